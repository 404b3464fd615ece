"""Time limits: derived from the settings, inside the broker's visibility timeout, on every task, and enforced on the
threads pool (a soft limit raised inside the task's thread; a hard limit hands the task to the watchdog)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import fakeredis
import pytest
from pydantic import ValidationError

from agent.infra import liveness
from agent.infra.error_classes import classify_error
from agent.settings import Settings
from agent.time_limits import RATE_LIMIT_MAX_WAIT_S, LimitKind, TimeLimit, longest_hard_limit, role_call_s, time_limits
from workers.deadlines import DeadlineEnforcer, pool_ignores_limits, raise_in_thread, soft_limit_error

REPO = Path(__file__).resolve().parents[3]
JOB = "0b6f3c3e-8a55-4d47-9d53-2f3f7a3f0a11"


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith("FINAGENT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)  # no .env
    return monkeypatch


# ---------- derivation ----------

def test_llm_limits_grow_with_what_a_role_call_waits_on(clean_env):
    base = Settings()
    llm = time_limits(base)[LimitKind.llm]
    assert time_limits(Settings(llm_timeout_s=30))[LimitKind.llm].soft_s < llm.soft_s
    assert time_limits(Settings(max_tool_retries=0))[LimitKind.llm].soft_s < llm.soft_s
    # the shared rate limit's longest wait counts only when a limit is on
    assert role_call_s(Settings(llm_requests_per_minute=60)) == role_call_s(base) + RATE_LIMIT_MAX_WAIT_S
    # injected latency counts up to the provider timeout: slower than that models a stuck provider
    assert role_call_s(Settings(llm_latency_s=2)) == role_call_s(base) + 2
    assert role_call_s(Settings(llm_latency_s=500, broker_visibility_timeout_s=5000)) == role_call_s(base) + base.llm_timeout_s
    # a soft exception waits behind at most one blocking read: the hard limit leaves it that long
    assert llm.hard_s - llm.soft_s >= base.llm_timeout_s


def test_every_kind_has_a_soft_limit_below_its_hard_limit_and_embedding_scales_with_the_batch(clean_env):
    limits = time_limits(Settings())
    assert set(limits) == set(LimitKind)
    assert all(0 < lim.soft_s < lim.hard_s for lim in limits.values())
    assert time_limits(Settings(embedding_batch_size=200))[LimitKind.embed].soft_s > limits[LimitKind.embed].soft_s
    with pytest.raises(ValidationError, match="shorter than the hard one"):
        TimeLimit(soft_s=10, hard_s=10)


def test_the_numbers_restated_from_other_modules_match_them():
    import inspect

    from agent.infra.ratelimit import MAX_WAIT_S
    from agent.providers.embeddings import OpenAIEmbedder
    from agent.providers.news import TavilyNews
    from agent.time_limits import NEWS_TIMEOUT_S, REMOTE_EMBED_ATTEMPTS

    assert RATE_LIMIT_MAX_WAIT_S == MAX_WAIT_S
    assert inspect.signature(TavilyNews).parameters["timeout_s"].default == NEWS_TIMEOUT_S
    embedder = OpenAIEmbedder(Settings(openai_api_key="sk-test", embedding_provider="openai"))
    assert embedder.client.max_retries + 1 == REMOTE_EMBED_ATTEMPTS


# ---------- the visibility-timeout relation ----------

def test_the_default_visibility_timeout_outlasts_every_hard_limit(clean_env):
    s = Settings()
    assert s.broker_visibility_timeout_s > longest_hard_limit(s)
    # and still with the rate limit, benchmark latency and remote embeddings on
    s = Settings(llm_requests_per_minute=60, llm_tokens_per_minute=100_000, llm_latency_s=2, embedding_provider="openai")
    assert s.broker_visibility_timeout_s > longest_hard_limit(s)


def test_a_visibility_timeout_shorter_than_a_hard_limit_fails_at_load_naming_both_settings(clean_env):
    clean_env.setenv("FINAGENT_LLM_TIMEOUT_S", "600")
    with pytest.raises(ValidationError) as err:
        Settings()
    message = str(err.value)
    assert "FINAGENT_BROKER_VISIBILITY_TIMEOUT_S" in message and "FINAGENT_LLM_TIMEOUT_S" in message
    hard = longest_hard_limit(Settings.model_construct(llm_timeout_s=600.0))  # unvalidated: what the check saw
    assert f"got 600 s <= {hard:g} s" in message
    clean_env.setenv("FINAGENT_BROKER_VISIBILITY_TIMEOUT_S", str(int(hard) + 1))
    assert Settings().broker_visibility_timeout_s == int(hard) + 1  # a long enough timeout is accepted


# ---------- every task carries its limits ----------

REGISTERED = """
import json
from workers.app import app
app.loader.import_default_modules()
from workers.topology import TASK_ROUTES
print(json.dumps({"vt": app.conf.broker_transport_options["visibility_timeout"],
                  "tasks": {n: [app.tasks[n].soft_time_limit, app.tasks[n].time_limit] for n in TASK_ROUTES},
                  "sent": {n: [app.tasks[n]._get_exec_options()[k] for k in ("soft_time_limit", "time_limit")] for n in TASK_ROUTES}}))
"""


def test_every_registered_task_has_soft_and_hard_limits_inside_the_visibility_timeout(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")} | {
        "FINAGENT_DATA_DIR": str(tmp_path), "FINAGENT_DATABASE_URL": "postgresql://nobody@127.0.0.1:9/x",
        "FINAGENT_REDIS_URL": "redis://127.0.0.1:9/0"}
    out = json.loads(subprocess.run([sys.executable, "-c", REGISTERED], cwd=tmp_path, env=env | {"PYTHONPATH": str(REPO)},
                                    capture_output=True, text=True, check=True).stdout)
    assert out["tasks"] and out["tasks"] == out["sent"]  # the messages we send carry them too (Flower shows them)
    for name, (soft, hard) in out["tasks"].items():
        assert soft and hard and soft < hard < out["vt"], (name, soft, hard)
    assert out["tasks"]["tasks.llm.extract"][1] > out["tasks"]["tasks.coordinator.advance"][1]


# ---------- enforcement on the threads pool ----------

class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class BusyTask(threading.Thread):
    """A task's thread running Python until something is raised in it."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.started = threading.Event()
        self.stop = threading.Event()
        self.raised: BaseException | None = None

    def run(self) -> None:
        self.started.set()
        try:
            while not self.stop.is_set():
                time.sleep(0.01)
        except BaseException as exc:
            self.raised = exc


def test_past_the_soft_limit_the_exception_is_raised_inside_the_tasks_thread():
    clock, task = Clock(), BusyTask()
    task.start()
    task.started.wait(5)
    enforcer = DeadlineEnforcer(on_hard=lambda d: None, clock=clock)
    enforcer.register(f"{JOB}:1:extract:0", "tasks.llm.extract", soft_s=5, hard_s=20, thread_id=task.ident)
    clock.now += 4.9
    enforcer.check()
    task.join(0.3)
    assert task.is_alive() and task.raised is None  # not yet
    clock.now += 0.2
    enforcer.check()
    task.join(5)
    assert not task.is_alive()
    from celery.exceptions import SoftTimeLimitExceeded

    assert isinstance(task.raised, SoftTimeLimitExceeded)
    assert str(task.raised) == "soft time limit of 5 s exceeded"
    assert classify_error(task.raised) == "network"  # a retryable timeout


def test_nothing_is_raised_into_a_thread_whose_task_has_ended():
    clock, task = Clock(), BusyTask()
    task.start()
    task.started.wait(5)
    enforcer = DeadlineEnforcer(on_hard=lambda d: pytest.fail("hard limit on an ended task"), clock=clock)
    enforcer.register(f"{JOB}:1:extract:0", "tasks.llm.extract", soft_s=5, hard_s=20, thread_id=task.ident)
    enforcer.unregister(f"{JOB}:1:extract:0", thread_id=task.ident)
    clock.now += 60
    enforcer.check()
    task.join(0.3)
    assert task.is_alive() and task.raised is None and enforcer.running() == []
    task.stop.set()
    task.join(5)


def test_past_the_hard_limit_the_claim_expires_and_the_watchdog_sees_an_orphan(monkeypatch):
    import workers.signals as worker_signals

    server = fakeredis.FakeServer()
    worker, watchdog = fakeredis.FakeRedis(server=server), fakeredis.FakeRedis(server=server)
    monkeypatch.setattr(worker_signals, "_redis", lambda: worker)
    node, task_id = "llm@a#41", f"{JOB}:1:extract:ACME:2025_q1"
    liveness.beat(worker, node)
    liveness.claim(worker, task_id, node)
    clock = Clock()
    raised: list[int] = []

    def stuck_in_c(thread_id: int, exc: type[BaseException] | None) -> bool:
        raised.append(thread_id)  # the thread sits in a C call: the exception never lands
        return True

    enforcer = DeadlineEnforcer(on_hard=worker_signals._expire_claim, clock=clock, raise_in=stuck_in_c)
    enforcer.register(task_id, "tasks.llm.extract", soft_s=5, hard_s=20, node=node, thread_id=12345)
    clock.now += 6
    enforcer.check()
    assert raised == [12345] and liveness.orphans(watchdog) == {}  # soft: raised, still a live claim
    clock.now += 15
    enforcer.check()
    assert liveness.orphans(watchdog) == {task_id: liveness.expired_name(node)}  # its worker still beats
    enforcer.check()
    assert raised == [12345]  # each limit acts once

    # the watchdog re-sends the step; another worker claims the task id; the stuck thread's late release leaves it
    liveness.forget(watchdog, [task_id])
    liveness.beat(worker, "llm@b#7")
    liveness.claim(worker, task_id, "llm@b#7")
    assert not liveness.release(worker, task_id, node)
    assert watchdog.hget(liveness.CLAIMS, task_id) == b"llm@b#7"
    assert liveness.release(worker, task_id, "llm@b#7") and watchdog.hlen(liveness.CLAIMS) == 0


def test_a_stuck_task_that_ends_after_its_claim_expired_releases_it():
    r = fakeredis.FakeRedis()
    liveness.claim(r, f"{JOB}:1:plan", "llm@a#1")
    assert liveness.expire(r, f"{JOB}:1:plan", "llm@a#1")
    assert not liveness.expire(r, f"{JOB}:1:plan", "llm@a#1")  # only the holder's claim expires
    assert liveness.release(r, f"{JOB}:1:plan", "llm@a#1") and r.hlen(liveness.CLAIMS) == 0


def test_the_benchmark_latency_sleeps_in_slices_a_soft_limit_can_interrupt():
    from agent.providers.llm.factory import DelayedProvider

    class Inner:
        name = "inner"

        def plan(self, request):
            return "planned"

    delayed = DelayedProvider(Inner(), latency_s=30)
    outcome: list[BaseException | str] = []

    def call() -> None:
        try:
            outcome.append(delayed.plan("q"))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    time.sleep(0.2)
    assert raise_in_thread(thread.ident or 0, soft_limit_error(7.0))
    thread.join(3)
    assert not thread.is_alive(), "a single 30 s sleep cannot be interrupted"
    assert str(outcome[0]) == "soft time limit of 7 s exceeded"


def test_only_the_pools_that_ignore_time_limits_get_the_enforcer():
    from celery.concurrency.prefork import TaskPool as Prefork
    from celery.concurrency.solo import TaskPool as Solo
    from celery.concurrency.thread import TaskPool as Threads

    assert pool_ignores_limits(object.__new__(Threads)) and pool_ignores_limits(object.__new__(Solo))
    assert not pool_ignores_limits(object.__new__(Prefork))


def test_a_soft_limit_wrapped_by_a_client_library_is_still_what_failed_the_call():
    from celery.exceptions import SoftTimeLimitExceeded
    from openai import APIConnectionError

    from tasks.fanout import soft_time_limit_behind

    request = __import__("httpx").Request("POST", "http://localhost/v1/chat/completions")
    try:
        try:
            raise soft_limit_error(42.0)()
        except Exception as inner:
            raise APIConnectionError(request=request) from inner
    except APIConnectionError as wrapped:
        found = soft_time_limit_behind(wrapped, 42.0)
    assert found is not None and str(found) == "soft time limit of 42 s exceeded"
    # prefork's own exception carries no message: it gets the task's limit
    bare = soft_time_limit_behind(SoftTimeLimitExceeded(), 30.0)
    assert bare is not None and str(bare) == "soft time limit of 30 s exceeded" and classify_error(bare) == "network"
    assert soft_time_limit_behind(ValueError("bad"), 30.0) is None
