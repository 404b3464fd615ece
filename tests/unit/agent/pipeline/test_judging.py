"""How the loop judges an answer and when judging ends it: the whole-answer evaluation beside the per-scope ones and
how they merge into the confidence; a refinement round that cannot change the answer is skipped, one that did not
change it ends the loop; the evaluator's "sufficient" ends the loop in every mode, above a floor, unless the request
sets min_confidence. The rules on their own, then whole jobs through the pure machine."""
from __future__ import annotations

from agent.models.job import IterationRecord, JobResult
from agent.models.research import SearchPlan, TickerPeriods
from agent.models.steps import ComposeOutput, EvaluateCall, EvaluateOutput, FailedOutput, PlanOutput
from agent.pipeline.decision import decide, grades_of, merge_evaluations, spans_several
from tests.support.machine_driver import SETTINGS, USAGE, Job, answer, evaluation, plan
from tests.unit.agent.pipeline.test_loop_rules import state
from tests.unit.agent.pipeline.test_machine import answering, planned, searched

# ----- the rules -----


def test_the_whole_answer_weighs_as_much_as_the_per_scope_mean():
    parts = [evaluation(90, scope="ACME:2024_q4", missing_info=["q4 margin"], keywords=["q4 margin"]),
             evaluation(70, scope="ACME:2025_q1", issues=["vague"], keywords=["q1 margin"])]
    whole = evaluation(40, scope="whole", missing_info=["the change across the quarters"], keywords=["margin change"],
                       issues=["the direction contradicts the figures"])
    merged = merge_evaluations(parts, whole)
    assert merged.completeness_score == 60  # ((90 + 70) / 2 + 40) / 2
    assert merged.overall_confidence == 0.6 and merged.scope == "all"  # the mean of the grades 0.8 and 0.4
    # what only the whole shows leads the union; its keywords follow the per-scope ones
    assert merged.missing_info == ["the change across the quarters", "q4 margin"]
    assert merged.issues == ["the direction contradicts the figures", "vague"]
    assert merged.followup_keywords == ["q4 margin", "q1 margin", "margin change"]
    assert merge_evaluations(parts).completeness_score == 80  # without a whole-answer evaluation: the mean alone


def test_the_answer_is_sufficient_only_if_the_whole_is_too():
    parts = [evaluation(90, sufficient=True, scope="ACME:2024_q4"), evaluation(90, sufficient=True, scope="ACME:2025_q1")]
    assert merge_evaluations(parts).is_sufficient
    assert not merge_evaluations(parts, evaluation(90, scope="whole")).is_sufficient
    only_whole = merge_evaluations([], evaluation(55, scope="whole"))
    assert only_whole.completeness_score == 55 and only_whole.scope == "all"


def test_grades_show_each_scope_and_the_whole():
    g = grades_of({"ACME:2024_q4": evaluation(90), "ACME:2025_q1": evaluation(70)}, evaluation(40))
    assert g.per_scope == {"ACME:2024_q4": 0.9, "ACME:2025_q1": 0.7} and g.whole_answer == 0.4
    assert grades_of({"ACME:2025_q1": evaluation(70)}).whole_answer is None


def test_an_answer_spans_several_periods_or_companies():
    st = state()
    assert not spans_several(st, ["ACME:2025_q1", "news"])  # one quarter and the news
    assert spans_several(st, ["ACME:2024_q4", "ACME:2025_q1"])
    assert spans_several(st, ["ACME:10k", "ACME:2025_q1"])
    st.search_plan = SearchPlan(transcripts=[TickerPeriods(ticker="ACME", periods=["2024_q4", "2025_q1"])])
    assert spans_several(st, [])  # the targeted quarters count, found or not
    one = state()
    one.plan = plan(tickers=["ACME", "BETA"])
    assert spans_several(one, ["ACME:2025_q1"])  # a comparison whose other side found nothing


def test_a_refinement_that_cannot_change_the_answer_is_skipped_saying_why():
    ev = evaluation(60, issues=["no margin figure"])
    assert decide(state(), ev, 1.0, SETTINGS).action == "refine"
    d = decide(state(), ev, 1.0, SETTINGS, refine_blocked="the answer cannot change without new evidence")
    assert d.action == "stop"
    assert d.reason == "confidence 60% < threshold 80%; refinement skipped: the answer cannot change without new evidence"
    # a search round does not depend on the provider reworking anything
    searching = evaluation(60, keywords=["margin trend"])
    assert decide(state(), searching, 1.0, SETTINGS, refine_blocked="x").action == "search"


def test_a_result_saved_before_the_grades_still_loads():
    record = IterationRecord(iteration=1, confidence=0.5, evaluation=evaluation(50), chunks_total=1, chunks_added=1,
                             will_iterate=False, reason="r").model_dump(mode="json")
    del record["grades"]
    old = JobResult.model_validate({"job_id": "j", "question": "q", "status": "completed", "answer": "a",
                                    "provider": "extractive", "evaluations": [record]})
    assert old.evaluations[0].grades is None


# ----- whole jobs -----


def two_companies() -> Job:
    job = Job(question="How did Acme's revenue compare with Beta's?")
    planned(job, tickers=["ACME", "BETA"], time_refs=["latest quarter"])
    return job


def test_a_comparison_is_also_judged_as_a_whole_in_the_same_wave():
    job = two_companies()
    out = searched(job, 4, "ACME:2025_q1", "BETA:2025_q1")
    assert [c for c in out.calls if isinstance(c, EvaluateCall)] == [
        EvaluateCall(scope="ACME:2025_q1"), EvaluateCall(scope="BETA:2025_q1"), EvaluateCall(scope="whole")]

    def grade(c: EvaluateCall) -> EvaluateOutput:
        if c.scope == "whole":  # each side is right on its own; together they do not compare
            return EvaluateOutput(evaluation=evaluation(40, scope=c.scope, missing_info=["which company grew faster"]),
                                  usage=USAGE)
        return EvaluateOutput(evaluation=evaluation(90, scope=c.scope), usage=USAGE)

    out = job.respond(answering(evaluate=grade))
    decision = out.events[0]
    assert decision.type == "agent_decision" and decision.data["confidence"] == 0.65  # (0.90 + 0.40) / 2
    assert decision.data["missing_info"] == ["which company grew faster"]
    record = job.state.iterations[-1]
    assert record.grades.per_scope == {"ACME:2025_q1": 0.9, "BETA:2025_q1": 0.9} and record.grades.whole_answer == 0.4


def test_one_quarter_of_one_company_has_no_whole_answer_evaluation():
    job = Job(question="What was Acme's revenue last quarter?")
    planned(job, time_refs=["latest quarter"])
    out = searched(job, 2, "ACME:2025_q1")
    assert [c for c in out.calls if isinstance(c, EvaluateCall)] == [EvaluateCall(scope="ACME:2025_q1")]
    out = job.respond(answering(95))
    assert out.result.evaluations[0].grades.model_dump() == {"per_scope": {"ACME:2025_q1": 0.95}, "whole_answer": None}


def test_a_failed_whole_answer_evaluation_leaves_the_per_scope_grades():
    job = two_companies()
    searched(job, 4, "ACME:2025_q1", "BETA:2025_q1")
    out = job.respond(answering(evaluate=lambda c: FailedOutput(error="bad json", error_class="data") if c.scope == "whole"
                                else EvaluateOutput(evaluation=evaluation(90, scope=c.scope))))
    assert out.status == "completed" and out.result.confidence == 0.9
    assert out.result.evaluations[0].grades.whole_answer is None and "error" in [e.type for e in out.events]


def wanting_a_rework() -> EvaluateOutput:
    """Nothing to search for, an issue only a rework of the answer would fix (above the router's bar: no re-route)."""
    return EvaluateOutput(evaluation=evaluation(75, needs_transcript_search=False, issues=["no margin figure"]))


def test_with_a_provider_that_cannot_revise_no_refinement_round_runs():
    job = Job()
    job.provider_revises = False
    planned(job)
    searched(job, 3, "ACME:2025_q1")
    out = job.respond(answering(evaluate=lambda c: wanting_a_rework()))
    assert out.status == "completed" and out.result.iterations == 1
    assert out.result.termination_reason == ("confidence 75% < threshold 80%; refinement skipped: "
                                             "the answer cannot change without new evidence")
    assert job.state.phase_iterations["refinement"] == 0


def test_a_refinement_that_returns_the_same_answer_ends_the_loop():
    job = Job(max_iterations=6)
    planned(job)
    searched(job, 3, "ACME:2025_q1")
    job.respond(answering(evaluate=lambda c: wanting_a_rework()))
    assert job.state.phase == "refinement"  # a provider that can revise: the round runs
    out = job.respond(answering(compose=ComposeOutput(answer=answer("Revenue rose [1], margins held [1].")),
                                evaluate=lambda c: wanting_a_rework()))
    assert out.status == "running" and job.state.iteration == 3  # it changed the answer: another round may
    out = job.respond(answering(compose=ComposeOutput(answer=answer("Revenue rose [1], margins held [1].")),
                                evaluate=lambda c: wanting_a_rework()))
    assert out.status == "completed" and out.result.iterations == 3
    assert out.result.termination_reason.endswith("refinement skipped: the last refinement round left the answer unchanged")


def sufficient_at_60(c: EvaluateCall) -> EvaluateOutput:
    return EvaluateOutput(evaluation=evaluation(60, keywords=["segment margin"], sufficient=True, scope=c.scope))


def direct_job(**request) -> Job:
    job = Job(mode="direct", **request)
    job.advance()
    job.respond(lambda c, it: PlanOutput(plan=plan(time_refs=["latest quarter"]), usage=USAGE))
    searched(job, 2, "ACME:2025_q1")
    return job


def test_sufficient_ends_a_direct_job_below_its_threshold():
    job = direct_job()
    out = job.respond(answering(evaluate=sufficient_at_60))
    assert out.status == "completed" and out.result.iterations == 1
    assert out.result.termination_reason == "evaluator judged the answer sufficient"


def test_with_min_confidence_on_the_request_only_the_bar_ends_the_job():
    job = direct_job(min_confidence=0.7)
    out = job.respond(answering(evaluate=sufficient_at_60))
    assert out.status == "running" and job.state.iteration == 2
    searched(job, 1, "ACME:2025_q1")
    out = job.respond(answering(evaluate=sufficient_at_60))
    assert out.status == "completed" and out.result.termination_reason == "max iterations (2) reached"
