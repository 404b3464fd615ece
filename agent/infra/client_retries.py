"""One layer retries a remote call's transient failures: the service's own client.

The openai SDK retries the LLM endpoint (`max_retries = max_tool_retries`, backoff with jitter, honouring
Retry-After) and TavilyNews its own requests; the Celery task around the call (tasks/fanout.py) does not retry what
a client already retried. With both layers retrying, one call made (1 + r) x (1 + r) HTTP attempts instead of
1 + r (r = max_tool_retries). The task still retries what never reached the service (a call the shared rate limit
or an open circuit breaker held back), what is not the service's (Postgres, Redis) and the offline providers' errors.

The client marks the exception its call ends with (`mark_retried`), with the HTTP attempts it made; the task finds
the mark anywhere in the exception's cause chain (`retried_by_client`), also on a soft time limit that broke off
the client's attempts: the limit's budget covers all of them (agent/time_limits.py).
"""
from __future__ import annotations

from collections.abc import Collection

from pydantic import BaseModel

_MARK = "_finagent_client_retried"


class ClientRetried(BaseModel, frozen=True):
    client: str  # "llm", "news"
    attempts: int  # HTTP attempts made by the call (0: not counted)

    def note(self) -> str:
        """What the stored failure adds, so a reader knows the call was already retried."""
        made = f"{self.attempts} HTTP attempt{'s' if self.attempts != 1 else ''}" if self.attempts else "its retries"
        return f" ({self.client} client: {made}, not retried again)"


def mark_retried(exc: BaseException, client: str, attempts: int) -> None:
    """Record on `exc` that `client` made `attempts` HTTP attempts (its retries included) before raising it."""
    try:
        setattr(exc, _MARK, ClientRetried(client=client, attempts=attempts))
    except AttributeError:  # an exception type without a __dict__: left unmarked (the task may retry it)
        pass


def retried_by_client(exc: BaseException | None) -> ClientRetried | None:
    """The mark of the client that already retried this failure, on it or on what caused it."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen and len(seen) < 16:  # a cycle must not hang the worker
        seen.add(id(exc))
        mark = getattr(exc, _MARK, None)
        if isinstance(mark, ClientRetried):
            return mark
        exc = exc.__cause__ or exc.__context__
    return None


def task_may_retry(error_class: str, retried: ClientRetried | None, *, retries: int, limit: int,
                   retryable: Collection[str]) -> bool:
    """Whether the task around a call retries its failure: a transient class, retries left, and no client that
    already spent its own retries on it (`retried`, from retried_by_client)."""
    return error_class in retryable and retries < limit and retried is None
