"""Error classes: every failure is mapped to one, for retries, the circuit breaker and the ledger.

An HTTP status decides first (it is what the server said), then the exception's type and its base classes, and only
then words in the message: a 500 whose body happens to mention an API key is still a server failure.
"""
from __future__ import annotations

import datetime as dt
import email.utils
from typing import Any

ERROR_CLASSES = ("parameter", "network", "authentication", "rate_limit", "data", "system", "unknown")
# A server's Retry-After is honoured up to this long; a longer one is read as "much later", not as a day's wait.
MAX_RETRY_AFTER_S = 120.0


def http_status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def classify_error(exc: BaseException) -> str:
    """Map an exception to an error class, by HTTP status first, then by type, then by message."""
    status = http_status(exc)
    if status is not None:
        by_status = _by_status(status)
        if by_status:
            return by_status
    names = " ".join(cls.__name__.lower() for cls in type(exc).__mro__)
    name = type(exc).__name__.lower()
    text = str(exc).lower()
    if "circuitopen" in name:  # our own breaker refused the call: the dependency is failing
        return "system"
    if "structuredoutput" in name:  # the model kept returning invalid JSON: invalid data
        return "data"
    if "auth" in name or "permissiondenied" in name:
        return "authentication"
    if "ratelimit" in name:
        return "rate_limit"
    # timeouts, refused or reset connections, broken HTTP exchanges (httpx's TransportError family, the SDK's
    # APIConnectionError and APITimeoutError, the builtin ConnectionError and TimeoutError)
    if isinstance(exc, (ConnectionError, TimeoutError)) or any(k in names for k in ("timeout", "connect", "network", "transporterror")):
        return "network"
    if "unauthori" in text or "api key" in text or "forbidden" in text:
        return "authentication"
    if "rate limit" in text or "quota" in text or "too many requests" in text:
        return "rate_limit"
    if isinstance(exc, (TypeError, ValueError)) and "validation" in name or "invalid param" in text:
        return "parameter"
    if isinstance(exc, (KeyError, LookupError)) or "not found" in text or "no data" in text:
        return "data"
    if isinstance(exc, (OSError, MemoryError, RuntimeError)):
        return "system"
    return "unknown"


def _by_status(status: int) -> str | None:
    if status in (401, 403):
        return "authentication"
    if status == 429:
        return "rate_limit"
    if status == 408:
        return "network"
    if status in (400, 413, 422):
        return "parameter"
    if status == 404:
        return "data"
    if status >= 500:
        return "system"
    return None


def retry_after_s(exc: BaseException) -> float | None:
    """How long the server asked us to wait before the next attempt (Retry-After / retry-after-ms), capped at
    MAX_RETRY_AFTER_S; None when it did not say. An HTTP-date is read relative to now."""
    headers: Any = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return _capped(float(ms) / 1000)
        value = headers.get("retry-after")
    except (AttributeError, TypeError, ValueError):
        return None
    if value is None:
        return None
    try:
        return _capped(float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return _capped((when - dt.datetime.now(dt.UTC)).total_seconds())


def _capped(seconds: float) -> float | None:
    if seconds != seconds:  # NaN
        return None
    return min(max(0.0, seconds), MAX_RETRY_AFTER_S)
