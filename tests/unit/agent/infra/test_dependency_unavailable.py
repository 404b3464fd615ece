"""Postgres or Redis down, without services: which failures count as a server being down, the API's 503 (and 500)
in the one error shape, /readyz within its deadline, a saved job's submission surviving a broker that is down, and
the CLI's one line. The live version (real servers killed under real workers) is tests/chaos/test_dependency_down.py."""
from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
import redis
from fastapi.testclient import TestClient
from kombu.exceptions import OperationalError as BrokerError
from psycopg_pool import PoolTimeout

from agent.infra.unavailable import unavailable
from agent.models.job import JobRequest
from agent.settings import Settings
from api_stub import health
from api_stub.asgi import create_app
from api_stub.runtime import Runtime
from finagent.models import ErrorBody

SETTINGS = Settings(api_keys=[])


# ---------- what counts as a server being down ----------

def _raised_from(cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as exc:
            raise RuntimeError("the step failed") from exc
    except RuntimeError as wrapped:
        return wrapped


@pytest.mark.parametrize("exc, service", [
    (PoolTimeout("couldn't get a connection after 5.00 sec"), "postgres"),
    (psycopg.OperationalError("connection failed: Connection refused"), "postgres"),
    (psycopg.errors.AdminShutdown("terminating connection due to administrator command"), "postgres"),
    (psycopg.errors.ConnectionFailure("server closed the connection unexpectedly"), "postgres"),
    (redis.ConnectionError("Error 111 connecting to localhost:6379. Connection refused."), "redis"),
    (redis.TimeoutError("Timeout connecting to server"), "redis"),
    (BrokerError("Error 111 connecting to localhost:6379. Connection refused."), "redis"),
    (_raised_from(redis.ConnectionError("Connection refused.")), "redis"),
])
def test_a_server_down_is_named(exc, service):
    down = unavailable(exc)
    assert down is not None and down.service == service
    assert down.reason and "\n" not in down.reason


@pytest.mark.parametrize("exc", [
    psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),  # an OperationalError, not an outage
    psycopg.errors.UniqueViolation("duplicate key"),
    redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
    ValueError("connection refused"),  # the words alone decide nothing
    _raised_from(ValueError("bad input")),
])
def test_other_failures_are_not_outages(exc):
    assert unavailable(exc) is None


def test_the_reason_is_its_first_line_with_secrets_masked():
    exc = psycopg.OperationalError('connection to "postgresql://app:hunter22@db:5432/x" failed\n\tIs the server running?')
    down = unavailable(exc)
    assert down is not None
    assert "hunter22" not in down.reason and "Is the server running" not in down.reason and "failed" in down.reason


# ---------- the API ----------

class _DownPool:
    def connection(self, *args, **kwargs):
        raise PoolTimeout("couldn't get a connection after 5.00 sec")


class _DownRedis:
    def ping(self):
        raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6999. Connection refused.")


class _FakeContext:
    def __init__(self, pool=None, redis_client=None):
        self.pool, self.redis_one_attempt, self.settings = pool, redis_client, SETTINGS


def _client(ctx, **runtime) -> TestClient:
    rt = Runtime(settings=SETTINGS, **runtime)
    rt.__dict__["ctx"] = ctx  # the cached property, resolved to servers that are down
    return TestClient(create_app(rt), raise_server_exceptions=False)


def _error(resp, status: int) -> ErrorBody:
    assert resp.status_code == status, resp.text
    return ErrorBody.model_validate(resp.json())


def test_postgres_down_is_503_with_retry_after():
    client = _client(_FakeContext(pool=_DownPool()))
    for resp in (client.get(f"/v1/jobs/{uuid.uuid4()}"), client.get("/v1/jobs")):
        body = _error(resp, 503)
        assert body.error.code == "dependency_unavailable"
        assert body.error.message.startswith("postgres is unavailable (couldn't get a connection after 5.00 sec: the "
                                             "server is down, or every pooled connection is in use)")
        assert resp.headers["Retry-After"] == "5"


def test_any_other_failure_is_500_in_the_error_shape_without_its_text(monkeypatch):
    def broken(*args, **kwargs):
        raise ArithmeticError("internal detail that stays in the log")

    monkeypatch.setattr("agent.submission.find_job", broken)
    resp = _client(_FakeContext())
    body = _error(resp.get(f"/v1/jobs/{uuid.uuid4()}"), 500)
    assert body.error.code == "internal_error" and "ArithmeticError" in body.error.message
    assert "internal detail" not in body.error.message


def test_every_protected_route_documents_503():
    spec = create_app(Runtime(settings=SETTINGS)).openapi()
    for path, ops in spec["paths"].items():
        if path.startswith("/v1/"):
            for op in ops.values():
                assert "503" in op["responses"], (path, op.get("summary"))


def test_readiness_answers_by_its_deadline_naming_each_check(monkeypatch):
    release = threading.Event()

    def hung(rt):  # Celery's broadcast meeting a broker that is down keeps retrying its connection
        release.wait(30)
        return "ok"

    monkeypatch.setitem(health.CHECKS, "queues", hung)
    try:
        resp = _client(_FakeContext(pool=_DownPool(), redis_client=_DownRedis()), ready_cache_s=0,
                       ready_deadline_s=0.5).get("/readyz")
    finally:
        release.set()
    body = _error(resp, 503)
    checks = {d.loc[0]: d.msg for d in body.error.details}
    assert checks["redis"].startswith("ConnectionError: Error 111")
    assert checks["postgres"].startswith("PoolTimeout")
    assert checks["queues"] == "no answer within 0.5 s"


# ---------- a submission whose job is saved ----------

class _Recorder:
    def __init__(self):
        self.started: list[str] = []

    def start(self, job_id: str, batch: bool) -> None:
        self.started.append(job_id)

    def cancel(self, job) -> None:
        raise AssertionError("not used")


def _submission(monkeypatch, publish):
    from agent import submission

    monkeypatch.setattr(submission, "check_request", lambda ctx, request, **_: None)
    monkeypatch.setattr(submission.jobstore, "create_job", lambda pool, state, **_: ("job-1", True))
    monkeypatch.setattr(submission, "publish", publish)
    return submission


def test_a_saved_job_is_accepted_with_redis_down(monkeypatch, caplog):
    def down(*args, **kwargs):
        raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6999. Connection refused.")

    submission = _submission(monkeypatch, down)
    dispatcher = _Recorder()
    ctx = _FakeContext(redis_client=object())
    assert submission.create(ctx, dispatcher, JobRequest(question="How did revenue develop?")) == ("job-1", True)
    assert dispatcher.started == []  # the reconciler sends its first step when the broker is back
    assert "job job-1 is saved but not started: redis is unavailable" in caplog.text


def test_a_cancel_saved_with_redis_down_is_accepted(monkeypatch, caplog):
    from types import SimpleNamespace

    def down(*args, **kwargs):
        raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6999. Connection refused.")

    submission = _submission(monkeypatch, down)
    monkeypatch.setattr(submission, "find_job", lambda ctx, job_id: SimpleNamespace(id=job_id, status="running"))
    monkeypatch.setattr(submission.jobstore, "request_cancel", lambda pool, job_id: True)
    monkeypatch.setattr(submission.jobstore, "load_job", lambda pool, job_id: SimpleNamespace(status="running"))
    # the coordinator ends the job at its next step: the cancel is in Postgres, where every step reads it
    assert submission.cancel(_FakeContext(redis_client=object()), _Recorder(), "job-2") == "running"
    assert "job job-2's cancel is saved but not sent: redis is unavailable" in caplog.text


def test_jobs_saved_while_redis_was_down_get_their_queued_event_when_they_start(monkeypatch):
    """Admission (batch jobs) and the reconciler (the rest) publish `queued` first for a job whose stream is empty, and
    only for it: a job announced at submission is not announced twice."""
    import json

    import fakeredis

    from agent import submission
    from agent.infra.events import publish, stream_key

    server = fakeredis.FakeServer()
    ctx = _FakeContext()
    ctx.redis = fakeredis.FakeRedis(server=server, decode_responses=True)
    publish(ctx.redis, "announced", "job_status", "queued", {"status": "queued"})
    monkeypatch.setattr(submission.batchstore, "claim_batch_slots", lambda pool, n: ["announced", "silent"])
    dispatcher = _Recorder()
    assert submission.admit_batch_jobs(ctx, dispatcher) == ["announced", "silent"]
    streams = {j: [json.loads(f["event"]) for _, f in ctx.redis.xrange(stream_key(j))] for j in ("announced", "silent")}
    assert [(e["type"], e["data"]) for e in streams["silent"]] == [("job_status", {"status": "queued"})]
    assert len(streams["announced"]) == 1
    assert dispatcher.started == ["announced", "silent"]


def test_a_saved_job_still_fails_on_anything_else(monkeypatch):
    def broken(*args, **kwargs):
        raise redis.ResponseError("WRONGTYPE")

    submission = _submission(monkeypatch, broken)
    with pytest.raises(redis.ResponseError):
        submission.create(_FakeContext(redis_client=object()), _Recorder(), JobRequest(question="How did revenue develop?"))


# ---------- an events stream that is open when Redis goes ----------

class _FlakyStream:
    """An async Redis whose XREAD returns the next event after the id it is asked for (one at a time, as they come
    live), and fails `outage` times when asked after `after_id` (the server went)."""

    def __init__(self, entries: list[tuple[str, dict]], outage: int, after_id: str):
        self.entries, self.outage, self.after_id, self.reads = entries, outage, after_id, []

    async def xread(self, streams: dict, block: int, count: int):
        (key, last), = streams.items()
        self.reads.append(last)
        if last == self.after_id and self.outage:
            self.outage -= 1
            raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6999. Connection refused.")
        newer = [(i, f) for i, f in self.entries if tuple(map(int, i.split("-"))) > tuple(map(int, last.split("-")))]
        return [(key, newer[:1])] if newer else []


def _entry(entry_id: str, type_: str, **data) -> tuple[str, dict]:
    from agent.infra.events import Event

    return entry_id, {"event": Event(type=type_, job_id="job-1", data=data).model_dump_json()}


def _drain(rt, after: str) -> list[dict]:
    import asyncio

    from api_stub import sse

    async def collect():
        return [m async for m in sse.job_events(rt, "job-1", after)]

    return asyncio.run(collect())


def test_an_open_stream_waits_out_a_redis_outage_and_misses_nothing(monkeypatch):
    from types import SimpleNamespace

    from api_stub import sse

    monkeypatch.setattr(sse, "OUTAGE_WAITS_S", (0.0,))
    monkeypatch.setattr(sse, "_is_final", lambda rt, job_id: False)
    entries = [_entry("1-0", "planning"), _entry("2-0", "iteration_start", iteration=1),
               _entry("3-0", "job_status", status="completed")]
    flaky = _FlakyStream(entries, outage=3, after_id="1-0")
    messages = _drain(SimpleNamespace(aredis=flaky), "0-0")
    comments = [m["comment"] for m in messages if "comment" in m]
    assert [m["id"] for m in messages if "id" in m] == ["1-0", "2-0", "3-0"]  # each event once, in order
    assert flaky.reads == ["0-0", "1-0", "1-0", "1-0", "1-0", "2-0"]  # it resumed after the last event it had sent
    assert len(comments) == 2, messages  # one when the outage starts, one when it ends: not one per attempt
    assert comments[0].startswith("redis is unavailable (Error 111") and "after event 1-0" in comments[0]
    assert comments[1] == "resumed after event 1-0"


def test_an_open_stream_still_fails_on_anything_else(monkeypatch):
    from types import SimpleNamespace

    class Broken:
        async def xread(self, streams, block, count):
            raise redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")

    with pytest.raises(redis.ResponseError):
        _drain(SimpleNamespace(aredis=Broken()), "0-0")


# ---------- the CLI ----------

def test_the_cli_says_which_server_is_down_in_one_line(monkeypatch, capsys):
    from ops.cli import main as cli

    def down():
        raise PoolTimeout("couldn't get a connection after 30.00 sec")

    monkeypatch.setattr(cli, "app", down)
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 3
    err = capsys.readouterr().err
    assert err.startswith("postgres is unavailable: couldn't get a connection") and "FINAGENT_DATABASE_URL" in err
    assert "Traceback" not in err


def test_the_cli_keeps_the_traceback_of_other_failures(monkeypatch):
    from ops.cli import main as cli

    def canceled():
        raise psycopg.errors.QueryCanceled("canceling statement due to statement timeout")

    monkeypatch.setattr(cli, "app", canceled)
    with pytest.raises(psycopg.errors.QueryCanceled):
        cli.main()


def test_an_overnight_batch_run_waits_out_a_database_restart(monkeypatch):
    import datetime as dt

    from agent import batches
    from agent.models.batch import BatchProgress
    from ops.cli import batch_runs as cli_batch

    answers = [PoolTimeout("couldn't get a connection after 30.00 sec"), psycopg.OperationalError("connection failed"),
               BatchProgress(batch_id="b", name="n", created_at=dt.datetime.now(dt.UTC), total=2, done=2)]

    def progress(pool, batch_id):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(batches, "batch_progress", progress)
    cli_batch._follow(None, "b", retry_s=0)
    assert answers == []  # both outages ridden out, then the finished batch ended the wait


def test_a_batch_run_still_stops_on_any_other_failure(monkeypatch):
    from agent import batches
    from ops.cli import batch_runs as cli_batch

    def broken(pool, batch_id):
        raise psycopg.errors.UndefinedTable("relation does not exist")

    monkeypatch.setattr(batches, "batch_progress", broken)
    with pytest.raises(psycopg.errors.UndefinedTable):
        cli_batch._follow(None, "b", retry_s=0)


def test_a_followed_job_that_loses_redis_says_where_to_pick_it_up(monkeypatch, capsys):
    from ops.cli import ask

    def follow(redis_client, job_id, timeout_s):
        yield from ()
        raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(ask, "follow", follow)
    with pytest.raises(redis.ConnectionError):  # ops.cli.main.main turns it into its one line and exit status 3
        ctx = _FakeContext()
        ctx.redis = object()
        ask.follow_job(ctx, "job-7")
    err = capsys.readouterr().err
    assert "job job-7 goes on in the workers; once redis is back" in err and "finagent jobs events job-7" in err
