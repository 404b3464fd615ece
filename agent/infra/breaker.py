"""Circuit breaker shared by every worker through Redis (seed 002: threshold 3, reset timeout 300 s).

closed --threshold consecutive counted failures--> open --reset_s--> half_open
half_open: one trial call at a time; success -> closed, counted failure -> open again.

Keys (all under finagent:breaker:{name}):
  :failures   consecutive counted failures (INCR)
  :opened_at  wall time the breaker opened; its Redis expiry (reset_s) *is* the open period, so every
              worker reads the same clock (the Redis server's) instead of comparing its own
  :trial      the half-open trial lease (SET NX PX), so only one worker probes a recovering service
Read-then-write decisions run in WATCH/MULTI transactions, so concurrent workers count correctly.
"""
from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Literal, TypeVar

import redis as redis_lib

from agent.infra.errors import classify_error
from agent.infra.redis_tx import watched_transaction

log = logging.getLogger(__name__)

BreakerState = Literal["closed", "open", "half_open"]
T = TypeVar("T")

# Failures that say the dependency itself is unhealthy; parameter and data errors are the caller's problem.
COUNTED_ERROR_CLASSES = frozenset({"network", "rate_limit", "system", "authentication", "unknown"})


def counts_as_failure(exc: BaseException) -> bool:
    # another breaker's rejection says nothing about this dependency (nested guards)
    return not isinstance(exc, CircuitOpenError) and classify_error(exc) in COUNTED_ERROR_CLASSES


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
                 trial_lease_s: float | None = None):
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
        prefix = f"finagent:breaker:{name}"
        self.k_failures = f"{prefix}:failures"
        self.k_opened = f"{prefix}:opened_at"
        self.k_trial = f"{prefix}:trial"
        self._local = threading.local()  # the trial token this thread holds, if any

    # ---------- queries ----------
    def state(self) -> BreakerState:
        with self.redis.pipeline(transaction=True) as pipe:
            opened, failures = pipe.exists(self.k_opened).get(self.k_failures).execute()
        return self._state(bool(opened), failures)

    def _state(self, opened: bool, failures: Any) -> BreakerState:
        if opened:
            return "open"
        return "half_open" if int(failures or 0) >= self.threshold else "closed"

    def failures(self) -> int:
        return int(self.redis.get(self.k_failures) or 0)

    def retry_after_s(self) -> float:
        """Seconds until a call may be let through: the rest of the open period, or of a running trial's lease."""
        with self.redis.pipeline(transaction=True) as pipe:
            open_ms, failures, trial_ms = pipe.pttl(self.k_opened).get(self.k_failures).pttl(self.k_trial).execute()
        if open_ms and open_ms > 0:
            return open_ms / 1000
        if int(failures or 0) >= self.threshold and trial_ms and trial_ms > 0:
            return trial_ms / 1000
        return 0.0

    # ---------- transitions ----------
    def allow(self) -> bool:
        """May a call go out now? In half-open state this takes the single trial lease (only one caller gets True)."""
        token = uuid.uuid4().hex

        def decide(pipe) -> bool:
            opened = pipe.exists(self.k_opened)
            failures = pipe.get(self.k_failures)
            state = self._state(bool(opened), failures)
            if state == "open":
                return False
            if state == "closed":
                return True
            if pipe.exists(self.k_trial):
                return False
            pipe.multi()
            pipe.set(self.k_trial, token, px=_ms(self.trial_lease_s))
            return True

        allowed, trial_set = self._transaction(decide, self.k_opened, self.k_failures, self.k_trial)
        self._local.trial = token if allowed and trial_set else None
        if allowed and trial_set:
            log.info("circuit %s half-open: trial call allowed", self.name)
        return allowed

    def record_success(self) -> None:
        """The dependency answered: close the breaker, whatever state it was in."""
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.get(self.k_failures).delete(self.k_failures, self.k_opened, self.k_trial)
            before = pipe.execute()[0]
        self._local.trial = None
        if int(before or 0) >= self.threshold:
            log.info("circuit %s closed after a successful call", self.name)

    def record_failure(self) -> None:
        """Count one failure; at `threshold` consecutive failures (or any failure while half-open) open the breaker."""

        def count(pipe) -> int:
            failures = int(pipe.get(self.k_failures) or 0) + 1
            pipe.multi()
            pipe.incr(self.k_failures)
            if failures >= self.threshold:
                # NX: failures counted while already open must not extend the open period
                pipe.set(self.k_opened, f"{time.time():.3f}", nx=True, px=_ms(self.reset_s))
                pipe.delete(self.k_trial)
            return failures

        failures, results = self._transaction(count, self.k_failures)
        self._local.trial = None
        if failures >= self.threshold and len(results) > 1 and results[1]:
            log.warning("circuit %s opened after %d consecutive failures; retry in %.0f s", self.name, failures, self.reset_s)

    def release_trial(self) -> None:
        """Give back this thread's half-open trial lease without a verdict (the call failed for a non-counted reason)."""
        token = getattr(self._local, "trial", None)
        self._local.trial = None
        if not token:
            return

        def release(pipe) -> None:
            if _text(pipe.get(self.k_trial)) == token:
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
        Only failures of COUNTED_ERROR_CLASSES count; every exception is re-raised."""
        if not self.allow():
            raise CircuitOpenError(self.name, self.retry_after_s())
        try:
            yield
        except Exception as exc:
            if counts_as_failure(exc):
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


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value
