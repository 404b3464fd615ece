"""Flower as operators run it (`ops/cli/flower.py`): a real Flower process on the test broker, basic auth, a real
job through the real workers, then the job's tasks found through Flower's HTTP API by the job id."""
from __future__ import annotations

import ast
import os
import socket
import subprocess
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from agent.persistence import jobstore
from agent.services import celery_broker_url
from ops.cli.flower import flower_command
from tests.integration.jobs import run_job
from workers.topology import ADVANCE, CALL_TASKS

pytestmark = pytest.mark.integration

AUTH = ("ops", "s3cret-flower")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def flower(ctx, worker, tmp_path, request):
    """A Flower process with basic auth on a free loopback port; stopped in a finalizer."""
    settings = ctx.settings.model_copy(update={"flower_basic_auth": SecretStr(":".join(AUTH)), "data_dir": tmp_path})
    cmd = flower_command(settings, celery_broker_url(ctx.redis_url), host="127.0.0.1", port=_free_port())
    log = open(tmp_path / "flower.log", "wb")
    env = cmd.environ(os.environ)
    proc = subprocess.Popen(cmd.argv, env=env, stdout=log, stderr=subprocess.STDOUT)

    def stop() -> None:
        if proc.poll() is None:
            proc.terminate()  # SIGTERM: Flower saves its state and exits
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()

    request.addfinalizer(stop)
    port = next(a.split("=", 1)[1] for a in cmd.argv if a.startswith("--port="))
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, (tmp_path / "flower.log").read_text()
        try:
            if httpx.get(f"{base}/healthcheck", timeout=2).text == "OK":
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "Flower did not answer within 60 s"
        time.sleep(0.3)
    # Flower sees only the events sent while it listens: wait until it knows the workers, so none is missed
    while not httpx.get(f"{base}/api/workers", params={"refresh": "1"}, auth=AUTH, timeout=30).json():
        assert time.monotonic() < deadline, "Flower saw no worker within 60 s"
        time.sleep(0.5)
    return base, cmd, stop


def _job_tasks(base: str, job_id: str, timeout_s: float = 30) -> dict[str, dict]:
    """The tasks Flower's search finds for the job id, once every one of them has finished."""
    deadline = time.monotonic() + timeout_s
    while True:
        resp = httpx.get(f"{base}/api/tasks", params={"search": job_id}, auth=AUTH, timeout=10)
        assert resp.status_code == 200, resp.text
        tasks = resp.json()
        if tasks and all(t["state"] == "SUCCESS" for t in tasks.values()):
            return tasks
        assert time.monotonic() < deadline, {i: t["state"] for i, t in tasks.items()}
        time.sleep(0.5)


def test_a_jobs_tasks_are_found_in_flower_by_the_job_id(ctx, sample_corpus, flower):
    base, cmd, stop = flower
    assert AUTH[1] not in " ".join(cmd.argv)  # the password is not on the command line, where ps shows it
    assert httpx.get(f"{base}/api/tasks", timeout=10).status_code == 401
    assert httpx.get(f"{base}/api/tasks", auth=("ops", "wrong"), timeout=10).status_code == 401

    job, _ = run_job(ctx, question="What was NVDA's revenue last quarter and what drove it?", mode="standard")
    assert job.status == "completed"
    tasks = _job_tasks(base, job.id)

    # the search matches ids and arguments; every task it finds has an id that starts with the job id
    assert all(task_id.startswith(f"{job.id}:") for task_id in tasks), sorted(tasks)
    names = {t["name"] for t in tasks.values()}
    assert {ADVANCE.name, CALL_TASKS["plan"].name, CALL_TASKS["search"].name, CALL_TASKS["extract"].name,
            CALL_TASKS["compose"].name, CALL_TASKS["evaluate"].name} <= names, names

    # one advance per coordinator step: the first step, then one body per fan-out, named after the stage it joins
    advances = {i: ast.literal_eval(t["args"]) for i, t in tasks.items() if t["name"] == ADVANCE.name}
    assert advances[f"{job.id}:0:start:0"] == (job.id, "start")
    bodies = {i: a for i, a in advances.items() if i != f"{job.id}:0:start:0"}
    assert f"{job.id}:0:advance:plan" in bodies and f"{job.id}:1:advance:search" in bodies
    for task_id, (_, done_step) in bodies.items():
        iteration, stage = done_step.split(":", 1)
        assert task_id == f"{job.id}:{iteration}:advance:{stage}"
    # every call task stored an output under its id's key, and no other output was stored (recovery reads them to
    # tell finished calls); the result backend keeps a result for the coordinator's steps only
    keys = set(jobstore.get_outputs(ctx.pool, job.id, ""))
    calls = {i.removeprefix(f"{job.id}:") for i, t in tasks.items() if t["name"] != ADVANCE.name}
    assert keys == calls, (keys - calls, calls - keys)
    assert not any(ctx.redis.exists(f"celery-task-meta-{job.id}:{k}") for k in calls)
    assert ctx.redis.exists(f"celery-task-meta-{job.id}:0:start:0")
    assert any(tasks[f"{job.id}:{k}"]["name"] == CALL_TASKS["search"].name for k in calls if ":search:" in k)
    # the search fan-out ran as a chord whose header group carries the job id too (the backend's done marker)
    assert ctx.redis.exists(f"celery-taskset-meta-{job.id}:1:fanout:search.c")

    # Prometheus: Flower's own metrics, unauthenticated, count this job's tasks by name
    metrics = httpx.get(f"{base}/metrics", timeout=10)
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(metrics.text)}
    succeeded = {s.labels["task"]: s.value for s in families["flower_events"].samples
                 if s.name == "flower_events_total" and s.labels["type"] == "task-succeeded"}
    assert succeeded[ADVANCE.name] >= len(advances) and succeeded[CALL_TASKS["search"].name] >= 1
    assert "flower_task_runtime_seconds" in families and "flower_worker_online" in families

    # a clean stop saves Flower's task history where the next Flower reads it
    stop()
    assert list(cmd.db.parent.glob(cmd.db.name + "*")), "Flower saved no state"
