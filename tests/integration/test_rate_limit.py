"""The shared LLM rate limit across real worker processes: with a tight requests limit the LLM calls of concurrent
interactive and batch jobs are spread out so that no window ever holds more than the limit (nor batch calls more
than their share), and every job still completes.

The window is shortened to a few seconds through the test-only FINAGENT_TEST_RATE_WINDOW_S, so the test does not
take minutes; the limiter's own sorted set (admission times from the Redis clock) is watched while the jobs run."""
from __future__ import annotations

import threading
import time

import pytest

from agent.models.job import JobRequest
from agent.persistence import jobstore
from agent.persistence.ledger import load_ledger
from agent.submission import create
from tasks.dispatch import CeleryDispatcher

pytestmark = pytest.mark.integration

LIMIT, SHARE, WINDOW_S = 4, 0.5, 3.0
BATCH_LIMIT = int(LIMIT * SHARE)
REQ_KEY = "finagent:ratelimit:llm:req"
QUESTIONS = [
    ("What did NVDA say about data center demand last quarter?", False),
    ("How did MSFT's cloud revenue change over the last 2 quarters?", False),
    ("What did AAPL say about services revenue last quarter?", True),
    ("What drove NVDA gross margin last quarter?", True),
]


class WindowWatcher:
    """Collects every entry the limiter records (each stays in its sorted set for at least one window)."""

    def __init__(self, redis):
        self.redis = redis
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for member, score in self.redis.zrange(REQ_KEY, 0, -1, withscores=True):
                self.seen[member] = float(score)
            self._stop.wait(0.2)

    def __enter__(self) -> WindowWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def most_in_any_window(self, kind: str | None = None) -> int:
        times = sorted(t for m, t in self.seen.items() if kind is None or m.startswith(kind + ":"))
        # the window is (t - W, t]: the most calls a window held is the most admitted in [t, t + W) for some t
        return max((sum(1 for u in times if t <= u < t + WINDOW_S) for t in times), default=0)


def wait_final(ctx, job_ids: list[str], timeout_s: float) -> list[jobstore.JobRow]:
    deadline = time.monotonic() + timeout_s
    while True:
        jobs = [jobstore.load_job(ctx.pool, j) for j in job_ids]
        if all(j is not None and j.status in ("completed", "failed", "rejected", "cancelled") for j in jobs):
            return [j for j in jobs if j is not None]
        assert time.monotonic() < deadline, [(j.id, j.status, j.step) for j in jobs if j is not None]
        time.sleep(0.5)


def test_llm_calls_across_workers_stay_within_the_shared_limit(ctx, sample_corpus, workers_with):
    workers_with(FINAGENT_LLM_REQUESTS_PER_MINUTE=str(LIMIT), FINAGENT_LLM_BATCH_SHARE=str(SHARE),
                 FINAGENT_TEST_RATE_WINDOW_S=str(WINDOW_S), FINAGENT_LLM_CACHE_TTL_S="0")
    ctx.redis.delete(REQ_KEY, "finagent:ratelimit:llm:tok", "finagent:ratelimit:llm:used")
    started = time.monotonic()
    with WindowWatcher(ctx.redis) as watcher:
        job_ids = [create(ctx, CeleryDispatcher(), JobRequest(question=q, mode="direct", batch=b))[0] for q, b in QUESTIONS]
        jobs = wait_final(ctx, job_ids, timeout_s=150)
        time.sleep(0.5)  # one more look at the window
    elapsed = time.monotonic() - started

    assert [j.status for j in jobs] == ["completed"] * len(jobs), [(j.id, j.status, j.error) for j in jobs]
    ledger = [(job, row) for job in jobs for row in load_ledger(ctx.pool, job.id) if row["tool"].startswith("llm.")]
    assert all(not row["cached"] for _, row in ledger)
    calls = len(watcher.seen)
    # every LLM call went through the limiter (a ledger row may hold more than one call, never fewer)
    assert calls >= len(ledger) > 2 * LIMIT
    assert watcher.most_in_any_window() <= LIMIT
    assert watcher.most_in_any_window("b") <= BATCH_LIMIT
    kinds = {m.split(":")[0] for m in watcher.seen}
    assert kinds == {"b", "i"}
    # the batch jobs' calls were marked batch, the interactive jobs' calls interactive (through the queue they ran on)
    batch_calls = sum(1 for m in watcher.seen if m.startswith("b:"))
    assert batch_calls >= sum(1 for job, _ in ledger if job.state.request.batch)
    assert calls - batch_calls >= sum(1 for job, _ in ledger if not job.state.request.batch)
    # the calls came from more than one worker process and were spread out over several windows
    assert len({row["worker"].split(":")[1] for _, row in ledger}) >= 2
    span = max(watcher.seen.values()) - min(watcher.seen.values())
    assert span >= (calls // LIMIT - 1) * WINDOW_S
    print(f"{calls} LLM calls ({batch_calls} batch) over {span:.1f} s, {elapsed:.1f} s in all; busiest window "
          f"{watcher.most_in_any_window()} calls, {watcher.most_in_any_window('b')} batch")
