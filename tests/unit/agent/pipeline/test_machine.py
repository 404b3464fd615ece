"""The coordinator's state machine, driven through whole jobs with no database, Redis or workers."""
from __future__ import annotations

import copy

import pytest

from agent.models.research import Answer, ScopeFindings, TickerPeriods, Usage
from agent.models.steps import (
    ComposeCall,
    ComposeOutput,
    EvaluateCall,
    EvaluateOutput,
    ExtractCall,
    ExtractOutput,
    FailedOutput,
    NewsCall,
    NewsOutput,
    PlanCall,
    PlanOutput,
    SearchCall,
    TenKAnswerCall,
    TenKAnswerOutput,
    TenKEvaluateCall,
    TenKEvaluateOutput,
    TenKPlanCall,
    TenKPlanOutput,
    TenKRetrieveCall,
    TenKRetrieveOutput,
    call_chains,
    call_waves,
)
from agent.models.tenk import SubQuestion, TenKEvaluation, TenKPlan
from tests.support.machine_driver import AVAILABILITY, USAGE, Job, answer, evaluation, event_types, plan, quarters


def planned(job: Job, **plan_fields):
    job.advance()
    return job.respond(lambda c, it: PlanOutput(plan=plan(**plan_fields), usage=USAGE))


def answering(score: int = 90, keywords: list[str] | None = None, *, extract=None, compose=None, evaluate=None):
    """The answer round's outputs by call (models.steps.call_waves): each extraction's, the compose's and each
    evaluation's; `extract` and `evaluate` make one from the call, `compose` is the output itself."""
    def respond(c, it):
        if isinstance(c, ExtractCall):
            return extract(c) if extract else ExtractOutput(findings=ScopeFindings(scope=c.scope), usage=USAGE)
        if isinstance(c, ComposeCall):
            return compose if compose is not None else ComposeOutput(answer=answer(), usage=USAGE)
        if isinstance(c, EvaluateCall):
            return evaluate(c) if evaluate else EvaluateOutput(evaluation=evaluation(score, keywords=keywords, scope=c.scope),
                                                               usage=USAGE)
        return None
    return respond


def is_answer_round(out) -> bool:
    return any(isinstance(c, ComposeCall) for c in out.calls)


def searched(job: Job, chunks: int, *scopes: str):
    """The search fan-out in flight finds `chunks` in `scopes`; the step after it."""
    job.find(chunks, *scopes)
    return job.respond(lambda c, it: None)


def answer_round(job: Job, score: int, keywords: list[str] | None = None, chunks: int = 4, scopes=("ACME:2025_q1",),
                 compose: ComposeOutput | None = None):
    """From a search fan-out (or a refinement round's answer round) in flight to the evaluation's outcome."""
    out = job.last
    if not is_answer_round(out):
        assert all(isinstance(c, (SearchCall, NewsCall)) for c in out.calls), out.calls
        if chunks:
            job.find(chunks, *scopes)
        out = job.respond(lambda c, it: None)
        if not is_answer_round(out):
            return out
    return job.respond(answering(score, keywords, compose=compose))


def test_a_whole_job_plans_searches_answers_evaluates_iterates_and_finishes():
    job = Job()
    out = job.advance()
    assert out.calls == [PlanCall()] and str(out.step) == "0:plan" and event_types(out) == ["job_status"]

    out = job.respond(lambda c, it: PlanOutput(plan=plan(), usage=USAGE))
    limits = job.state.limits
    assert (limits.max_iterations, limits.confidence_threshold, limits.max_tokens) == (3, 0.80, 6000)  # standard mode
    assert str(out.step) == "1:search" and event_types(out) == ["planning", "iteration_start"]
    assert [(c.spec.ticker, c.spec.period, c.spec.query) for c in out.calls] == [
        ("ACME", "2024_q4", "revenue growth drivers"), ("ACME", "2025_q1", "revenue growth drivers")]

    job.find(6, "ACME:2024_q4", "ACME:2025_q1")
    out = job.respond(lambda c, it: None)  # a search stores evidence rows, not an output
    assert event_types(out) == ["search"] and out.events[0].data == {"chunks": 6}
    # the answer round: the extractions, then the compose, then the evaluations, in one dispatch
    # the answer spans two quarters: beside each quarter's evaluation, one of the whole answer
    assert out.calls == [ExtractCall(scope="ACME:2024_q4"), ExtractCall(scope="ACME:2025_q1"), ComposeCall(),
                         EvaluateCall(scope="ACME:2024_q4"), EvaluateCall(scope="ACME:2025_q1"), EvaluateCall(scope="whole")]
    assert str(out.step) == "1:extract"
    assert call_waves(out.calls) == [[[c] for c in out.calls[:2]], [[ComposeCall()]], [[c] for c in out.calls[3:]]]

    out = job.respond(answering(60, ["segment margin"]))
    assert event_types(out) == ["agent_decision", "iteration_complete", "iteration_start", "iteration_followup"]
    assert out.events[0].data["will_iterate"] and out.events[0].data["reason"] == "confidence 60% < threshold 80%"
    assert (job.state.iteration, job.state.phase) == (2, "execution")  # a follow-up search is an execution round
    assert [c.spec.query for c in out.calls] == ["segment margin", "segment margin"]

    out = answer_round(job, 90, chunks=3)
    assert out.status == "completed" and str(out.step) == "done" and out.calls == []
    assert event_types(out)[-2:] == ["result", "job_status"]
    result = out.result
    assert (result.iterations, result.confidence, result.chunks_used) == (2, 0.9, 9)
    assert result.termination_reason == "confidence 90% >= threshold 80%"
    assert [r.keywords for r in result.evaluations] == [["revenue growth drivers"], ["segment margin"]]
    # plan, then per iteration 2 extracts, 1 compose and 3 evaluations: 13 calls of 10 + 5 tokens
    assert result.tokens == {"prompt": 130, "completion": 65}
    assert result.evaluations[-1].grades.model_dump() == {
        "per_scope": {"ACME:2024_q4": 0.9, "ACME:2025_q1": 0.9}, "whole_answer": 0.9}
    assert set(result.timing) == {"reasoning", "retrieval", "generation", "evaluation", "total"}
    assert result.timing["total"] == job.now - job.state.started_at


def test_the_router_reroutes_a_low_confidence_answer_through_strategies_that_widen_the_search():
    job = Job(mode="detailed")  # 4 iterations: room for the plan's round and two re-routes
    planned(job)
    out = answer_round(job, 40, scopes=("ACME:2024_q4", "ACME:2025_q1"))  # nothing to follow up: 40% < 70% re-routes
    assert [r.agent_name for r in job.state.routing_history] == ["transcripts_first", "10k_first"]
    planning = next(e for e in out.events if e.type == "planning")
    assert planning.data["previous_strategy"] == "transcripts_first" and planning.data["tenk"] == {"ACME": ["FY2024"]}
    # 10k_first adds the 10-K: its agent plans first, then its retrievals run beside the transcript searches
    assert out.calls == [TenKPlanCall(round=1, ticker="ACME", fiscal_year=2024)]
    assert (job.state.iteration, job.state.router_retries, job.state.phase_iterations["planning"]) == (2, 1, 2)
    out = job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(ticker="ACME", fiscal_year=2024,
                                                                 sub_questions=[sub_question(1, "inventories")])))
    assert [c.task for c in out.calls] == ["tenk_retrieve", "search", "search"]

    job.respond(lambda c, it: TenKRetrieveOutput(added=1) if isinstance(c, TenKRetrieveCall) else None)
    job.find(2, "ACME:10k")
    job.respond(tenk_chord(0.95))
    out = answer_round(job, 40)
    # the transcripts-only fallback would search less than now, so the next re-route widens the window instead
    assert [r.agent_name for r in job.state.routing_history] == ["transcripts_first", "10k_first", "broad_window"]
    assert job.state.search_plan.transcripts[0].periods == ["2024_q2", "2024_q3", "2024_q4", "2025_q1"]
    assert job.state.search_plan.tenk == [TickerPeriods(ticker="ACME", periods=["FY2024"])]

    run_tenk_round(job, quality=0.95, chunks=1)
    out = answer_round(job, 40)  # two re-routes used, and the planning phase with them
    assert out.status == "completed" and job.state.router_retries == 2 and job.state.iteration == 3
    assert out.result.termination_reason == "no new follow-up keyword phrases"
    assert out.result.suggestion.request.mode == "deep_search"  # 40% < 90%: a thorough search is offered


def test_a_reroute_never_passes_the_modes_iteration_limit():
    job = Job(mode="direct")
    planned(job)
    answer_round(job, 40)  # iteration 1 at 40%: re-routed to 10k_first as iteration 2
    assert job.state.iteration == 2 and job.state.strategy == "10k_first"
    run_tenk_round(job, quality=0.95, chunks=1)
    out = answer_round(job, 40)  # still 40%, one re-route left, but the mode allows 2 iterations
    assert out.status == "completed" and job.state.iteration == 2 and job.state.router_retries == 1
    assert out.result.termination_reason == "max iterations (2) reached"


def sub_question(id: int, keywords: str) -> SubQuestion:
    return SubQuestion(id=id, text=keywords, kind="TABLE", items=["8"], keywords=keywords)


def tenk_chord(quality: float = 0.95, missing=None, text: str = "- Inventories were 5 [10K1]"):
    """The outputs of a 10-K answer chord: each company's answer with its evaluation chained to it, and any
    extraction run beside them."""
    def respond(c, it):
        if isinstance(c, TenKAnswerCall):
            return TenKAnswerOutput(answer=answer(text), markers={})
        if isinstance(c, TenKEvaluateCall):
            return TenKEvaluateOutput(evaluation=TenKEvaluation(quality=quality, missing_info=missing or []))
        return ExtractOutput(findings=ScopeFindings(scope=c.scope), usage=USAGE)
    return respond


def run_tenk_round(job: Job, quality: float, chunks: int = 0, sub_questions=None, missing=None):
    """One 10-K round from its plan calls to its evaluation's outcome."""
    subs = sub_questions or [sub_question(1, "inventories balance sheet"), sub_question(2, "cost of sales")]
    out = job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(ticker=c.ticker, fiscal_year=c.fiscal_year,
                                                                 sub_questions=subs), usage=USAGE)
                      if isinstance(c, TenKPlanCall) else None)  # the transcript searches beside it store evidence
    if out.calls and isinstance(out.calls[0], TenKRetrieveCall):
        out = job.respond(lambda c, it: TenKRetrieveOutput(added=2) if isinstance(c, TenKRetrieveCall) else None)
    assert all(isinstance(c, (TenKAnswerCall, TenKEvaluateCall, ExtractCall)) for c in out.calls)
    if chunks:
        job.find(chunks, "ACME:10k")
    return job.respond(tenk_chord(quality, missing))


def test_tenk_rounds_replan_from_missing_information_and_skip_sub_questions_already_searched():
    job = Job()
    out = planned(job, data_sources=["10k"], needs_10k=True, time_refs=["fiscal 2024"])
    assert job.state.strategy == "10k_first" and job.state.search_plan.transcripts == []
    assert out.calls == [TenKPlanCall(round=1, ticker="ACME", fiscal_year=2024)]

    out = job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(
        ticker="ACME", fiscal_year=2024, sub_questions=[sub_question(1, "inventories"), sub_question(2, "cost of sales")])))
    assert [(c.slot, [(a.ticker, a.sub_question) for a in c.assignments]) for c in out.calls] == [
        (0, [("ACME", 1)]), (1, [("ACME", 2)])]
    out = job.respond(lambda c, it: TenKRetrieveOutput(added=3))
    assert out.events[0].data["chunks_added"] == 6
    assert out.calls == [TenKAnswerCall(round=1, ticker="ACME", fiscal_year=2024),
                         TenKEvaluateCall(round=1, ticker="ACME", fiscal_year=2024)]
    out = job.respond(tenk_chord(0.5, ["turnover"]))
    assert out.calls == [TenKPlanCall(round=2, ticker="ACME", fiscal_year=2024, missing_info=["turnover"])]

    # the replan keeps sub-question 1 and adds 3: only 3 is retrieved
    out = job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(
        ticker="ACME", fiscal_year=2024, sub_questions=[sub_question(1, "inventories"), sub_question(3, "turnover")])))
    assert [[a.sub_question for a in c.assignments] for c in out.calls] == [[3]]
    job.respond(lambda c, it: TenKRetrieveOutput(added=1))
    job.find(7, "ACME:10k")
    out = job.respond(tenk_chord(0.95))
    # quality reached; no transcript search for a 10-K-only question: straight to extraction
    assert job.state.tenk.done and job.state.tenk.quality == {"ACME:FY2024": 0.95}
    assert event_types(out) == ["tenk_search", "search"] and out.calls[0] == ExtractCall(scope="ACME:10k")


def test_transcript_scopes_are_extracted_beside_the_10k_answers_and_only_the_10k_scope_after():
    """A question over the 10-K and the calls: the searches' scopes are complete once the retrieval chord is in,
    so their extraction shares the 10-K answer step (one LLM step fewer on the critical path)."""
    job = Job()
    out = planned(job, data_sources=["10k", "earnings_transcripts"], needs_10k=True, time_refs=["last 2 quarters"])
    assert job.state.search_plan.tenk and job.state.search_plan.transcripts
    out = job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(ticker=c.ticker, fiscal_year=c.fiscal_year,
                                                                 sub_questions=[sub_question(1, "revenue")])))
    assert {type(c) for c in out.calls} == {TenKRetrieveCall, SearchCall}  # the searches ride with the retrieval
    job.find(6, "ACME:2024_q4", "ACME:2025_q1")
    out = job.respond(lambda c, it: TenKRetrieveOutput(added=2) if isinstance(c, TenKRetrieveCall) else None)
    assert out.calls == [TenKAnswerCall(round=1, ticker="ACME", fiscal_year=2024), TenKEvaluateCall(round=1, ticker="ACME", fiscal_year=2024),
                         ExtractCall(scope="ACME:2024_q4"), ExtractCall(scope="ACME:2025_q1")]
    job.find(2, "ACME:10k")
    out = job.respond(tenk_chord(0.5, ["margin"], "- Revenue was 5 [10K1]"))  # extraction outputs wait for the answer step
    assert out.calls == [TenKPlanCall(round=2, ticker="ACME", fiscal_year=2024, missing_info=["margin"])]
    job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(ticker=c.ticker, fiscal_year=c.fiscal_year,
                                                           sub_questions=[sub_question(2, "margin")])))
    out = job.respond(lambda c, it: TenKRetrieveOutput(added=1))
    # the transcripts are extracted once
    assert out.calls == [TenKAnswerCall(round=2, ticker="ACME", fiscal_year=2024),
                         TenKEvaluateCall(round=2, ticker="ACME", fiscal_year=2024)]
    out = job.respond(tenk_chord(0.95))
    assert out.calls[0] == ExtractCall(scope="ACME:10k") and not isinstance(out.calls[1], ExtractCall)
    job.respond(answering(95, extract=lambda c: ExtractOutput(findings=ScopeFindings(scope=c.scope), usage=USAGE),
                          compose=ComposeOutput(answer=answer()), evaluate=lambda c: EvaluateOutput(evaluation=evaluation(95))))
    # the plan and every extraction of the iteration counted once: 2 early and the 10-K scope's
    assert job.state.tokens == {"prompt": 4 * USAGE.prompt, "completion": 4 * USAGE.completion}


def tenk_answers_and_calls_extracting() -> Job:
    """A question over the 10-K and two calls, its first answer chord in flight: the 10-K answer and evaluation, and
    the two calls' extraction beside them."""
    job = Job()
    planned(job, data_sources=["10k", "earnings_transcripts"], needs_10k=True, time_refs=["last 2 quarters"])
    job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(ticker=c.ticker, fiscal_year=c.fiscal_year,
                                                           sub_questions=[sub_question(1, "revenue")])))
    job.find(6, "ACME:2024_q4", "ACME:2025_q1")
    job.respond(lambda c, it: TenKRetrieveOutput(added=2) if isinstance(c, TenKRetrieveCall) else None)
    return job


def test_extractions_beside_the_10k_answers_are_paid_for_even_when_the_job_ends_before_the_answer_step():
    """A cancel (or the time running out) during the 10-K rounds ends the job before the answer step reads the early
    extractions: their tokens and cost are the job's all the same, and counted once when the answer step does read them."""
    job = tenk_answers_and_calls_extracting()
    out = job.respond(tenk_chord(0.5, ["margin"]))
    assert out.calls == [TenKPlanCall(round=2, ticker="ACME", fiscal_year=2024, missing_info=["margin"])]
    paid = {"prompt": 3 * USAGE.prompt, "completion": 3 * USAGE.completion}  # the plan and the two early extractions
    assert job.state.tokens == paid
    out = job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(ticker=c.ticker, fiscal_year=c.fiscal_year,
                                                                 sub_questions=[sub_question(2, "margin")])), cancel=True)
    assert out.status == "cancelled" and job.state.tokens == paid


def test_each_companys_10k_evaluation_is_chained_to_its_own_answer():
    """The round's answers and their evaluations go out in one fan-out, each evaluation right after its own company's
    answer (models.steps.call_chains); a job saved while it waited on answers alone evaluates them at its next step."""
    both = AVAILABILITY.model_copy(update={"tenk": {"ACME": quarters("FY2024"), "BETA": quarters("FY2024")}})
    job = Job(availability=both)
    planned(job, tickers=["ACME", "BETA"], data_sources=["10k"], needs_10k=True, time_refs=["fiscal 2024"])
    job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(ticker=c.ticker, fiscal_year=c.fiscal_year,
                                                           sub_questions=[sub_question(1, "revenue")])))
    out = job.respond(lambda c, it: TenKRetrieveOutput(added=1))
    answers = [TenKAnswerCall(round=1, ticker=t, fiscal_year=2024) for t in ("ACME", "BETA")]
    evaluations = [TenKEvaluateCall(round=1, ticker=t, fiscal_year=2024) for t in ("ACME", "BETA")]
    assert out.calls == [answers[0], evaluations[0], answers[1], evaluations[1]]
    assert call_chains(out.calls) == [[answers[0], evaluations[0]], [answers[1], evaluations[1]]]
    assert call_chains([*out.calls, ExtractCall(scope="ACME:2024_q4")])[-1] == [ExtractCall(scope="ACME:2024_q4")]

    saved = copy.deepcopy(job)  # the same point, where a job saved before the chains waited on its answers alone
    out = saved.respond(lambda c, it: TenKAnswerOutput(answer=answer(), markers={})
                        if isinstance(c, TenKAnswerCall) else None)
    assert out.calls == evaluations and str(out.step) == "1:tenk_evaluate"
    out = saved.respond(tenk_chord(0.95))
    assert saved.state.tenk.done and saved.state.tenk.quality == {"ACME:FY2024": 0.95, "BETA:FY2024": 0.95}


def test_a_follow_up_round_that_found_nothing_extracts_nothing_early():
    job = Job()
    planned(job, data_sources=["10k", "earnings_transcripts"], needs_10k=True)
    run_tenk_round(job, quality=0.95, chunks=2)
    answer_round(job, 50, keywords=["gross margin"], scopes=("ACME:10k",))
    assert job.state.iteration == 2 and job.state.answer is not None
    out = job.respond(lambda c, it: TenKPlanOutput(plan=TenKPlan(ticker=c.ticker, fiscal_year=c.fiscal_year,
                                                                 sub_questions=[sub_question(3, "gross margin")]))
                      if isinstance(c, TenKPlanCall) else None)
    out = job.respond(lambda c, it: TenKRetrieveOutput(added=0) if isinstance(c, TenKRetrieveCall) else None)
    assert out.calls == [TenKAnswerCall(round=1, ticker="ACME", fiscal_year=2024),
                         TenKEvaluateCall(round=1, ticker="ACME", fiscal_year=2024)]


def test_tenk_stops_after_its_round_limit():
    job = Job()
    planned(job, data_sources=["10k"], needs_10k=True)
    for n in range(1, 6):
        subs = [sub_question(n, f"phrase {n}")]
        out = run_tenk_round(job, quality=0.3, chunks=1, sub_questions=subs)
    assert job.state.tenk.round == 5 and job.state.tenk.done
    assert isinstance(out.calls[0], ExtractCall) and is_answer_round(out)


def test_a_planner_failure_fails_the_job_with_a_readable_reason():
    job = Job()
    job.advance()
    out = job.respond(lambda c, it: FailedOutput(error="ConnectError: refused", error_class="network"))
    assert out.status == "failed" and out.result.error == "The planner failed (network error): ConnectError: refused"
    job = Job()
    job.advance()
    out = job.advance({})
    assert out.status == "failed" and "the planner produced no output" in out.result.error


def test_an_invalid_plan_is_rejected_and_a_company_without_sources_fails():
    job = Job()
    out = planned(job, is_valid=False, invalid_reason="not about a company")
    assert out.status == "rejected" and out.result.answer == "not about a company"
    job = Job()
    out = planned(job, tickers=["ZED"])
    assert out.status == "failed" and out.result.error == "no earnings-call transcripts are ingested for ZED"


def test_no_evidence_completes_with_a_note():
    job = Job()
    planned(job)
    out = answer_round(job, 90, chunks=0)
    assert out.status == "completed" and out.result.answer.startswith("No evidence was found")


def test_an_empty_round_keeps_the_previous_answer_and_decides_again():
    job = Job()
    planned(job)
    answer_round(job, 75, keywords=["capital returns"])
    out = answer_round(job, 90, chunks=0)  # the follow-up search finds nothing new: no extraction, no new answer
    assert out.status == "completed" and out.calls == []
    assert out.result.termination_reason == "follow-up search found nothing new; no new follow-up keyword phrases"
    assert out.result.answer == "Revenue rose [1]." and out.result.iterations == 2
    assert out.result.evaluations[1].confidence == 0.75 and out.result.evaluations[1].chunks_added == 0


def test_an_empty_round_goes_on_when_there_is_more_to_try():
    job = Job()
    planned(job)
    answer_round(job, 50, keywords=["capital returns"])  # 50% < 70%: after the empty round, a re-route widens
    out = answer_round(job, 90, chunks=0)
    assert out.status == "running" and job.state.strategy == "10k_first" and job.state.iteration == 3


NOT_COMPOSED = FailedOutput(error="timeout", error_class="network")
SKIPPED = FailedOutput(error="no answer was composed to evaluate", error_class="no_answer")  # agent.work.calls


def test_a_compose_failure_fails_a_first_answer_and_keeps_a_later_one():
    job = Job()
    planned(job)
    searched(job, 2, "ACME:2025_q1")
    out = job.respond(answering(compose=NOT_COMPOSED, evaluate=lambda c: SKIPPED))
    assert out.status == "failed" and "answer generation failed" in out.result.error
    assert out.result.error_class == "network" and not out.result.partial
    assert "evaluation" not in " ".join(e.message for e in out.events)  # the skipped evaluations are no error

    job = Job()
    planned(job)
    answer_round(job, 50, keywords=["capital returns"])
    searched(job, 2, "ACME:2025_q1")
    out = job.respond(answering(compose=NOT_COMPOSED, evaluate=lambda c: SKIPPED))
    assert out.status == "completed" and out.result.termination_reason.endswith("kept the previous answer")


def test_a_failed_job_keeps_the_cited_findings_as_its_partial_answer():
    job = Job()
    planned(job)
    searched(job, 2, "ACME:2025_q1")
    partial = Answer(text="Partial answer: ...\n- Revenue rose 4% [1]", citations=[])
    out = job.respond(answering(compose=FailedOutput(error="RateLimitError: 429", error_class="rate_limit"),
                                evaluate=lambda c: SKIPPED), partial_answer=partial)
    assert out.status == "failed" and out.result.partial and out.result.error_class == "rate_limit"
    assert out.result.answer == partial.text and "rate_limit error" in out.result.error
    assert event_types(out)[-2:] == ["result", "job_status"]


def test_every_evaluation_failing_returns_the_unevaluated_answer():
    job = Job()
    planned(job)
    searched(job, 2, "ACME:2025_q1")
    out = job.respond(answering(evaluate=lambda c: FailedOutput(error="bad json", error_class="data")))
    assert out.status == "completed" and out.result.answer == "Revenue rose [1]."
    assert event_types(out).count("error") == 3  # both quarters' evaluations and the whole answer's


def test_running_out_of_time_after_composing_ends_the_job():
    """The round's evaluations found the time gone when the answer came (agent.work.calls.do_evaluate)."""
    job = Job(max_duration_seconds=5)
    planned(job)
    searched(job, 2, "ACME:2025_q1")
    late = FailedOutput(error="the job's time ran out before the evaluation", error_class="out_of_time")
    out = job.respond(answering(evaluate=lambda c: late), seconds=10)
    assert out.status == "completed" and out.result.termination_reason == "max_duration_seconds ran out"
    assert out.result.answer == "Revenue rose [1]." and "error" not in event_types(out)


def test_news_is_searched_beside_the_transcripts_and_reported():
    job = Job()
    out = planned(job, needs_latest_news=True, topic="pricing")
    assert out.calls[-1] == NewsCall(query="Acme Corp (ACME) pricing")  # the company by name, then the topic
    job.find(2, "ACME:2025_q1", "news")
    out = job.respond(lambda c, it: NewsOutput(status="ok", query=c.query, count=2, summary="Prices rose.")
                      if isinstance(c, NewsCall) else None)
    assert event_types(out) == ["news_search", "search"] and job.state.news_status == "ok"
    assert job.state.news_summary == "Prices rose."  # kept for the generator
    assert ExtractCall(scope="news") in out.calls


def test_a_failed_news_call_is_reported_as_an_error_status():
    job = Job()
    planned(job, needs_latest_news=True, topic="pricing")
    job.find(1, "ACME:2025_q1")
    job.respond(lambda c, it: FailedOutput(error="HTTP 500") if isinstance(c, NewsCall) else None)
    assert job.state.news_status == "error: HTTP 500"


@pytest.mark.parametrize("mode, iterations", [("standard", 3), ("detailed", 4)])
def test_the_answer_modes_iteration_limit_ends_the_loop(mode, iterations):
    job = Job(mode=mode)
    planned(job)
    for n in range(iterations):
        out = answer_round(job, 75, keywords=[f"phrase {n}"], chunks=1)  # above the router bar (70%)
    assert out.status == "completed" and out.result.termination_reason == f"max iterations ({iterations}) reached"


def keep_searching(job: Job, score: int, rounds: int):
    """An evaluator that never reaches the threshold and always has a new phrase; each search finds more."""
    out = job.last
    for n in range(rounds):  # each round composes another answer: a refinement that could not would end the job
        out = answer_round(job, score, keywords=[f"phrase {n}"], chunks=1,
                           compose=ComposeOutput(answer=answer(f"Revenue rose [1] (round {n}).")))
        if out.status != "running":
            break
    return out


def test_deep_search_runs_its_ten_iterations():
    job = Job(mode="deep_search")
    planned(job)
    out = keep_searching(job, 80, rounds=20)
    assert out.status == "completed" and job.state.iteration == 10
    assert out.result.termination_reason == "max iterations (10) reached"
    assert job.state.phase_iterations == {"planning": 1, "execution": 7, "refinement": 3}
    assert out.result.suggestion is None  # already the thorough mode
    assert [e.data["max_iterations"] for o in job.outcomes for e in o.events if e.type == "iteration_start"] == [10] * 10


def test_an_explicit_max_iterations_runs_that_many():
    job = Job(max_iterations=6)
    planned(job)
    out = keep_searching(job, 75, rounds=20)
    assert job.state.iteration == 6 and out.result.termination_reason == "max iterations (6) reached"
    assert out.result.suggestion.request.mode == "deep_search" and out.result.suggestion.request.max_iterations is None


def sufficient_but_for_an_issue(job: Job):
    """A planned job's first round, evaluated sufficient in substance but with an issue only a rework fixes."""
    searched(job, 3, "ACME:2025_q1")
    return job.respond(answering(compose=ComposeOutput(answer=answer("Revenue rose [1]. Let me also check the margins.")),
                                 evaluate=lambda c: EvaluateOutput(evaluation=evaluation(
                                     70, sufficient=True, needs_transcript_search=False, issues=["no margin figure"]))))


def test_a_refinement_round_reworks_the_answer_without_searching():
    job = Job()
    planned(job)
    out = sufficient_but_for_an_issue(job)
    assert job.state.phase == "refinement" and job.state.revision_notes == ["no margin figure"]
    assert out.calls[0] == ExtractCall(scope="ACME:2025_q1") and is_answer_round(out)  # no search calls
    assert out.events[-1].data["phase"] == "refinement"


def test_a_refinement_round_after_extractions_beside_the_10k_answers_pays_for_every_scope():
    """The scopes extracted beside the 10-K answers belong to their iteration: a refinement round extracts every scope
    again and is charged for each of them."""
    job = tenk_answers_and_calls_extracting()
    job.find(2, "ACME:10k")
    out = job.respond(tenk_chord(0.95))
    assert [c for c in out.calls if isinstance(c, ExtractCall)] == [ExtractCall(scope="ACME:10k")]
    unpriced = answering(compose=ComposeOutput(answer=answer("Revenue rose [1]. Let me also check the margins.")),
                         evaluate=lambda c: EvaluateOutput(evaluation=evaluation(
                             70, sufficient=True, needs_transcript_search=False, issues=["no margin figure"])))
    out = job.respond(unpriced)
    assert job.state.phase == "refinement" and len([c for c in out.calls if isinstance(c, ExtractCall)]) == 3
    before = job.state.tokens["prompt"]
    job.respond(unpriced)  # only the extractions are priced
    assert job.state.tokens["prompt"] == before + 3 * USAGE.prompt


def test_a_10k_only_question_iterates_with_what_was_missing():
    job = Job()
    planned(job, data_sources=["10k"], needs_10k=True)
    out = run_tenk_round(job, quality=0.95, chunks=3)
    assert out.calls[0] == ExtractCall(scope="ACME:10k") and is_answer_round(out)
    out = job.respond(answering(evaluate=lambda c: EvaluateOutput(evaluation=evaluation(60, missing_info=["the gross margin"]))))
    assert job.state.iteration == 2 and out.calls == [
        TenKPlanCall(round=1, ticker="ACME", fiscal_year=2024, missing_info=["the gross margin"], previous="1:tenk1:plan:ACME:FY2024")]
    assert job.state.tenk.retrieved  # what iteration 1 searched is remembered: it is not searched again



def test_tokens_cost_and_cache_hits_add_up_from_every_call():
    job = Job()
    job.advance()
    priced = Usage(prompt=1_000_000, completion=1_000_000, model="gpt-4o-mini")
    job.respond(lambda c, it: PlanOutput(plan=plan(), usage=priced))
    searched(job, 2, "ACME:2025_q1")
    out = job.respond(answering(
        extract=lambda c: ExtractOutput(findings=ScopeFindings(scope=c.scope), usage=Usage(cached=True, model="gpt-4o-mini")),
        compose=ComposeOutput(answer=answer(), usage=Usage(prompt=10, completion=5)),
        evaluate=lambda c: EvaluateOutput(evaluation=evaluation(95, scope=c.scope), usage=Usage(prompt=1, completion=1))))
    # the two quarters' evaluations and the whole answer's
    assert out.result.tokens == {"prompt": 1_000_000 + 10 + 3, "completion": 1_000_000 + 5 + 3}
    assert out.result.cost_usd == 0.75 and out.result.cache_hits == 1  # 0.15 + 0.60 per million; the cached extract


def test_evidence_over_the_budget_reaches_the_answer_through_working_memory():
    job = Job()
    planned(job)
    searched(job, 9, "ACME:2024_q4", "ACME:2025_q1")
    job.respond(answering(extract=lambda c: ExtractOutput(
        findings=ScopeFindings(scope=c.scope), verbatim=3, merged=1, tokens_saved=40,
        summarised=["transcript:7", "transcript:8"] if c.scope.endswith("2024_q4") else [],
        summary="ACME Q4 2024: Margins widened" if c.scope.endswith("2024_q4") else None)))
    assert job.state.working_memory == "ACME:2024_q4: ACME Q4 2024: Margins widened"
    assert job.state.context.model_dump() == {"verbatim": 6, "summarised": 2, "summarised_scopes": ["ACME:2024_q4"],
                                              "merged": 2, "tokens_saved": 80}


def test_a_cancel_before_any_answer_ends_the_job_cancelled():
    job = Job()
    job.advance()
    out = job.respond(lambda c, it: PlanOutput(plan=plan(), usage=USAGE), cancel=True)
    assert (out.status, str(out.step), out.calls) == ("cancelled", "done", [])
    assert event_types(out)[-2:] == ["result", "job_status"] and out.events[-1].data == {"status": "cancelled"}
    assert out.result.status == "cancelled" and out.result.citations == []
    assert out.result.termination_reason == "cancelled by request before any answer"


def test_a_cancel_mid_loop_keeps_the_answer_so_far():
    job = Job()
    planned(job)
    out = answer_round(job, 60, keywords=["segment margin"])
    assert str(out.step) == "2:search"  # a follow-up search is in flight when the cancel arrives
    out = job.respond(lambda c, it: None, cancel=True)
    assert (out.status, out.calls) == ("cancelled", [])
    assert out.result.answer == answer().text and out.result.iterations == 1 and out.result.confidence == 0.6
    assert "the answer so far is kept" in out.result.termination_reason


def test_an_answer_composed_just_before_the_cancel_is_kept():
    job = Job()
    planned(job)
    searched(job, 4, "ACME:2025_q1")
    # the cancel came while the evaluations ran: they were revoked (tasks.dispatch.CeleryDispatcher.cancel)
    composed = answering(compose=ComposeOutput(answer=answer("Margins widened [1]."), usage=USAGE))
    out = job.respond(lambda c, it: None if isinstance(c, EvaluateCall) else composed(c, it), cancel=True)
    assert out.status == "cancelled" and out.result.answer == "Margins widened [1]."
    assert out.result.tokens == {"prompt": 3 * USAGE.prompt, "completion": 3 * USAGE.completion}  # plan, extract, compose


def test_the_result_reports_the_mode_the_job_ran_in_the_callers_over_the_planners():
    job = Job(mode="direct")
    planned(job, answer_mode="standard")
    out = answer_round(job, 95)
    assert out.result.mode == "direct" and job.state.limits.max_iterations == 2
    free = Job()
    planned(free, answer_mode="detailed")
    assert answer_round(free, 95).result.mode == "detailed"


def test_the_answer_round_splits_generation_and_evaluation_time_where_the_compose_ended():
    job = Job()
    planned(job)
    searched(job, 2, "ACME:2025_q1")
    generation_before = job.state.timing.stages.get("generation", 0.0)
    composed_at = job.now + 0.75  # the step after the round comes 1 s after its dispatch
    job.respond(answering(95, compose=ComposeOutput(answer=answer(), finished_at=composed_at)), seconds=1.0)
    assert job.state.timing.stages["generation"] == pytest.approx(generation_before + 0.75)
    assert job.state.timing.stages["evaluation"] == pytest.approx(0.25)


def test_a_job_saved_before_the_answer_round_composes_and_evaluates_in_steps_of_their_own():
    """A job whose extractions alone were in flight when it was saved (before the round was one dispatch) goes on
    as it would have: the compose, then the evaluations, each at a step of its own."""
    job = Job()
    planned(job)
    out = searched(job, 2, "ACME:2024_q4", "ACME:2025_q1")
    extracts = [c for c in out.calls if isinstance(c, ExtractCall)]
    job.state = job.state.model_copy(update={"inflight": extracts})
    job.outcomes[-1] = out.model_copy(update={"calls": extracts})
    out = job.respond(answering())
    assert out.calls == [ComposeCall()] and str(out.step) == "1:compose"
    out = job.respond(answering())
    assert out.calls == [EvaluateCall(scope="ACME:2024_q4"), EvaluateCall(scope="ACME:2025_q1"), EvaluateCall(scope="whole")]
    out = job.respond(answering(95))
    assert out.status == "completed" and out.result.confidence == 0.95


def test_evaluations_some_of_which_found_the_time_gone_judge_with_those_that_ran():
    """At the deadline's edge a round's evaluations can start either side of it: those that ran decide; the others
    are no error."""
    job = Job()
    planned(job)
    searched(job, 2, "ACME:2024_q4", "ACME:2025_q1")
    late = FailedOutput(error="the job's time ran out before the evaluation", error_class="out_of_time")
    out = job.respond(answering(evaluate=lambda c: late if c.scope.endswith("q4") else EvaluateOutput(
        evaluation=evaluation(95, scope=c.scope))))
    assert out.status == "completed" and out.result.confidence == 0.95 and "error" not in event_types(out)
