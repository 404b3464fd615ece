"""One topology: the queue map in workers/topology.py is what the dispatch, the routes, the local
workers and docker-compose.yml use (the compose file is parsed: there is no Docker engine here)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
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
)

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
COMPOSE_SCHEMA = REPO.parent / "shared" / "specs" / "compose-spec.json"


def test_every_call_kind_has_a_task_and_every_task_a_route():
    assert set(CALL_TASKS) == set(TaskKind.__args__)  # type: ignore[attr-defined]
    assert {t.name for t in ALL_TASKS} == set(TASK_ROUTES)
    assert all(TASK_ROUTES[t.name] == {"queue": t.queue.value} for t in ALL_TASKS)


def test_every_queue_has_exactly_one_worker_and_the_coordinator_runs_beat():
    consumed = [q for w in WORKERS for q in w.queues]
    assert sorted(consumed) == sorted(Queue)
    assert [w.name for w in WORKERS if w.beat] == ["coordinator"]


def test_docker_compose_runs_the_same_workers():
    services = COMPOSE["services"]
    workers = {name: svc for name, svc in services.items() if "worker" in svc.get("command", [])}
    assert set(workers) == {f"worker-{w.name}" for w in WORKERS}
    for spec in WORKERS:
        assert workers[f"worker-{spec.name}"]["command"] == ["celery", *worker_argv(spec, spec.name)]
    assert any("beat" in s.get("command", []) for s in services.values())  # its own service in production
    assert any("flower" in s.get("command", []) for s in services.values())
    assert any("api_stub.app:app" in s.get("command", []) for s in services.values())
    assert services["postgres"]["image"].startswith("pgvector/pgvector:pg16")


def test_app_services_point_at_the_compose_servers():
    worker = COMPOSE["services"]["worker-llm"]
    env = worker["environment"]
    assert env["FINAGENT_DATABASE_URL"].startswith("postgresql://") and "@postgres:5432/" in env["FINAGENT_DATABASE_URL"]
    assert env["FINAGENT_REDIS_URL"] == "redis://redis:6379/0"
    assert set(worker["depends_on"]) == {"postgres", "redis"}


def test_docker_compose_is_valid_against_the_compose_spec():
    if not COMPOSE_SCHEMA.is_file():
        pytest.skip(f"the Compose JSON Schema is not at {COMPOSE_SCHEMA}")
    import jsonschema

    jsonschema.validate(COMPOSE, json.loads(COMPOSE_SCHEMA.read_text()))


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
