"""The rules the coordinator applies, each on its own: keys, the decision, the router, budgets and phases,
context compression, scopes and the search plan."""
from __future__ import annotations

import pytest

from agent.models.job import JobRequest, JobState, Limits
from agent.models.research import Evidence, SearchPlan, TickerPeriods
from agent.models.steps import (
    EvaluateOutput,
    FailedOutput,
    JobStep,
    PlanOutput,
    Stage,
    StepKey,
    StepOutputs,
    TenKAnswerOutput,
    parse_output,
)
from agent.pipeline import router
from agent.pipeline.budget import budget_note, limits_for, out_of_time, seconds_left
from agent.pipeline.decision import decide, merge_evaluations
from agent.pipeline.scopes import MAX_EVAL_SCOPES, evaluation_scopes, group_by_scope
from agent.pipeline.search_plan import plan_search, search_specs
from agent.settings import PhaseLimits
from agent.work.answering import fit_budget
from tests.support.machine_driver import AVAILABILITY, SETTINGS, answer, evaluation, plan, quarters

# ----- keys -----


@pytest.mark.parametrize("text, key", [
    ("0:plan", StepKey(iteration=0, stage=Stage.plan)),
    ("3:search:12", StepKey(iteration=3, stage=Stage.search, part="12")),
    ("1:extract:ACME:2024_q4", StepKey(iteration=1, stage=Stage.extract, part="ACME:2024_q4")),
    ("2:evaluate:news", StepKey(iteration=2, stage=Stage.evaluate, part="news")),
    ("1:tenk2:answer:ACME", StepKey(iteration=1, stage=Stage.tenk_answer, round=2, part="ACME")),
    ("4:tenk1:retrieve:5", StepKey(iteration=4, stage=Stage.tenk_retrieve, round=1, part="5")),
    ("1:news", StepKey(iteration=1, stage=Stage.news)),
])
def test_step_keys_build_and_parse(text, key):
    assert StepKey.parse(text) == key and str(key) == text


@pytest.mark.parametrize("bad", ["plan", "x:plan", "1:unknown", "1:tenk:plan:ACME", "1:tenk1:compose"])
def test_a_malformed_key_is_an_error(bad):
    with pytest.raises(ValueError):
        StepKey.parse(bad)


def test_job_steps_build_and_parse():
    for text in ("start", "done", "0:plan", "2:tenk_evaluate"):
        assert str(JobStep.parse(text)) == text
    assert JobStep.parse("2:evaluate") == JobStep(iteration=2, stage=Stage.evaluate)


def test_outputs_parse_into_their_stage_model_or_a_failure():
    key = StepKey(iteration=1, stage=Stage.evaluate, part="ACME:2024_q4")
    ok = EvaluateOutput(evaluation=evaluation(70)).model_dump(mode="json")
    assert isinstance(parse_output(key, ok), EvaluateOutput)
    assert isinstance(parse_output(key, {"error": "boom", "error_class": "network", "retries": 2}), FailedOutput)
    rows = {"0:plan": PlanOutput(plan=plan()).model_dump(mode="json"), "1:tenk1:answer:ACME":
            TenKAnswerOutput(answer=answer(), markers={"k": "[10K1]"}).model_dump(mode="json"), "1:evaluate:ACME": ok}
    outputs = StepOutputs.from_rows(rows)
    assert list(outputs.of(1, Stage.evaluate)) == [StepKey(iteration=1, stage=Stage.evaluate, part="ACME")]
    assert list(outputs.of(1, Stage.tenk_answer, round=2)) == []
    assert isinstance(outputs.one(0, Stage.plan), PlanOutput)


# ----- the decision -----

def state(iteration: int = 1, phases: dict | None = None, **limits) -> JobState:
    st = JobState(request=JobRequest(question="How did revenue change?"), iteration=iteration, started_at=0.0)
    st.limits = Limits(**({"max_iterations": 3, "max_iterations_effective": 3, "max_tokens": 6000,
                           "confidence_threshold": 0.8, "max_duration_seconds": 180,
                           "phase_limits": {"planning": 3, "execution": 3, "refinement": 3}} | limits))
    st.phase_iterations = phases or {"planning": 1, "execution": iteration, "refinement": 0}
    st.answer = answer("Revenue rose [1].")
    return st


def run(st, ev, now=1.0, reroute=None, settings=SETTINGS):
    return decide(st, ev, now, settings, reroute=reroute)


def test_the_decision_stops_at_the_threshold_and_searches_below_it():
    assert run(state(), evaluation(85, keywords=["x"])).reason == "confidence 85% >= threshold 80%"
    d = run(state(), evaluation(60, keywords=["margin trend"], needs_news_search=True, news_query="pricing"))
    assert (d.action, d.keywords, d.news_query) == ("search", ["margin trend"], "pricing")


def test_dynamic_termination_off_keeps_going_above_the_threshold():
    off = SETTINGS.model_copy(update={"enable_dynamic_termination": False})
    assert run(state(), evaluation(85, keywords=["x"]), settings=off).action == "search"


def test_min_confidence_raises_the_bar_and_overrides_sufficiency():
    d = run(state(min_confidence=0.95), evaluation(85, keywords=["x"], sufficient=True))
    assert d.action == "search" and d.reason == "confidence 85% < threshold 95%"


def test_the_evaluators_sufficient_stops_the_loop_in_every_mode_above_the_floor():
    for threshold in (0.7, 0.8, 0.9):  # direct, standard, detailed: below each mode's threshold it still stops
        d = run(state(confidence_threshold=threshold), evaluation(60, keywords=["x"], sufficient=True))
        assert (d.action, d.reason) == ("stop", "evaluator judged the answer sufficient")
    assert SETTINGS.sufficient_floor == 0.5
    assert run(state(), evaluation(45, keywords=["x"], sufficient=True)).action == "search"  # below the floor: nonsense
    raised = SETTINGS.model_copy(update={"sufficient_floor": 0.65})
    assert run(state(), evaluation(60, keywords=["x"], sufficient=True), settings=raised).action == "search"


def test_sufficient_does_not_stop_a_reroute_it_precedes_nor_an_answer_announcing_more():
    d = run(state(), evaluation(55, sufficient=True, missing_info=["the margin"]), reroute="broad_window")
    assert d.reason == "evaluator judged the answer sufficient"  # sufficient ends the loop before any re-route
    st = state()
    st.answer = answer("Revenue rose [1]. Let me also check the margins.")
    assert run(st, evaluation(60, keywords=["margins"], sufficient=True)).action == "search"


def test_the_iteration_limit_is_checked_first_even_before_a_reroute():
    d = run(state(iteration=2, max_iterations=2, max_iterations_effective=2), evaluation(30), reroute="10k_first")
    assert d.action == "stop" and d.reason == "max iterations (2) reached"


@pytest.mark.parametrize("st, ev, reason", [
    (state(max_duration_seconds=5), evaluation(60, keywords=["x"]), "max_duration_seconds (5) ran out"),
    (state(confidence_threshold=0.9), evaluation(85, keywords=["x"], sufficient=True), "evaluator judged the answer sufficient"),
    (state(), evaluation(75), "no new follow-up keyword phrases"),
    (state(phases={"planning": 1, "execution": 3, "refinement": 3}, max_iterations_effective=9), evaluation(75, keywords=["x"]),
     "execution (3) and refinement (3) phase limits reached"),
])
def test_each_stop_condition(st, ev, reason):
    d = run(st, ev, now=10)
    assert d.action == "stop" and d.reason == reason


def test_with_the_execution_phase_used_up_the_answer_is_refined():
    st = state(iteration=3, phases={"planning": 1, "execution": 3, "refinement": 0}, max_iterations_effective=6)
    assert run(st, evaluation(60, keywords=["x"])).action == "refine"


def test_the_evaluators_needs_transcript_search_is_read():
    d = run(state(), evaluation(60, keywords=["x"], needs_transcript_search=False, issues=["vague wording"]))
    assert d.action == "refine"
    assert run(state(), evaluation(75, keywords=["x"], needs_transcript_search=False)).action == "stop"


def test_an_answer_announcing_more_continues_within_the_limits():
    st = state()
    st.answer = answer("Revenue rose [1]. Let me also check the segment margins.")
    assert run(st, evaluation(75, sufficient=True)).action == "refine"
    st.answer = answer("Revenue rose [1]. Additionally, I'll look at guidance.")
    assert run(st, evaluation(75, keywords=["guidance"])).action == "search"
    st.answer = answer("Additionally, revenue rose [1].")  # ordinary prose, not an announcement
    assert run(st, evaluation(75)).action == "stop"


def test_a_low_confidence_answer_is_rerouted_with_what_was_missing():
    d = run(state(), evaluation(40, missing_info=["The net interest margin for each quarter"]), reroute="broad_window")
    assert d.action == "reroute" and d.keywords == ["net interest margin for each quarter"]
    assert run(state(), evaluation(40), reroute=None).action == "stop"  # nothing that widens the search
    st = state(phases={"planning": 3, "execution": 1, "refinement": 0})
    assert run(st, evaluation(40), reroute="broad_window").action == "stop"  # the planning phase is used up


def test_phrases_already_searched_are_not_searched_again():
    from agent.models.job import IterationRecord

    st = state()
    st.iterations.append(IterationRecord(iteration=1, confidence=0.5, evaluation=evaluation(50), chunks_total=1,
                                         chunks_added=1, keywords=["margin trend"], will_iterate=True, reason=""))
    d = run(st, evaluation(75, keywords=["margin trend"]))
    assert d.action == "stop" and d.reason == "no new follow-up keyword phrases"


def test_merging_per_scope_evaluations():
    merged = merge_evaluations([evaluation(60, keywords=["a", "b"], sufficient=True, scope="X:2024_q4"),
                                evaluation(81, keywords=["b", "c"], needs_news_search=True, news_query="n", scope="X")])
    assert (merged.completeness_score, merged.scope, merged.is_sufficient) == (70, "all", False)
    assert merged.followup_keywords == ["a", "b", "c"] and merged.needs_news_search and merged.news_query == "n"
    assert merge_evaluations([evaluation(50, scope="X")]).scope == "all"


# ----- the router -----

def test_the_initial_strategy_follows_the_sources():
    assert router.initial_strategy(plan()) == "transcripts_first"
    assert router.initial_strategy(plan(data_sources=["10k"])) == "10k_first"
    assert router.initial_strategy(plan(needs_10k=True)) == "hybrid"


def test_the_alternatives_and_what_widens():
    assert router.alternatives("transcripts_first") == ["10k_first", "broad_window"]
    assert router.alternatives("broad_window") == []
    narrow = SearchPlan(transcripts=[TickerPeriods(ticker="ACME", periods=["2025_q1"])])
    wide = SearchPlan(transcripts=[TickerPeriods(ticker="ACME", periods=["2024_q4", "2025_q1"])])
    assert router.widens(narrow, wide) and not router.widens(wide, narrow) and not router.widens(wide, wide)


def test_the_router_retries_only_below_its_bar_and_at_most_twice():
    st = state()
    assert router.should_retry(st, 0.69, 0.70, 2) and not router.should_retry(st, 0.70, 0.70, 2)
    st.router_retries = 2
    assert not router.should_retry(st, 0.1, 0.70, 2)


# ----- budgets and phases -----

def test_limits_come_from_the_mode_table_and_the_request():
    st = JobState(request=JobRequest(question="How did revenue change?", max_iterations=6, max_duration_seconds=30,
                                     min_confidence=0.9))
    limits = limits_for(SETTINGS, st, plan(answer_mode="detailed"))
    assert (limits.max_iterations, limits.max_tokens, limits.confidence_threshold) == (6, 16000, 0.90)
    assert (limits.max_iterations_effective, limits.max_duration_seconds, limits.min_confidence) == (6, 30, 0.9)
    assert limits.phase_limits == {"planning": 3, "execution": 3, "refinement": 3}
    direct = limits_for(SETTINGS, JobState(request=JobRequest(question="How did revenue change?", mode="direct")), plan())
    assert (direct.max_iterations, direct.max_iterations_effective) == (2, 2)  # the mode's limit overrides the sum
    deep = limits_for(SETTINGS, JobState(request=JobRequest(question="How did revenue change?", mode="deep_search")), plan())
    assert deep.max_iterations_effective == 10 and deep.phase_limits["execution"] == 7  # execution grows to fill it


def test_phase_limits_sum_plus_a_buffer_unless_set_explicitly():
    assert PhaseLimits().effective_max_iterations() == 10  # 3 + 3 + 3, plus max(1, 10%)
    assert PhaseLimits(planning=10, execution=10, refinement=10).effective_max_iterations() == 33
    assert PhaseLimits().effective_max_iterations(explicit=4) == 4


def test_time_left_and_the_budget_note_are_computed_from_the_given_time():
    st = state(iteration=2, max_duration_seconds=100)
    assert seconds_left(st, now=40) == 60 and not out_of_time(st, now=99.9) and out_of_time(st, now=100)
    assert budget_note(st, now=40) == "Budget: iteration 2 of 3 (1 left after this one), 60 s of 100 s left."
    assert budget_note(JobState(request=JobRequest(question="How did revenue change?"))).startswith("Budget: planning")


# ----- context compression and scopes -----

def ev(key: int, text: str, score: float, ticker: str = "ACME", quarter: int = 4, source: str = "transcript") -> Evidence:
    return Evidence(source_type=source, chunk_id=key, ticker=ticker, fiscal_year=2024, fiscal_quarter=quarter,
                    text=text, score=score)


def test_compression_keeps_the_best_evidence_within_the_budget_and_summarises_the_rest():
    evidence = [ev(1, "Costs fell. " + "a" * 3000, 0.2), ev(2, "b" * 3000, 0.9), ev(3, "c" * 2000, 0.5)]
    kept, summary = fit_budget(evidence, max_tokens=1500)  # 6,000 characters: the best two fit
    assert [e.chunk_id for e in kept] == [2, 3] and summary.startswith("1 lower-ranked passages summarised")
    assert "ACME Q4 2024: Costs fell" in summary
    assert fit_budget(evidence, max_tokens=100_000) == (evidence, None)


def test_scopes_group_evidence_and_evaluation_covers_targeted_periods():
    groups = group_by_scope([ev(1, "x", 1), ev(2, "y", 1, quarter=3), ev(3, "z", 1, source="10k"),
                             Evidence(source_type="news", chunk_id="u", text="n")])
    assert list(groups) == ["ACME:10k", "ACME:2024_q3", "ACME:2024_q4", "news"]
    st = state()
    st.search_plan = SearchPlan(transcripts=[TickerPeriods(ticker="ACME", periods=["2024_q3", "2025_q1"])])
    assert evaluation_scopes(st, ["ACME:2024_q3"]) == ["ACME:2024_q3", "ACME:2025_q1"]
    many = [f"T{i}:2024_q4" for i in range(MAX_EVAL_SCOPES)] + ["news"]
    assert evaluation_scopes(st, many) == sorted({"ACME", *(f"T{i}" for i in range(MAX_EVAL_SCOPES))})
    assert evaluation_scopes(state(), []) == ["all"]


# ----- the search plan -----

def test_the_search_plan_uses_each_companys_own_periods():
    sp = plan_search(plan(tickers=["ACME", "BETA"], time_refs=["last 2 quarters"]), AVAILABILITY)
    assert [(tp.ticker, tp.periods) for tp in sp.transcripts] == [("ACME", ["2024_q4", "2025_q1"]),
                                                                  ("BETA", ["2024_q4", "2025_q1"])]
    assert len(search_specs(sp, ["a", "b"])) == 8  # phrase x company x quarter


def test_broad_window_widens_and_10k_years_follow_the_question():
    current = plan_search(plan(time_refs=["latest quarter"]), AVAILABILITY)
    wider = plan_search(plan(time_refs=["latest quarter"]), AVAILABILITY, "broad_window", current=current)
    assert wider.transcripts[0].periods == ["2024_q2", "2024_q3", "2024_q4", "2025_q1"] and router.widens(current, wider)
    every = plan_search(plan(time_refs=["last 4 quarters"]), AVAILABILITY)  # all ACME has: nothing wider exists
    assert not router.widens(every, plan_search(plan(), AVAILABILITY, "broad_window", current=every))
    sp = plan_search(plan(time_refs=["fiscal 2024"], data_sources=["10k"]), AVAILABILITY)
    assert sp.transcripts == [] and sp.tenk == [TickerPeriods(ticker="ACME", periods=["FY2024"])]
    assert plan_search(plan(tickers=["BETA"], needs_10k=True), AVAILABILITY).problems == ["no filing is ingested for BETA"]
    assert plan_search(plan(time_refs=[], answer_mode="direct"), AVAILABILITY).transcripts[0].periods == ["2025_q1"]


def test_compression_keeps_the_newest_evidence_and_lists_what_it_summarised():
    from agent.work.answering import compress

    old = [ev(i, "x" * 900, 0.9).model_copy(update={"iteration": 1}) for i in range(1, 6)]
    new = [ev(i, "y" * 900, 0.1).model_copy(update={"iteration": 2}) for i in range(6, 9)]
    packed = compress(old + new, max_tokens=1000)  # 4,000 characters: four passages
    assert sorted(e.chunk_id for e in packed.kept) == [1, 6, 7, 8]  # the newest, then the best of the older
    assert packed.summarised == [f"transcript:{i}" for i in (2, 3, 4, 5)] and packed.summary.startswith("4 lower-ranked")


def test_compression_keeps_the_passages_the_answer_cites_before_newer_ones():
    """A round's new evidence does not push out what the current answer stands on: its cited passages stay verbatim,
    whatever their round, and the newest fill the rest of the budget."""
    from agent.work.answering import compress

    old = [ev(i, "x" * 900, 0.9).model_copy(update={"iteration": 1}) for i in range(1, 6)]
    new = [ev(i, "y" * 900, 0.1).model_copy(update={"iteration": 2}) for i in range(6, 11)]
    packed = compress(old + new, max_tokens=1000, cited={"transcript:4", "transcript:5"})  # room for four
    assert sorted(e.chunk_id for e in packed.kept) == [4, 5, 6, 7]
    assert "transcript:4" not in packed.summarised and len(packed.summarised) == 6


def test_a_company_with_filings_and_no_calls_is_searched_in_its_filings():
    from agent.pipeline.inputs import Availability

    filings_only = Availability(transcripts={}, tenk={"ACME": quarters("FY2024")}, names={"ACME": "Acme Corp"})
    sp = plan_search(plan(time_refs=["fiscal 2024"]), filings_only)
    assert sp.transcripts == [] and sp.tenk == [TickerPeriods(ticker="ACME", periods=["FY2024"])]
    assert sp.problems == ["no earnings-call transcripts are ingested for ACME; searching its filings"]
    nothing = Availability(transcripts={}, tenk={}, names={"ACME": "Acme Corp"})
    assert plan_search(plan(), nothing).problems == ["no earnings-call transcripts are ingested for ACME"]


def test_a_quarterly_filing_is_its_fiscal_years_filing():
    """A company whose only filing of a year is a 10-Q or an earnings release is still read: every form's fiscal years
    are what the filings agent has, and a quarter the question names picks its year."""
    from agent.models.corpus import Period
    from agent.pipeline.inputs import Availability
    from agent.work.planning import filing_years

    years = filing_years([Period.parse_key("2021_q1"), Period.parse_key("2021_q3"), Period.parse_key("FY2022")])
    assert [p.key for p in years] == ["FY2021", "FY2022"]
    quarterly = Availability(transcripts={}, tenk={"ACME": years}, names={"ACME": "Acme Corp"})
    sp = plan_search(plan(time_refs=["Q1 2021"]), quarterly)
    assert sp.tenk == [TickerPeriods(ticker="ACME", periods=["FY2021"])]
