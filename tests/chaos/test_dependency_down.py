"""Clients while a server is down, on the real stack: the API, the CLI and a Celery-only service against a Redis or a
Postgres that was killed, with real workers behind them. A job the API accepted (or a cancel it saved) while Redis was
down must take effect once Redis is back, with no one calling a recovery function; a submission refused while
Postgres was down must have saved nothing, and its 503 must say so (Retry-After) rather than hang or answer 500; a
Celery submission must wait the outage out; an events stream open when Redis goes must stay open and deliver every
event once Redis is back."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from agent.infra.events import stream_key
from agent.persistence import jobstore
from agent.services import celery_broker_url
from api_stub.asgi import create_app
from api_stub.runtime import Runtime
from ops.chaos.audit import Supervisor, audit, crash_postgres, crash_redis, diagnose, start_postgres, start_redis, wait_final
from tests.support.chaos_jobs import check, questions

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


def _client(settings, **overrides) -> TestClient:
    rt = Runtime(settings=settings.model_copy(update=overrides), ready_cache_s=0, ready_deadline_s=2.0)
    return TestClient(create_app(rt), raise_server_exceptions=False)


def _cli(ctx, *args: str) -> subprocess.CompletedProcess:
    env = os.environ | {"FINAGENT_DATABASE_URL": ctx.database_url, "FINAGENT_REDIS_URL": ctx.redis_url}
    return subprocess.run([sys.executable, "-m", "ops.cli.main", *args], env=env, capture_output=True, text=True, timeout=120)


def _job_count(ctx) -> int:
    with ctx.pool.connection() as conn:
        return conn.execute("SELECT count(*) AS n FROM research_jobs").fetchone()["n"]


def _sources_up(scrape) -> dict[str, float]:
    """`finagent_scrape_source_up` by source, from a /metrics response that must have answered."""
    assert scrape.status_code == 200, scrape.text
    return {s.labels["source"]: s.value for f in text_string_to_metric_families(scrape.text)
            if f.name == "finagent_scrape_source_up" for s in f.samples}


def test_jobs_submitted_while_redis_is_down_are_accepted_and_run(ctx, settings, sample_corpus, workers, slow_scripted,
                                                                  report):
    client = _client(settings)
    texts = questions(3, 21)
    before = _job_count(ctx)
    with Supervisor(workers):
        crash_redis(settings)
        try:
            ready = client.get("/readyz")
            scrape = client.get("/metrics")
            started = time.monotonic()
            accepted = [client.post("/v1/jobs", json={"question": q, "max_iterations": 1}) for q in texts]
            submit_s = time.monotonic() - started
            cli = _cli(ctx, "ask", texts[0])
            stream = client.get(f"/v1/jobs/{accepted[0].json()['job_id']}/events")
            doomed = client.post("/v1/jobs", json={"question": questions(1, 24)[0], "max_iterations": 1})
            cancel = client.delete(f"/v1/jobs/{doomed.json()['job_id']}")
        finally:
            start_redis(settings)
        assert [r.status_code for r in accepted] == [202] * 3, [r.text for r in accepted]
        assert cancel.status_code == 202, cancel.text  # the cancel is saved; the job's next step reads it
        jobs = [r.json()["job_id"] for r in accepted]
        assert wait_final(ctx, [*jobs, doomed.json()["job_id"]], 240), ("jobs accepted while Redis was down did not "
                                                                         "finish", diagnose(ctx, jobs))
    assert ready.status_code == 503
    checks = {d["loc"][0]: d["msg"] for d in ready.json()["error"]["details"]}
    assert checks["redis"].startswith("ConnectionError"), checks
    assert "postgres" not in checks, checks
    # a stream that could only break at once is refused before it starts, as a retry-later
    assert stream.status_code == 503 and stream.json()["error"]["code"] == "dependency_unavailable", stream.text
    assert stream.headers["Retry-After"] == "5"
    # the scrape an operator needs most during the outage still answers, saying which source is down
    up = _sources_up(scrape)
    assert up == {"postgres": 1, "redis": 0}, up
    # the CLI checks the broker before it saves a job: one line, exit 3, no job of its own
    assert cli.returncode == 3, (cli.stdout, cli.stderr)
    assert cli.stderr.startswith("redis is unavailable") and "Traceback" not in cli.stderr, cli.stderr
    assert _job_count(ctx) == before + 4  # no job twice, none from the CLI
    assert jobstore.load_job(ctx.pool, doomed.json()["job_id"]).status == "cancelled"
    # their streams begin as every job's does, with the `queued` status the submission could not publish
    firsts = [json.loads(ctx.redis.xrange(stream_key(j), count=1)[0][1]["event"]) for j in jobs]
    assert [(e["type"], e["data"]) for e in firsts] == [("job_status", {"status": "queued"})] * 3, firsts
    tally = audit(ctx, "redis_down_at_submit", jobs, faults=1)
    check(tally, report, f"submit_s={submit_s:.2f} readyz={ready.elapsed.total_seconds():.2f}s "
                        f"metrics={scrape.elapsed.total_seconds():.2f}s")
    assert tally.completed == 3, tally


def test_an_open_events_stream_rides_out_a_redis_restart(ctx, settings, sample_corpus, workers, slow_scripted, report):
    client = _client(settings)
    job_id = client.post("/v1/jobs", json={"question": questions(1, 25)[0], "max_iterations": 1}).json()["job_id"]
    lines: list[str] = []
    first_event = threading.Event()

    def read() -> None:
        with client.stream("GET", f"/v1/jobs/{job_id}/events") as response:
            lines.append(f"status {response.status_code}")
            for line in response.iter_lines():
                lines.append(line)
                first_event.set()

    reader = threading.Thread(target=read, daemon=True)
    with Supervisor(workers):
        reader.start()
        assert first_event.wait(60), lines
        crash_redis(settings)
        try:
            time.sleep(3)
        finally:
            start_redis(settings)
        reader.join(240)
    assert not reader.is_alive(), ("the stream did not end after Redis came back", lines[-5:], diagnose(ctx, [job_id]))
    assert lines[0] == "status 200"
    ids = [line.removeprefix("id: ") for line in lines if line.startswith("id: ")]
    events = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]
    assert len(ids) == len(set(ids)) and ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
    # every event Redis holds for the job reached the client (the client may hold more: AOF keeps all but the last
    # second before the kill)
    held = [entry_id for entry_id, _ in ctx.redis.xrange(stream_key(job_id))]
    assert set(held) <= set(ids), sorted(set(held) - set(ids))
    assert events[-1]["type"] == "job_status" and events[-1]["data"]["status"] == "completed", events[-3:]
    comments = [line for line in lines if line.startswith(": ") and not line.startswith(": ping")]
    assert comments[0].startswith(": redis is unavailable") and comments[-1].startswith(": resumed after event"), comments
    assert jobstore.load_job(ctx.pool, job_id).status == "completed"
    report(f"stream_across_redis_restart events={len(ids)} comments={len(comments)}")


def test_a_submission_while_postgres_is_down_is_refused_and_saves_nothing(ctx, settings, sample_corpus, worker, report):
    client = _client(settings, api_db_wait_s=1.0)
    question = {"question": questions(1, 22)[0], "max_iterations": 1}
    before = _job_count(ctx)
    crash_postgres(settings)
    try:
        refused = client.post("/v1/jobs", json=question, headers={"Idempotency-Key": "while-postgres-is-down"})
        ready = client.get("/readyz")
        scrape = client.get("/metrics")
        cli = _cli(ctx, "jobs", "list")
    finally:
        start_postgres(settings)
    assert refused.status_code == 503, refused.text
    error = refused.json()["error"]
    assert error["code"] == "dependency_unavailable" and error["message"].startswith("postgres is unavailable")
    assert refused.headers["Retry-After"] == "5"
    assert ready.status_code == 503 and "postgres" in {d["loc"][0] for d in ready.json()["error"]["details"]}
    up = _sources_up(scrape)
    assert up == {"postgres": 0, "redis": 1}, up
    assert cli.returncode == 3, (cli.stdout, cli.stderr)
    assert cli.stderr.startswith("postgres is unavailable") and "Traceback" not in cli.stderr, cli.stderr
    # a client retrying as told (Retry-After, the same key) once Postgres is back gets one job; the API's pool may
    # take a retry or two to reconnect (psycopg_pool's backoff)
    retries = [refused]
    while retries[-1].status_code == 503 and len(retries) < 8:
        time.sleep(int(retries[-1].headers["Retry-After"]))
        retries.append(client.post("/v1/jobs", json=question, headers={"Idempotency-Key": "while-postgres-is-down"}))
    retried = retries[-1]
    assert retried.status_code == 202, [r.text for r in retries]
    assert _job_count(ctx) == before + 1
    assert wait_final(ctx, [retried.json()["job_id"]], 120), diagnose(ctx, [retried.json()["job_id"]])
    report(f"postgres_down_at_submit refused_in={refused.elapsed.total_seconds():.2f}s "
           f"readyz={ready.elapsed.total_seconds():.2f}s metrics={scrape.elapsed.total_seconds():.2f}s "
           f"cli_exit={cli.returncode} retries={len(retries) - 1}")


# a service with only celery and the broker URL (tests/integration/test_celery_contract.py has the whole contract)
SERVICE = textwrap.dedent('''
    import json, sys, time
    from celery import Celery

    app = Celery("some-other-service", broker=sys.argv[1], backend=sys.argv[1])
    started = time.time()
    job_id = app.send_task("finagent.v1.submit_research", kwargs={"question": sys.argv[2], "max_iterations": 1,
                           "idempotency_key": "svc-during-outage"}).get(timeout=240)
    print(json.dumps({"job_id": job_id, "waited_s": round(time.time() - started, 1)}))
''')


def test_a_celery_submission_waits_out_a_postgres_outage(ctx, settings, sample_corpus, worker, report):
    """Postgres is down for longer than a worker's wait for a connection (30 s): the public submit task is retried
    under the same id, and the service's `.get()` returns the job once Postgres is back."""
    before = _job_count(ctx)
    crash_postgres(settings)
    try:
        service = subprocess.Popen([sys.executable, "-I", "-c", SERVICE, celery_broker_url(ctx.redis_url), questions(1, 23)[0]],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={"PATH": "/usr/bin:/bin"})
        time.sleep(40)
    finally:
        start_postgres(settings)
    out, err = service.communicate(timeout=240)
    assert service.returncode == 0, err[-3000:]
    job_id = json.loads(out.strip().splitlines()[-1])["job_id"]
    assert wait_final(ctx, [job_id], 120), diagnose(ctx, [job_id])
    assert _job_count(ctx) == before + 1
    report(f"celery_submit_during_postgres_outage outage_s=40 waited_s={json.loads(out.strip().splitlines()[-1])['waited_s']}")
