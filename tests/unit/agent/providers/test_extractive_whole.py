"""The whole-answer evaluation offline and online: the extractive evaluator judges what only the whole answer shows
(every company and period the question sets side by side states the asked figure, like against like), the OpenAI
evaluator is told to, and a provider says whether it can rework an answer from feedback. Made-up companies."""
from __future__ import annotations

from agent.models.corpus import Company
from agent.models.research import Answer, Evidence
from agent.providers.llm.cache import CachedProvider
from agent.providers.llm.extractive import ExtractiveProvider
from agent.providers.llm.extractive_figures import FROM_PROSE
from agent.providers.llm.extractive_judge import answer_sides, asks_comparison
from agent.providers.llm.prompts import evaluate_messages
from agent.providers.llm.roles import EvaluateRequest, PlanRequest, revises_answers

COMPANIES = [Company(ticker="ACME", name="Acme Widgets"), Company(ticker="BRCH", name="Birch Tools")]
ACME_Q1 = "Total revenue was $745 million."
ACME_Q2 = "Total revenue was $812 million, up 9% from a year ago."
ACME_Q2_CHANGE = "Total revenue grew 9% from the prior quarter."
BRCH_Q2 = "Total revenue was $640 million in the quarter."


def ev(i: int, ticker: str, quarter: int, text: str) -> Evidence:
    return Evidence(source_type="transcript", chunk_id=i, ticker=ticker, fiscal_year=2023, fiscal_quarter=quarter, text=text,
                    score=0.5, iteration=1)


def judge(question: str, lines: dict[str, dict[str, tuple[int, str]]], scope: str = "whole",
          targets: dict[str, list[str]] | None = None):
    """Evaluate an answer arranged as the extractive compose writes it: `lines` is ticker -> period -> (quarter, text);
    the targeted periods are those, unless given."""
    plan, _ = ExtractiveProvider().plan(PlanRequest(question=question, companies=COMPANIES))
    evidence, rows = [], []
    for ticker, periods in lines.items():
        rows.append(f"**{ticker}**")
        for label, (quarter, text) in periods.items():
            evidence.append(ev(len(evidence) + 1, ticker, quarter, text))
            rows.append(f"- {label}: {text} [{len(evidence)}]")
    if targets is None:  # every company asked about, its quarter targeted
        targets = {t: list(lines.get(t, {"Q2 2023": None})) for t in plan.tickers}
    req = EvaluateRequest(question=question, plan=plan, answer=Answer(text="\n".join(rows)), scope=scope, evidence=evidence,
                          markers={e.citation_key: f"[{i}]" for i, e in enumerate(evidence, 1)}, periods=targets)
    return ExtractiveProvider().evaluate(req)[0]


COMPARE = "How did ACME's revenue in Q2 2023 compare with BRCH's?"
CHANGE = "How did ACME's revenue change from Q1 2023 to Q2 2023?"


def test_a_comparison_that_states_both_sides_is_whole():
    both = judge(COMPARE, {"ACME": {"Q2 2023": (2, ACME_Q2)}, "BRCH": {"Q2 2023": (2, BRCH_Q2)}})
    assert both.is_sufficient and both.missing_info == [] and both.completeness_score == FROM_PROSE[0]


def test_a_comparison_missing_a_side_is_half_answered_though_its_one_side_is_right():
    one_side = {"ACME": {"Q2 2023": (2, ACME_Q2)}}
    whole = judge(COMPARE, one_side)
    assert whole.completeness_score <= 50 and not whole.is_sufficient
    assert whole.missing_info[0] == "the comparison lacks BRCH: nothing on 'revenue'"
    assert "revenue results" in whole.followup_keywords
    part = judge(COMPARE, one_side, scope="ACME:2023_q2", targets={"ACME": ["Q2 2023"]})  # right on its own
    assert part.completeness_score == FROM_PROSE[0] and whole.overall_confidence < part.overall_confidence


def test_a_change_across_periods_is_read_from_both_ends_like_against_like():
    levels = judge(CHANGE, {"ACME": {"Q1 2023": (1, ACME_Q1), "Q2 2023": (2, ACME_Q2)}})
    assert levels.is_sufficient and levels.completeness_score == FROM_PROSE[0]  # two levels: the change can be read off
    # each quarter on its own is asked for the change, which no one quarter states
    per_period = judge(CHANGE, {"ACME": {"Q1 2023": (1, ACME_Q1), "Q2 2023": (2, ACME_Q2)}}, scope="all")
    assert per_period.completeness_score < 100 and levels.overall_confidence > per_period.overall_confidence
    mixed = judge(CHANGE, {"ACME": {"Q1 2023": (1, ACME_Q1), "Q2 2023": (2, ACME_Q2_CHANGE)}})
    assert mixed.issues[0] == "the comparison sets a change (ACME Q2 2023) against a level (ACME Q1 2023)"
    assert mixed.completeness_score <= 50 and not mixed.is_sufficient
    one_end = judge(CHANGE, {"ACME": {"Q2 2023": (2, ACME_Q2)}}, targets={"ACME": ["Q1 2023", "Q2 2023"]})
    assert one_end.missing_info[0] == "the change across periods lacks ACME Q1 2023: nothing on 'revenue'"
    assert one_end.followup_keywords[0] == "revenue Q1 2023" and not one_end.is_sufficient


def test_what_the_whole_sets_side_by_side():
    blocks = {"ACME": {"Q1 2023": ["a"], "Q2 2023": ["b"]}, "BRCH": {"Q2 2023": ["c"]}}
    sides = answer_sides(COMPARE, "revenue", ["ACME", "BRCH"], {"ACME": ["Q2 2023", "Q1 2023"]}, blocks)
    assert [(s.name, s.statements) for s in sides] == [("ACME", ["a", "b"]), ("BRCH", ["c"]), ("ACME Q1 2023", ["a"]),
                                                       ("ACME Q2 2023", ["b"])]
    # one company, one question about a level in each period: nothing to set side by side
    assert answer_sides("What was ACME's revenue in Q1 and Q2 2023?", "revenue", ["ACME"],
                        {"ACME": ["Q1 2023", "Q2 2023"]}, blocks) == []
    assert asks_comparison("Which of the two grew faster, ACME versus BRCH?") and not asks_comparison("What was revenue?")


def test_a_question_with_nothing_side_by_side_is_judged_whole_as_all_of_it():
    q = "What was ACME's revenue in Q2 2023?"
    lines = {"ACME": {"Q2 2023": (2, ACME_Q2)}}
    whole, everything = judge(q, lines), judge(q, lines, scope="all")
    assert whole.model_dump(exclude={"scope"}) == everything.model_dump(exclude={"scope"})


def test_the_openai_evaluator_is_asked_to_judge_the_whole():
    plan, _ = ExtractiveProvider().plan(PlanRequest(question=COMPARE, companies=COMPANIES))
    req = EvaluateRequest(question=COMPARE, plan=plan, answer=Answer(text="ACME $812M [1]; BRCH $640M [2]"), scope="whole",
                          evidence=[], markers={})
    system, user = (m["content"] for m in evaluate_messages(req))
    assert "judges the answer as a whole" in system and "states both sides" in system
    assert "Evaluate the whole answer, across every company and period it covers." in user
    scoped = evaluate_messages(req.model_copy(update={"scope": "ACME:2023_q2"}))
    assert "as a whole" not in scoped[0]["content"] and "only the part of the answer about ACME:2023_q2" in scoped[1]["content"]


def test_a_provider_says_whether_it_can_rework_an_answer_from_feedback():
    class Model:
        name = "model"

    assert not revises_answers(ExtractiveProvider()) and revises_answers(Model())
    assert not revises_answers(CachedProvider(ExtractiveProvider(), redis=None, ttl_s=60))  # a wrapper passes it through
