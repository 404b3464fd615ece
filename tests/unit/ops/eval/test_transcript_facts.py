"""The transcript-fact procedure and the answer judge, on made-up calls and answers (no sentence from the data)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.models.job import JobResult
from agent.models.research import Citation
from ops.eval.transcript_facts import Fact, extract_facts, facts_in_sentence, is_guidance, names_other_period, normalise_figure
from ops.eval.transcripts_eval import (
    AnswerRecord,
    auroc,
    chunk_states_fact,
    classify_failure,
    halves,
    judge_answer,
    statements,
    states_figure,
    summarise_answers,
)


@pytest.mark.parametrize("sentence, expected", [
    ("Total revenue was $812 million for the quarter.", [("revenue", "$812 million")]),
    ("Diluted earnings per share came in at $1.37.", [("earnings per share", "$1.37")]),
    ("Our net interest margin was 3.41%, down 6 basis points.", [("net interest margin", "3.41%")]),
    ("Adjusted EPS increased 7% to $2.15.", [("earnings per share", "$2.15")]),  # the level after "to"
    ("Revenue grew by $40 million.", []),  # a change, not the level
    ("Revenue increased 12% in the quarter.", []),
    ("Gross margin was 41.5% and 40.2% in the two divisions.", []),  # a list: which one is unclear
    ("Net income was $55 million and $61 million, respectively.", []),
    ("The effective tax rate was 21.4%, compared with 23.0% last year.", [("effective tax rate", "21.4%")]),
    ("We expect total revenue to be $900 million next quarter.", [("revenue", "$900 million")]),
    ("Book value per share rose to $41.20.", []),  # 'rose to' without the change: not a linking phrase
    ("Book value per share was $41.20, a new high.", [("book value per share", "$41.20")]),
    ("Revenue was $25 this quarter.", []),  # a bare dollar amount is neither a total nor per share
    ("We saw an increase in core deposits of $2 billion this quarter.", []),  # a change in the metric
    ("Other operating income was $9 million in the quarter.", []),  # a part of it
    ("Excluding one-time items, revenue was $500 million.", []),  # a variant
    ("Plant level gross margin was 31.2% in the quarter.", []),  # a level below the company
    ("We granted relief on about 450 loans totaling $88 million.", []),  # a count of loans, not the balance
    ("Total loans were $4.1 billion at quarter end.", [("loans", "$4.1 billion")]),
    ("Net charge-offs were 0.21% of loans, compared with net charge-offs of 0.40% a year ago.", [("net charge-offs", "0.21%")]),
])
def test_facts_in_sentence(sentence, expected):
    assert facts_in_sentence(sentence) == expected


def test_guidance_and_period_words():
    assert is_guidance("We expect revenue of about $900 million.")
    assert is_guidance("Operating expenses will total roughly $120 million.")
    assert not is_guidance("Revenue was $812 million, above our guidance of $790 million.")
    assert not is_guidance("EPS of $1.10 was better than expected.")
    assert names_other_period("For the full year, revenue was $3.1 billion.", 2023, 4)
    assert names_other_period("Revenue was $3.1 billion in 2023.", 2023, 4)  # a bare year is the whole year
    assert not names_other_period("Revenue was $812 million in the fourth quarter of 2023.", 2023, 4)
    assert not names_other_period("Revenue was $812 million, compared with $745 million in the fourth quarter of 2022.", 2023, 4)
    assert normalise_figure("$1,234.50 million") == "1234.5 million" and normalise_figure("3.20 percent") == "3.2%"


def call(tmp_path: Path, name: str, remarks: list[str], qa: list[str] | None = None) -> Path:
    data = {"header_texts": [], "participants": [],
            "prepared_remarks": [{"speaker": "Operator", "speech": "Welcome. Revenue was $1 billion for the quarter, says the operator."}]
            + [{"speaker": "Pat Chief--CFO", "speech": s} for s in remarks],
            "q_and_a": [{"speaker": "Sam Analyst", "speech": s} for s in qa or []]}
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def made_up_calls(tmp_path: Path) -> list[Path]:
    return [
        call(tmp_path, "ACME_2023_q2.json", ["Total revenue was $812 million for the quarter. Operating margin was 14.2% in the quarter.",
                                             "We expect revenue to be $850 million next quarter. Our industrial segment revenue was $300 million."],
             qa=["So revenue was $999 million, right? Net income was $77 million, I think."]),
        call(tmp_path, "ACME_2023_q3.json", ["Net income was $61 million this quarter. Later I said net income was $64 million."]),
        call(tmp_path, "BOLT_2024_q1.json", ["Diluted earnings per share was $0.42 in the quarter.",
                                             "Total deposits were $5.2 billion at the end of the quarter."]),
    ]


def test_extraction_keeps_management_remarks_drops_ambiguity_and_samples_every_ticker(tmp_path):
    ex = extract_facts(made_up_calls(tmp_path), per_ticker=10, seed=1)
    got = {(f.ticker, f.period_label, f.metric, f.figure, f.kind) for f in ex.facts}
    assert got == {
        ("ACME", "Q2 2023", "revenue", "$812 million", "reported"),
        ("ACME", "Q2 2023", "operating margin", "14.2%", "reported"),
        ("ACME", "Q2 2023", "revenue", "$850 million", "guidance"),
        ("BOLT", "Q1 2024", "earnings per share", "$0.42", "reported"),
        ("BOLT", "Q1 2024", "deposits", "$5.2 billion", "reported"),
    }  # no operator, no analyst, no segment; ACME Q3's two net incomes disagree: ambiguous
    assert ex.ambiguous_groups == 1 and ex.calls == 3
    assert all(f.question.startswith("What") and f.sentence not in f.question for f in ex.facts)


def test_a_past_figure_in_an_outlook_sentence_is_not_guidance(tmp_path):
    path = call(tmp_path, "ACME_2023_q4.json", ["We expect our effective tax rate next year to be a little higher than our 2023 "
                                                "effective tax rate of 21.5%.", "We expect our effective tax rate to be about 23% next year."])
    assert [(f.figure, f.kind) for f in extract_facts([path]).facts] == [("23%", "guidance")]


def test_sampling_is_reproducible_and_spread_over_tickers(tmp_path):
    files = made_up_calls(tmp_path)
    once, again = extract_facts(files, per_ticker=1, seed=7), extract_facts(list(reversed(files)), per_ticker=1, seed=7)
    assert once.facts == again.facts
    assert sorted(f.ticker for f in once.facts) == ["ACME", "BOLT"]


def fact(kind: str = "reported", figure: str = "$812 million", metric: str = "revenue") -> Fact:
    return Fact(id="ACME_2023_q2:1:0", ticker="ACME", fiscal_year=2023, fiscal_quarter=2, speaker="Pat Chief",
                sentence=f"Total {metric} was {figure} for the quarter.", figure=figure, metric=metric, kind=kind)  # type: ignore[arg-type]


CHUNK = "Pat Chief: Total revenue was $812 million for the quarter. We expect revenue to be $850 million next quarter."


def result(answer: str, period: str = "Q2 2023", text: str = CHUNK, confidence: float = 0.9) -> JobResult:
    return JobResult(job_id="j", question="q", status="completed", answer=answer, provider="extractive", confidence=confidence,
                     citations=[Citation(marker="[1]", source_type="transcript", ticker="ACME", period=period, text=text,
                                         citation_key="transcript:1")])


def test_figures_and_chunks():
    assert states_figure("sales of $0.812 billion", "$812 million") and not states_figure("$812 thousand", "$812 million")
    assert states_figure("margin of 14.20%", "14.2%") and not states_figure("$14.2 million", "14.2%")
    assert chunk_states_fact("Pat Chief: Total   revenue was\n$812 million for the quarter. More.", fact())
    assert not chunk_states_fact("Total revenue was $790 million for the quarter.", fact())


def test_statements_follow_their_company_and_period():
    answer = "**ACME**\n- Q2 2023: Revenue was $812 million. [1] Margin was 14.2%. [2]\n**BOLT**\n- Q1 2024: Deposits were up. [3]"
    sts = statements(answer, "ACME")
    assert [(s.label, s.text, s.markers) for s in sts] == [("Q2 2023", "Revenue was $812 million.", ["[1]"]),
                                                          ("Q2 2023", "Margin was 14.2%.", ["[2]"])]


def test_judging_answers_and_failure_kinds():
    right = judge_answer(fact(), result("**ACME**\n- Q2 2023: Total revenue was $812 million for the quarter. [1]"))
    assert right.correct and right.failure_kind is None
    guided = judge_answer(fact(), result("**ACME**\n- Q2 2023: We expect revenue to be $850 million next quarter. [1] "
                                         "Total revenue was $812 million for the quarter. [1]"))
    assert not guided.correct and guided.stated_anywhere and guided.failure_kind == "guidance_as_reported"
    other = judge_answer(fact(), result("**ACME**\n- Q1 2023: Total revenue was $790 million for the quarter. [1]", period="Q1 2023",
                                        text="Total revenue was $790 million for the quarter."))
    assert other.failure_kind == "wrong_period"
    assert judge_answer(fact(), result("**ACME**\n- Q2 2023: Industrial Products: Revenue of $300 million. [1]")).failure_kind == "segment_as_total"
    assert judge_answer(fact(), result("**ACME**\n- Q2 2023: Operating margin was 14.2%. [1]")).failure_kind == "wrong_metric"
    assert judge_answer(fact(), result("**ACME**\n- Q2 2023: Total revenue rose in the quarter. [1]")).failure_kind == "figure_missing"
    assert judge_answer(fact(), None).failure_kind == "no_answer"
    outlook = fact(kind="guidance", figure="$850 million")
    assert judge_answer(outlook, result("**ACME**\n- Q2 2023: Total revenue was $812 million for the quarter. [1]")).failure_kind \
        == "reported_as_guidance"
    # a figure the cited chunk does not hold is not a right answer, even when it is the fact's
    assert not judge_answer(fact(), result("**ACME**\n- Q2 2023: Total revenue was $812 million. [1]", text="Revenue rose.")).correct


def test_classify_failure_order():
    from ops.eval.transcripts_eval import Statement

    lead = Statement(label="Q2 2023", text="For the full year, revenue was $3.1 billion.", markers=["[1]"])
    assert classify_failure(fact(), lead, ["Q2 2023"]) == "wrong_period"
    assert classify_failure(fact(), lead, ["Q1 2023"]) == "wrong_period"
    assert classify_failure(fact(), None, []) == "no_answer"


def test_summaries_and_separation():
    assert auroc([0.9, 0.8], [0.5, 0.8]) == 0.875 and auroc([], [0.1]) is None
    recs = [AnswerRecord(id=str(i), mode="direct", confidence=c, correct=ok, iterations=1, early_terminated=ok,
                         failure_kind=None if ok else "wrong_metric") for i, (c, ok) in enumerate([(0.99, True), (0.6, False), (0.7, False)])]
    judged = [judge_answer(fact(), None)] * 3
    s = summarise_answers(recs, judged)
    assert s.correct_share == 0.333 and s.failures == {"wrong_metric": 2} and s.auroc == 1.0
    assert s.mean_confidence_right == 0.99 and s.mean_confidence_wrong == 0.65
    split = halves([fact(), fact().model_copy(update={"ticker": "BOLT"}), fact().model_copy(update={"ticker": "CRAB"})])
    assert [f.ticker for f in split["development"]] == ["ACME", "BOLT"] and [f.ticker for f in split["held_out"]] == ["CRAB"]


def test_the_command_refuses_bad_input_in_one_line(tmp_path):
    from ops.cli.main import app

    runner = CliRunner()
    missing = runner.invoke(app, ["eval", "transcripts", "--data", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "is not a directory" in missing.output
    (tmp_path / "ACME_2023_q2.json").write_text("{not json")
    broken = runner.invoke(app, ["eval", "transcripts", "--data", str(tmp_path)])
    assert broken.exit_code == 2 and "malformed JSON" in broken.output and len(broken.output.strip().splitlines()) == 1
