"""Error classes: every failure is mapped to one, for retries, the circuit breaker and the ledger."""
from __future__ import annotations

ERROR_CLASSES = ("parameter", "network", "authentication", "rate_limit", "data", "system", "unknown")


def classify_error(exc: BaseException) -> str:
    """Map an exception to an error class, by type first, then by HTTP status or message."""
    name = type(exc).__name__.lower()
    status = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)
    text = str(exc).lower()
    if status in (401, 403) or "auth" in name or "unauthori" in text or "api key" in text or "forbidden" in text:
        return "authentication"
    if status == 429 or "ratelimit" in name or "rate limit" in text or "quota" in text or "too many requests" in text:
        return "rate_limit"
    if "circuitopen" in name:  # our own breaker refused the call: the dependency is failing
        return "system"
    if "structuredoutput" in name:  # the model kept returning invalid JSON: invalid data
        return "data"
    if status in (400, 422) or isinstance(exc, (TypeError, ValueError)) and "validation" in name or "invalid param" in text:
        return "parameter"
    if isinstance(exc, (ConnectionError, TimeoutError)) or any(k in name for k in ("timeout", "connect", "network")):
        return "network"
    if isinstance(exc, (KeyError, LookupError)) or "not found" in text or "no data" in text or status == 404:
        return "data"
    if isinstance(exc, (OSError, MemoryError, RuntimeError)) or (status is not None and status >= 500):
        return "system"
    return "unknown"
