"""Recovery and chained calls: a job waiting on a 10-K answer chord waits on each company's answer first, and on its
evaluation only once the answer is finished. An evaluation whose answer still runs is not sent yet, so it is neither
queued nor held by a worker; it must not be taken for lost (that would re-send a step that is only slow)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import tasks.reconcile as reconcile
from agent.models.job import JobRequest, JobState
from agent.models.steps import ExtractCall, TenKAnswerCall, TenKEvaluateCall

JOB = "job-1"


@pytest.fixture
def states(monkeypatch) -> dict[str, str]:
    found: dict[str, str] = {}
    monkeypatch.setattr(reconcile.app, "AsyncResult", lambda task_id: SimpleNamespace(state=found.get(task_id, "PENDING")))
    return found


def _job() -> SimpleNamespace:
    calls = [TenKAnswerCall(round=1, ticker="ACME"), TenKEvaluateCall(round=1, ticker="ACME"),
             TenKAnswerCall(round=1, ticker="BETA"), TenKEvaluateCall(round=1, ticker="BETA"),
             ExtractCall(scope="ACME:2025_q1")]
    state = JobState(request=JobRequest(question="How did revenue change?"), iteration=1, inflight=calls)
    return SimpleNamespace(id=JOB, step="1:tenk_answer", state=state)


def test_a_job_waits_on_each_chains_first_unfinished_link(states):
    job = _job()
    assert reconcile.waited_chains(job) == [[f"{JOB}:1:tenk1:answer:ACME", f"{JOB}:1:tenk1:evaluate:ACME"],
                                            [f"{JOB}:1:tenk1:answer:BETA", f"{JOB}:1:tenk1:evaluate:BETA"],
                                            [f"{JOB}:1:extract:ACME:2025_q1"]]
    assert len(reconcile.waited_ids(job)) == 5  # every id, for diagnostics
    assert reconcile._unfinished(reconcile.waited_chains(job)) == [
        f"{JOB}:1:tenk1:answer:ACME", f"{JOB}:1:tenk1:answer:BETA", f"{JOB}:1:extract:ACME:2025_q1"]

    states |= {f"{JOB}:1:tenk1:answer:ACME": "SUCCESS", f"{JOB}:1:extract:ACME:2025_q1": "SUCCESS",
               f"{JOB}:1:tenk1:answer:BETA": "RETRY"}
    assert reconcile._unfinished(reconcile.waited_chains(job)) == [
        f"{JOB}:1:tenk1:evaluate:ACME", f"{JOB}:1:tenk1:answer:BETA"]

    states |= {f"{JOB}:1:tenk1:evaluate:ACME": "SUCCESS", f"{JOB}:1:tenk1:answer:BETA": "SUCCESS",
               f"{JOB}:1:tenk1:evaluate:BETA": "FAILURE"}
    assert reconcile._unfinished(reconcile.waited_chains(job)) == []  # all in: a quiet job then lost its chord body
