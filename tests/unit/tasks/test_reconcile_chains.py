"""Recovery and chained calls: a job waiting on a 10-K answer chord waits on each company's answer first, and on its
evaluation only once the answer is finished. An evaluation whose answer still runs is not sent yet, so it is neither
queued nor held by a worker; it must not be taken for lost (that would re-send a step that is only slow)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import tasks.recovery as reconcile
from agent.models.job import JobRequest, JobState
from agent.models.steps import ExtractCall, TenKAnswerCall, TenKEvaluateCall

JOB = "job-1"


@pytest.fixture
def states(monkeypatch) -> dict[str, str]:
    found: dict[str, str] = {}
    monkeypatch.setattr(reconcile.app, "AsyncResult", lambda task_id: SimpleNamespace(state=found.get(task_id, "PENDING")))
    return found


@pytest.fixture
def stored(monkeypatch) -> set[str]:
    """The output keys the job's rows hold (job_step_outputs)."""
    keys: set[str] = set()
    monkeypatch.setattr(reconcile, "context", lambda: SimpleNamespace(pool=None))
    monkeypatch.setattr(reconcile.jobstore, "output_keys", lambda pool, job_id, prefix: {k for k in keys if k.startswith(prefix)})
    return keys


def _job() -> SimpleNamespace:
    calls = [TenKAnswerCall(round=1, ticker="ACME"), TenKEvaluateCall(round=1, ticker="ACME"),
             TenKAnswerCall(round=1, ticker="BETA"), TenKEvaluateCall(round=1, ticker="BETA"),
             ExtractCall(scope="ACME:2025_q1")]
    state = JobState(request=JobRequest(question="How did revenue change?"), iteration=1, inflight=calls)
    return SimpleNamespace(id=JOB, step="1:tenk_answer", state=state)


def test_a_job_waits_on_each_chains_first_unfinished_link(states, stored):
    job = _job()
    assert reconcile.waited_waves(job) == [[[f"{JOB}:1:tenk1:answer:ACME", f"{JOB}:1:tenk1:evaluate:ACME"],
                                             [f"{JOB}:1:tenk1:answer:BETA", f"{JOB}:1:tenk1:evaluate:BETA"],
                                             [f"{JOB}:1:extract:ACME:2025_q1"]]]
    assert len(reconcile.waited_ids(job)) == 5  # every id, for diagnostics
    assert reconcile.unfinished_ids(job) == [
        f"{JOB}:1:tenk1:answer:ACME", f"{JOB}:1:tenk1:answer:BETA", f"{JOB}:1:extract:ACME:2025_q1"]

    stored |= {"1:tenk1:answer:ACME", "1:extract:ACME:2025_q1"}
    states[f"{JOB}:1:tenk1:answer:BETA"] = "RETRY"  # waiting for its retry: not finished
    assert reconcile.unfinished_ids(job) == [
        f"{JOB}:1:tenk1:evaluate:ACME", f"{JOB}:1:tenk1:answer:BETA"]

    stored |= {"1:tenk1:evaluate:ACME", "1:tenk1:answer:BETA"}
    stored.add("1:tenk1:evaluate:BETA")  # a call that failed for good stored a FailedOutput
    assert reconcile.unfinished_ids(job) == []  # all in: a quiet job then lost its chord body


def test_an_answer_round_waits_on_its_extractions_then_its_compose_then_its_evaluations(states, stored):
    """A wave is sent when the one before it has finished: while an extraction runs, the compose and the evaluations
    are not sent yet, and not lost."""
    from agent.models.steps import ComposeCall, EvaluateCall

    calls = [ExtractCall(scope="ACME:2024_q4"), ExtractCall(scope="ACME:2025_q1"), ComposeCall(),
             EvaluateCall(scope="ACME:2024_q4"), EvaluateCall(scope="ACME:2025_q1")]
    state = JobState(request=JobRequest(question="How did revenue change?"), iteration=1, inflight=calls)
    job = SimpleNamespace(id=JOB, step="1:extract", state=state)
    extracts = [f"{JOB}:1:extract:ACME:2024_q4", f"{JOB}:1:extract:ACME:2025_q1"]
    evaluations = [f"{JOB}:1:evaluate:ACME:2024_q4", f"{JOB}:1:evaluate:ACME:2025_q1"]
    assert reconcile.waited_waves(job) == [[[i] for i in extracts], [[f"{JOB}:1:compose"]], [[i] for i in evaluations]]
    stored.add("1:extract:ACME:2024_q4")
    assert reconcile.unfinished_ids(job) == [extracts[1]]
    stored.add("1:extract:ACME:2025_q1")
    assert reconcile.unfinished_ids(job) == [f"{JOB}:1:compose"]
    stored |= {"1:compose", "1:evaluate:ACME:2025_q1"}
    assert reconcile.unfinished_ids(job) == [evaluations[0]]
    stored.add("1:evaluate:ACME:2024_q4")
    assert reconcile.unfinished_ids(job) == []


def test_re_sending_an_answer_round_starts_at_its_first_unfinished_wave(states, stored):
    """Extractions that all finished are not sent again (their chord, counted already, would not fire the compose a
    second time): the re-send starts at the compose, and keeps the evaluations' group id."""
    from agent.models.steps import ComposeCall, EvaluateCall
    from tasks.dispatch import fan_out_canvas

    calls = [ExtractCall(scope="ACME:2024_q4"), ExtractCall(scope="ACME:2025_q1"), ComposeCall(),
             EvaluateCall(scope="ACME:2024_q4"), EvaluateCall(scope="ACME:2025_q1")]
    state = JobState(request=JobRequest(question="How did revenue change?"), iteration=1, inflight=calls)
    job = SimpleNamespace(id=JOB, step="1:extract", state=state)
    assert reconcile.unsent_calls(job) == calls  # the first wave unfinished: the whole round
    stored |= {"1:extract:ACME:2024_q4", "1:extract:ACME:2025_q1"}
    assert reconcile.unsent_calls(job) == calls[2:]
    whole = fan_out_canvas(JOB, job.step, calls, 1, batch=False)
    rest = fan_out_canvas(JOB, job.step, calls[2:], 1, batch=False)
    assert rest.tasks[0].options["task_id"] == f"{JOB}:1:compose"
    assert rest.tasks[1].options["task_id"] == whole.body.tasks[1].options["task_id"] == f"{JOB}:1:fanout:extract:evaluate"
    stored |= {"1:compose", "1:evaluate:ACME:2024_q4"}
    assert reconcile.unsent_calls(job) == calls[3:]  # a wave is re-sent whole
    stored.add("1:evaluate:ACME:2025_q1")
    assert reconcile.unsent_calls(job) == []  # all in: only the step's body can have been lost


def test_a_stored_output_is_a_finished_call(states, stored):
    """Calls whose outputs Postgres holds are not sent again (a Redis crash loses none of them), and the re-send starts
    after them."""
    from agent.models.steps import ComposeCall, EvaluateCall

    calls = [ExtractCall(scope="ACME:2025_q1"), ComposeCall(), EvaluateCall(scope="ACME:2025_q1")]
    state = JobState(request=JobRequest(question="How did revenue change?"), iteration=1, inflight=calls)
    job = SimpleNamespace(id=JOB, step="1:extract", state=state)
    assert reconcile.unsent_calls(job) == calls  # nothing known finished
    stored |= {"1:extract:ACME:2025_q1", "1:compose"}
    assert reconcile.unsent_calls(job) == calls[2:]


def test_a_call_that_recorded_no_outcome_is_sent_again_whatever_the_backend_says(states, stored):
    """Calls keep no result in the backend (tasks/fanout.py); a state there (Celery's FAILURE for a retry it could not
    publish while the broker was down, or for a chord body failed for a failed part) is not an outcome. Taking it for
    finished would send the evaluations with no answer to read (the job would fail); the call is sent again."""
    from agent.models.steps import ComposeCall, EvaluateCall

    calls = [ExtractCall(scope="ACME:2025_q1"), ComposeCall(), EvaluateCall(scope="ACME:2025_q1")]
    state = JobState(request=JobRequest(question="How did revenue change?"), iteration=1, inflight=calls)
    job = SimpleNamespace(id=JOB, step="1:extract", state=state)
    stored.add("1:extract:ACME:2025_q1")
    states |= {f"{JOB}:1:extract:ACME:2025_q1": "FAILURE", f"{JOB}:1:compose": "FAILURE",
               f"{JOB}:1:evaluate:ACME:2025_q1": "SUCCESS"}
    assert reconcile.unfinished_ids(job) == [f"{JOB}:1:compose"]
    assert reconcile.unsent_calls(job) == calls[1:]
    stored.add("1:compose")
    assert reconcile.unfinished_ids(job) == [f"{JOB}:1:evaluate:ACME:2025_q1"]


def test_a_search_finishes_by_storing_its_output(states, stored):
    """A search's passages are evidence rows; its output (how many it added) is what says it ended."""
    from agent.models.steps import SearchCall

    calls = [SearchCall.model_validate({"n": 0, "spec": {"ticker": "ACME", "period": "2025_q1", "query": "revenue"}})]
    state = JobState(request=JobRequest(question="How did revenue change?"), iteration=1, inflight=calls)
    job = SimpleNamespace(id=JOB, step="1:search", state=state)
    task_id = reconcile.call_task_id(calls[0], JOB, 1)
    assert reconcile.unfinished_ids(job) == [task_id]
    states[task_id] = "SUCCESS"
    assert reconcile.unfinished_ids(job) == [task_id]
    stored.add(str(calls[0].output_key(1)))
    assert reconcile.unfinished_ids(job) == [] and reconcile.unsent_calls(job) == []


def test_a_finished_fan_outs_body_is_sent_again_only_when_nothing_holds_it(states, monkeypatch):
    """Every call finished and the job stood still: its body is queued behind a busy coordinator queue, or lost. Sent
    again only in the second case: each duplicate would be one more delivery for that busy queue to throw away."""
    from tasks.dispatch import advance_task_id

    calls = [ExtractCall(scope="ACME:2025_q1")]
    state = JobState(request=JobRequest(question="How did revenue change?"), iteration=1, inflight=calls)
    job = SimpleNamespace(id=JOB, step="1:search", state=state)
    body = advance_task_id(JOB, job.step, calls)
    held: set[str] = set()
    resent: list[str] = []
    monkeypatch.setattr(reconcile, "context", lambda: SimpleNamespace(pool=None, redis=None))
    monkeypatch.setattr(reconcile.jobstore, "quiet_jobs", lambda pool, grace: [JOB])
    monkeypatch.setattr(reconcile.jobstore, "load_job", lambda pool, job_id: job)
    monkeypatch.setattr(reconcile.jobstore, "touch", lambda pool, job_id: None)
    monkeypatch.setattr(reconcile.jobstore, "output_keys", lambda pool, job_id, prefix: {"1:extract:ACME:2025_q1"})
    monkeypatch.setattr(reconcile, "queued_ids", lambda redis: held)
    monkeypatch.setattr(reconcile, "worker_held_ids", lambda expected=None: set())
    monkeypatch.setattr(reconcile, "live_claims", lambda redis: set())
    monkeypatch.setattr(reconcile.liveness, "beating_workers", lambda redis: set())
    monkeypatch.setattr(reconcile, "resume_job", lambda j: resent.append(j.id))

    held.add(body)
    assert reconcile.reconcile_quiet_jobs() == [] and resent == []  # queued: it will arrive
    held.clear()
    assert reconcile.reconcile_quiet_jobs() == [JOB] and resent == [JOB]  # nowhere: lost, sent again


def test_a_stored_search_output_reads_back_as_one():
    from agent.models.steps import FailedOutput, SearchOutput, StepKey, parse_output

    key = StepKey.parse("1:search:0")
    assert parse_output(key, {"added": 4}) == SearchOutput(added=4)
    assert isinstance(parse_output(key, {"error": "TimeoutError: search", "error_class": "network"}), FailedOutput)
