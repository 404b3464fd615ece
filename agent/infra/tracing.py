"""OpenTelemetry traces, opt-in (setting `tracing`; the `tracing` extra): the API's requests (FastAPI), every Celery
publish and task run (the trace context rides in the task's headers, so a job is one trace across processes and
hosts), every Postgres query (psycopg) and every HTTP call made with httpx or httpx2 (the openai SDK's client, so every
LLM request). The official instrumentations do the work; this module only sets them up, once per process.

Where the spans go is OpenTelemetry's own configuration, from the standard environment variables: OTLP over
HTTP/protobuf to OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; default localhost:4318),
OTEL_TRACES_EXPORTER=console|none instead, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER...

Nothing of OpenTelemetry's SDK is imported unless `install` is called: with tracing off the process runs as before.
"""
from __future__ import annotations

import importlib.util
import os
import threading
from typing import TYPE_CHECKING, Any

from agent.infra.extras import require

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

EXTRA = "tracing"
# health probes and scrapes are not worth a trace each
EXCLUDED_URLS = "/healthz,/readyz,/metrics"

_lock = threading.Lock()
_provider: TracerProvider | None = None
_instrumentors: list[Any] = []


def installed() -> bool:
    return _provider is not None


def _processor_from_env() -> SpanProcessor | None:
    """The span processor OTEL_TRACES_EXPORTER names: otlp (the default, over HTTP/protobuf), console, or none (the
    process still propagates the trace context, so the processes after it stay in the same trace)."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    exporter = (os.environ.get("OTEL_TRACES_EXPORTER") or "otlp").split(",")[0].strip().lower()
    if exporter == "none":
        return None
    if exporter == "console":
        return BatchSpanProcessor(ConsoleSpanExporter())
    if exporter != "otlp":
        raise ValueError(f"OTEL_TRACES_EXPORTER={exporter} is not supported here: use otlp, console or none")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return BatchSpanProcessor(OTLPSpanExporter())


def install(service: str, processor: SpanProcessor | None = None, set_global: bool = True) -> bool:
    """Start tracing in this process, once: a tracer provider named `service` (OTEL_SERVICE_NAME wins) exporting
    through `processor` (default: from the OTEL_* environment), and the Celery, psycopg and httpx instrumentations.
    False if it was already installed (the first call's provider stays). `set_global=False` keeps the provider out of
    OpenTelemetry's global one (a test process), handing it to the instrumentations only."""
    global _provider
    with _lock:
        if _provider is not None:
            return False
        sdk_trace = require("opentelemetry.sdk.trace", EXTRA)
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource

        provider = sdk_trace.TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or service}))
        processor = processor or _processor_from_env()
        if processor is not None:
            provider.add_span_processor(processor)
        if set_global:
            trace.set_tracer_provider(provider)
        celery = require("opentelemetry.instrumentation.celery", EXTRA)
        psycopg = require("opentelemetry.instrumentation.psycopg", EXTRA)
        httpx = require("opentelemetry.instrumentation.httpx", EXTRA)
        instrumentors = [celery.CeleryInstrumentor(), psycopg.PsycopgInstrumentor(), httpx.HTTPXClientInstrumentor()]
        if importlib.util.find_spec("httpx2") is not None:  # the openai SDK's client (3.x): httpx's successor
            instrumentors.append(httpx.HTTPX2ClientInstrumentor())
        for instrumentor in instrumentors:
            instrumentor.instrument(tracer_provider=provider)
            _instrumentors.append(instrumentor)
        _provider = provider
        return True


def instrument_fastapi(app: Any) -> None:
    """Server spans for the app's requests (call `install` first; before the app builds its middleware stack)."""
    fastapi = require("opentelemetry.instrumentation.fastapi", EXTRA)
    fastapi.FastAPIInstrumentor.instrument_app(app, tracer_provider=_provider, excluded_urls=EXCLUDED_URLS)


def uninstall() -> None:
    """Undo `install`'s instrumentations and flush and stop its provider (tests; a process that is ending)."""
    global _provider
    with _lock:
        for instrumentor in reversed(_instrumentors):
            instrumentor.uninstrument()
        _instrumentors.clear()
        if _provider is not None:
            _provider.shutdown()
        _provider = None


def flush(timeout_ms: int = 5000) -> bool:
    """Export the spans that ended and wait for it (before a process exits abruptly)."""
    return _provider.force_flush(timeout_ms) if _provider is not None else True
