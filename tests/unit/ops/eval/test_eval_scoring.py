"""The answer scorer on made-up figures and phrasings (none taken from the evaluation data)."""
from __future__ import annotations

import pytest

from ops.eval.scoring import _FIGURE, declared_scale, figures, gold_kind, score_answer, stated_figures


def _texts(text: str) -> list[str]:
    return [f.text for f in figures(text)]


# ---------- reading figures ----------
@pytest.mark.parametrize("text, number, scale, unit", [
    ("$4.7B", 4.7, 1e9, "money"),
    ("3,150 million", 3150, 1e6, "plain"),
    ("US$ 12.5 bn", 12.5, 1e9, "money"),
    ("USD 640 thousand", 640, 1e3, "money"),
    ("27%", 27, None, "percent"),
    ("27 percent", 27, None, "percent"),
    ("0.27", 0.27, None, "plain"),
    ("(3.4)", -3.4, None, "plain"),
    ("(3.4)%", -3.4, None, "percent"),
    ("$(0.12)", -0.12, None, "money"),
    ("($2.1 bn)", 2.1, 1e9, "money"),  # an aside, not a negative
    ("(41%)", 41, None, "percent"),
    ("($1,020)", -1020, None, "money"),
    ("-0.07", -0.07, None, "plain"),
    ("$-15 million", -15, 1e6, "money"),
    ("2.35x", 2.35, None, "plain"),
    ("4.1 times", 4.1, None, "plain"),
    ("$88mm", 88, 1e6, "money"),
    ("120 bps", 1.2, None, "percent"),
])
def test_a_figure_is_read_with_its_sign_scale_and_unit(text, number, scale, unit):
    [fig] = figures(f"It was {text} for the period.")
    assert (fig.number, fig.scale, fig.unit) == (pytest.approx(number), scale, unit)


@pytest.mark.parametrize("text", [
    "In fiscal 2031 the plan changed.", "FY2027 and FY 2026 results", "Q3 and 4Q29 and H2", "as cited [3] and [10K2]",
    "the 10-K for the year", "see Item 8 and Note 14 on page 61", "as of September 30, 2029", "a 5-year plan",
    "a 4 year average", "round to two decimal places", "3M and 10K are names", "Metric 2 and Table 4",
])
def test_labels_years_markers_dates_and_counts_are_not_figures(text):
    assert figures(text) == []


def test_per_share_and_decrease_are_noted():
    [eps] = figures("Diluted earnings per share were $3.05.")
    [fall] = figures("Operating margin fell 1.8% from the prior year.")
    assert eps.per_share and not fall.per_share and fall.decrease


def test_a_calculation_line_states_only_its_result():
    answer = "- Asset turnover (FY2030) = revenue / average assets = 7,200 / 5,000 = 1.44 [10K1]\n- Revenue: 7,200"
    assert [f.text for f in stated_figures(answer)] == ["1.44", "7,200"]


def test_numbers_echoed_from_the_question_are_not_stated():
    question = "What is the 3 year average of the 12 stores' margin?"
    assert [f.text for f in stated_figures("Over 3 periods and 12 stores the margin was 8.1%.", question)] == ["8.1%"]


@pytest.mark.parametrize("text, scale", [
    ("Answer in USD millions.", 1e6), ("(in thousands, except per share data)", 1e3), ("dollars in billions", 1e9),
    ("Give the figure in units of millions", 1e6), ("What was revenue?", None),
])
def test_declared_scale(text, scale):
    assert declared_scale(text) == scale


# ---------- the verdict on a bare figure ----------
@pytest.mark.parametrize("gold, answer", [
    ("$4.2B", "Net sales were 4,200 million dollars [1]."),
    ("$4.2B", "Net sales were $4,213 million."),  # within 1%
    ("4,200 million", "about $4.2 billion"),
    ("27%", "The ratio was 0.27."),
    ("0.27", "The ratio was 27%."),
    ("0.4%", "Growth came to 0.43% a year."),  # rounds to the gold's precision
    ("-0.05", "The change was (0.05)."),
    ("-2.1%", "Margin declined 2.1% year over year."),
    ("$3.46", "Diluted EPS of $3.46 per share."),
    ("1.85", "Coverage = 740 / 400 = 1.85"),
    ("~31%", "roughly 30.8 percent"),
    ("$0", "The company paid $0 in dividends."),
])
def test_a_bare_figure_matches_its_equivalents(gold, answer):
    s = score_answer("What was the value?", gold, answer)
    assert (s.correct, s.method) == (True, "numeric"), s


def test_the_question_declares_the_scale_of_a_bare_gold():
    q = "What were total liabilities at year end (answer in USD millions)?"
    assert score_answer(q, "$5310.00", "Total liabilities were $5.31 billion.").correct is True
    assert score_answer(q, "$5310.00", "Total liabilities: 2030: 5,310; 2029: 4,980").correct is True
    assert score_answer(q, "$5310.00", "Total liabilities were $5.31 million.").correct is False


def test_the_answer_declares_the_scale_of_its_table():
    q = "What were total liabilities at year end?"
    assert score_answer(q, "$5.31 billion", "(in millions) Total liabilities: 5,310").correct is True


@pytest.mark.parametrize("gold, answer", [
    ("$4.2B", "Net sales were $4.3 billion."),  # 2.4% off
    ("27%", "The margin was 2.7%."),
    ("-0.05", "The change was 0.05."),  # a sign lost without a word of decrease
    ("$3.46", "Revenue grew 3.46%."),  # money is no percentage
    ("0.4%", "Growth came to 0.46%."),
    ("12.5", "Years 2030 and 2029 and Q3 and FY2028 [12]"),  # only labels and markers
])
def test_a_bare_figure_does_not_match_another(gold, answer):
    assert score_answer("What was the value?", gold, answer).correct is False


def test_an_answer_with_no_figure_or_no_text_is_wrong():
    assert score_answer("What was it?", "$12.00", "The filing does not say.").reason == "the answer states no figure"
    assert score_answer("What was it?", "$12.00", "").method == "no_answer"
    assert score_answer("What was it?", "$12.00", None).correct is False


# ---------- prose golds ----------
def test_a_prose_gold_needs_every_figure():
    gold = "It rose from 14.2% in FY2029 to 15.0% in FY2030."
    assert gold_kind(gold) == "figures"
    assert score_answer("Did the margin improve?", gold, "Margin: FY2030 15.0%; FY2029 14.2%").correct is True
    partial = score_answer("Did the margin improve?", gold, "Margin was 15.0% in FY2030 and 13.1% before.")
    assert partial.correct is None and partial.method == "unscored"


def test_yes_no_golds():
    assert gold_kind("Yes, the segment was sold.") == "yes_no"
    assert score_answer("Was it sold?", "Yes, the segment was sold.", "No. It was kept.").correct is False
    assert score_answer("Was it sold?", "Yes, the segment was sold.", "Yes: the segment was sold in March.").correct is True
    assert score_answer("Was it sold?", "Yes, the segment was sold.", "The segment's revenue grew.").correct is None
    # a yes/no gold with a figure: the opposite conclusion is wrong even with the right figure
    gold = "No, the ratio was 0.61, below one."
    assert score_answer("Is liquidity healthy?", gold, "Yes. The ratio was 0.61.").correct is False
    assert score_answer("Is liquidity healthy?", gold, "No. The ratio is 0.61.").correct is True
    assert score_answer("Is liquidity healthy?", gold, "The ratio is 0.61.").correct is None


def test_text_golds_need_their_content_words_and_are_never_failed_by_overlap():
    assert score_answer("Which line item?", "Deferred revenue", "The largest item is deferred revenue [2].").correct is True
    assert score_answer("Which line item?", "Deferred revenue", "Accrued wages are the largest.").correct is None


# ---------- a property of the real gold answers (no rule was written from them) ----------
def _moved(text: str) -> str:
    """Every figure moved by 10% (and at least one unit of its last digit), written at its own precision."""
    def move(m):
        n = m.group("num")
        decimals = len(n.partition(".")[2])
        value = float(n.replace(",", ""))
        value += max(0.1 * abs(value), 10 ** -decimals)
        return m.group().replace(n, f"{value:.{decimals}f}")
    return _FIGURE.sub(move, text)


def test_every_gold_matches_itself_and_never_its_figures_moved(shared_data):
    import json

    rows = [json.loads(line) for line in (shared_data / "financebench" / "questions_dev.jsonl").read_text().splitlines() if line.strip()]
    assert rows
    for row in rows:
        question, gold = row["question"], row["answer"]
        assert score_answer(question, gold, gold).correct is True, gold
        if figures(gold):
            assert score_answer(question, gold, _moved(gold)).correct is not True, (gold, _moved(gold))
