"""The HTTP attempts of one openai SDK call, counted by the provider's HTTP client, and the mark on the error the
call ends with: the SDK owns the retries (agent/infra/client_retries.py), so the task around it does not add its own."""
from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

from openai import DefaultHttpxClient

from agent.infra.client_retries import mark_retried

R = TypeVar("R")

# the attempts of the SDK call running in this thread (one counter per call; None outside a call)
_ATTEMPTS: ContextVar[list[int] | None] = ContextVar("llm_http_attempts", default=None)


def _count(request: Any) -> None:
    counter = _ATTEMPTS.get()
    if counter is not None:
        counter[0] += 1


def http_client(timeout_s: float) -> DefaultHttpxClient:
    """The SDK's default HTTP client (its connection limits, redirects) counting each request it sends."""
    return DefaultHttpxClient(timeout=timeout_s, event_hooks={"request": [_count]})


def sdk_call(fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
    """`fn(*args, **kwargs)`, one SDK request with the SDK's retries; an exception it ends with (the last attempt's
    error, or a soft time limit that broke off the attempts) is marked as retried by the LLM client."""
    counter = [0]
    token = _ATTEMPTS.set(counter)
    try:
        return fn(*args, **kwargs)
    except BaseException as exc:
        mark_retried(exc, "llm", counter[0])
        raise
    finally:
        _ATTEMPTS.reset(token)
