"""The tool ledger: every tool call with its parameters, timing, result size, retries, error class and worker."""
from __future__ import annotations

import datetime as dt
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from psycopg.types.json import Jsonb

from agent.db import one_transaction
from agent.infra import metrics
from agent.infra.error_classes import classify_error
from agent.models.research import Usage
from agent.persistence.jobstore import async_commit
from agent.redact import active, redact, scrub_exception
from agent.settings import Settings
from finagent.models import JobLedger, ToolCall

# How many times the task running this call has been retried; the task sets it, every ledger row records it.
ATTEMPT_RETRIES: ContextVar[int] = ContextVar("attempt_retries", default=0)


class CallRecord:
    def __init__(self, tool: str = ""):
        self.tool = tool
        self.result_size = 0
        self.retries = 0
        self.error_class: str | None = None  # for tools that report failure in their result instead of raising
        self.error: str | None = None
        self.usage = Usage()
        self.cost_usd = 0.0
        self.llm_requests = 0
        self.writes: list[Callable[[Any], None]] = []

    def store_with(self, write: Callable[[Any], None]) -> None:
        """Run `write(conn)` in the transaction that writes this call's ledger row, if the call does not raise: the
        call's output and its ledger row are then committed together, one connection and one commit at the end of a
        task instead of two (a stage's last task ending is on the path to the next stage)."""
        self.writes.append(write)

    def use(self, usage: Usage, settings: Settings) -> None:
        """Charge the call with an LLM's usage (add to it: a call may make several LLM requests)."""
        self.usage = self.usage.add(usage) if self.usage.model or self.usage.prompt else usage
        self.llm_requests += 1
        cost = 0.0 if usage.cached else settings.cost_usd(usage.model, usage.prompt, usage.completion)
        self.cost_usd += cost
        metrics.count_llm_call(self.tool.removeprefix("llm."), usage, cost)


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"


@contextmanager
def record_call(pool, job_id: str, call_key: str, tool: str, params: dict[str, Any], retries: int = 0) -> Iterator[CallRecord]:
    """Write one ledger row for the call, whether it succeeds or raises (the exception propagates); with it, in the
    same transaction, what the call asked to store (`CallRecord.store_with`) if it did not raise."""
    rec = CallRecord(tool)
    started = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    error_class = error = None
    raised = False
    try:
        yield rec
    except BaseException as exc:
        raised = True
        scrub_exception(exc)  # a provider's error may echo its key: masked here, for the ledger and every later reader
        error_class, error = classify_error(exc), redact(f"{type(exc).__name__}: {exc}")[:500]
        raise
    finally:
        error_class, error = error_class or rec.error_class, error or rec.error
        retries = max(retries, rec.retries, ATTEMPT_RETRIES.get())
        with one_transaction(pool) as conn:  # the row and the call's writes in one round trip
            async_commit(conn)  # a ledger row is not worth an fsync per call
            conn.execute(
                "INSERT INTO job_tool_calls (job_id, call_key, tool, params, started_at, duration_ms, result_size, retries,"
                " error_class, error, worker, prompt_tokens, completion_tokens, cost_usd, cached, llm_requests)"
                " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
                " ON CONFLICT (job_id, call_key) DO UPDATE SET duration_ms=EXCLUDED.duration_ms, result_size=EXCLUDED.result_size,"
                " retries=EXCLUDED.retries, error_class=EXCLUDED.error_class, error=EXCLUDED.error, started_at=EXCLUDED.started_at,"
                " worker=EXCLUDED.worker, prompt_tokens=EXCLUDED.prompt_tokens, completion_tokens=EXCLUDED.completion_tokens,"
                " cost_usd=EXCLUDED.cost_usd, cached=EXCLUDED.cached, llm_requests=EXCLUDED.llm_requests",
                (job_id, call_key, tool, Jsonb(active().data(params)), started, (time.perf_counter() - t0) * 1000, rec.result_size, retries,
                 error_class, error, worker_identity(), rec.usage.prompt, rec.usage.completion, rec.cost_usd, rec.usage.cached,
                 rec.llm_requests),
            )
            for write in [] if raised else rec.writes:
                write(conn)


def load_ledger(pool, job_id: str) -> list[dict]:
    """The job's ledger rows in the order the calls started (the parameters as stored: masked when written)."""
    with pool.connection() as conn:
        return conn.execute(
            "SELECT call_key, tool, params, started_at, duration_ms, result_size, retries, error_class, error, worker,"
            " prompt_tokens, completion_tokens, cost_usd, cached, llm_requests"
            " FROM job_tool_calls WHERE job_id=%s ORDER BY started_at", (job_id,)
        ).fetchall()


def job_ledger(pool, job_id: str) -> JobLedger:
    """The job's ledger as the API shows it: each call with its parameters masked again (rows written before the
    writer masked them), and the totals."""
    calls = [ToolCall.model_validate(r | {"params": active().data(r["params"] or {})}) for r in load_ledger(pool, job_id)]
    return JobLedger(job_id=job_id, calls=calls,
                     prompt_tokens=sum(c.prompt_tokens for c in calls), completion_tokens=sum(c.completion_tokens for c in calls),
                     cost_usd=round(sum(c.cost_usd for c in calls), 6), retries=sum(c.retries for c in calls),
                     errors=sum(1 for c in calls if c.error_class))
