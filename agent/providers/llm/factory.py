"""Build the configured LLM provider; optionally with an injected per-call latency (benchmarks)."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from agent.settings import Settings

if TYPE_CHECKING:
    from agent.providers.llm.base import LLMProvider

ROLES = ("plan", "extract", "compose", "evaluate", "plan_10k", "select_tables", "answer_10k", "evaluate_10k")


class RoleProxy:
    """Wraps every role call of an inner provider in `around`; anything else passes straight through."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name

    def around(self, fn, *args, **kwargs):
        raise NotImplementedError

    def __getattr__(self, role):
        fn = getattr(self.inner, role)
        if role not in ROLES:
            return fn
        return lambda *args, **kwargs: self.around(fn, *args, **kwargs)


class DelayedProvider(RoleProxy):
    """Adds a fixed latency to every role call, to model a remote LLM in benchmarks."""

    def __init__(self, inner, latency_s: float):
        super().__init__(inner)
        self.latency_s = latency_s

    def around(self, fn, *args, **kwargs):
        time.sleep(self.latency_s)
        return fn(*args, **kwargs)


class GuardedProvider(RoleProxy):
    """Every role call goes through the LLM endpoint's circuit breaker, shared by all workers through Redis:
    after `threshold` consecutive failures no worker calls it until the reset period has passed."""

    def __init__(self, inner, breaker):
        super().__init__(inner)
        self.breaker = breaker

    def around(self, fn, *args, **kwargs):
        return self.breaker.call(fn, *args, **kwargs)


def llm_breaker_name(settings: Settings) -> str:
    return "llm:" + (urlparse(settings.llm_base_url).netloc if settings.llm_base_url else "api.openai.com")


def make_llm(settings: Settings, redis=None):
    if settings.llm_provider == "openai":
        from agent.infra.breaker import CircuitBreaker
        from agent.providers.llm.openai_provider import OpenAIProvider

        provider: LLMProvider = OpenAIProvider(settings, use_json_schema=settings.llm_json_schema)
        if redis is not None:
            provider = GuardedProvider(provider, CircuitBreaker(redis, llm_breaker_name(settings),
                                                                threshold=settings.circuit_breaker_threshold,
                                                                reset_s=settings.circuit_breaker_reset_s))
    elif settings.llm_provider == "scripted":
        from agent.providers.llm.scripted import ScriptedProvider

        provider = ScriptedProvider.from_settings(settings)
    else:
        from agent.providers.llm.extractive import ExtractiveProvider

        provider = ExtractiveProvider()
    if redis is not None and settings.llm_cache_ttl_s > 0:
        from agent.providers.llm.cache import CachedProvider

        provider = CachedProvider(provider, redis, settings.llm_cache_ttl_s)
    # the injected latency stays outside the cache: a benchmark's calls keep their cost even when answered from it
    return DelayedProvider(provider, settings.llm_latency_s) if settings.llm_latency_s > 0 else provider
