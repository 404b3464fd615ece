"""CircuitBreaker on fakeredis: one FakeServer, two clients = two workers sharing the breaker state.

Time is a FakeClock shared by the workers (as if their clocks agree): tests advance it instead of sleeping or
deleting Redis keys by hand. The Redis TTLs (real time in fakeredis) never run out during a test."""
from __future__ import annotations

import threading
import time

import fakeredis
import pytest

from agent.infra.breaker import CircuitBreaker, CircuitOpenError, counts_as_failure


class HTTPFailure(Exception):
    def __init__(self, status_code: int):
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


class Dependency:
    """Stands in for the remote service; counts how often it is actually called."""

    def __init__(self):
        self.calls = 0

    def fail(self, exc: Exception):
        self.calls += 1
        raise exc

    def ok(self) -> str:
        self.calls += 1
        return "ok"


class FakeClock:
    """Injectable clock: returns `now`; `advance(s)` moves it forward."""

    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def server():
    return fakeredis.FakeServer()


@pytest.fixture
def worker_a(server):
    return fakeredis.FakeRedis(server=server, decode_responses=True)  # like ctx.redis


@pytest.fixture
def worker_b(server):
    return fakeredis.FakeRedis(server=server)  # bytes replies: the breaker must not depend on decoding


def elapse_open_period(breaker: CircuitBreaker) -> None:
    """Let reset_s pass on the breaker's (fake) clock; the Redis keys are left alone."""
    breaker.clock.advance(breaker.reset_s + 0.001)


def elapse_trial_lease(breaker: CircuitBreaker) -> None:
    breaker.clock.advance(breaker.trial_lease_s + 0.001)


def fail_n(breaker: CircuitBreaker, dep: Dependency, n: int, exc: Exception | None = None) -> None:
    for _ in range(n):
        with pytest.raises(type(exc) if exc else ConnectionError):
            breaker.call(dep.fail, exc or ConnectionError("connection refused"))


def test_opens_after_threshold_and_rejects_without_calling(worker_a, clock):
    breaker = CircuitBreaker(worker_a, "tavily", threshold=3, reset_s=300, clock=clock)
    dep = Dependency()
    fail_n(breaker, dep, 2)
    assert breaker.state() == "closed" and breaker.failures() == 2
    fail_n(breaker, dep, 1)
    assert breaker.state() == "open" and dep.calls == 3
    with pytest.raises(CircuitOpenError) as info:
        breaker.call(dep.ok)
    assert dep.calls == 3  # the 4th call never reached the dependency
    err = info.value
    assert err.name == "tavily" and 299 < err.retry_after_s <= 300
    assert "tavily is temporarily switched off" in str(err) and "300 s" in str(err)
    assert worker_a.exists("finagent:breaker:tavily:failures", "finagent:breaker:tavily:opened_at") == 2
    assert float(worker_a.get("finagent:breaker:tavily:opened_at")) == clock.now  # written from the clock
    clock.advance(100)
    assert breaker.state() == "open" and 199 < breaker.retry_after_s() <= 200


def test_second_worker_sees_open_breaker(worker_a, worker_b, clock):
    a = CircuitBreaker(worker_a, "tavily", threshold=3, reset_s=300, clock=clock)
    b = CircuitBreaker(worker_b, "tavily", threshold=3, reset_s=300, clock=clock)
    dep_a, dep_b = Dependency(), Dependency()
    fail_n(a, dep_a, 3)
    assert b.state() == "open" and not b.allow() and b.retry_after_s() > 299
    with pytest.raises(CircuitOpenError):
        b.call(dep_b.ok)
    assert dep_b.calls == 0


def test_failures_from_both_workers_add_up(worker_a, worker_b, clock):
    a = CircuitBreaker(worker_a, "tavily", threshold=3, reset_s=300, clock=clock)
    b = CircuitBreaker(worker_b, "tavily", threshold=3, reset_s=300, clock=clock)
    dep = Dependency()
    fail_n(a, dep, 1)
    fail_n(b, dep, 1)
    assert a.state() == "closed"
    fail_n(a, dep, 1)
    assert b.state() == "open"


def test_half_open_allows_one_trial_and_success_closes(worker_a, worker_b, clock):
    a = CircuitBreaker(worker_a, "tavily", threshold=3, reset_s=300, clock=clock)
    b = CircuitBreaker(worker_b, "tavily", threshold=3, reset_s=300, trial_lease_s=30, clock=clock)
    dep = Dependency()
    fail_n(a, dep, 3)
    assert a.state() == "open"
    elapse_open_period(a)
    assert a.state() == b.state() == "half_open"
    assert b.allow()  # worker B takes the single trial
    assert not a.allow()  # worker A must wait for its outcome
    with pytest.raises(CircuitOpenError) as info:
        a.call(dep.ok)
    assert info.value.retry_after_s > 29  # the trial's lease
    b.record_success()
    assert a.state() == "closed" and a.failures() == 0
    assert a.call(dep.ok) == "ok" and a.call(dep.ok) == "ok"


def test_failed_trial_reopens(worker_a, worker_b, clock):
    a = CircuitBreaker(worker_a, "tavily", threshold=3, reset_s=300, clock=clock)
    b = CircuitBreaker(worker_b, "tavily", threshold=3, reset_s=300, clock=clock)
    dep = Dependency()
    fail_n(a, dep, 3)
    elapse_open_period(a)
    fail_n(b, dep, 1, HTTPFailure(503))  # the trial call fails
    assert a.state() == "open" and a.retry_after_s() > 290  # a whole new open period
    calls = dep.calls
    with pytest.raises(CircuitOpenError):
        a.call(dep.ok)
    assert dep.calls == calls
    elapse_open_period(a)
    assert a.call(dep.ok) == "ok" and b.state() == "closed"  # the next trial succeeds


def test_parameter_and_data_errors_do_not_count(worker_a, clock):
    breaker = CircuitBreaker(worker_a, "tavily", threshold=3, reset_s=300, clock=clock)
    dep = Dependency()
    for exc in (HTTPFailure(400), HTTPFailure(422), KeyError("ticker"), HTTPFailure(404)) * 2:
        with pytest.raises(type(exc)):
            breaker.call(dep.fail, exc)
    assert breaker.state() == "closed" and breaker.failures() == 0 and dep.calls == 8
    assert not counts_as_failure(HTTPFailure(400)) and not counts_as_failure(KeyError("x"))
    for cls_exc in (HTTPFailure(401), HTTPFailure(429), HTTPFailure(500), TimeoutError(), Exception("odd")):
        assert counts_as_failure(cls_exc)


def test_success_resets_the_consecutive_count(worker_a, clock):
    breaker = CircuitBreaker(worker_a, "tavily", threshold=3, reset_s=300, clock=clock)
    dep = Dependency()
    fail_n(breaker, dep, 2)
    breaker.call(dep.ok)
    fail_n(breaker, dep, 2)
    assert breaker.state() == "closed" and breaker.failures() == 2


def test_parameter_error_in_trial_releases_the_lease(worker_a, worker_b, clock):
    a = CircuitBreaker(worker_a, "tavily", threshold=3, reset_s=300, trial_lease_s=60, clock=clock)
    b = CircuitBreaker(worker_b, "tavily", threshold=3, reset_s=300, trial_lease_s=60, clock=clock)
    dep = Dependency()
    fail_n(a, dep, 3)
    elapse_open_period(a)
    with pytest.raises(HTTPFailure):
        a.call(dep.fail, HTTPFailure(400))  # no verdict on the service: stays half-open, lease given back
    assert b.state() == "half_open"
    assert b.call(dep.ok) == "ok" and a.state() == "closed"


def test_expired_trial_lease_lets_another_worker_try(worker_a, worker_b, clock):
    a = CircuitBreaker(worker_a, "tavily", threshold=3, reset_s=300, trial_lease_s=300, clock=clock)
    b = CircuitBreaker(worker_b, "tavily", threshold=3, reset_s=300, trial_lease_s=300, clock=clock)
    fail_n(a, Dependency(), 3)
    elapse_open_period(a)
    assert a.allow()  # ...and worker A dies without reporting
    assert not b.allow() and b.retry_after_s() > 290
    elapse_trial_lease(a)
    assert b.allow()  # takes over the stale lease (its Redis key had not expired yet)
    a.release_trial()  # the dead worker's token no longer matches: B's lease stays
    assert not a.allow() and b.state() == "half_open"


def test_concurrent_workers_count_every_failure_and_share_one_trial(server, clock):
    clients = [fakeredis.FakeRedis(server=server, decode_responses=True) for _ in range(8)]
    breakers = [CircuitBreaker(c, "tavily", threshold=3, reset_s=300, clock=clock) for c in clients]
    barrier = threading.Barrier(len(breakers))

    def fail(b: CircuitBreaker):
        barrier.wait()
        for _ in range(5):
            b.record_failure()

    threads = [threading.Thread(target=fail, args=(b,)) for b in breakers]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert breakers[0].failures() == 40 and breakers[0].state() == "open"
    opened_at = breakers[0].redis.get(breakers[0].k_opened)
    clock.advance(10)
    for b in breakers:  # failures while open do not restart the open period
        b.record_failure()
    assert breakers[0].redis.get(breakers[0].k_opened) == opened_at and breakers[0].retry_after_s() <= 290
    elapse_open_period(breakers[0])

    granted: list[bool] = []
    lock = threading.Lock()

    def try_trial(b: CircuitBreaker):
        barrier.wait()
        ok = b.allow()
        with lock:
            granted.append(ok)

    threads = [threading.Thread(target=try_trial, args=(b,)) for b in breakers]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert granted.count(True) == 1


def test_names_are_isolated(worker_a, clock):
    tavily = CircuitBreaker(worker_a, "tavily", threshold=1, reset_s=300, clock=clock)
    other = CircuitBreaker(worker_a, "sec", threshold=1, reset_s=300, clock=clock)
    tavily.record_failure()
    assert tavily.state() == "open" and other.state() == "closed" and other.allow()
    tavily.reset()
    assert tavily.state() == "closed"


def test_guard_context_manager(worker_a, clock):
    breaker = CircuitBreaker(worker_a, "tavily", threshold=1, reset_s=300, clock=clock)
    with pytest.raises(ConnectionError):
        with breaker.guard():
            raise ConnectionError("reset by peer")
    with pytest.raises(CircuitOpenError):
        with breaker.guard():
            pytest.fail("the block must not run while open")


def test_nested_rejection_is_not_a_failure(worker_a, clock):
    inner = CircuitBreaker(worker_a, "tavily", threshold=1, reset_s=300, clock=clock)
    outer = CircuitBreaker(worker_a, "news-task", threshold=1, reset_s=300, clock=clock)
    inner.record_failure()
    with pytest.raises(CircuitOpenError):
        outer.call(inner.call, Dependency().ok)
    assert outer.state() == "closed" and outer.failures() == 0


def test_advancing_the_clock_past_reset_s_half_opens_and_a_good_trial_closes(worker_a, worker_b, clock):
    a = CircuitBreaker(worker_a, "tavily", threshold=3, reset_s=300, clock=clock)
    b = CircuitBreaker(worker_b, "tavily", threshold=3, reset_s=300, clock=clock)
    dep = Dependency()
    fail_n(a, dep, 3)
    clock.advance(299.9)
    assert a.state() == b.state() == "open" and not b.allow()
    assert 0 < b.retry_after_s() <= 0.1 + 1e-6
    clock.advance(0.2)  # past reset_s: no sleep, no Redis key deleted by hand
    assert worker_a.exists(a.k_opened) and worker_a.pttl(a.k_opened) > 0  # the Redis expiry has not fired
    assert a.state() == b.state() == "half_open" and a.retry_after_s() == 0.0
    assert b.call(dep.ok) == "ok"  # the trial succeeds
    assert a.state() == b.state() == "closed" and a.failures() == 0
    assert not worker_a.exists(a.k_opened, a.k_failures, a.k_trial)


def test_failed_trial_after_clock_reset_restarts_the_open_period(worker_a, clock):
    breaker = CircuitBreaker(worker_a, "tavily", threshold=3, reset_s=300, clock=clock)
    fail_n(breaker, Dependency(), 3)
    clock.advance(301)
    assert breaker.state() == "half_open"
    fail_n(breaker, Dependency(), 1)  # the old opened_at key is still in Redis: it is overwritten, not kept
    assert breaker.state() == "open" and 299 < breaker.retry_after_s() <= 300
    assert float(worker_a.get(breaker.k_opened)) == clock.now


def test_redis_expiry_is_the_safety_net(worker_a, clock):
    """A worker whose clock lags still half-opens once the Redis server has expired the open marker."""
    breaker = CircuitBreaker(worker_a, "tavily", threshold=3, reset_s=300, clock=clock)
    fail_n(breaker, Dependency(), 3)
    assert breaker.state() == "open"
    worker_a.delete(breaker.k_opened)  # what Redis does when its own reset_s has passed
    assert breaker.state() == "half_open" and breaker.retry_after_s() == 0.0 and breaker.allow()


def test_default_clock_is_wall_time(worker_a):
    breaker = CircuitBreaker(worker_a, "tavily")
    assert breaker.clock is time.time and (breaker.threshold, breaker.reset_s) == (3, 300)
    breaker.record_failure()
    assert breaker.state() == "closed"
