"""Every id a job sends to Celery starts with the job id, is the same when a step is re-sent, and never repeats
within the job: checked on whole jobs driven through the pure state machine (no broker; canvases are built,
not sent)."""
from __future__ import annotations

from collections import Counter

from celery.canvas import Signature, _chain, _chord

from agent.models.steps import ComposeCall, EvaluateCall, ExtractCall, TenKPlanOutput, TenKRetrieveCall, TenKRetrieveOutput
from agent.models.tenk import TenKPlan
from tasks.dispatch import fan_out_canvas, start_task_id
from tests.support.machine_driver import Job
from tests.unit.agent.pipeline.test_machine import (
    answer_round,
    answering,
    keep_searching,
    planned,
    run_tenk_round,
    sub_question,
    sufficient_but_for_an_issue,
)
from workers.topology import ADVANCE

JOB = "job-1"  # the driver's job id


def _ids(sig: Signature) -> list[str]:
    return canvas_ids(sig)[0]


def canvas_ids(canvas: Signature) -> tuple[list[str], list[str]]:
    """(task ids in sending order, the header group ids of its chords, outermost first)."""
    if isinstance(canvas, _chord):
        body, groups = canvas_ids(canvas.body)
        return [i for t in canvas.tasks for i in _ids(t)] + body, [canvas.options["task_id"], *groups]
    if isinstance(canvas, _chain):
        parts = [canvas_ids(t) for t in canvas.tasks]
        return [i for ids, _ in parts for i in ids], [g for _, groups in parts for g in groups]
    return [canvas.options["task_id"]], []


def last_task(canvas: Signature) -> Signature:
    if isinstance(canvas, _chord):
        return last_task(canvas.body)
    return last_task(canvas.tasks[-1]) if isinstance(canvas, _chain) else canvas


def sent_ids(job: Job, parallel: bool = True) -> tuple[list[str], list[str]]:
    """Every task id and group id the coordinator would send for the job's steps so far."""
    tasks, groups = [start_task_id(JOB)], []
    for out in job.outcomes:
        if not out.calls:
            continue
        canvas = fan_out_canvas(JOB, str(out.step), out.calls, out.state.iteration, batch=False, parallel=parallel)
        again = fan_out_canvas(JOB, str(out.step), out.calls, out.state.iteration, batch=False, parallel=parallel)
        assert canvas_ids(canvas) == canvas_ids(again)  # a redelivered step re-sends the same ids
        body = last_task(canvas)
        assert body.task == ADVANCE.name and body.args == (JOB, str(out.step))
        ids, chords = canvas_ids(canvas)
        tasks += ids
        groups += chords
    return tasks, groups


def assert_unique_and_prefixed(job: Job) -> list[str]:
    for parallel in (True, False):
        tasks, groups = sent_ids(job, parallel)
        assert all(i.startswith(f"{JOB}:") for i in tasks + groups)
        assert [i for i, n in Counter(tasks).items() if n > 1] == []
        assert [i for i, n in Counter(groups).items() if n > 1] == []
    return sent_ids(job)[0]


def test_a_multi_iteration_job_sends_distinct_ids_named_after_their_steps():
    job = Job(max_iterations=4)
    planned(job)
    out = keep_searching(job, 75, rounds=10)
    assert out.status == "completed" and job.state.iteration == 4
    ids = assert_unique_and_prefixed(job)
    assert ids[:3] == [f"{JOB}:0:start:0", f"{JOB}:0:plan", f"{JOB}:0:advance:plan"]
    for it in range(1, 4):
        # the answer round's compose and evaluations follow its extractions with no coordinator step between
        assert {f"{JOB}:{it}:advance:{s}" for s in ("search", "extract")} <= set(ids)
        assert not {f"{JOB}:{it}:advance:{s}" for s in ("compose", "evaluate")} & set(ids)
    assert f"{JOB}:4:advance:extract" in ids and f"{JOB}:4:advance:search" not in ids  # a refinement round
    assert f"{JOB}:2:extract:ACME:2025_q1" in ids  # a call's id is its output key


def test_ten_k_rounds_in_one_iteration_carry_their_round():
    job = Job()
    planned(job, data_sources=["10k"], needs_10k=True)
    for n in range(1, 4):
        run_tenk_round(job, quality=0.3, chunks=1, sub_questions=[sub_question(n, f"phrase {n}")])
    assert job.state.iteration == 1 and job.state.tenk.round == 4  # round 4 planning in flight
    ids = assert_unique_and_prefixed(job)
    for r in (1, 2, 3):
        # the evaluation rides in the answer chord, chained to its answer: no advance of its own
        assert {f"{JOB}:1:advance:tenk{r}:{s}" for s in ("plan", "retrieve", "answer")} <= set(ids)
        assert f"{JOB}:1:advance:tenk{r}:evaluate" not in ids
        assert {f"{JOB}:1:tenk{r}:answer:ACME:FY2024", f"{JOB}:1:tenk{r}:evaluate:ACME:FY2024"} <= set(ids)


def test_a_rerouted_job_with_10k_rounds_and_searches_side_by_side():
    job = Job(mode="detailed")
    planned(job)
    answer_round(job, 40, scopes=("ACME:2024_q4", "ACME:2025_q1"))  # re-routed to add the 10-K
    out = job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(ticker="ACME", fiscal_year=2024,
                                                                 sub_questions=[sub_question(1, "inventories")])))
    assert [c.task for c in out.calls] == ["tenk_retrieve", "search", "search"]
    job.respond(lambda c, it: TenKRetrieveOutput(added=1) if isinstance(c, TenKRetrieveCall) else None)
    ids = assert_unique_and_prefixed(job)
    assert f"{JOB}:2:advance:tenk1:retrieve" in ids and f"{JOB}:2:fanout:tenk1:retrieve" in sent_ids(job)[1]


def test_a_refinement_round_right_after_the_first_reuses_no_id():
    job = Job()
    planned(job)
    out = sufficient_but_for_an_issue(job)
    assert out.calls[0] == ExtractCall(scope="ACME:2025_q1")
    job.respond(answering())
    assert_unique_and_prefixed(job)


def test_the_drivers_outcomes_are_what_the_coordinator_dispatches():
    """The ids above are only meaningful if `out.step` is the done_step the coordinator passes (tasks/coordinator.py
    sends `str(outcome.step)` and the state's iteration): the step's iteration is the state's."""
    job = Job()
    planned(job)
    keep_searching(job, 75, rounds=3)
    assert all(out.step.iteration == out.state.iteration for out in job.outcomes if out.calls)


def test_a_10k_evaluation_is_sent_chained_to_its_own_companys_answer():
    """In the answer chord, each company's evaluation is the second link of a chain whose first is its answer (it
    starts when that answer is in); the extractions beside them are single parts. Not fanned out, the same tasks run
    one after another, each evaluation right after its answer."""
    job = Job()
    planned(job, data_sources=["10k", "earnings_transcripts"], needs_10k=True, time_refs=["last 2 quarters"])
    job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(ticker=c.ticker, fiscal_year=c.fiscal_year,
                                                           sub_questions=[sub_question(1, "revenue")])))
    job.find(4, "ACME:2024_q4", "ACME:2025_q1")
    out = job.respond(lambda c, it: TenKRetrieveOutput(added=2) if isinstance(c, TenKRetrieveCall) else None)
    canvas = fan_out_canvas(JOB, str(out.step), out.calls, out.state.iteration, batch=False)
    assert isinstance(canvas, _chord)
    parts = [_ids(t) for t in canvas.tasks]
    assert parts == [[f"{JOB}:1:tenk1:answer:ACME:FY2024", f"{JOB}:1:tenk1:evaluate:ACME:FY2024"],
                     [f"{JOB}:1:extract:ACME:2024_q4"], [f"{JOB}:1:extract:ACME:2025_q1"]]
    assert isinstance(canvas.tasks[0], _chain) and canvas.body.options["task_id"] == f"{JOB}:1:advance:tenk1:answer"
    sequential = fan_out_canvas(JOB, str(out.step), out.calls, out.state.iteration, batch=False, parallel=False)
    assert _ids(sequential)[:-1] == [i for p in parts for i in p]


def test_the_answer_round_is_sent_as_nested_waves():
    """The extractions' chord has the compose as its body, chained to the evaluations' chord, whose body is the next
    coordinator step; each chord with a fixed group id. Not fanned out, the same tasks run one after another."""
    job = Job()
    planned(job)
    job.find(4, "ACME:2024_q4", "ACME:2025_q1")
    out = job.respond(lambda c, it: None)
    canvas = fan_out_canvas(JOB, str(out.step), out.calls, out.state.iteration, batch=False)
    assert isinstance(canvas, _chord) and canvas.options["task_id"] == f"{JOB}:1:fanout:extract"
    assert [_ids(t) for t in canvas.tasks] == [[f"{JOB}:1:extract:ACME:2024_q4"], [f"{JOB}:1:extract:ACME:2025_q1"]]
    compose, evaluations = canvas.body.tasks
    assert compose.options["task_id"] == f"{JOB}:1:compose" and compose.task == "tasks.llm.compose"
    assert isinstance(evaluations, _chord) and evaluations.options["task_id"] == f"{JOB}:1:fanout:extract:evaluate"
    assert [_ids(t) for t in evaluations.tasks] == [[f"{JOB}:1:evaluate:ACME:2024_q4"], [f"{JOB}:1:evaluate:ACME:2025_q1"],
                                                    [f"{JOB}:1:evaluate:whole"]]
    assert evaluations.body.options["task_id"] == f"{JOB}:1:advance:extract"
    sequential = fan_out_canvas(JOB, str(out.step), out.calls, out.state.iteration, batch=False, parallel=False)
    assert isinstance(sequential, _chain) and _ids(sequential) == _ids(canvas)


def test_an_answer_round_of_one_scope_is_one_chain():
    job = Job()
    planned(job)
    job.find(2, "ACME:2025_q1")
    out = job.respond(lambda c, it: None)
    # targets 2 quarters: their evaluations and the whole answer's
    assert [type(c) for c in out.calls] == [ExtractCall, ComposeCall, EvaluateCall, EvaluateCall, EvaluateCall]
    canvas = fan_out_canvas(JOB, str(out.step), out.calls, out.state.iteration, batch=False)
    assert isinstance(canvas, _chain) and [t.options["task_id"] for t in canvas.tasks[:2]] == [
        f"{JOB}:1:extract:ACME:2025_q1", f"{JOB}:1:compose"]
    assert isinstance(canvas.tasks[2], _chord) and last_task(canvas).options["task_id"] == f"{JOB}:1:advance:extract"
