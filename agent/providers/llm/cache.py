"""The LLM response cache: an identical request to the same provider (same models, same script) is answered
from Redis for `llm_cache_ttl_s`. The budget note is left out of the key: it only tells the model how much
time is left, and would make every request unique."""
from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, TypeAdapter

from agent.infra import metrics
from agent.models.research import Answer, Evaluation, ResearchPlan, ScopeFindings, Usage
from agent.models.tenk import TenKEvaluation, TenKPlan

RESULT_TYPES: dict[str, Any] = {
    "plan": ResearchPlan, "extract": ScopeFindings, "compose": Answer, "evaluate": Evaluation, "plan_10k": TenKPlan,
    "select_tables": list[int], "answer_10k": Answer, "evaluate_10k": TenKEvaluation,
}
PREFIX = "finagent:llmcache:"


def cache_key(namespace: str, role: str, request: BaseModel) -> str:
    body = request.model_dump_json(exclude={"budget_note"})
    return PREFIX + hashlib.sha256(f"{namespace}\0{role}\0{body}".encode()).hexdigest()


class CachedProvider:
    """Wraps every role call of an inner provider with the response cache; a hit returns the stored result
    with a Usage marked cached (no tokens spent)."""

    def __init__(self, inner: Any, redis: Any, ttl_s: int):
        self.inner, self.redis, self.ttl_s = inner, redis, ttl_s
        self.name = inner.name

    def __getattr__(self, role: str) -> Any:
        fn = getattr(self.inner, role)
        if role not in RESULT_TYPES:
            return fn
        adapter: TypeAdapter[Any] = TypeAdapter(RESULT_TYPES[role])

        def call(request: BaseModel) -> tuple[Any, Usage]:
            namespace = getattr(self.inner, "cache_namespace", self.inner.name)
            key = cache_key(namespace, role, request)
            stored = self.redis.get(key)
            metrics.count_cache_lookup(role, hit=stored is not None)
            if stored is not None:
                data = json.loads(stored)
                return adapter.validate_python(data["result"]), Usage(model=data.get("model"), cached=True)
            result, usage = fn(request)
            self.redis.set(key, json.dumps({"result": adapter.dump_python(result, mode="json"), "model": usage.model}),
                           ex=self.ttl_s)
            return result, usage

        return call
