"""The client's exceptions: one per kind of failure, each carrying the server's error body."""
from __future__ import annotations

import httpx
from pydantic import ValidationError

from finagent.models import ErrorBody, ErrorInfo


class FinagentError(Exception):
    """An error answer from the API. `error` is the server's {"code", "message", "details"} (None when the
    response was not the API's JSON, e.g. a proxy's page)."""

    def __init__(self, status_code: int, error: ErrorInfo | None, text: str = "", retry_after: float | None = None):
        self.status_code, self.error = status_code, error
        self.retry_after = retry_after  # seconds, from the server's Retry-After (429, 503)
        super().__init__(f"{status_code} {error.code}: {error.message}" if error else f"{status_code}: {text[:200]}")

    @property
    def code(self) -> str | None:
        return self.error.code if self.error else None


class BadRequest(FinagentError):
    """400, 415 or 422: the request itself is wrong; `error.details` names the fields. An Idempotency-Key already
    used with a different request is a 422 with code "idempotency_key_reused"."""


class Unauthorized(FinagentError):
    """401: missing or wrong API key."""


class NotFound(FinagentError):
    """404: no such job or batch."""


class Conflict(FinagentError):
    """409: a submission with the same Idempotency-Key still in flight (code "idempotency_in_flight": retry after
    `retry_after` seconds), or a job or batch that has already finished."""


class PayloadTooLarge(FinagentError):
    """413: the body (or batch) is over the server's limits."""


class NotReady(FinagentError):
    """503: a dependency of the server is not ready (`code` "not_ready", from /readyz), or Postgres or Redis is down
    (`code` "dependency_unavailable"): retry after `retry_after` seconds; a submission with the same idempotency key
    cannot make a second job."""


class ServerError(FinagentError):
    """Any other 5xx."""


BY_STATUS: dict[int, type[FinagentError]] = {400: BadRequest, 401: Unauthorized, 404: NotFound, 409: Conflict,
                                             413: PayloadTooLarge, 415: BadRequest, 422: BadRequest, 503: NotReady}


def raise_for_error(response: httpx.Response) -> None:
    if response.is_success:
        return
    if not response.is_closed:
        response.read()
    try:
        error: ErrorInfo | None = ErrorBody.model_validate_json(response.content).error
    except ValidationError:
        error = None
    kind = BY_STATUS.get(response.status_code, ServerError if response.status_code >= 500 else FinagentError)
    raise kind(response.status_code, error, response.text, _seconds(response.headers.get("Retry-After")))


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:  # the HTTP-date form: not sent by this server
        return None
