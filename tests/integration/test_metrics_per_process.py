"""Metrics without a shared disk (METRICS_PORT, as docker-compose.yml runs the workers): real worker processes of the
topology, each serving its own /metrics on its own port, run a job; each shows the tasks it ran and only those, none
writes a metric file, and a SIGKILLed one leaves nothing behind while the API's scrape stops counting it as a consumer
of its queue."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.infra.metrics import render_metrics
from agent.services import ServiceURLs
from ops.local.worker_pool import stop_pids, wait_ready, worker_env
from tests.integration.jobs import run_job
from workers.topology import WORKERS, Queue, worker_argv

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
SCRAPE_TIME = {"finagent_jobs", "finagent_job_oldest_active_seconds", "finagent_queue_depth", "finagent_queue_consumers",
               "finagent_circuit_breaker_state", "finagent_circuit_breaker_failures", "finagent_scrape_source_up"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse(text: str) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def total(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items())


def until(predicate, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if value := predicate():
                return value
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise AssertionError("timed out")


def scrape(port: int) -> Samples:
    return parse(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)


def consumers(ctx) -> dict[str, float]:
    """`finagent_queue_consumers` by queue, as the API's scrape reports it."""
    samples = parse(render_metrics(ctx)[0].decode())
    return {dict(ls)["queue"]: v for (n, ls), v in samples.items() if n == "finagent_queue_consumers"}


def test_each_worker_serves_its_own_metrics_and_a_killed_one_leaves_nothing(ctx, sample_corpus, workers, tmp_path):
    workers.stop()  # the shared-directory workers: this test runs its own
    urls = ServiceURLs(database_url=ctx.database_url, redis_url=ctx.redis_url)
    ports = {spec.name: free_port() for spec in WORKERS}
    procs: dict[str, subprocess.Popen] = {}
    nodes = {spec.name: f"pp-{spec.name}-{uuid.uuid4().hex[:6]}" for spec in WORKERS}
    try:
        for spec in WORKERS:
            env = worker_env(urls, ctx.settings.metrics_path(), spec) | {"FINAGENT_METRICS_PORT": str(ports[spec.name])}
            procs[spec.name] = subprocess.Popen(
                [sys.executable, "-m", "celery", *worker_argv(spec, nodes[spec.name]), "-l", "INFO"], env=env,
                stdout=open(tmp_path / f"{spec.name}.log", "wb"), stderr=subprocess.STDOUT)
        wait_ready(urls, [f"{n}@" for n in nodes.values()], 60)
        for port in ports.values():  # the endpoint starts at worker_ready
            until(lambda port=port: scrape(port) is not None)

        job, _ = run_job(ctx, question="What was NVDA's revenue last quarter and what drove it?")
        assert job.status == "completed" and job.result is not None
        steps = job.result.iterations * 2 + 2  # start, plan, then per iteration a search and an answer round
        coordinator = until(lambda: (s := scrape(ports["coordinator"]))
                            and total(s, "finagent_task_duration_seconds_count", task="tasks.coordinator.advance") >= steps
                            and total(s, "finagent_jobs_finished_total", status="completed") >= 1 and s)
        llm, search = scrape(ports["llm"]), scrape(ports["search"])
        # each process shows the tasks it ran, and only those
        assert total(llm, "finagent_task_duration_seconds_count", task="tasks.llm.plan", outcome="success") >= 1
        assert total(search, "finagent_task_duration_seconds_count", task="tasks.search.search_quarter") >= 1
        assert total(coordinator, "finagent_task_duration_seconds_count", task="tasks.llm.plan") == 0
        assert total(llm, "finagent_task_duration_seconds_count", task="tasks.coordinator.advance") == 0
        assert total(coordinator, "finagent_job_latency_seconds_count") >= 1  # the job's end, where it was recorded
        answered = sum(total(llm, f"finagent_llm_{kind}_total", role="plan") for kind in ("calls", "cache_hits"))
        assert answered >= 1
        # the cluster-wide gauges are the API's: no worker serves them
        assert not {n for n, _ in coordinator} & SCRAPE_TIME
        # the API's scrape: a live consumer on every queue, the oldest job under way from Postgres
        live = until(lambda: (c := consumers(ctx)) and all(v >= 1 for v in c.values()) and c)
        assert set(live) == {q.value for q in Queue}
        assert ("finagent_job_oldest_active_seconds", ()) in parse(render_metrics(ctx)[0].decode())

        directory = ctx.settings.metrics_path()

        def mine() -> list[str]:
            return [f.name for p in procs.values() for f in directory.glob(f"*-{p.pid}.db")]

        assert mine() == []  # in memory: no multiprocess file, though the directory was in their environment
        os.kill(procs["llm"].pid, signal.SIGKILL)
        procs["llm"].wait(30)
        assert mine() == []
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{ports['llm']}/metrics", timeout=5)
        # its announcement lapses with its heartbeat: nothing consumes the llm queue now
        until(lambda: consumers(ctx)["llm"] == 0 and consumers(ctx)["search"] >= 1)
    finally:
        stop_pids([p.pid for p in procs.values() if p.poll() is None])
        for p in procs.values():
            p.wait(30)
