"""The extractive provider judges substance: a reported figure wins over a forecast when the question asks what
something was, and the evaluator scores a right answer above a wrong-period, wrong-figure, forecast-as-result or
segment-as-total one. Made-up company and sentences."""
from __future__ import annotations

import pytest

from agent.models.corpus import Company
from agent.models.research import Answer, Evidence
from agent.providers.llm.extractive import ExtractiveProvider
from agent.providers.llm.extractive_judge import problems, question_parts
from agent.providers.llm.extractive_rules import asks_outlook, is_forward_looking, other_period
from agent.providers.llm.roles import EvaluateRequest, ExtractRequest, PlanRequest

RESULT = ("Mary Major -- Chief Financial Officer: Thanks. Turning to the quarter, total revenue was $812 million, up 9% "
          "from a year ago and above our outlook of $790 million. Operating margin was 14.2%.")
OUTLOOK = ("Mary Major -- Chief Financial Officer: Looking ahead, total revenue is expected to be $850 million, plus or "
           "minus 2%. We anticipate operating margin of about 15%.")
SEGMENT = ("Mary Major -- Chief Financial Officer: Starting with Industrial Products. Revenue of $301 million was up 4% "
           "sequentially, on steady orders.")
OTHER_PERIOD = ("Mary Major -- Chief Financial Officer: For the full year, total revenue was $3.1 billion, a record.")


def ev(i: int, text: str, score: float) -> Evidence:
    return Evidence(source_type="transcript", chunk_id=i, ticker="ACME", fiscal_year=2023, fiscal_quarter=2, text=text,
                    semantic=score, keyword=score, score=score, iteration=1, query="revenue")


def plan_for(question: str):
    plan, _ = ExtractiveProvider().plan(PlanRequest(question=question, companies=[Company(ticker="ACME", name="Acme Widgets")]))
    return plan


def test_tense_and_period_vocabulary():
    assert is_forward_looking("Total revenue is expected to be $850 million.")
    assert is_forward_looking("We anticipate operating margin of about 15%.")
    assert not is_forward_looking("Total revenue was $812 million, above our outlook of $790 million.")
    assert not is_forward_looking("Earnings per share came in better than expected at $1.10.")
    assert asks_outlook("What revenue outlook did ACME give in Q2 2023?") and not asks_outlook("What was ACME's revenue in Q2 2023?")
    assert other_period("For the full year, revenue was $3.1 billion.", 2023, 2) == "full year"
    assert other_period("Revenue was $812 million in the second quarter, compared with $745 million in the second quarter of 2022.",
                        2023, 2) is None
    assert other_period("Fourth quarter revenue was $900 million.", 2023, 2) == "fourth quarter"


def test_problems_of_a_statement():
    q = "What was ACME's revenue in Q2 2023?"
    assert problems("Total revenue was $812 million.", q, (2023, 2)) == []
    assert problems("Total revenue is expected to be $850 million.", q, (2023, 2)) == ["an outlook, not the reported figure"]
    assert problems("For the full year, total revenue was $3.1 billion.", q, (2023, 2)) == ["about full year, not Q2 2023"]
    assert problems("Industrial Products: Revenue of $301 million.", q, (2023, 2)) == ["a figure for Industrial Products, not the total"]
    assert problems("Total revenue was $812 million.", "What revenue outlook did ACME give in Q2 2023?", (2023, 2)) == [
        "a reported figure, not the outlook"]


def test_question_parts_name_the_metric():
    parts = question_parts("What was ACME's net interest margin in Q2 2023?", "net interest margin")
    metric = [p for p in parts if p.name == "net interest margin"]
    assert metric and metric[0].need == 2 and metric[0].numeric


@pytest.mark.parametrize("scores", [(0.2, 0.9), (0.9, 0.2)])
def test_a_reported_figure_leads_over_the_outlook_whatever_the_search_scores(scores):
    q = "What was ACME's revenue last quarter?"
    evidence = [ev(1, RESULT, scores[0]), ev(2, OUTLOOK, scores[1])]
    req = ExtractRequest(question=q, reasoning=plan_for(q).reasoning, scope="ACME:2023_q2", evidence=evidence,
                         markers={e.citation_key: f"[{i}]" for i, e in enumerate(evidence, 1)})
    findings, _ = ExtractiveProvider().extract(req)
    assert findings.findings[0].text.startswith("Turning to the quarter, total revenue was $812 million")


def test_an_outlook_question_leads_with_the_outlook():
    q = "What revenue outlook did ACME give in Q2 2023?"
    evidence = [ev(1, RESULT, 0.9), ev(2, OUTLOOK, 0.2)]
    req = ExtractRequest(question=q, reasoning=plan_for(q).reasoning, scope="ACME:2023_q2", evidence=evidence,
                         markers={e.citation_key: f"[{i}]" for i, e in enumerate(evidence, 1)})
    findings, _ = ExtractiveProvider().extract(req)
    assert "expected to be $850 million" in findings.findings[0].text


def confidence(question: str, lead: str, cited: Evidence) -> float:
    answer = Answer(text=f"**ACME**\n- Q2 2023: {lead} [1]")
    req = EvaluateRequest(question=question, plan=plan_for(question), answer=answer, scope="ACME:2023_q2", evidence=[cited],
                          markers={cited.citation_key: "[1]"}, periods={"ACME": ["Q2 2023"]})
    evaluation, _ = ExtractiveProvider().evaluate(req)
    return evaluation.overall_confidence


def test_the_evaluator_scores_a_right_answer_above_each_kind_of_wrong_one():
    q = "What was ACME's revenue in Q2 2023?"
    right = confidence(q, "Turning to the quarter, total revenue was $812 million, up 9% from a year ago.", ev(1, RESULT, 0.5))
    wrong = {
        "guidance as reported": confidence(q, "Looking ahead, total revenue is expected to be $850 million, plus or minus 2%.",
                                           ev(2, OUTLOOK, 0.5)),
        "wrong period": confidence(q, "For the full year, total revenue was $3.1 billion, a record.", ev(3, OTHER_PERIOD, 0.5)),
        "segment as total": confidence(q, "Industrial Products: Revenue of $301 million was up 4% sequentially.", ev(4, SEGMENT, 0.5)),
        "figure not in its source": confidence(q, "Turning to the quarter, total revenue was $821 million.", ev(1, RESULT, 0.5)),
        "wrong metric": confidence(q, "Operating margin was 14.2%.", ev(1, RESULT, 0.5)),
    }
    assert right >= 0.9
    for kind, value in wrong.items():
        assert value < 0.7 <= right, (kind, value, right)  # below even the direct mode's threshold


def test_a_right_outlook_answer_scores_high():
    q = "What revenue outlook did ACME give in Q2 2023?"
    assert confidence(q, "Looking ahead, total revenue is expected to be $850 million, plus or minus 2%.", ev(2, OUTLOOK, 0.5)) >= 0.9
    assert confidence(q, "Turning to the quarter, total revenue was $812 million.", ev(1, RESULT, 0.5)) < 0.7


def test_another_measure_built_on_the_metric_is_not_the_metric():
    from agent.providers.llm.extractive_judge import metric_stems, states_metric

    nim = metric_stems("net interest margin")
    assert states_metric("Net interest margin was 3.41% for the quarter.", nim, 2)
    assert not states_metric("Net interest income was $212 million for the quarter.", nim, 2)  # another metric
    sales = metric_stems("sales")
    assert states_metric("Total sales were $1.9 billion.", sales, 1)
    assert not states_metric("Sales per location were $1.2 million.", sales, 1)  # a per-unit measure
    margin = metric_stems("operating margin")
    assert not states_metric("Store-level operating margin was 18.2%.", margin, 2)  # a level below the company
    loans = metric_stems("total loans")
    assert states_metric("Total loans were $9.8 billion at quarter end.", loans, 1)
    assert not states_metric("Total loan growth of 6% was led by commercial lending.", metric_stems("total loan"), 1)


def test_a_question_in_the_transcript_and_a_should_are_not_reported_results():
    q = "What was ACME's net interest margin in Q2 2023?"
    assert "a question, not a statement" in problems("Was net interest margin 3.4% this quarter?", q, (2023, 2))
    assert "a hypothetical, not a reported figure" in problems("If the margin ran at 3%, we would still earn our dividend.", q, (2023, 2))
    assert not problems("Net interest margin was 3.4%, even if deposit costs rise.", q, (2023, 2))
    assert is_forward_looking("Net interest income should increase modestly next year.")
    assert not is_forward_looking("We should note that revenue was $812 million.")


@pytest.mark.parametrize("metric, sentence, stated", [
    ("total deposits", "Total deposits were $14.2 billion at quarter end.", True),
    ("total deposits", "Brokered deposits were 12% of total deposits.", False),  # a share, not the amount
    ("revenue", "Services now make up 31% of our total revenue.", False),
    ("loans", "The loan yield was 4.12% for the quarter.", False),  # another measure of loans
    ("loans", "Mortgage loan originations reached $2.4 billion in the quarter.", False),  # a flow, not the balance
    ("loans", "Loan production was a record $1.8 billion.", False),
    ("sales", "Unit volumes rose and comparable sales increased 4.1%, with average check of $21.50 and sales per store"
              " of $1.3 million.", False),  # a comparable-unit rate, a per-unit amount
    ("revenue", "Shops averaged $58,000 and same-store sales fell 3.2%.", False),  # the $ belongs to another clause
    ("revenue", "We delivered $640 million in total revenue this quarter.", True),
    ("ebitda", "EBITDA was up a strong 9% versus last year.", False),  # a change, and a percent
    ("operating margin", "Operating margin was 22.5% in the quarter.", True),
    ("operating margin", "Operating margin was $410 million, we think.", False),  # an amount is not a margin
    ("effective tax rate", "The effective tax rate was 19% for the quarter.", True),
    ("occupancy", "Occupancy was 81% across the portfolio.", True),
    ("revenue run rate", "Our revenue run rate now exceeds $3 billion.", True),  # "rate" alone does not say
])
def test_a_figure_of_the_wrong_kind_does_not_state_the_metric(metric, sentence, stated):
    from agent.providers.llm.extractive_judge import metric_stems, states_metric, stems

    words = metric_stems(metric)
    assert states_metric(sentence, words, max(1, -(-2 * len(words) // 3))) is stated, stems(sentence)


def test_a_change_question_takes_a_percent_of_an_amount_metric():
    from agent.providers.llm.extractive_judge import metric_stems, states_metric

    assert states_metric("Revenue grew 12% year over year.", metric_stems("revenue"), 1, change_ok=True)
