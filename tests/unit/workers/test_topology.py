"""One topology: the queue map in workers/topology.py is what the dispatch, the routes, the local
workers and docker-compose.yml's worker services use."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from agent.models.steps import TaskKind
from workers.topology import (
    ADVANCE,
    ALL_TASKS,
    CALL_TASKS,
    TASK_ROUTES,
    WORKERS,
    Queue,
    queue_for,
    worker_argv,
    worker_cpu,
)

REPO = Path(__file__).resolve().parents[3]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_every_call_kind_has_a_task_and_every_task_a_route():
    assert set(CALL_TASKS) == set(TaskKind.__args__)  # type: ignore[attr-defined]
    assert {t.name for t in ALL_TASKS} == set(TASK_ROUTES)
    assert all(TASK_ROUTES[t.name] == {"queue": t.queue.value} for t in ALL_TASKS)


def test_every_queue_has_exactly_one_worker_and_the_coordinator_runs_beat():
    consumed = [q for w in WORKERS for q in w.queues]
    assert sorted(consumed) == sorted(Queue)
    assert [w.name for w in WORKERS if w.beat] == ["coordinator"]


def compose_workers() -> dict[str, dict]:
    return {name: svc for name, svc in COMPOSE["services"].items() if svc.get("command", [])[:2] == ["finagent", "worker"]}


def test_docker_compose_runs_one_worker_service_per_topology_pool():
    """Each pool of WORKERS is one compose service with the same queues, threads and node name, and its health
    check pings that node (tests/unit/test_compose.py checks the rest of the production shape)."""
    workers = compose_workers()
    assert set(workers) == {f"worker-{w.name}" for w in WORKERS}
    for spec in WORKERS:
        svc = workers[f"worker-{spec.name}"]
        assert svc["command"] == ["finagent", "worker", "--queues", ",".join(q.value for q in spec.queues),
                                  "--concurrency", str(spec.concurrency), "--name", spec.name]
        assert f"inspect ping -d {spec.name}@$$HOSTNAME " in svc["healthcheck"]["test"][1]
    # the node name `finagent worker --name X` gives the process is the one the health check pings
    assert worker_argv(WORKERS[0], WORKERS[0].name)[-2:] == ["-n", f"{WORKERS[0].name}@%h"]
    services = COMPOSE["services"]
    assert [n for n, s in services.items() if s.get("command") == ["finagent", "beat"]] == ["beat"]  # one beat


def test_a_batch_job_runs_every_step_on_the_batch_queue():
    from agent.models.research import SearchSpec
    from agent.models.steps import SearchCall
    from tasks.dispatch import advance_signature, call_signature

    assert queue_for(ADVANCE, batch=True) == "batch" and queue_for(ADVANCE, batch=False) == "coordinator"
    assert advance_signature("j", "start", batch=True).options["queue"] == "batch"
    call = SearchCall(n=3, spec=SearchSpec(ticker="ACME", period="2024_q4", query="margin"))
    sig = call_signature(call, "j", 2, batch=False)
    assert sig.options == {"task_id": "j:2:search:3", "queue": "search"} and sig.task == CALL_TASKS["search"].name
    assert call_signature(call, "j", 2, batch=True).options["queue"] == "batch"


REGISTERED = """
import json
from workers.app import app
import workers.app as w
app.loader.import_default_modules()
print(json.dumps(sorted(n for n in app.tasks if not n.startswith("celery."))))
"""


def test_the_registered_celery_tasks_are_the_topology(tmp_path):
    env = os.environ | {"FINAGENT_DATA_DIR": str(tmp_path), "FINAGENT_DATABASE_URL": "postgresql://nobody@127.0.0.1:9/x",
                        "FINAGENT_REDIS_URL": "redis://127.0.0.1:9/0"}
    out = subprocess.run([sys.executable, "-c", REGISTERED], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == sorted(t.name for t in ALL_TASKS)


def test_the_batch_pool_holds_half_its_threads_in_llm_calls_unless_the_operator_set_it(monkeypatch):
    from agent.settings import Settings

    monkeypatch.delenv("FINAGENT_LLM_MAX_IN_FLIGHT", raising=False)
    batch = next(w for w in WORKERS if w.queues == [Queue.batch])
    assert batch.env_defaults(Settings(_env_file=None)) == {"FINAGENT_LLM_MAX_IN_FLIGHT": str(batch.concurrency // 2)}
    assert batch.env_defaults(Settings(_env_file=None, llm_max_in_flight=0)) == {}  # set, even to 0: the operator's
    assert [w.name for w in WORKERS if w.env_defaults(Settings(_env_file=None))] == ["batch"]
    monkeypatch.setenv("FINAGENT_LLM_MAX_IN_FLIGHT", "3")
    assert batch.env_defaults(Settings(_env_file=None)) == {}


def test_the_coordinator_keeps_a_cpu_apart_from_the_call_pools_and_the_batch_pool_has_none():
    by_name = {w.name: w for w in WORKERS}
    assert {n: worker_cpu(w, [0, 1]) for n, w in by_name.items()} == {"coordinator": 0, "search": 1, "llm": 1,
                                                                       "batch": None}
    assert {n: worker_cpu(w, [5, 3, 9]) for n, w in by_name.items()} == {"coordinator": 3, "search": 5, "llm": 5,
                                                                          "batch": None}
    assert all(worker_cpu(w, [0]) is None for w in WORKERS)  # one CPU: nothing to keep apart


def test_the_local_launcher_passes_each_pinned_pool_its_cpu_unless_pinning_is_off(monkeypatch):
    import ops.local.worker_pool as launcher
    from agent.services import ServiceURLs
    from agent.settings import get_settings

    urls = ServiceURLs(database_url="postgresql://x/y", redis_url="redis://x:1/0")
    by_name = {w.name: w for w in WORKERS}
    monkeypatch.setattr(launcher.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setenv("FINAGENT_WORKER_CPU", "1")  # the launcher's own (say, run from a pinned worker): not inherited
    monkeypatch.delenv("FINAGENT_WORKER_CPU_PINNING", raising=False)
    get_settings.cache_clear()
    try:
        envs = {n: launcher.worker_env(urls, Path("/tmp/m"), w) for n, w in by_name.items()}
        assert {n: e.get("FINAGENT_WORKER_CPU") for n, e in envs.items()} == {"coordinator": "0", "search": "1",
                                                                            "llm": "1", "batch": None}
        monkeypatch.setenv("FINAGENT_WORKER_CPU_PINNING", "false")
        get_settings.cache_clear()
        assert all("FINAGENT_WORKER_CPU" not in launcher.worker_env(urls, Path("/tmp/m"), w) for w in WORKERS)
    finally:
        get_settings.cache_clear()
