"""A coordinator step re-sent while its first send is still running (the beat's `resume_stalled`, or a redelivered
`advance`) sends the same task ids and the same chord group id (tasks/dispatch.py): the job still runs each step
once, ending with the same answer as an undisturbed run of the same question."""
from __future__ import annotations

import json
import re
import threading

import pytest

from agent.models.job import JobRequest
from agent.persistence import jobstore
from agent.submission import create
from ops.cli.ask import follow_job
from tasks.dispatch import CeleryDispatcher
from tests.integration.jobs import run_job

pytestmark = pytest.mark.integration

QUESTION = "How did AAPL's services revenue change over the last 3 quarters?"


def test_resending_every_in_flight_step_changes_nothing(ctx, sample_corpus, workers_with, script_path):
    from tasks.recovery import resume_stalled

    script_path.write_text(json.dumps({}))
    workers_with(FINAGENT_LLM_PROVIDER="scripted", FINAGENT_LLM_SCRIPT_PATH=str(script_path), FINAGENT_LLM_LATENCY_S="0.5")
    calm, _ = run_job(ctx, question=QUESTION, max_iterations=1)

    job_id, _ = create(ctx, CeleryDispatcher(), JobRequest(question=QUESTION, max_iterations=1))
    done = threading.Event()
    resent: list[str] = []

    def resend_while_running() -> None:
        while not done.wait(0.3):  # every 0.3 s: each step's chord is re-sent while its first send runs
            resent.extend(j for j in resume_stalled.run(stalled_after_s=0) if j == job_id)

    thread = threading.Thread(target=resend_while_running)
    thread.start()
    try:
        job, events = follow_job(ctx, job_id, timeout_s=120)
    finally:
        done.set()
        thread.join()
    assert len(resent) >= 3, resent  # the re-sends really happened, at several steps
    assert job.status == "completed" and job.result is not None and calm.result is not None
    assert job.result.iterations == calm.result.iterations
    # each call stored once, as in the undisturbed run: the same outputs, evidence and answer sentences (the
    # citation numbers follow the evidence rows' insertion order, which concurrent searches make vary)
    assert sorted(jobstore.get_outputs(ctx.pool, job_id, "")) == sorted(jobstore.get_outputs(ctx.pool, calm.id, ""))
    keys = [e.citation_key for e in jobstore.load_evidence(ctx.pool, job_id)]
    assert len(keys) == len(set(keys)) and set(keys) == {e.citation_key for e in jobstore.load_evidence(ctx.pool, calm.id)}
    assert sentences(job.result.answer) == sentences(calm.result.answer)
    assert [e.type for e in events] == [e.type for e in follow_job(ctx, calm.id, timeout_s=10)[1]]


def sentences(answer: str) -> set[str]:
    return {s.strip() for s in re.split(r"\[\d+\]", answer) if s.strip()}
