"""The shared LLM rate limit on fakeredis: two clients on one FakeServer stand for two worker processes, and an
injected clock replaces wall time."""
from __future__ import annotations

import fakeredis
import httpx
import openai
import pytest
import respx

from agent.infra import metrics
from agent.infra.breaker import CircuitOpenError
from agent.infra.error_classes import classify_error
from agent.infra.ratelimit import BATCH_CALL, RateLimitedError, RateLimiter
from agent.providers.llm.estimate import estimate_tokens
from agent.providers.llm.factory import make_llm
from tests.unit.agent.providers.test_openai_provider import URL, make_settings, ok, plan_req  # (it also registers respx's httpx2 mocker)


class Clock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


@pytest.fixture
def router():
    with respx.mock(using="httpx2", assert_all_called=False) as r:
        yield r


@pytest.fixture
def server():
    return fakeredis.FakeServer()


def limiter(server, clock, **limits) -> RateLimiter:
    return RateLimiter(fakeredis.FakeRedis(server=server, decode_responses=True), clock=clock, **limits)


def test_requests_limit_is_shared_between_processes_and_tells_the_wait(server):
    clock = Clock()
    a, b = limiter(server, clock, requests_per_minute=3), limiter(server, clock, requests_per_minute=3)
    assert a.acquire(0, batch=False).admitted
    clock.t += 10
    assert b.acquire(0, batch=False).admitted
    clock.t += 10
    assert a.acquire(0, batch=False).admitted
    clock.t += 5
    refused = b.acquire(0, batch=False)
    assert not refused.admitted
    assert refused.wait_s == pytest.approx(35.0)  # the oldest call (t=0) leaves the window at t=60
    clock.t += 34.9
    assert not a.acquire(0, batch=False).admitted
    clock.t += 0.1
    assert a.acquire(0, batch=False).admitted
    assert len(a.window()) == 3  # the call at t=0 was pruned, the refused ones were never recorded


def test_tokens_limit_waits_until_enough_tokens_leave_the_window(server):
    clock = Clock()
    lim = limiter(server, clock, tokens_per_minute=1000)
    assert lim.acquire(600, batch=False).admitted
    clock.t += 20
    assert lim.acquire(300, batch=False).admitted
    clock.t += 20
    refused = lim.acquire(300, batch=False)  # 900 + 300 > 1000: the 600 of t=0 must go, at t=60
    assert not refused.admitted and refused.wait_s == pytest.approx(20.0)
    assert lim.acquire(100, batch=False).admitted  # 1000 fits exactly
    assert lim.tokens_used() == 1000
    clock.t += 20
    assert lim.acquire(300, batch=False).admitted
    assert lim.tokens_used() == 700


def test_a_call_larger_than_the_whole_limit_goes_once_the_window_is_empty(server):
    clock = Clock()
    lim = limiter(server, clock, tokens_per_minute=1000)
    assert lim.acquire(10, batch=False).admitted
    refused = lim.acquire(5000, batch=False)
    assert not refused.admitted and refused.wait_s == pytest.approx(60.0)
    clock.t += 60
    assert lim.acquire(5000, batch=False).admitted


def test_reconcile_refunds_and_adds_the_difference(server):
    clock = Clock()
    lim = limiter(server, clock, tokens_per_minute=1000)
    big = lim.acquire(900, batch=False).reservation
    assert not lim.acquire(200, batch=False).admitted
    lim.reconcile(big, 150)  # the call used far less than estimated: the rest is refunded at once
    assert lim.tokens_used() == 150
    assert lim.acquire(800, batch=False).admitted
    small = lim.acquire(50, batch=False).reservation
    lim.reconcile(small, 400)  # and more than estimated: the window holds the real figure
    assert lim.tokens_used() == 150 + 800 + 400
    clock.t += 60.5  # every entry has left, with its reconciled tokens
    assert lim.acquire(1000, batch=False).admitted
    assert lim.tokens_used() == 1000


def test_reconcile_after_the_call_left_the_window_changes_nothing(server):
    clock = Clock()
    lim = limiter(server, clock, tokens_per_minute=1000)
    old = lim.acquire(500, batch=False).reservation
    clock.t += 61
    assert lim.acquire(100, batch=False).admitted  # prunes the old entry
    lim.reconcile(old, 900)
    assert lim.tokens_used() == 100


def test_release_gives_back_the_request_and_its_tokens(server):
    clock = Clock()
    lim = limiter(server, clock, requests_per_minute=1, tokens_per_minute=1000)
    res = lim.acquire(700, batch=False).reservation
    assert not lim.acquire(10, batch=False).admitted
    lim.release(res)
    assert lim.tokens_used() == 0 and lim.window() == []
    assert lim.acquire(1000, batch=False).admitted


def test_batch_share_leaves_headroom_for_interactive_calls(server):
    clock = Clock()
    batch_worker = limiter(server, clock, requests_per_minute=10, tokens_per_minute=10_000, batch_share=0.8)
    interactive_worker = limiter(server, clock, requests_per_minute=10, tokens_per_minute=10_000, batch_share=0.8)
    admitted = 0
    while batch_worker.acquire(100, batch=True).admitted:
        admitted += 1
    assert admitted == 8  # 80% of the requests
    assert not batch_worker.acquire(100, batch=True).admitted
    assert interactive_worker.acquire(100, batch=False).admitted
    assert interactive_worker.acquire(100, batch=False).admitted
    assert not interactive_worker.acquire(100, batch=False).admitted  # the full limit is reached
    kinds = [member.split(":")[0] for member, _ in interactive_worker.window()]
    assert kinds == ["b"] * 8 + ["i"] * 2


def test_a_call_sent_after_waiting_is_counted(router, server, monkeypatch):
    route = router.post(URL).mock(return_value=ok("plan_ok.json"))
    counted: list[tuple[bool, str]] = []
    monkeypatch.setattr(metrics, "count_throttled", lambda batch, outcome: counted.append((batch, outcome)))
    llm = make_llm(make_settings(llm_requests_per_minute=1, llm_cache_ttl_s=0),
                   fakeredis.FakeRedis(server=server, decode_responses=True))
    # the limiter's own clock, advanced only by its sleeps: the second call must wait however slow the first one was
    clock = Clock()
    llm.limiter.clock, llm.limiter.window_s = clock, 20.0  # within the 30 s a call may wait
    wait = llm.limiter.wait
    monkeypatch.setattr(llm.limiter, "wait", lambda *a, **k: wait(*a, **k, sleep=clock.sleep))
    llm.plan(plan_req())
    assert counted == []
    llm.plan(plan_req())
    assert route.call_count == 2 and counted == [(False, "waited")]


def test_batch_share_of_the_tokens_limit(server):
    clock = Clock()
    lim = limiter(server, clock, tokens_per_minute=1000, batch_share=0.5)
    assert lim.acquire(400, batch=True).admitted
    assert not lim.acquire(200, batch=True).admitted  # 600 > 500
    assert lim.acquire(600, batch=False).admitted  # 1000 <= 1000


def test_limits_of_zero_are_off(server):
    clock = Clock()
    lim = limiter(server, clock)
    assert not lim.enabled
    for _ in range(1000):
        assert lim.acquire(10**6, batch=True).admitted
    assert lim.window() == [] and lim.tokens_used() == 0
    only_tokens = limiter(server, clock, tokens_per_minute=100)
    for _ in range(50):  # the requests limit is off: only tokens count
        assert only_tokens.acquire(1, batch=False).admitted
    assert only_tokens.tokens_used() == 50


def test_wait_sleeps_until_admitted(server):
    clock = Clock()
    lim = limiter(server, clock, requests_per_minute=2)
    lim.acquire(0, batch=False)
    clock.t += 5
    lim.acquire(0, batch=False)
    waits: list[float] = []
    reservation = lim.wait(0, batch=False, max_wait_s=60, sleep=clock.sleep, on_wait=waits.append)
    assert reservation is not None
    assert 1_000_060.0 <= clock.t <= 1_000_061.0  # slept in steps until the first call left the window
    assert waits == [pytest.approx(55.0)]


def test_wait_gives_up_with_a_retryable_error_instead_of_blocking(server):
    clock = Clock()
    lim = limiter(server, clock, requests_per_minute=1)
    lim.acquire(0, batch=False)
    with pytest.raises(RateLimitedError) as err:
        lim.wait(0, batch=False, max_wait_s=30, sleep=clock.sleep)
    assert err.value.retry_after_s == pytest.approx(60.0)
    assert clock.t == 1_000_000.0  # it did not sleep at all: the wait was longer than allowed from the start
    assert classify_error(err.value) == "rate_limit"


def test_server_clock_when_none_is_injected(server):
    lim = RateLimiter(fakeredis.FakeRedis(server=server, decode_responses=True), requests_per_minute=1)
    first = lim.acquire(0, batch=False)
    assert first.admitted and first.reservation is not None and first.reservation.admitted_at > 1e9
    refused = lim.acquire(0, batch=False)
    assert not refused.admitted and 59 < refused.wait_s <= 60


# ---------- the provider chain (make_llm): an OpenAI endpoint mocked at the HTTP edge ----------

def test_calls_reserve_an_estimate_then_hold_the_reported_usage(router, server):
    route = router.post(URL).mock(return_value=ok("plan_ok.json"))  # reports 1243 + 187 tokens
    settings = make_settings(llm_tokens_per_minute=100_000, llm_requests_per_minute=50, llm_cache_ttl_s=0)
    llm = make_llm(settings, fakeredis.FakeRedis(server=server, decode_responses=True))
    estimate = estimate_tokens(settings, "plan", plan_req())
    assert estimate > 1024  # the prompt's tokens plus the output allowance
    reserved: list[int] = []
    original = llm.limiter.acquire

    def spy(tokens: int, batch: bool):
        reserved.append(tokens)
        return original(tokens, batch)

    llm.limiter.acquire = spy
    llm.plan(plan_req())
    llm.plan(plan_req())
    assert route.call_count == 2 and reserved == [estimate, estimate]
    assert llm.limiter.tokens_used() == 2 * (1243 + 187)
    assert len(llm.limiter.window()) == 2


def test_a_cache_hit_takes_no_slot(router, server):
    route = router.post(URL).mock(return_value=ok("plan_ok.json"))
    llm = make_llm(make_settings(llm_requests_per_minute=1, llm_cache_ttl_s=600),
                   fakeredis.FakeRedis(server=server, decode_responses=True))
    first, _ = llm.plan(plan_req())
    for _ in range(3):  # over the 1 request/minute, yet answered at once from the cache
        again, usage = llm.plan(plan_req())
        assert usage.cached and again == first
    assert route.call_count == 1
    assert len(llm.inner.limiter.window()) == 1


def test_over_the_limit_a_call_waits_then_raises_a_retryable_error(router, server, monkeypatch):
    route = router.post(URL).mock(return_value=ok("plan_ok.json"))
    llm = make_llm(make_settings(llm_requests_per_minute=1, llm_cache_ttl_s=0),
                   fakeredis.FakeRedis(server=server, decode_responses=True))
    wait = llm.limiter.wait
    monkeypatch.setattr(llm.limiter, "wait", lambda tokens, batch, **kw: wait(tokens, batch, max_wait_s=0.3, **kw))  # not 30 s
    counted: list[tuple[bool, str]] = []
    monkeypatch.setattr(metrics, "count_throttled", lambda batch, outcome: counted.append((batch, outcome)))
    llm.plan(plan_req())
    with pytest.raises(RateLimitedError) as err:
        llm.plan(plan_req())
    assert route.call_count == 1 and 55 < err.value.retry_after_s <= 60
    assert counted == [(False, "gave_up")]
    assert classify_error(err.value) == "rate_limit"
    assert llm.breaker.state() == "closed" and llm.breaker.failures() == 0  # held back, not a failing endpoint


def test_a_call_the_open_breaker_refuses_gives_its_slot_back(router, server):
    router.post(URL).mock(return_value=httpx.Response(503, json={"error": {"message": "overloaded"}}))
    llm = make_llm(make_settings(llm_requests_per_minute=10, llm_cache_ttl_s=0),
                   fakeredis.FakeRedis(server=server, decode_responses=True))
    for _ in range(3):
        with pytest.raises(openai.InternalServerError):
            llm.plan(plan_req())
    assert len(llm.limiter.window()) == 3  # calls that reached the endpoint keep their slot
    with pytest.raises(CircuitOpenError):
        llm.plan(plan_req())
    assert len(llm.limiter.window()) == 3


def test_the_batch_flag_of_the_context_picks_the_share(router, server):
    router.post(URL).mock(return_value=ok("plan_ok.json"))
    llm = make_llm(make_settings(llm_requests_per_minute=2, llm_batch_share=0.5, llm_cache_ttl_s=0),
                   fakeredis.FakeRedis(server=server, decode_responses=True))
    token = BATCH_CALL.set(True)
    try:
        llm.plan(plan_req())
        assert not llm.limiter.acquire(0, batch=True).admitted  # batch has used its half
    finally:
        BATCH_CALL.reset(token)
    llm.plan(plan_req())  # interactive still finds the other half
    assert [m.split(":")[0] for m, _ in llm.limiter.window()] == ["b", "i"]


def test_a_throttled_task_comes_back_when_its_slot_frees_up():
    from tasks.fanout import retry_countdown

    for retries in (0, 1, 4):  # not the growing backoff of a failing call
        countdown = retry_countdown(RateLimitedError("llm", 12.0), retries, base_s=5.0)
        assert 12.5 <= countdown <= 14.0
