"""Every request's id (X-Request-ID in, the same or a new one out, bound for its log lines), and tracing that is
decided when the app first runs (api_stub/observability.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from agent.infra import logs
from agent.settings import Settings
from api_stub.asgi import create_app
from api_stub.observability import RequestIdMiddleware, job_id_in, request_id_from
from api_stub.runtime import Runtime

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def client(tmp_path) -> TestClient:
    return TestClient(create_app(Runtime(settings=Settings(data_dir=tmp_path))))


def test_a_usable_request_id_is_echoed(client):
    response = client.get("/healthz", headers={"X-Request-ID": "upstream-lb:4f2a.9"})
    assert response.status_code == 200 and response.headers["X-Request-ID"] == "upstream-lb:4f2a.9"


@pytest.mark.parametrize("sent", [None, "", "has space", 'quote"d', "x" * 129, "-leading-dash", "caf\xe9".encode("latin-1")])
def test_a_missing_or_unusable_request_id_is_replaced_by_a_new_one(client, sent):
    headers = {"X-Request-ID": sent} if sent is not None else {}
    first = client.get("/healthz", headers=headers).headers["X-Request-ID"]
    second = client.get("/healthz", headers=headers).headers["X-Request-ID"]
    assert first != second and first != sent and len(first) == 32 and int(first, 16) >= 0


def test_an_error_response_carries_the_id_too(client):
    response = client.get(f"/v1/jobs/{uuid.uuid4()}/nothing-here", headers={"X-Request-ID": "req-404"})
    assert response.status_code == 404 and response.headers["X-Request-ID"] == "req-404"


def test_the_routes_see_the_request_and_job_ids():
    app = FastAPI()
    app.add_middleware(RequestIdMiddleware)

    @app.get("/v1/jobs/{job_id}")
    def sync_route(job_id: str) -> dict:  # a sync route runs in a worker thread: the ids follow it there
        return logs.current_ids()

    @app.get("/v1/batches")
    async def async_route() -> dict:
        return logs.current_ids()

    job = str(uuid.uuid4())
    with TestClient(app) as c:
        assert c.get(f"/v1/jobs/{job}", headers={"X-Request-ID": "r-1"}).json() == {"request_id": "r-1", "job_id": job}
        assert c.get("/v1/batches", headers={"X-Request-ID": "r-2"}).json() == {"request_id": "r-2"}
    assert logs.current_ids() == {}  # nothing left bound after the request


def test_the_job_id_is_read_from_job_routes_only():
    job = str(uuid.uuid4())
    assert job_id_in(f"/v1/jobs/{job}") == job and job_id_in(f"/v1/jobs/{job}/events") == job
    assert job_id_in(f"/v1/jobs/{job.upper()}/ledger") == job
    assert job_id_in("/v1/jobs/not-a-uuid") is None and job_id_in(f"/v1/batches/{job}") is None
    assert request_id_from(b"ok-id") == "ok-id" and request_id_from(b"bad\nid") != "bad\nid"


TRACING_OFF_PROBE = """
import json, sys
from fastapi.testclient import TestClient
from agent.settings import Settings
from api_stub.asgi import create_app
from api_stub.runtime import Runtime
import workers.app, tasks.dispatch, ops.cli.main
with TestClient(create_app(Runtime(settings=Settings(data_dir=sys.argv[1])))) as client:
    assert client.get("/healthz").status_code == 200
from opentelemetry import trace
print(json.dumps([type(trace.get_tracer_provider()).__name__,
                  sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk.trace", "opentelemetry.instrumentation",
                                                                  "opentelemetry.exporter", "agent.infra.tracing")))]))
"""


def test_with_tracing_off_nothing_of_opentelemetry_is_imported(tmp_path):
    """No tracer, instrumentation or exporter is loaded and no provider is set. (FastAPI imports OpenTelemetry's API
    for its own telemetry, and redis its metrics SDK when installed, whatever our setting says.)"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    out = subprocess.run([sys.executable, "-c", TRACING_OFF_PROBE, str(tmp_path)], cwd=tmp_path, env=env | {"PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.splitlines()[-1]) == ["ProxyTracerProvider", []]
