"""Telling "a server finagent needs is down or unreachable" apart from every other failure.

The API answers it with 503 and Retry-After, `finagent` with one line and exit status 3, and a submission whose job is
already saved does not fail on it (the reconciler sends the job's first step once the broker is back). A query that
fails for its own reasons (bad SQL, a constraint, a statement timeout) is not this: it says nothing about the server.
"""
from __future__ import annotations

from typing import Literal

import psycopg
import redis
from kombu.exceptions import OperationalError as BrokerError
from psycopg_pool import PoolTimeout
from pydantic import BaseModel

from agent.redact import redact

# SQLSTATE class 08 (connection exception), and the server shutting down, crashed, or still starting up
_CONNECTION_SQLSTATES = ("08", "57P01", "57P02", "57P03")
# what the API and the CLI catch; `unavailable` then decides whether it is a server being down
UNAVAILABLE_TYPES: tuple[type[Exception], ...] = (psycopg.OperationalError, PoolTimeout, redis.ConnectionError,
                                                      redis.TimeoutError, BrokerError)


class Unavailable(BaseModel):
    service: Literal["postgres", "redis"]
    reason: str  # the driver's own first line, secrets masked


def _classify(exc: BaseException) -> Literal["postgres", "redis"] | None:
    if isinstance(exc, PoolTimeout):  # before OperationalError, which it subclasses: no connection could be had
        return "postgres"
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        # a connection attempt that failed has no SQLSTATE; a canceled statement (57014) is not the server being down
        return "postgres" if state is None or state.startswith(_CONNECTION_SQLSTATES) else None
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, BrokerError)):
        return "redis"
    return None


def unavailable(exc: BaseException) -> Unavailable | None:
    """The server behind `exc` (or behind an exception it was raised from), or None when `exc` is another failure."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        service = _classify(current)
        if service is not None:
            lines = [line.strip() for line in str(current).splitlines() if line.strip()]
            reason = redact(lines[0] if lines else type(current).__name__)
            if isinstance(current, PoolTimeout):  # the pool cannot tell a server that is gone from one that is busy
                reason += ": the server is down, or every pooled connection is in use"
            return Unavailable(service=service, reason=reason)
        current = current.__cause__ or current.__context__
    return None
