"""The service contract, used the way another service would: a separate Python process that has `celery`
and the broker URL and imports nothing from this project submits a job by its versioned task name on
Celery's default routing, follows its events, reads its result and cancels a job."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from agent.services import celery_broker_url

pytestmark = pytest.mark.integration

CLIENT = textwrap.dedent('''
    import json, sys, time

    class NoFinagent:  # prove the client needs none of our code: importing it fails loudly
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {"agent", "tasks", "workers", "ops", "api_stub", "finagent", "bench"}:
                raise ImportError("the client must not import " + name)
            return None

    sys.meta_path.insert(0, NoFinagent())
    from celery import Celery

    url = sys.argv[1]
    app = Celery("some-other-service", broker=url, backend=url)  # default routing: no task_routes, no queue=
    out = {}
    job_id = app.send_task("finagent.v1.submit_research", kwargs={"question": "What was NVDA revenue last quarter?",
                           "idempotency_key": "svc-1"}).get(timeout=60)
    out["again"] = app.send_task("finagent.v1.submit_research", kwargs={"question": "What was NVDA revenue last quarter?",
                                 "idempotency_key": "svc-1"}).get(timeout=60)
    out["job_id"], after, types, deadline = job_id, "0", [], time.time() + 150
    while time.time() < deadline:
        events = app.send_task("finagent.v1.job_events", args=[job_id, after]).get(timeout=30)
        for ev in events:
            after = ev["id"]
            types.append(ev["type"])
        if events and events[-1]["type"] == "job_status" and events[-1]["data"]["status"] in ("completed", "failed", "rejected", "cancelled"):
            break
        time.sleep(0.5)
    out["events"] = types
    out["job"] = app.send_task("finagent.v1.get_job", args=[job_id]).get(timeout=30)
    try:
        app.send_task("finagent.v1.submit_research", kwargs={"question": "x"}).get(timeout=30)
    except Exception as exc:
        out["bad_request"] = f"{type(exc).__name__}: {exc}"
    other = app.send_task("finagent.v1.submit_research", kwargs={"question": "How did AAPL services revenue trend?",
                          "mode": "detailed"}).get(timeout=60)
    out["cancel_status"] = app.send_task("finagent.v1.cancel_job", args=[other]).get(timeout=30)
    deadline = time.time() + 60
    while time.time() < deadline:
        out["cancelled"] = app.send_task("finagent.v1.get_job", args=[other]).get(timeout=30)
        if out["cancelled"]["status"] not in ("queued", "running"):
            break
        time.sleep(0.5)
    out["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in {"agent", "tasks", "workers", "ops"})
    print(json.dumps(out))
''')


def test_a_service_with_only_celery_submits_follows_reads_and_cancels(ctx, worker, sample_corpus, tmp_path):
    run = subprocess.run([sys.executable, "-I", "-c", CLIENT, celery_broker_url(ctx.redis_url)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=280, env={"PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["modules"] == []
    assert out["again"] == out["job_id"]  # the idempotency key makes a retried submission safe
    assert out["events"][0] == "job_status" and "planning" in out["events"] and out["events"][-1] == "job_status"
    job = out["job"]
    assert job["status"] == "completed" and job["result"]["answer"] and job["result"]["citations"]
    assert "invalid research request" in out["bad_request"] and "question" in out["bad_request"]
    assert out["cancel_status"] in ("queued", "running", "cancelled")
    assert out["cancelled"]["status"] == "cancelled"
    assert out["cancelled"]["result"]["termination_reason"].startswith("cancelled by request")
