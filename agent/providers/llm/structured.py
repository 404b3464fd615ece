"""Schema-validated JSON from an OpenAI-compatible chat model, with one model-level repair retry.

Transient HTTP failures (timeouts, connection resets, 429, 5xx) are retried by the SDK itself (`max_retries`,
honouring Retry-After) and by nothing else (attempts.sdk_call marks the error it gives up with); this module asks for
the schema in the endpoint's structured-output form (json_modes.py), re-sends once in plain json_object form when the
server rejects that form, and corrects a reply that is not valid JSON for the schema (prose, JSON cut short, a missing
field or a wrong type): it sends the validation errors back once and asks for corrected JSON, then gives up with
StructuredOutputError.
"""
from __future__ import annotations

import json
import logging
import re
from typing import Any, TypeVar

from openai.types.chat import ChatCompletionMessageParam
from pydantic import BaseModel, ValidationError

from agent.models.research import Usage
from agent.providers.llm.attempts import sdk_call
from agent.providers.llm.json_modes import JsonForms, request_kwargs
from agent.providers.llm.tokens import count_messages, count_tokens

T = TypeVar("T", bound=BaseModel)

# A cap on a JSON reply: every role's answer fits in a few hundred tokens, and a small model constrained only to "some
# JSON" can otherwise emit whitespace until its context is full (minutes on a CPU server that serves one request at a time)
JSON_MAX_TOKENS = 1500  # the default; the OpenAI provider passes its role's settings.output_tokens

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S | re.I)


log = logging.getLogger(__name__)


class StructuredOutputError(ValueError):
    """The model's reply did not validate against the role's schema, even after one repair request."""

    def __init__(self, role: str, message: str):
        self.role, self.message = role, message
        super().__init__(f"LLM role '{role}' returned output that does not match its schema after one repair attempt: {message}")


def schema_text(schema: type[BaseModel]) -> str:
    return json.dumps(schema.model_json_schema(), separators=(",", ":"))


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


def _excerpt(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...") if flat else "an empty reply"


_BOUNDS = {"less_than_equal": "le", "greater_than_equal": "ge", "less_than": "lt", "greater_than": "gt"}


def within_bounds(schema: type[T], text: str, exc: ValidationError) -> T | None:
    """The reply validated once every number out of its field's range is brought within it, when that is all that is
    wrong: a share written as a percentage (85 for a 0-1 confidence) is read as 0.85, anything else is clamped to the
    bound. None when the reply has other errors too."""
    errors = exc.errors()
    if not errors or any(e["type"] not in _BOUNDS or not isinstance(e.get("input"), int | float) for e in errors):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    for e in errors:
        bound = float(next(iter((e.get("ctx") or {}).values()), 0))
        value = float(e["input"])
        if _BOUNDS[e["type"]] in ("le", "lt") and bound == 1 and 1 < value <= 100:
            value = value / 100  # a percentage for a share
        else:
            value = bound
        target = data
        for key in e["loc"][:-1]:
            target = target[key]
        target[e["loc"][-1]] = value
    try:
        return schema.model_validate(data)
    except (ValidationError, KeyError, IndexError, TypeError):
        return None


def repair_message(error: str) -> str:
    return ("Your previous reply was not valid for the required JSON schema. Validation errors: "
            f"{error}. Reply again with only the corrected JSON object, no prose and no code fences.")


def complete_json(client: Any, *, role: str, model: str, messages: list[ChatCompletionMessageParam], schema: type[T],
                  forms: JsonForms | None = None, **create_kwargs: Any) -> tuple[T, Usage]:
    """One chat completion parsed into `schema`; one repair retry on invalid JSON; usage summed over both.
    `forms` picks the structured-output form for the endpoint (plain json_object without it)."""
    usage = Usage(model=model)

    def send(convo: list[ChatCompletionMessageParam]) -> Any:
        form = forms.current(client) if forms else "json_object"
        kwargs = {"max_tokens": JSON_MAX_TOKENS} | create_kwargs
        while True:
            try:
                return sdk_call(client.chat.completions.create, model=model, messages=convo, **request_kwargs(form, schema),
                                **kwargs)
            except Exception as exc:
                lower = forms.fall_back(form, exc) if forms else None
                if lower is None:
                    raise
                form = lower  # the server rejected the form: the same request one form down (at most two steps)

    def attempt(convo: list[ChatCompletionMessageParam]) -> tuple[T | None, str, str]:
        resp = send(convo)
        add_usage(usage, resp, convo)
        text = reply_text(resp)
        try:
            return schema.model_validate_json(_strip_fences(text)), text, ""
        except ValidationError as exc:
            fixed = within_bounds(schema, _strip_fences(text), exc)
            if fixed is not None:
                log.warning("LLM role '%s': a number out of its range was brought within it (%s)", role, _errors(exc))
                return fixed, text, ""
            return None, text, _errors(exc)

    result, text, error = attempt(messages)
    if result is not None:
        return result, usage
    repair: list[ChatCompletionMessageParam] = [
        *messages, {"role": "assistant", "content": text or "(empty reply)"}, {"role": "user", "content": repair_message(error)},
    ]
    result, text, error = attempt(repair)
    if result is None:
        raise StructuredOutputError(role, f"{error} (the corrected reply was {_excerpt(text)})")
    return result, usage
