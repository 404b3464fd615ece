"""Build the configured LLM provider. Outermost first:

    output caps -> in-flight limit -> delayed (benchmarks only) -> cached -> rate-limited -> guarded (openai) -> provider

The output caps come first, so the cache keys on, and the rate limiter reserves, the request as it is sent. A cache
hit spends nothing, so it is answered before the shared rate limit is consulted; the limiter stays outside the
circuit breaker, so a call it holds back is never counted as the endpoint failing.
"""
from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from pydantic import BaseModel

from agent.providers.llm.roles import ROLES
from agent.settings import Settings

if TYPE_CHECKING:
    from agent.infra.ratelimit import RateLimiter
    from agent.providers.llm.roles import LLMProvider


class RoleProxy:
    """Wraps every role call of an inner provider in `around`; anything else passes straight through."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name

    def around(self, role: str, fn, *args, **kwargs):
        raise NotImplementedError

    def __getattr__(self, role):
        fn = getattr(self.inner, role)
        if role not in ROLES:
            return fn
        return lambda *args, **kwargs: self.around(role, fn, *args, **kwargs)


class OutputCappedProvider(RoleProxy):
    """A request that states its longest reply (compose's max_tokens, the answer mode's budget) asks for no more than
    its role's output cap (settings.output_tokens): deep_search's 20,000 would be refused by a model that writes at
    most 16,384, as a parameter error that is never retried."""

    def __init__(self, inner, settings: Settings):
        super().__init__(inner)
        self.caps = {role: settings.output_tokens(role) for role in ROLES}

    def around(self, role, fn, *args, **kwargs):
        if args and isinstance(args[0], BaseModel) and isinstance(getattr(args[0], "max_tokens", None), int):
            req = args[0]
            if req.max_tokens > self.caps[role]:  # type: ignore[attr-defined]
                args = (req.model_copy(update={"max_tokens": self.caps[role]}), *args[1:])
        return fn(*args, **kwargs)


class DelayedProvider(RoleProxy):
    """Adds a fixed latency to every role call, to model a remote LLM in benchmarks."""

    def __init__(self, inner, latency_s: float):
        super().__init__(inner)
        self.latency_s = latency_s

    def around(self, role, fn, *args, **kwargs):
        deadline = time.monotonic() + self.latency_s
        while (left := deadline - time.monotonic()) > 0:  # in short slices: a soft time limit lands between two
            time.sleep(min(left, 0.25))
        return fn(*args, **kwargs)


class InFlightLimitedProvider(RoleProxy):
    """At most `slots` role calls of this process in flight at once; a thread over the limit waits its turn. The LLM
    slots a deployment pays for are then decoupled from worker threads: with more threads than slots, the work
    around a call (its reads and writes, other tasks) runs on the spare threads instead of leaving a slot idle."""

    def __init__(self, inner, slots: int):
        super().__init__(inner)
        self.slots = threading.BoundedSemaphore(slots)

    def around(self, role, fn, *args, **kwargs):
        while not self.slots.acquire(timeout=0.25):  # in short waits: a soft time limit lands between two
            pass
        try:
            return fn(*args, **kwargs)
        finally:
            self.slots.release()


class GuardedProvider(RoleProxy):
    """Every role call goes through the LLM endpoint's circuit breaker, shared by all workers through Redis:
    after `threshold` consecutive failures no worker calls it until the reset period has passed. A role call fails
    only after the SDK's own retries, and only the endpoint's health counts (network, rate_limit, system): a
    caller's 400/404/422, a rejected key (401/403) and a reply that broke its schema leave the breaker alone."""

    def __init__(self, inner, breaker):
        super().__init__(inner)
        self.breaker = breaker

    def around(self, role, fn, *args, **kwargs):
        return self.breaker.call(fn, *args, **kwargs)


class RateLimitedProvider(RoleProxy):
    """Every role call takes a slot of the shared LLM rate limit first (waiting for one up to MAX_WAIT_S, then
    raising the retryable RateLimitedError); the tokens it reserved are set to what the provider reports after."""

    def __init__(self, inner, limiter: RateLimiter, settings: Settings):
        super().__init__(inner)
        self.limiter = limiter
        self.settings = settings

    def around(self, role, fn, *args, **kwargs):
        from agent.infra.breaker import CircuitOpenError
        from agent.infra.metrics import count_throttled
        from agent.infra.ratelimit import BATCH_CALL, RateLimitedError
        from agent.providers.llm.estimate import estimate_tokens

        batch = BATCH_CALL.get()
        tokens = estimate_tokens(self.settings, role, args[0]) if self.limiter.tokens_per_minute and args else 0
        held: list[float] = []
        try:
            reservation = self.limiter.wait(tokens, batch, on_wait=held.append)
        except RateLimitedError:
            count_throttled(batch, "gave_up")
            raise
        if held:
            count_throttled(batch, "waited")
        try:
            result, usage = fn(*args, **kwargs)
        except CircuitOpenError:  # the breaker refused it: the call never reached the endpoint
            self.limiter.release(reservation)
            raise
        if self.limiter.tokens_per_minute:
            self.limiter.reconcile(reservation, usage.prompt + usage.completion)
        return result, usage


def make_rate_limiter(settings: Settings, redis) -> RateLimiter:
    from agent.infra.ratelimit import RateLimiter

    # FINAGENT_TEST_RATE_WINDOW_S shortens the window for the integration test only; the limits stay "per minute"
    window_s = float(os.environ.get("FINAGENT_TEST_RATE_WINDOW_S") or 60)
    return RateLimiter(redis, "llm", requests_per_minute=settings.llm_requests_per_minute,
                       tokens_per_minute=settings.llm_tokens_per_minute, batch_share=settings.llm_batch_share,
                       window_s=window_s)


def llm_breaker_name(settings: Settings) -> str:
    return "llm:" + (urlparse(settings.llm_base_url).netloc if settings.llm_base_url else "api.openai.com")


def make_llm(settings: Settings, redis=None):
    if settings.llm_provider == "openai":
        from agent.infra.breaker import HEALTH_ERROR_CLASSES, CircuitBreaker
        from agent.providers.llm.openai_provider import OpenAIProvider

        provider: LLMProvider = OpenAIProvider(settings)
        if redis is not None:
            provider = GuardedProvider(provider, CircuitBreaker(redis, llm_breaker_name(settings),
                                                                threshold=settings.circuit_breaker_threshold,
                                                                reset_s=settings.circuit_breaker_reset_s,
                                                                counted=HEALTH_ERROR_CLASSES))
        if settings.llm_grounding_fallback:
            from agent.providers.llm.grounded import GroundedProvider

            provider = GroundedProvider(provider)
    elif settings.llm_provider == "scripted":
        from agent.providers.llm.scripted import ScriptedProvider

        provider = ScriptedProvider.from_settings(settings)
    else:
        from agent.providers.llm.extractive import ExtractiveProvider

        provider = ExtractiveProvider()
    if redis is not None and (settings.llm_requests_per_minute or settings.llm_tokens_per_minute):
        provider = RateLimitedProvider(provider, make_rate_limiter(settings, redis), settings)
    if redis is not None and settings.llm_cache_ttl_s > 0:
        from agent.providers.llm.cache import CachedProvider

        provider = CachedProvider(provider, redis, settings.llm_cache_ttl_s)
    # the injected latency stays outside the cache: a benchmark's calls keep their cost even when answered from it
    if settings.llm_latency_s > 0:
        provider = DelayedProvider(provider, settings.llm_latency_s)
    # a slot is held for the whole remote call, the modelled latency included
    if settings.llm_max_in_flight:
        provider = InFlightLimitedProvider(provider, settings.llm_max_in_flight)
    return OutputCappedProvider(provider, settings)
