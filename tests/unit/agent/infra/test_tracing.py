"""Tracing set up once per process (agent/infra/tracing.py): the API's requests become server spans, and a task
published under a span carries the trace in its headers, so the task's run continues the same trace. The tracing
across real processes is tests/integration/test_tracing.py."""
from __future__ import annotations

import uuid

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="the tracing extra is not installed: pip install 'finagent[tracing]'")

from celery import Celery, signals
from celery.app.task import Context
from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent.infra import tracing
from agent.settings import Settings
from api_stub.asgi import create_app
from api_stub.runtime import Runtime
from workers.telemetry import REQUEST_ID_HEADER


class _Task:
    """What a task is to the signals: its name and its request (a signal's sender must be hashable)."""

    def __init__(self, name: str, request: Context):
        self.name, self.request = name, request


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    assert tracing.install("finagent-test", SimpleSpanProcessor(exporter), set_global=False)
    try:
        yield exporter
    finally:
        tracing.uninstall()
    assert not tracing.installed()


def test_install_happens_once_per_process(spans):
    assert tracing.installed()
    assert not tracing.install("another", SimpleSpanProcessor(InMemorySpanExporter()), set_global=False)
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"  # set_global=False: left alone


def test_an_api_request_is_a_server_span_and_health_probes_are_not(spans, tmp_path):
    app = create_app(Runtime(settings=Settings(data_dir=tmp_path, tracing=True)))
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        assert client.get(f"/v1/jobs/{uuid.uuid4()}/nothing").status_code == 404
    server = [s for s in spans.get_finished_spans() if s.kind == trace.SpanKind.SERVER]
    assert [s.name for s in server] == ["GET"]  # the 404 (no route), and no span for /healthz
    assert server[0].resource.attributes["service.name"] == "finagent-test"


@pytest.fixture
def bare_app():
    """A Celery app of the test's own as the current one: the instrumentation looks the published task up in the
    current app, and the finagent app (when a test before this one imported it) would resolve its broker first."""
    from celery import current_app

    previous = current_app._get_current_object()
    app = Celery("tracing-test", set_as_current=True)
    try:
        yield app
    finally:
        previous.set_current()


def test_a_task_published_under_a_span_continues_its_trace_when_it_runs(spans, bare_app):
    tracer = tracing._provider.get_tracer("test")  # type: ignore[union-attr]
    task_id = f"{uuid.uuid4()}:0:start:0"
    headers = {"id": task_id, "task": "tasks.coordinator.advance"}
    with tracer.start_as_current_span("POST /v1/jobs") as request_span:
        signals.before_task_publish.send(sender="tasks.coordinator.advance", headers=headers, body=((), {}, {}),
                                         exchange="", routing_key="coordinator", properties={}, declare=[], retry_policy={})
        signals.after_task_publish.send(sender="tasks.coordinator.advance", headers=headers, body=((), {}, {}),
                                        exchange="", routing_key="coordinator")
    assert "traceparent" in headers
    # the worker's side: the message's headers become the task's request
    task = _Task("tasks.coordinator.advance", Context(headers, hostname=None))
    signals.task_prerun.send(sender=task, task_id=task_id, task=task, args=(), kwargs={})
    signals.task_postrun.send(sender=task, task_id=task_id, task=task, args=(), kwargs={}, retval=None, state="SUCCESS")
    run = next(s for s in spans.get_finished_spans() if s.kind == trace.SpanKind.CONSUMER)
    assert run.context.trace_id == request_span.get_span_context().trace_id
    assert REQUEST_ID_HEADER not in headers  # no request id bound here: nothing invented


def test_after_uninstall_nothing_is_traced_any_more(spans):
    tracing.uninstall()
    headers = {"id": "J:0:start:0", "task": "t"}
    signals.before_task_publish.send(sender="t", headers=headers, body=((), {}, {}), exchange="", routing_key="q",
                                     properties={}, declare=[], retry_policy={})
    assert "traceparent" not in headers and spans.get_finished_spans() == ()


@pytest.mark.parametrize("exporter, expected", [("none", None), ("console", BatchSpanProcessor), ("otlp", BatchSpanProcessor),
                                                (None, BatchSpanProcessor)])
def test_the_exporter_is_the_standard_environments(monkeypatch, exporter, expected):
    if exporter is None:
        monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    else:
        monkeypatch.setenv("OTEL_TRACES_EXPORTER", exporter)
    processor = tracing._processor_from_env()
    assert (type(processor) if processor is not None else None) is expected
    if processor is not None:
        processor.shutdown()


def test_an_unsupported_exporter_is_named(monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(ValueError, match="OTEL_TRACES_EXPORTER=zipkin"):
        tracing._processor_from_env()
