"""One error shape for every failure (`ErrorBody`), the handlers that produce it, and its OpenAPI documentation."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from agent.models.api import ErrorBody, ErrorDetail, ErrorInfo
from agent.redact import install_log_redaction, redact

# the code an error gets when nothing more specific was said
DEFAULT_CODES: dict[int, str] = {
    400: "bad_request", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed", 409: "conflict",
    413: "payload_too_large", 415: "unsupported_media_type", 422: "validation_error", 503: "not_ready",
}

DESCRIPTIONS: dict[int, str] = {
    400: "Malformed request (e.g. a bad cursor or Last-Event-ID)",
    401: "Missing or wrong API key",
    404: "No such job or batch",
    409: "Conflicts with the resource's state",
    413: "Request body (or batch) too large",
    415: "Unsupported Content-Type",
    422: "Invalid field values; `details` names each field",
    503: "A dependency is not ready",
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


def install(app: FastAPI) -> None:
    install_log_redaction()  # no secret in the API's logs either (agent/redact.py)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
