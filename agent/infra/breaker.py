"""Circuit breaker shared by every worker through Redis (threshold 3, reset timeout 300 s by default).

closed --threshold consecutive counted failures--> open --reset_s--> half_open
half_open: one trial call at a time; success -> closed, counted failure -> open again.

Keys (all under finagent:breaker:{name}):
  :failures   consecutive counted failures (INCR)
  :opened_at  the breaker's clock reading when it opened; written with a Redis expiry of reset_s
  :trial      the half-open trial lease, "<token> <clock reading when taken>" (SET PX), so only one worker
              probes a recovering service
Read-then-write decisions run in WATCH/MULTI transactions, so concurrent workers count correctly.

Time: every time reading goes through the injectable `clock` (default time.time). The breaker is open while
clock() < opened_at + reset_s, and a trial is running while clock() < taken_at + trial_lease_s. The Redis
expiries stay as the shared safety net and cleanup: once a key has expired, every worker treats that period as
over whatever its own clock says, so a worker whose clock lags never waits longer than the Redis server's
clock allows. (A worker whose clock runs ahead may see half-open a little early; the trial lease still lets
only one caller through.) Tests drive the breaker with a fake clock instead of wall time.
"""
from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

import redis as redis_lib

from agent.infra.error_classes import classify_error
from agent.infra.redis_tx import watched_transaction

log = logging.getLogger(__name__)

BreakerState = Literal["closed", "open", "half_open"]
T = TypeVar("T")

# Failures that say the dependency itself is unhealthy; parameter and data errors are the caller's problem.
COUNTED_ERROR_CLASSES = frozenset({"network", "rate_limit", "system", "authentication", "unknown"})
# For a dependency on the jobs' critical path (the LLM endpoint) a rejected key is not counted either: it is the
# operator's configuration, not the endpoint's health. Counted, it would open the breaker, and every later job would
# retry CircuitOpenError (a retryable "system" error) for minutes before failing with "temporarily switched off",
# hiding the real cause, and would go on waiting out the reset period after the key is fixed. Uncounted, each call
# fails at once with the server's own 401/403 message and the job fails with error class "authentication".
HEALTH_ERROR_CLASSES = frozenset({"network", "rate_limit", "system", "unknown"})


def counts_as_failure(exc: BaseException, counted: frozenset[str] = COUNTED_ERROR_CLASSES) -> bool:
    # another breaker's rejection says nothing about this dependency (nested guards)
    return not isinstance(exc, CircuitOpenError) and classify_error(exc) in counted


class CircuitOpenError(Exception):
    """Raised instead of calling a dependency whose breaker is open (or half-open with a trial in flight)."""

    def __init__(self, name: str, retry_after_s: float):
        self.name = name
        self.retry_after_s = max(0.0, float(retry_after_s))
        wait = math.ceil(self.retry_after_s)
        super().__init__(f"{name} is temporarily switched off after repeated failures; "
                         f"it will be tried again in about {wait} s.")


class CircuitBreaker:
    def __init__(self, redis: redis_lib.Redis, name: str, threshold: int = 3, reset_s: float = 300,
                 trial_lease_s: float | None = None, clock: Callable[[], float] = time.time,
                 counted: frozenset[str] = COUNTED_ERROR_CLASSES):
        if threshold < 1:
            raise ValueError("threshold must be >= 1")
        if reset_s <= 0:
            raise ValueError("reset_s must be > 0")
        self.redis = redis
        self.name = name
        self.threshold = threshold
        self.reset_s = float(reset_s)
        # A trial whose worker died must not block recovery forever; by default it lasts one reset period.
        self.trial_lease_s = float(trial_lease_s if trial_lease_s is not None else reset_s)
        if self.trial_lease_s <= 0:
            raise ValueError("trial_lease_s must be > 0")
        self.clock = clock
        self.counted = counted  # the error classes (agent/infra/error_classes.py) that count as the dependency failing
        prefix = f"finagent:breaker:{name}"
        self.k_failures = f"{prefix}:failures"
        self.k_opened = f"{prefix}:opened_at"
        self.k_trial = f"{prefix}:trial"
        self._local = threading.local()  # the trial token this thread holds, if any

    # ---------- queries ----------
    def state(self) -> BreakerState:
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.get(self.k_opened)
            pipe.pttl(self.k_opened)
            pipe.get(self.k_failures)
            opened, open_ms, failures = pipe.execute()
        return self._state(self._open_remaining(opened, open_ms, self.clock()), failures)

    def _state(self, open_remaining: float, failures: Any) -> BreakerState:
        if open_remaining > 0:
            return "open"
        return "half_open" if int(failures or 0) >= self.threshold else "closed"

    def failures(self) -> int:
        return int(self.redis.get(self.k_failures) or 0)

    def retry_after_s(self) -> float:
        """Seconds until a call may be let through: the rest of the open period, or of a running trial's lease."""
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.get(self.k_opened)
            pipe.pttl(self.k_opened)
            pipe.get(self.k_failures)
            pipe.get(self.k_trial)
            pipe.pttl(self.k_trial)
            opened, open_ms, failures, trial, trial_ms = pipe.execute()
        now = self.clock()
        open_remaining = self._open_remaining(opened, open_ms, now)
        if open_remaining > 0:
            return open_remaining
        if int(failures or 0) >= self.threshold:
            return self._trial_remaining(trial, trial_ms, now)
        return 0.0

    def _open_remaining(self, opened: Any, pttl_ms: Any, now: float) -> float:
        """Seconds left in the open period: by the clock (opened_at + reset_s), never past the key's Redis expiry."""
        return _remaining(_text(opened), pttl_ms, self.reset_s, now)

    def _trial_remaining(self, trial: Any, pttl_ms: Any, now: float) -> float:
        """Seconds left on the running trial's lease (0: no trial, or its lease is over)."""
        raw = _text(trial)
        if raw is None:
            return 0.0
        _, _, taken_at = raw.partition(" ")
        return _remaining(taken_at, pttl_ms, self.trial_lease_s, now)

    # ---------- transitions ----------
    def allow(self) -> bool:
        """May a call go out now? In half-open state this takes the single trial lease (only one caller gets True)."""
        token = uuid.uuid4().hex

        def decide(pipe) -> bool:
            now = self.clock()
            opened, open_ms = pipe.get(self.k_opened), pipe.pttl(self.k_opened)
            failures = pipe.get(self.k_failures)
            state = self._state(self._open_remaining(opened, open_ms, now), failures)
            if state == "open":
                return False
            if state == "closed":
                return True
            # a lease left over from a worker that died (over by the clock but not yet expired) is taken over
            if self._trial_remaining(pipe.get(self.k_trial), pipe.pttl(self.k_trial), now) > 0:
                return False
            pipe.multi()
            pipe.set(self.k_trial, f"{token} {now:.3f}", px=_ms(self.trial_lease_s))
            return True

        allowed, trial_set = self._transaction(decide, self.k_opened, self.k_failures, self.k_trial)
        self._local.trial = token if allowed and trial_set else None
        if allowed and trial_set:
            log.info("circuit %s half-open: trial call allowed", self.name)
        return allowed

    def record_success(self) -> None:
        """The dependency answered: close the breaker, whatever state it was in."""
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.get(self.k_failures)
            pipe.delete(self.k_failures, self.k_opened, self.k_trial)
            before = pipe.execute()[0]
        self._local.trial = None
        if int(before or 0) >= self.threshold:
            log.info("circuit %s closed after a successful call", self.name)

    def record_failure(self) -> None:
        """Count one failure; at `threshold` consecutive failures (or any failure while half-open) open the breaker."""

        def count(pipe) -> tuple[int, bool]:
            now = self.clock()
            failures = int(pipe.get(self.k_failures) or 0) + 1
            still_open = self._open_remaining(pipe.get(self.k_opened), pipe.pttl(self.k_opened), now) > 0
            pipe.multi()
            pipe.incr(self.k_failures)
            opening = failures >= self.threshold and not still_open
            if opening:
                # overwrites an opened_at whose period is over by the clock but whose key has not expired yet
                pipe.set(self.k_opened, f"{now:.3f}", px=_ms(self.reset_s))
            if failures >= self.threshold:
                # failures counted while already open do not extend the open period (opened_at is left alone)
                pipe.delete(self.k_trial)
            return failures, opening

        (failures, opened_now), _ = self._transaction(count, self.k_failures, self.k_opened)
        self._local.trial = None
        if opened_now:
            log.warning("circuit %s opened after %d consecutive failures; retry in %.0f s", self.name, failures, self.reset_s)

    def release_trial(self) -> None:
        """Give back this thread's half-open trial lease without a verdict (the call failed for a non-counted reason)."""
        token = getattr(self._local, "trial", None)
        self._local.trial = None
        if not token:
            return

        def release(pipe) -> None:
            if (_text(pipe.get(self.k_trial)) or "").partition(" ")[0] == token:
                pipe.multi()
                pipe.delete(self.k_trial)

        self._transaction(release, self.k_trial)

    def reset(self) -> None:
        self.redis.delete(self.k_failures, self.k_opened, self.k_trial)
        self._local.trial = None

    # ---------- guarded calls ----------
    @contextmanager
    def guard(self) -> Iterator[None]:
        """Raise CircuitOpenError if the breaker rejects the call; otherwise run the block and record its outcome.
        Only failures of the breaker's `counted` error classes count; every exception is re-raised."""
        if not self.allow():
            raise CircuitOpenError(self.name, self.retry_after_s())
        try:
            yield
        except Exception as exc:
            if counts_as_failure(exc, self.counted):
                self.record_failure()
            else:
                self.release_trial()
            raise
        except BaseException:  # interrupted (KeyboardInterrupt, worker shutdown): no verdict on the dependency
            self.release_trial()
            raise
        self.record_success()

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with self.guard():
            return fn(*args, **kwargs)

    def _transaction(self, fn: Callable[[Any], T], *watch: str) -> tuple[T, list]:
        return watched_transaction(self.redis, fn, *watch)


def _remaining(started_at: str | None, pttl_ms: Any, period_s: float, now: float) -> float:
    """Seconds left of a period of period_s that started at started_at (a clock reading), stored in a key whose
    remaining Redis TTL is pttl_ms. 0 once either says the period is over; a missing key means it is over."""
    if started_at is None or pttl_ms is None or pttl_ms == -2:
        return 0.0
    ttl_s = period_s if pttl_ms == -1 else pttl_ms / 1000  # -1: no expiry (should not happen), trust the clock
    try:
        by_clock = float(started_at) + period_s - now
    except ValueError:  # unreadable value: fall back to the Redis expiry alone
        by_clock = period_s
    return max(0.0, min(by_clock, ttl_s, period_s))


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value
