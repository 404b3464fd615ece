"""Schema-validated JSON from an OpenAI-compatible chat model, with one model-level repair retry.

Transient HTTP failures (connection errors, 429, 5xx) are retried by the SDK itself (`max_retries`);
this module only corrects a reply that is not valid JSON for the schema: it sends the validation
error back once and asks for corrected JSON, then gives up with StructuredOutputError.
"""
from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from openai.types.chat import ChatCompletionMessageParam
from pydantic import BaseModel, ValidationError

from agent.models.research import Usage
from agent.providers.llm.tokens import count_messages, count_tokens

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S | re.I)


class StructuredOutputError(ValueError):
    """The model's reply did not validate against the role's schema, even after one repair request."""

    def __init__(self, role: str, message: str):
        self.role, self.message = role, message
        super().__init__(f"LLM role '{role}' returned output that does not match its schema after one repair attempt: {message}")


def schema_text(schema: type[BaseModel]) -> str:
    return json.dumps(schema.model_json_schema(), separators=(",", ":"))


def response_format(schema: type[BaseModel], use_json_schema: bool) -> dict[str, Any]:
    """json_object works on every OpenAI-compatible server; json_schema where the server supports it."""
    if not use_json_schema:
        return {"type": "json_object"}
    return {"type": "json_schema",
            "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema(), "strict": False}}


def add_usage(total: Usage, resp: Any, messages: Any = None) -> Usage:
    """Add a response's token usage; when the server reports none, count the tokens of the request and reply."""
    u = getattr(resp, "usage", None)
    prompt, completion = int(getattr(u, "prompt_tokens", 0) or 0), int(getattr(u, "completion_tokens", 0) or 0)
    if not prompt and not completion and messages is not None:
        model = total.model or str(getattr(resp, "model", "") or "")
        prompt, completion = count_messages(model, messages), count_tokens(model, reply_text(resp))
    total.prompt += prompt
    total.completion += completion
    return total


def reply_text(resp: Any) -> str:
    choices = getattr(resp, "choices", None) or []
    return (choices[0].message.content or "") if choices else ""


def _strip_fences(text: str) -> str:
    m = _FENCE.match(text)
    return m.group(1) if m else text.strip()


def _errors(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()[:8]]
    return "; ".join(parts)


def repair_message(error: str) -> str:
    return ("Your previous reply was not valid for the required JSON schema. Validation errors: "
            f"{error}. Reply again with only the corrected JSON object, no prose and no code fences.")


def complete_json(client: Any, *, role: str, model: str, messages: list[ChatCompletionMessageParam], schema: type[T],
                  use_json_schema: bool = False, **create_kwargs: Any) -> tuple[T, Usage]:
    """One chat completion parsed into `schema`; one repair retry on invalid JSON; usage summed over both."""
    usage = Usage(model=model)
    fmt = response_format(schema, use_json_schema)

    def attempt(convo: list[ChatCompletionMessageParam]) -> tuple[T | None, str, str]:
        resp = client.chat.completions.create(model=model, messages=convo, response_format=fmt, **create_kwargs)
        add_usage(usage, resp, convo)
        text = reply_text(resp)
        try:
            return schema.model_validate_json(_strip_fences(text)), text, ""
        except ValidationError as exc:
            return None, text, _errors(exc)

    result, text, error = attempt(messages)
    if result is not None:
        return result, usage
    repair: list[ChatCompletionMessageParam] = [
        *messages, {"role": "assistant", "content": text or "(empty reply)"}, {"role": "user", "content": repair_message(error)},
    ]
    result, _, error = attempt(repair)
    if result is None:
        raise StructuredOutputError(role, error)
    return result, usage
