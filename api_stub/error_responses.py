"""One error shape for every failure (`ErrorBody`), the handlers that produce it, and its OpenAPI documentation."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from agent.infra.unavailable import UNAVAILABLE_TYPES, unavailable
from agent.redact import install_log_redaction, redact
from finagent.models import ErrorBody, ErrorDetail, ErrorInfo

log = logging.getLogger(__name__)
# how long a client is told to wait before retrying a request that met Postgres or Redis down
UNAVAILABLE_RETRY_AFTER_S = 5

# the code an error gets when nothing more specific was said
DEFAULT_CODES: dict[int, str] = {
    400: "bad_request", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed", 409: "conflict",
    413: "payload_too_large", 415: "unsupported_media_type", 422: "validation_error", 500: "internal_error",
    503: "not_ready",
}

DESCRIPTIONS: dict[int, str] = {
    400: "Malformed request (e.g. a bad cursor or Last-Event-ID)",
    401: "Missing or wrong API key",
    404: "No such job or batch",
    409: "Conflicts with the resource's state",
    413: "Request body (or batch) too large",
    415: "Unsupported Content-Type",
    422: "Invalid field values; `details` names each field",
    500: "An internal error: the body names only its type",
    503: "A dependency is not ready, or Postgres or Redis is down (with Retry-After)",
}


class ApiError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, details: list[ErrorDetail] | None = None,
                 headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status, self.message = status, message
        self.code = code or DEFAULT_CODES.get(status, "error")
        self.details = details or []
        self.headers = dict(headers or {})


def error_response(status: int, code: str, message: str, details: list[ErrorDetail] | None = None,
                   headers: Mapping[str, str] | None = None) -> JSONResponse:
    body = ErrorBody(error=ErrorInfo(code=code, message=redact(message), details=details or []))
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=dict(headers or {}))


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: each status documented with the error model."""
    return {s: {"model": ErrorBody, "description": DESCRIPTIONS[s]} for s in statuses}


def _validation_details(exc: RequestValidationError) -> list[ErrorDetail]:
    return [ErrorDetail(loc=[p for p in e.get("loc", ()) if isinstance(p, str | int)], msg=e.get("msg", "invalid"),
                        type=e.get("type")) for e in exc.errors()]


def _describe(details: list[ErrorDetail]) -> str:
    parts = [f"{'.'.join(str(p) for p in d.loc[1:] or d.loc) or 'request'}: {d.msg}" for d in details[:5]]
    return "invalid request: " + "; ".join(parts)


def _malformed_json(exc: RequestValidationError) -> str | None:
    """FastAPI reports a body that is not JSON as a field error at the character offset; say what it is instead."""
    for e in exc.errors():
        if e.get("type") == "json_invalid":
            loc = e.get("loc", ())
            where = f" at character {loc[1] + 1}" if len(loc) > 1 and isinstance(loc[1], int) else ""
            return f"the body is not valid JSON: {e.get('ctx', {}).get('error', 'decode error')}{where}"
    return None


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, exc.details, exc.headers)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return error_response(exc.status_code, DEFAULT_CODES.get(exc.status_code, "error"), message,
                          headers=getattr(exc, "headers", None))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = _validation_details(exc)
    malformed = _malformed_json(exc)
    if malformed:
        return error_response(422, "malformed_json", malformed, details)
    return error_response(422, "validation_error", _describe(details), details)


async def _dependency_error(request: Request, exc: Exception) -> JSONResponse:
    """Postgres or Redis down: 503 naming the server, with Retry-After. A submission that got as far as saving its
    job does not come here: it is accepted and started later (agent/submission.py)."""
    down = unavailable(exc)
    if down is None:
        return await _internal_error(request, exc)
    log.warning("%s %s: %s is unavailable: %s", request.method, request.url.path, down.service, down.reason)
    hint = " (a submission with the same Idempotency-Key cannot make a second job)" if request.method == "POST" else ""
    return error_response(503, "dependency_unavailable",
                          f"{down.service} is unavailable ({down.reason}); retry the request later{hint}",
                          headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER_S)})


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", f"internal error ({type(exc).__name__}); the server's log has the rest")


def install(app: FastAPI) -> None:
    install_log_redaction()  # no secret in the API's logs either (agent/redact.py)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    for kind in UNAVAILABLE_TYPES:
        app.add_exception_handler(kind, _dependency_error)
    app.add_exception_handler(Exception, _internal_error)
