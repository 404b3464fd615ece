"""Chaos: kill the worker processes mid-job; the job still finishes, from the step it had reached,
with no duplicate evidence or outputs."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from agent.infra import liveness
from agent.infra.events import published_marker, replay, stream_key
from agent.models.job import JobRequest
from agent.persistence import jobstore
from ops.cli.ask import follow_job

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


def output_counts(ctx, job_id: str) -> list[dict]:
    """Each stored step output of the job with how many rows hold it (a duplicate would show n > 1)."""
    with ctx.pool.connection() as conn:
        return conn.execute("SELECT step_key, count(*) AS n FROM job_step_outputs WHERE job_id=%s GROUP BY 1", (job_id,)).fetchall()


def job_on_slow_workers(ctx, workers_with, script_path, latency_s: float, step: str, wait_s: float):
    """Scripted workers whose LLM calls take `latency_s`, and a three-quarter job (one iteration) followed until it
    reaches `step`. Returns the worker processes, their environment, the job id and the test's deadline."""
    script_path.write_text(json.dumps({}))
    env = dict(FINAGENT_LLM_PROVIDER="scripted", FINAGENT_LLM_SCRIPT_PATH=str(script_path), FINAGENT_LLM_LATENCY_S=str(latency_s))
    procs = list(workers_with(**env))
    from agent.submission import create
    from tasks.dispatch import CeleryDispatcher

    job_id, _ = create(ctx, CeleryDispatcher(), JobRequest(question="How did AAPL's services revenue change over the last 3 quarters?",
                                                            max_iterations=1))
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and jobstore.load_job(ctx.pool, job_id).step != step:
        time.sleep(0.05)
    return procs, env, job_id, deadline


def test_worker_killed_mid_job_resumes_on_its_own_without_duplicates(ctx, sample_corpus, workers, workers_with, script_path):
    """SIGKILL every worker during the extract fan-out and restart them as a supervisor would: with the production
    visibility timeout (600 s) and stall window (900 s), the heartbeat watchdog alone gets the job moving."""
    script_path.write_text(json.dumps({}))
    env = dict(FINAGENT_LLM_PROVIDER="scripted", FINAGENT_LLM_SCRIPT_PATH=str(script_path), FINAGENT_LLM_LATENCY_S="2.0")
    procs = list(workers_with(**env))
    from agent.submission import create
    from tasks.dispatch import CeleryDispatcher

    request = JobRequest(question="How did AAPL's services revenue change over the last 3 quarters?", max_iterations=1)
    job_id, _ = create(ctx, CeleryDispatcher(), request)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until the extract fan-out is running
        job = jobstore.load_job(ctx.pool, job_id)
        if job.step.endswith(":extract") and liveness.orphans(ctx.redis) == {} and ctx.redis.hlen(liveness.CLAIMS):
            break
        time.sleep(0.1)
    assert job.step == "1:extract", job.step
    evidence_before = jobstore.count_evidence(ctx.pool, job_id)
    for proc in procs:  # SIGKILL: no warm shutdown, nothing acknowledged
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    killed_at = time.monotonic()
    workers.procs = []
    workers_with(**env, FINAGENT_RESTARTED="1")  # the supervisor starts a fresh set of workers
    while time.monotonic() - killed_at < 120 and jobstore.load_job(ctx.pool, job_id).step == "1:extract":
        time.sleep(0.2)
    moved_after = time.monotonic() - killed_at
    print(f"job moved again {moved_after:.1f} s after the kill")
    assert moved_after < 60, f"the job stood at 1:extract for {moved_after:.0f} s after the kill"

    job, _ = follow_job(ctx, job_id, timeout_s=120)
    assert job.status == "completed", (job.status, job.step, job.error)
    assert job.result.answer and job.result.citations
    assert jobstore.count_evidence(ctx.pool, job_id) == evidence_before  # the search step was not redone
    steps = [e.data for e in replay(ctx.redis, job_id) if e.type == "search"]
    assert len(steps) == 1  # and its event was published once
    rows = output_counts(ctx, job_id)
    assert rows and all(r["n"] == 1 for r in rows)
    assert {r["step_key"] for r in rows} >= {"0:plan", "1:compose", "1:extract:AAPL:2024_q2"}


def test_final_events_lost_in_a_crash_are_published_by_resume_stalled(ctx, sample_corpus, workers):
    workers.ensure()
    from agent.submission import create
    from tasks.dispatch import CeleryDispatcher
    from tasks.recovery import resume_stalled

    job_id, _ = create(ctx, CeleryDispatcher(), JobRequest(question="What was NVDA's revenue last quarter?", max_iterations=1))
    job, _ = follow_job(ctx, job_id, timeout_s=120)
    assert job.status == "completed"
    # the coordinator committed its last step, then died before publishing: stream and marker never written
    ctx.redis.delete(stream_key(job_id), published_marker(job_id, job.state.outbox.seq))
    assert replay(ctx.redis, job_id) == []
    resume_stalled.apply_async(kwargs={"stalled_after_s": 900}).get(timeout=30)
    types = [e.type for e in replay(ctx.redis, job_id)]
    assert types == [e.type for e in job.state.outbox.events] and types[-2:] == ["result", "job_status"]
    assert replay(ctx.redis, job_id)[-1].data["status"] == "completed"
    resume_stalled.apply_async(kwargs={"stalled_after_s": 900}).get(timeout=30)
    assert len(replay(ctx.redis, job_id)) == len(types)  # published once, however often the beat runs


def _queued_task_ids(redis, queue: str) -> list[str]:
    return [json.loads(raw)["headers"]["id"] for raw in redis.lrange(queue, 0, -1)]


def test_resume_stalled_resends_a_stalled_batch_job_on_the_batch_queue(ctx, workers):
    """A batch job must stay on the batch queue when the beat task re-sends it, or it would compete with
    interactive jobs."""
    from agent.models.job import JobState
    from tasks.recovery import resume_stalled

    workers.stop()  # nothing consumes: the re-sent message stays where it was routed
    job_id, _ = jobstore.create_job(ctx.pool, JobState(request=JobRequest(question="What was NVDA's revenue?", batch=True)))
    try:
        time.sleep(0.05)
        assert job_id in resume_stalled.run(stalled_after_s=0)
        task_id = f"{job_id}:0:start:0"
        assert task_id in _queued_task_ids(ctx.redis, "batch")
        assert task_id not in _queued_task_ids(ctx.redis, "coordinator")
    finally:
        for queue in ("batch", "coordinator"):
            for raw in ctx.redis.lrange(queue, 0, -1):
                if job_id in json.loads(raw)["headers"]["id"]:
                    ctx.redis.lrem(queue, 0, raw)
        with ctx.pool.connection() as conn:
            conn.execute("DELETE FROM research_jobs WHERE id = %s", (job_id,))


def test_a_chord_body_lost_after_its_last_member_is_sent_again(ctx, sample_corpus, workers, workers_with, script_path):
    """The coordinator is down while the extract fan-out finishes, and the body it would have received is lost
    with the broker's queue: the watchdog sees every call finished and the job unmoved, and sends the body again."""
    procs, env, job_id, deadline = job_on_slow_workers(ctx, workers_with, script_path, latency_s=2.0, step="1:extract", wait_s=60)
    coordinator = procs[0]  # WORKERS order: the coordinator pool (and beat) first
    coordinator.send_signal(signal.SIGTERM)  # warm shutdown: nothing lost yet
    coordinator.wait(60)
    while ctx.redis.llen("coordinator") == 0 and time.monotonic() < deadline:  # the body arrives once extraction ends
        time.sleep(0.2)
    body = json.loads(ctx.redis.lindex("coordinator", 0))["headers"]["id"]
    assert body == f"{job_id}:1:advance:extract"
    ctx.redis.delete("coordinator")  # lost with the broker
    workers.stop()
    workers_with(**env, FINAGENT_RESTARTED="1")
    job, _ = follow_job(ctx, job_id, timeout_s=120)
    assert job.status == "completed", (job.status, job.step, job.error)
    rows = output_counts(ctx, job_id)
    assert all(r["n"] == 1 for r in rows) and "1:compose" in {r["step_key"] for r in rows}


def test_a_chord_member_lost_after_its_delivery_is_sent_again(ctx, sample_corpus, workers, workers_with, script_path):
    """One extract call's message vanishes as if its worker had acknowledged it and died before writing its output:
    no claim, no result, nothing queued. The watchdog finds the job quiet with an id nobody holds and re-sends the step."""
    procs, env, job_id, deadline = job_on_slow_workers(ctx, workers_with, script_path, latency_s=1.0, step="1:search", wait_s=90)
    llm = procs[2]  # WORKERS order: coordinator, search, llm, batch
    llm.send_signal(signal.SIGTERM)  # planned; the extract calls will wait in the queue
    llm.wait(60)
    lost = None
    while time.monotonic() < deadline and lost is None:
        for raw in ctx.redis.lrange("llm", 0, -1):
            if json.loads(raw)["headers"]["id"].startswith(f"{job_id}:1:extract:"):
                lost = raw
                break
        time.sleep(0.1)
    assert lost is not None, jobstore.load_job(ctx.pool, job_id).step
    time.sleep(0.5)  # the whole fan-out is queued
    assert ctx.redis.lrem("llm", 1, lost) == 1
    workers.respawn(2)
    job, _ = follow_job(ctx, job_id, timeout_s=120)
    assert job.status == "completed", (job.status, job.step, job.error)
    rows = output_counts(ctx, job_id)
    keys = {r["step_key"] for r in rows}
    assert json.loads(lost)["headers"]["id"].split(":", 1)[1] in keys and "1:compose" in keys


def test_an_embedded_beat_dies_with_its_worker(workers):
    """A SIGKILLed coordinator's beat (`-B`, a child process) must not outlive it: an orphaned beat would keep
    scheduling the watchdog beside the beat of the worker started in its place, and keep running after shutdown."""
    import psutil

    procs = workers.ensure()
    coordinator = psutil.Process(procs[0].pid)  # WORKERS order: coordinator (runs the beat) first
    deadline = time.monotonic() + 30
    while not coordinator.children() and time.monotonic() < deadline:
        time.sleep(0.1)
    beats = coordinator.children()
    assert beats, "the coordinator started no beat process"
    time.sleep(1)  # the beat has run its init handlers
    procs[0].send_signal(signal.SIGKILL)
    procs[0].wait()
    gone, alive = psutil.wait_procs(beats, timeout=10)
    assert not alive, [p.cmdline() for p in alive]
    workers.respawn(0)
