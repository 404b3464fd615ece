"""How many tokens a role call will take, counted before it is sent, for the shared tokens-per-minute limit:
the prompt the OpenAI-compatible provider would send, counted with the role's model's encoding, plus the output
the call may ask for (compose's max_tokens; the structured roles set none, so a fixed allowance). The limiter
replaces the estimate with the usage the provider reports once the call is back."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from agent.providers.llm import prompts
from agent.providers.llm.tokens import count_messages, count_tokens
from agent.settings import Settings

# the output allowance of a role that sets no max_tokens (its JSON answers are a few hundred tokens)
DEFAULT_OUTPUT_TOKENS = 1024

# role -> (the prompt it sends, which of settings.llm_models answers it)
PROMPTS: dict[str, tuple[Callable[[Any], prompts.Messages], str]] = {
    "plan": (prompts.plan_messages, "planner"),
    "extract": (prompts.extract_messages, "generator"),
    "compose": (prompts.compose_messages, "generator"),
    "evaluate": (prompts.evaluate_messages, "evaluator"),
    "plan_10k": (prompts.tenk_plan_messages, "planner"),
    "select_tables": (prompts.select_tables_messages, "planner"),
    "answer_10k": (prompts.tenk_answer_messages, "generator"),
    "evaluate_10k": (prompts.tenk_evaluate_messages, "evaluator"),
}


def estimate_tokens(settings: Settings, role: str, request: BaseModel) -> int:
    build, model_role = PROMPTS.get(role, (None, "generator"))
    model = getattr(settings.llm_models, model_role)
    output = getattr(request, "max_tokens", None) or DEFAULT_OUTPUT_TOKENS
    try:
        prompt = count_messages(model, build(request)) if build is not None else count_tokens(model, request.model_dump_json())
    except Exception:  # a request its prompt builder cannot render: its JSON is a fair upper bound
        prompt = count_tokens(model, request.model_dump_json())
    return prompt + int(output)
