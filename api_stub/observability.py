"""The API's part of logs and traces: every request's id, and tracing set up when the app first runs.

The request id is the client's `X-Request-ID` when it sends a usable one (letters, digits and `._:-`, at most 128),
else a new one; the response echoes it in `X-Request-ID`. It is bound for the request's log lines
(agent/infra/logs.py), with the job id of a /v1/jobs/{id} route, and a job submitted by the request carries it into
each of its Celery tasks (workers/telemetry.py)."""
from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent.infra import logs
from agent.settings import Settings

REQUEST_ID_HEADER = "X-Request-ID"
_USABLE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_JOB_PATH = re.compile(r"/v1/jobs/([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?:/|$)")


def request_id_from(sent: bytes | None) -> str:
    """The client's id if it is usable (no spaces, quotes or control characters to forge a log line with), else a
    new one."""
    if sent:
        text = sent.decode("latin-1").strip()
        if _USABLE_ID.fullmatch(text):
            return text
    return uuid.uuid4().hex


def job_id_in(path: str) -> str | None:
    match = _JOB_PATH.match(path)
    return match.group(1).lower() if match else None


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = next((value for name, value in scope["headers"] if name == b"x-request-id"), None)
        request_id = request_id_from(sent)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        with logs.bound(request_id=request_id, job_id=job_id_in(scope["path"])):
            await self.app(scope, receive, send_with_id)


def trace_when_built(app: FastAPI, settings: Callable[[], Settings]) -> None:
    """With `settings().tracing`, install tracing and FastAPI's instrumentation when the app first runs (uvicorn's
    lifespan, or a test client's first request), not when the module is imported: the instrumentation wraps the
    middleware stack, which the app builds then."""

    def build() -> ASGIApp:
        del app.build_middleware_stack  # the class's own method from now on (the instrumentation wraps that one)
        if settings().tracing:
            from agent.infra import tracing

            tracing.install("finagent-api")
            tracing.instrument_fastapi(app)
        return app.build_middleware_stack()

    app.build_middleware_stack = build  # type: ignore[method-assign]
