"""The HTTP front door (FastAPI): `create_app()` wires the /v1 routers, the API-key check, the body caps and the
one error shape. `app` is what `uvicorn api_stub.asgi:app` serves; importing it starts nothing."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import Response

from api_stub import batch_routes as batches
from api_stub import error_responses as errors
from api_stub import health
from api_stub import job_routes as jobs
from api_stub.auth import require_key
from api_stub.error_responses import error_responses
from api_stub.limits import BodyLimitMiddleware, body_limit
from api_stub.observability import RequestIdMiddleware, trace_when_built
from api_stub.runtime import Runtime, runtime

DESCRIPTION = """Research jobs over earnings calls, 10-K filings and news.

Every route but /healthz and /readyz needs an API key when keys are configured (`Authorization: Bearer <key>`
or `X-API-Key: <key>`). Every error is `{"error": {"code", "message", "details": [{"loc", "msg", "type"}]}}`."""

metrics_router = APIRouter(tags=["operations"])


@metrics_router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}, **error_responses(401, 503)},
                    summary="Prometheus metrics")
def metrics(rt: Runtime = Depends(runtime)) -> Response:
    try:
        from agent.infra.metrics import render_metrics  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise errors.ApiError(503, "metrics are not available in this build", code="metrics_unavailable") from None
    body, content_type = render_metrics(rt.ctx)
    return Response(body, media_type=content_type)


def serve_metrics_port(rt: Runtime) -> int | None:
    """With METRICS_PORT, this process's metrics and the scrape-time ones also on that port, without a key, for
    Prometheus (agent/infra/metrics_server.py); the port it listens on, or None."""
    try:
        from agent.infra import metrics_server  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    return metrics_server.start(scrape=lambda: rt.ctx)


def create_app(rt: Runtime | None = None) -> FastAPI:
    rt = rt or Runtime()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        serve_metrics_port(rt)
        yield

    app = FastAPI(title="finagent", version="1.0.0", description=DESCRIPTION, lifespan=lifespan)
    app.state.runtime = rt
    errors.install(app)
    app.add_middleware(BodyLimitMiddleware, limit_for=lambda path: body_limit(rt.settings, path))
    app.add_middleware(RequestIdMiddleware)  # added last, so outermost: a 413 and its log lines carry the id too
    trace_when_built(app, lambda: rt.settings)
    app.include_router(health.router)
    # every protected route can answer 401, 422 for a malformed parameter or header (FastAPI's own 422 schema would
    # otherwise be documented), and 503 when Postgres or Redis is down
    for router in (jobs.router, batches.router, metrics_router):
        app.include_router(router, dependencies=[Depends(require_key)], responses=error_responses(401, 422, 503))
    return app


app = create_app()
