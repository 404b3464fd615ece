"""One job is one trace across processes, and its request id follows it into every task's log lines.

The API runs in this process (a FastAPI test client, spans to OpenTelemetry's in-memory exporter); a real Celery
worker subprocess (every queue, tracing on, JSON logs) writes its spans to a file (tests/support/traced_worker.py);
the LLM is the openai provider against the local OpenAI-compatible server. Every span of the job, from the API's
request through the coordinator's tasks to each LLM request and each Postgres query they made, has one trace id."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="the tracing extra is not installed: pip install 'finagent[tracing]'")

from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent.infra import tracing
from agent.models.job import FINAL_STATUSES
from agent.services import ServiceURLs
from api_stub.asgi import create_app
from ops.local.worker_pool import stop_pids, wait_ready, worker_env
from tests.integration.served_api import quick_runtime
from tests.support.fault_llm import FaultLLMServer
from tests.support.traced_worker import span_record
from workers.topology import ADVANCE, Queue, WorkerSpec, worker_argv

pytestmark = pytest.mark.integration

QUESTION = "What was NVDA's revenue last quarter?"


def _traced_worker(ctx, span_file: Path, log: Path, llm_url: str) -> subprocess.Popen:
    urls = ServiceURLs(database_url=ctx.database_url, redis_url=ctx.redis_url)
    node = f"traced-{uuid.uuid4().hex[:6]}"
    env = worker_env(urls, ctx.settings.metrics_path()) | {
        "FINAGENT_TRACING": "true", "FINAGENT_LOG_FORMAT": "json", "FINAGENT_LOG_LEVEL": "INFO",
        "FINAGENT_LLM_PROVIDER": "openai", "FINAGENT_LLM_BASE_URL": llm_url, "FINAGENT_LLM_API_KEY": "sk-trace-test-key",
        "FINAGENT_LLM_CACHE_TTL_S": "0"}
    spec = WorkerSpec(name="traced", queues=list(Queue), concurrency=4)
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.traced_worker", str(span_file), *worker_argv(spec, node)],
                            env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    wait_ready(urls, [f"{node}@"], 60)
    return proc


def _wait_final(client: TestClient, job_id: str, timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = client.get(f"/v1/jobs/{job_id}").json()
        if view["status"] in FINAL_STATUSES:
            return view
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not finish within {timeout_s:.0f} s")


def test_one_job_is_one_trace_from_the_api_through_the_worker(ctx, sample_corpus, workers, tmp_path):
    workers.stop()  # this test's own worker takes every queue
    span_file, log = tmp_path / "worker-spans.jsonl", tmp_path / "worker.log"
    exporter = InMemorySpanExporter()
    assert tracing.install("finagent-api", SimpleSpanProcessor(exporter), set_global=False)
    request_id = f"trace-test-{uuid.uuid4().hex[:8]}"
    try:
        with FaultLLMServer(seed=5) as srv:
            proc = _traced_worker(ctx, span_file, log, srv.url)
            try:
                with TestClient(create_app(quick_runtime(ctx.settings, tracing=True))) as client:
                    submitted = client.post("/v1/jobs", json={"question": QUESTION, "mode": "direct"},
                                            headers={"X-Request-ID": request_id})
                    assert submitted.status_code == 202 and submitted.headers["X-Request-ID"] == request_id
                    job_id = submitted.json()["job_id"]
                    view = _wait_final(client, job_id)
            finally:
                stop_pids([proc.pid])
            llm_calls = srv.chat_calls()
        api_spans = [span_record(s) for s in exporter.get_finished_spans()]
    finally:
        tracing.uninstall()
    worker_spans = [json.loads(line) for line in span_file.read_text().splitlines()]
    assert view["status"] == "completed", view
    assert llm_calls, "the job made no LLM request"

    # the API's side: the submission's server span, and the publish of the job's first task inside it
    [post] = [s for s in api_spans if s["name"] == "POST /v1/jobs" and s["kind"] == "SERVER"]
    trace_id = post["trace_id"]
    published = [s for s in api_spans if s["kind"] == "PRODUCER" and s["attributes"].get("messaging.message.id", "").startswith(job_id)]
    assert published and {s["trace_id"] for s in published} == {trace_id}

    # the worker's side: every task of the job, every LLM request and every query they made
    def job_task(s: dict) -> bool:
        return str(s["attributes"].get("messaging.message.id", "")).startswith(f"{job_id}:")

    runs = [s for s in worker_spans if s["kind"] == "CONSUMER" and job_task(s)]
    coordinator = [s for s in runs if s["attributes"].get("celery.task_name") == ADVANCE.name]
    chat_url = f"{srv.url}/chat/completions"
    llm = [s for s in worker_spans if s["kind"] == "CLIENT"
           and s["attributes"].get("url.full", s["attributes"].get("http.url")) == chat_url]
    by_id = {s["span_id"]: s for s in worker_spans}

    def under_a_job_task(s: dict) -> bool:
        while s is not None:
            if job_task(s):
                return True
            s = by_id.get(s["parent_id"])
        return False

    queries = [s for s in worker_spans if s["attributes"].get("db.system.name", s["attributes"].get("db.system")) == "postgresql"
               and under_a_job_task(s)]
    assert coordinator and len(runs) > len(coordinator), [s["name"] for s in runs]
    assert len(llm) == len(llm_calls)
    assert queries
    assert {s["trace_id"] for s in runs + coordinator + llm + queries} == {trace_id}
    assert {s["service"] for s in runs} == {"finagent-worker"} and post["service"] == "finagent-api"

    # the request id followed the job into the worker: every log line of its tasks carries it
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    task_lines = [entry for entry in lines if str(entry.get("task_id", "")).startswith(f"{job_id}:")]
    assert task_lines, "no log line of the job's tasks"
    assert {(entry.get("request_id"), entry.get("job_id")) for entry in task_lines} == {(request_id, job_id)}
