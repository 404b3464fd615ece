"""The HTTP API for real: uvicorn serving `api_stub` on a free port, real Postgres/Redis, real Celery workers,
driven through `finagent.client` the way another service would use it."""
from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from pydantic import SecretStr

from finagent import BadRequest, Conflict, FinagentClient, NotFound, NotReady, Unauthorized
from tests.integration.served_api import ServedApp, quick_runtime

pytestmark = pytest.mark.integration

QUESTION = "What was NVDA's revenue last quarter?"
KEY = "integration-key"


@pytest.fixture(scope="module")
def keyed_url(ctx) -> Iterator[str]:
    with ServedApp(quick_runtime(ctx.settings, api_keys=[SecretStr("other-key"), SecretStr(KEY)])) as served:
        yield served.url


@pytest.fixture
def fa(api_url, sample_corpus, worker) -> Iterator[FinagentClient]:
    with FinagentClient(api_url, poll_interval=0.3) as client:
        yield client


def test_submit_is_idempotent_and_the_result_arrives(fa, api_url):
    key = f"api-{uuid.uuid4()}"
    first = fa.submit(QUESTION, idempotency_key=key)
    assert first.created and first.status == "queued" and first.status_url == f"/v1/jobs/{first.job_id}"
    again = fa.submit(QUESTION, idempotency_key=key)
    assert (again.job_id, again.created) == (first.job_id, False)
    # the header overrides the body's key; the HTTP status tells a new job (202) from an existing one (200)
    raw = httpx.post(f"{api_url}/v1/jobs", json={"question": QUESTION, "idempotency_key": "ignored"}, headers={"Idempotency-Key": key})
    assert raw.status_code == 200 and raw.json()["job_id"] == first.job_id and raw.headers["Location"] == first.status_url
    with pytest.raises(BadRequest) as reused:  # the key with another request (tests/integration/test_api_surface.py)
        fa.submit(QUESTION, idempotency_key=key, mode="detailed")
    assert reused.value.status_code == 422 and reused.value.code == "idempotency_key_reused"
    assert first.job_id in reused.value.error.message  # type: ignore[union-attr]

    job = fa.wait(first.job_id, timeout=120)
    assert job.status == "completed" and job.result is not None
    assert "35.1 billion" in job.result.answer and job.result.citations
    assert job.created_at is not None and job.updated_at is not None and job.updated_at >= job.created_at

    fb = fa.feedback(first.job_id, "use the last 3 quarters")
    assert fb.created and fb.job_id != first.job_id
    assert fa.get(fb.job_id).parent_job_id == first.job_id


def test_unknown_jobs_are_404_everywhere(fa):
    for job_id in ("not-a-uuid", str(uuid.uuid4())):
        for call in (fa.get, fa.cancel, lambda j: list(fa.events(j)), lambda j: fa.feedback(j, "more")):
            with pytest.raises(NotFound) as exc:
                call(job_id)
            assert exc.value.code == "not_found" and job_id in exc.value.error.message  # type: ignore[union-attr]


def test_events_replay_after_last_event_id_and_reconnect(fa, api_url):
    job_id = fa.submit(QUESTION, mode="direct").job_id
    # read a few events live, drop the connection, and resume after the last one seen
    seen = []
    for ev in fa.events(job_id):
        seen.append(ev)
        if len(seen) == 2:
            break
    rest = list(fa.events(job_id, last_event_id=seen[-1].id))
    ids = [e.id for e in seen + rest]
    assert len(ids) == len(set(ids))  # nothing twice
    assert rest[-1].type == "job_status" and rest[-1].data["status"] in ("completed", "failed", "rejected")
    assert any(e.type == "result" for e in rest)

    full = list(fa.events(job_id))
    assert [e.id for e in full] == ids  # the reconnect missed nothing
    assert full[0].type == "job_status" and full[0].data["status"] == "queued"
    assert all(e.job_id == job_id for e in full)
    resumed = list(fa.events(job_id, last_event_id=full[2].id))
    assert [e.id for e in resumed] == [e.id for e in full[3:]]
    # a client that cannot set headers passes the id as a query parameter
    raw = httpx.get(f"{api_url}/v1/jobs/{job_id}/events", params={"last_event_id": full[-2].id}, timeout=30)
    assert raw.headers["content-type"].startswith("text/event-stream")
    assert [line[4:] for line in raw.text.splitlines() if line.startswith("id: ")] == [full[-1].id]


def test_list_filters_and_cursor_pages(fa):
    started = dt.datetime.now(dt.UTC)
    submitted = [fa.submit(f"{QUESTION} (listing {n})", mode="direct").job_id for n in range(5)]
    for job_id in submitted:
        fa.wait(job_id, timeout=120)

    pages = []
    page = fa.list_jobs(created_after=started, limit=2)
    pages.append(page)
    while page.next_cursor:
        page = fa.list_jobs(created_after=started, limit=2, cursor=page.next_cursor)
        pages.append(page)
    assert [len(p.items) for p in pages] == [2, 2, 1]
    listed = [j.job_id for p in pages for j in p.items]
    assert listed == list(reversed(submitted))  # newest first, each exactly once
    assert [j.job_id for j in fa.iter_jobs(created_after=started, page_size=3)] == listed

    statuses = {j.job_id: j.status for j in fa.list_jobs(created_after=started, limit=200).items}
    done = [j for j, s in statuses.items() if s == "completed"]
    assert done  # extractive answers about the sample corpus complete
    assert [j.job_id for j in fa.list_jobs(status="completed", created_after=started).items] == [j for j in listed if j in done]
    other = fa.list_jobs(status=["failed", "rejected,queued"], created_after=started).items
    assert {j.job_id for j in other} == {j for j, s in statuses.items() if s in ("failed", "rejected", "queued")}
    assert fa.list_jobs(created_after=dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)).items == []


def test_cancel_a_running_job(api_url, sample_corpus, workers_with):
    workers_with(FINAGENT_LLM_LATENCY_S="1.5")  # slow model calls, so the job is still running when cancelled
    with FinagentClient(api_url, poll_interval=0.3) as fa:
        job_id = fa.submit("Compare AAPL and MSFT revenue over the last 3 quarters", mode="detailed").job_id
        for ev in fa.events(job_id):
            if ev.type != "job_status":  # the coordinator has started working on it
                break
        view = fa.cancel(job_id)
        assert view.job_id == job_id and view.cancel_requested and view.status in ("running", "cancelled")
        with httpx.stream("GET", f"{api_url}/v1/jobs/{job_id}/events", timeout=60) as stream:
            lines = list(stream.iter_lines())  # the stream ends by itself after the terminal status
        assert '"status":"cancelled"' in [line for line in lines if line.startswith("data: ")][-1].replace(" ", "")
        job = fa.wait(job_id, timeout=60)
        assert job.status == "cancelled" and job.result is not None and job.result.status == "cancelled"
        with pytest.raises(Conflict) as again:
            fa.cancel(job_id)
        assert again.value.code == "job_finished" and "cancelled" in again.value.error.message  # type: ignore[union-attr]


def test_cancelling_a_finished_job_is_a_conflict(fa):
    job = fa.wait(fa.submit(QUESTION, mode="direct").job_id, timeout=120)
    with pytest.raises(Conflict) as exc:
        fa.cancel(job.job_id)
    assert exc.value.error.details[0].msg == job.status  # type: ignore[union-attr]
    assert fa.get(job.job_id).status == job.status


def test_batches_submit_progress_results(fa):
    name = f"api-batch-{uuid.uuid4().hex[:8]}"
    other = "How did AAPL services revenue trend?"
    sub = fa.submit_batch([QUESTION, {"question": other}, {"question": "x"}], name=name, mode="direct")
    assert sub.name == name and sub.total == 3 and sub.jobs == 2
    assert [(e.line, "question" in e.error) for e in sub.invalid] == [(3, True)]
    first_jobs = [i.job_id for i in fa.batch_results(sub.batch_id) if i.job_id]
    assert len(first_jobs) == 2
    # the same questions again as JSON lines (a comment moves them down): the same batch, the same jobs
    again = fa.submit_batch(f'{QUESTION}\n# a comment\n{{"question": "{other}", "mode": "direct"}}\n{{"question": "x"}}\n',
                            name=name, mode="direct")
    assert again.batch_id == sub.batch_id and [e.line for e in again.invalid] == [4]

    deadline = time.monotonic() + 180
    while (progress := fa.batch(sub.batch_id)).done < progress.total:
        assert time.monotonic() < deadline, progress
        time.sleep(1)
    assert progress.total == 3 and progress.counts.get("invalid") == 1 and progress.finished_at is not None
    items = list(fa.batch_results(sub.batch_id))
    assert [i.line for i in items] == [1, 3, 4]
    assert [i.job_id for i in items[:2]] == first_jobs
    assert items[0].status == "completed" and items[0].result is not None and "35.1 billion" in items[0].result.answer
    assert items[2].status == "invalid" and items[2].job_id is None
    with pytest.raises(NotFound):
        fa.batch(str(uuid.uuid4()))
    with pytest.raises(NotFound):
        list(fa.batch_results("not-a-batch"))


def test_keys_are_required_when_configured(keyed_url, ctx):
    with FinagentClient(keyed_url) as anonymous, FinagentClient(keyed_url, api_key="wrong") as wrong:
        assert anonymous.health().status == "ok"
        for client in (anonymous, wrong):
            with pytest.raises(Unauthorized) as exc:
                client.list_jobs()
            assert exc.value.code == "unauthorized"
    with FinagentClient(keyed_url, api_key=KEY) as keyed:
        assert keyed.list_jobs(limit=1).items is not None
    header = httpx.get(f"{keyed_url}/v1/jobs", params={"limit": 1}, headers={"X-API-Key": KEY})
    assert header.status_code == 200
    assert httpx.get(f"{keyed_url}/metrics").status_code == 401
    metrics = httpx.get(f"{keyed_url}/metrics", headers={"X-API-Key": KEY}, timeout=30)
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    assert "finagent_jobs" in metrics.text
    assert httpx.get(f"{keyed_url}/readyz").status_code in (200, 503)  # open, whatever the workers are doing


def _wait_ready(fa: FinagentClient, want: bool, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        try:
            ready = fa.ready()
            if want:
                return ready
        except NotReady as exc:
            if not want:
                return exc
            ready = exc  # type: ignore[assignment]
        assert time.monotonic() < deadline, f"readiness did not become {want}: {ready}"
        time.sleep(0.5)


def test_readyz_names_the_queue_nobody_consumes(api_url, ctx, workers, worker):
    from agent.services import ServiceURLs
    from ops.local.worker_pool import stop_pids, wait_ready, worker_env
    from workers.topology import Queue, WorkerSpec, worker_argv

    # READY_QUEUES set to every queue, batch included (the default, `api_url`'s, leaves batch out)
    every_queue = ServedApp(quick_runtime(ctx.settings, api_keys=[], ready_queues=[q.value for q in Queue]))
    with every_queue as served, FinagentClient(served.url) as fa, FinagentClient(api_url) as default_fa:
        ready = _wait_ready(fa, want=True)
        assert ready.ready and ready.checks == {"redis": "ok", "postgres": "ok", "queues": "ok"}

        workers.stop()
        # one worker for every queue but batch
        spec = WorkerSpec(name="partial", queues=[q for q in Queue if q is not Queue.batch], concurrency=1)
        node = f"partial-{uuid.uuid4().hex[:6]}"
        urls = ServiceURLs(database_url=ctx.database_url, redis_url=ctx.redis_url)
        log = open(ctx.settings.data_dir / f"{node}.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "celery", *worker_argv(spec, node)], env=worker_env(urls, ctx.settings.metrics_path()),
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_ready(urls, [f"{node}@"], 60)
            time.sleep(1)  # past the readiness cache
            exc = _wait_ready(fa, want=False)
            assert exc.status_code == 503 and exc.code == "not_ready"
            assert [(d.loc, d.msg) for d in exc.error.details] == [(["queues"], "no worker consumes batch")]  # type: ignore[union-attr]
            assert _wait_ready(default_fa, want=True).checks["queues"] == "ok"  # the batch pool is not required

            # a batch job waits on the unconsumed queue: its event stream stays open on keep-alive pings
            waiting = fa.submit(QUESTION, batch=True, mode="direct").job_id
            pings = 0
            with httpx.stream("GET", f"{api_url}/v1/jobs/{waiting}/events", timeout=10) as stream:
                for line in stream.iter_lines():
                    pings += line.startswith(": ping")
                    if pings == 2:
                        break
            assert pings == 2
            fa.cancel(waiting)
        finally:
            stop_pids([proc.pid])
            proc.wait(30)
            log.close()
        exc = _wait_ready(fa, want=False)
        missing = exc.error.details[0].msg  # type: ignore[union-attr]
        assert all(q.value in missing for q in Queue)  # no worker at all: every queue named
    workers.ensure()
