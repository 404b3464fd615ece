"""The chaos suite: jobs and batches on real workers, Redis and Postgres while workers are SIGKILLed, the broker and the
database crash and come back, and the LLM endpoint fails. Nobody calls a recovery function: the workers, their beat
and the clients must get every job to an end on their own. Each scenario prints its summary line (ops/chaos/audit.py):
submitted, completed, failed with a reason, lost (must be 0), duplicated rows (must be 0), fault-to-recovery seconds.
"""
from __future__ import annotations

import json
import random
import signal
import threading
import time

import pytest

from agent.models.job import JobRequest
from ops.chaos.audit import ProgressWatch, Supervisor, audit, crash_postgres, crash_redis, diagnose, start_postgres, start_redis, wait_final
from tests.support.chaos_jobs import check, questions

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

def submit(ctx, texts: list[str], batch: bool = False, max_iterations: int = 1) -> list[str]:
    from agent.submission import create
    from tasks.dispatch import CeleryDispatcher

    return [create(ctx, CeleryDispatcher(), JobRequest(question=q, batch=batch, max_iterations=max_iterations))[0] for q in texts]


def submit_batch(ctx, name: str, texts: list[str]) -> list[str]:
    from agent.batches import batch_items, create_batch, parse_lines
    from tasks.dispatch import CeleryDispatcher

    batch_id = create_batch(ctx, CeleryDispatcher(), name, parse_lines([json.dumps({"question": q, "max_iterations": 1}) for q in texts]))
    return [i.job_id for i in batch_items(ctx.pool, batch_id) if i.job_id]


def crash_mid_batch(ctx, scenario: str, crash, start, seed: int):
    """A batch of 8 runs; 4 s in, the service crashes and is started again 5 s later. Returns the jobs and their audit."""
    jobs = submit_batch(ctx, f"chaos-{scenario}", questions(8, seed))
    with ProgressWatch(ctx, jobs) as watch:
        time.sleep(4)
        crash()
        watch.fault()
        time.sleep(5)
        start()
        assert wait_final(ctx, jobs, 240), (f"jobs still running 4 minutes after the {scenario}", diagnose(ctx, jobs))
    return jobs, audit(ctx, scenario, jobs, faults=1, recovery_s=watch.recovery_s)


def test_sigkill_random_workers_at_random_steps(ctx, sample_corpus, workers, slow_scripted, report):
    """20 jobs (10 interactive, 10 batch); every few seconds a random worker process is SIGKILLed mid-step and a
    supervisor starts a fresh one in its place."""
    rnd = random.Random(11)
    jobs = submit(ctx, questions(10, 1)) + submit_batch(ctx, "chaos-sigkill", questions(10, 2))
    assert len(jobs) == 20
    kills = 0
    with ProgressWatch(ctx, jobs) as watch:
        deadline = time.monotonic() + 300
        while kills < 6 and time.monotonic() < deadline and not wait_final(ctx, jobs, 0):
            time.sleep(rnd.uniform(3, 7))
            index = rnd.randrange(len(workers.procs))
            proc = workers.procs[index]
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            watch.fault()
            kills += 1
            time.sleep(rnd.uniform(0.5, 2))  # the supervisor notices and restarts it
            workers.respawn(index)
        assert wait_final(ctx, jobs, 240), ("jobs still running 4 minutes after the last kill", diagnose(ctx, jobs))
        time.sleep(1)
    tally = audit(ctx, "sigkill", jobs, faults=kills, recovery_s=watch.recovery_s)
    check(tally, report)
    assert max(tally.recovery_s) < 60, tally.recovery_s


def test_redis_crash_and_restart_mid_batch(ctx, settings, sample_corpus, workers, slow_scripted, report):
    """Redis is SIGKILLed while a batch runs and comes back 5 s later from its append-only file."""
    with Supervisor(workers) as supervisor:
        jobs, tally = crash_mid_batch(ctx, "redis_restart", lambda: crash_redis(settings), lambda: start_redis(settings), seed=3)
    check(tally, report, f"worker_restarts={supervisor.restarts}")
    from agent.infra.events import replay
    from agent.persistence import jobstore

    for job_id in jobs:  # a client replaying the stream afterwards sees the whole job, the outage included
        types = [e.type for e in replay(ctx.redis, job_id)]
        status = jobstore.load_job(ctx.pool, job_id).status
        assert types[0] == "job_status" and types.count("planning") == 1, types
        assert types[-2:] == ["result", "job_status"] and types.count("result") == 1, (job_id, status, types)


def test_postgres_crash_and_restart_mid_batch(ctx, settings, sample_corpus, workers, slow_scripted, report):
    """Postgres is killed (immediate shutdown, crash recovery on start) while a batch runs, and is back 5 s later."""
    _, tally = crash_mid_batch(ctx, "postgres_restart", lambda: crash_postgres(settings), lambda: start_postgres(settings), seed=4)
    check(tally, report)


def test_events_are_replayable_after_an_outage(ctx, settings, sample_corpus, workers, slow_scripted):
    """Kept separate from the batch scenario so a failure names the outbox, not the recovery."""
    jobs = submit(ctx, questions(2, 5))
    with Supervisor(workers):
        threading.Event().wait(2)
        crash_redis(settings)
        time.sleep(4)
        start_redis(settings)
        assert wait_final(ctx, jobs, 180), diagnose(ctx, jobs)
    from agent.infra.events import replay
    from agent.persistence import jobstore

    for job_id in jobs:
        job = jobstore.load_job(ctx.pool, job_id)
        types = [e.type for e in replay(ctx.redis, job_id)]
        assert types[-1] == "job_status" and replay(ctx.redis, job_id)[-1].data["status"] == job.status
        assert "result" in types and "iteration_complete" in types, types
