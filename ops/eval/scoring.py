"""Does an answer match a gold answer? Deterministic rules, conservative by design: a verdict is given only when
the rules can stand behind it, otherwise `correct` is None and the question is left to the LLM judge.

- Figures are read the way financial text writes them: "$1.2B", "1,200 million", "(2.5)" (negative), "-0.02",
  "35%", "0.35", "1.57x", "$8.70 per share". Years, period labels (FY2022, Q2, 2Q23), citation markers ([1], [10K2]),
  dates (June 30), counts of years ("3-year", "3 year average"), references (Item 7, Note 12, page 45) and numbers
  echoed from the question are not figures the answer states. In a calculation line ("... = 12 / 4 = 3.0") only the
  result is stated; the inputs are working.
- Two figures match within 1% relative, or when the answer's figure rounds to the gold's at the gold's own precision
  (gold "0.4%", answer "0.43%"). Scale is normalised (thousand / million / billion / trillion and their short forms,
  a scale the question or the answer declares: "in USD millions", "(in thousands)"); a percentage matches the same
  ratio ("35%" = "0.35"); per-share figures are never scaled. Signs must agree, except that an unsigned figure beside
  a word of decrease ("fell", "decline") matches a negative one.
- The kind of gold decides the rule: a bare figure ("10.3%", "$9068.00") is matched numerically; a gold with figures
  and prose needs every figure stated; a yes/no gold is wrong when the answer opens with the opposite; other text
  needs the gold's content words. Prose that cannot be checked this way is left unscored.

quantulum3 was tried for the figure reading and rejected: it reads "1.5bn" as barn-newtons and "2,500 mm" as
millimetres, drops the parentheses of a negative and returns years as quantities.
"""
from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Literal

from pydantic import BaseModel

from agent.text import content_words, stem

Unit = Literal["percent", "money", "plain"]
Method = Literal["numeric", "figures", "yes_no", "lexical", "no_answer", "unscored"]

TOLERANCE = 0.01  # relative

_SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "mm": 1e6, "m": 1e6, "mil": 1e6,
           "billion": 1e9, "bn": 1e9, "b": 1e9, "trillion": 1e12, "tn": 1e12, "t": 1e12}
_SCALE_WORDS = r"trillions?|billions?|millions?|thousands?|tn|bn|mn|mm|mil"
_FIGURE = re.compile(
    r"(?P<open>\()?"
    r"(?P<sign>(?<![\w.,])[-\u2212\u2013])?"
    r"(?P<cur>(?:US\$|USD|\$|\u20ac|\u00a3|EUR|GBP)\s?)?"
    r"(?P<open2>(?(cur)\(|(?!)))?"
    r"(?P<sign2>(?(cur)[-\u2212]|(?!)))?"
    r"(?P<num>(?<![\w.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.,])\d+(?:\.\d+)?|(?<![\w.,\d])\.\d+)"
    r"(?P<scale>\s?(?:" + _SCALE_WORDS + r")\b|(?(cur)[kKmMbBtT](?![A-Za-z])|(?!)))?"
    r"(?P<unit>\s?(?:%|percent(?:age points?)?\b|per\s?cent\b|pp\b|bps\b|basis points\b)|x(?![A-Za-z])|\s?times\b)?"
    r"(?P<close>\))?"
    r"(?P<unit_after>(?(close)%|(?!)))?",
    re.I,
)
_MONTH_DAY = re.compile(r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|"
                        r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?\s+\d{1,2}\b(?![.,]\d|\s*(?:%|percent|million|billion))", re.I)
_REFERENCE = re.compile(r"\b(?:item|note|notes|page|pages|part|section|exhibit|schedule|rule|form|level|tier|phase|table|figure|"
                        r"metric|step|appendix|chart)\s*$", re.I)
_COUNT_AFTER = re.compile(r"^(?:-[A-Za-z]|\s?(?:years?|months?|quarters?|weeks?|decimal places?|places?)\b)", re.I)
_PER_SHARE = re.compile(r"per\s+(?:basic\s+|diluted\s+|common\s+)*share|/share|\beps\b|earnings per share|dividends? (?:per share|of)", re.I)
_DECREASE = re.compile(r"\b(?:decreas\w*|declin\w*|drop\w*|fell|fall\w*|lower\w*|loss\w*|negative|down|shrank|shrink\w*|"
                       r"reduc\w*|contract\w*|deficit|outflow\w*)\b", re.I)
_DECLARED_SCALE = re.compile(
    r"(?:in|of)\s+(?:units of\s+)?(?:usd\s+|us\s+dollars?\s+|dollars?\s+|\$\s*)?(?P<a>" + _SCALE_WORDS + r")\b"
    r"|(?:usd|dollars?|\$)\s+in\s+(?P<b>" + _SCALE_WORDS + r")\b",
    re.I,
)
_POLARITY = re.compile(r"^\W*(?:\*\*)?\s*(?P<word>yes|no)\b", re.I)
_MARKER = re.compile(r"\[(?:10K|N)?\d+\]")


class Figure(BaseModel):
    """One figure as the text writes it."""

    text: str  # as written
    number: float  # the digits, signed, before any scale
    scale: float | None  # an explicit scale (1e6 for "million"); None when the text gives none
    unit: Unit
    decimals: int  # digits after the decimal point as written
    per_share: bool = False
    decrease: bool = False  # a word of decrease stands beside it
    start: int = 0


class Score(BaseModel):
    correct: bool | None  # None: the rules could not decide (the judge's, if one runs)
    method: Method
    reason: str
    gold_figures: list[str] = []
    matched: list[str] = []  # the answer's figures that matched a gold figure, as written
    answer_figures: int = 0  # figures the answer states: many make a chance match likelier


# ---------- reading figures ----------
def declared_scale(text: str) -> float | None:
    """A scale the text declares for its bare figures: "in USD millions", "(in thousands)", "dollars in billions"."""
    m = _DECLARED_SCALE.search(text)
    if not m:
        return None
    return _scale_of(m.group("a") or m.group("b"))


def _scale_of(word: str) -> float | None:
    word = word.strip().lower()
    return _SCALES.get(word, _SCALES.get(word.rstrip("s")))


def _blank(text: str, pattern: re.Pattern[str]) -> str:
    """The text with every match replaced by spaces of the same length (positions kept)."""
    return pattern.sub(lambda m: " " * len(m.group()), text)


def figures(text: str, exclude: set[float] | None = None) -> list[Figure]:
    """The figures the text states, in order; `exclude` holds numbers (as written, before scale) to leave out,
    e.g. those the question itself contains."""
    clean = _blank(_blank(text, _MARKER), _MONTH_DAY)
    out: list[Figure] = []
    for m in _FIGURE.finditer(clean):
        fig = _figure(m, clean)
        if fig is None or (exclude and fig.number in exclude and fig.unit == "plain" and fig.scale is None):
            continue
        out.append(fig)
    return out


def _figure(m: re.Match[str], text: str) -> Figure | None:
    raw_num = m.group("num")
    before = text[max(0, m.start() - 12):m.start()]
    scale_txt = (m.group("scale") or "").strip().lower()
    unit_txt = (m.group("unit") or "").strip().lower()
    cur = bool(m.group("cur"))
    if re.search(r"[A-Za-z']$", text[:m.start("num")][-1:] or "") and not cur:
        return None  # glued to a word: Q2, FY2022, H1, '23
    if _REFERENCE.search(before) and not cur:
        return None
    tail = text[m.end("num"):]
    if not scale_txt and not unit_txt and re.match(r"[A-Za-z]", tail):
        return None  # 2Q23, 10K, 1st
    if not unit_txt and not scale_txt and not cur and _COUNT_AFTER.match(tail):
        return None  # "3-year", "3 year average", "two decimal places"
    number = float(raw_num.replace(",", ""))
    decimals = len(raw_num.partition(".")[2])
    if (not cur and not scale_txt and not unit_txt and decimals == 0 and "," not in raw_num
            and 1900 <= number <= 2100):
        return None  # a year
    # "(1,806)", "$(0.12)", "(2.5)%" are negatives; "($1.8 bn)" and "(35%)" are asides in prose
    paren = bool(m.group("open") or m.group("open2")) and bool(m.group("close")) and not scale_txt and not unit_txt
    if m.group("unit_after"):
        unit_txt = "%"
    negative = paren or bool(m.group("sign")) or bool(m.group("sign2"))
    scale = _scale_of(scale_txt) if scale_txt else None
    unit: Unit = "percent" if unit_txt and unit_txt not in ("x", "times") and unit_txt not in ("bps", "basis points") else "plain"
    if unit_txt in ("bps", "basis points"):
        number, decimals, unit = number / 100, decimals + 2, "percent"
    if cur and unit == "plain":
        unit = "money"
    window = text[max(0, m.start() - 60):m.end() + 30]
    return Figure(text=m.group().strip(), number=-number if negative else number, scale=scale, unit=unit, decimals=decimals,
                  per_share=bool(_PER_SHARE.search(window)), decrease=bool(_DECREASE.search(text[max(0, m.start() - 60):m.end() + 20])),
                  start=m.start())


def stated_figures(answer: str, question: str = "") -> list[Figure]:
    """The figures an answer states: every figure, except numbers echoed from the question, and in a calculation
    line (one with '=') only its result."""
    echoed = {float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", question)}
    out: list[Figure] = []
    offset = 0
    for line in answer.splitlines(keepends=True):
        found = figures(line, echoed)
        if "=" in line and found:
            tail = line.rsplit("=", 1)[1]
            found = [f for f in found if f.start >= len(line) - len(tail)] or found[-1:]
        out += [f.model_copy(update={"start": f.start + offset}) for f in found]
        offset += len(line)
    return out


# ---------- matching ----------
def _candidates(fig: Figure, context_scale: float | None) -> list[tuple[float, float]]:
    """(value, display multiplier) pairs the figure may stand for: as written, and at the declared scale."""
    if fig.scale is not None:
        return [(fig.number * fig.scale, fig.scale)]
    out = [(fig.number, 1.0)]
    if context_scale and fig.unit != "percent" and not fig.per_share:
        out.append((fig.number * context_scale, context_scale))
    return out


def _close(value: float, gold: Figure, gold_value: float, multiplier: float) -> bool:
    if gold_value == 0:
        return abs(value) < 1e-9 or _rounds_to(value / multiplier, gold)
    if abs(value - gold_value) <= TOLERANCE * abs(gold_value):
        return True
    return _rounds_to(value / multiplier, gold)


def _rounds_to(shown: float, gold: Figure) -> bool:
    """The answer's figure, rounded at the gold's precision, is the gold's figure as written."""
    quantum = Decimal(1).scaleb(-gold.decimals)
    try:
        return Decimal(repr(shown)).quantize(quantum, rounding=ROUND_HALF_UP) == Decimal(repr(gold.number)).quantize(quantum)
    except ArithmeticError:
        return False


def _signs_agree(a: Figure, g: Figure) -> bool:
    if (a.number < 0) == (g.number < 0):
        return True
    positive = a if a.number >= 0 else g
    return positive.decrease  # "fell 2%" states -2%; "-2%" states a decline of 2%


def figures_match(answer_fig: Figure, gold: Figure, question_scale: float | None = None, answer_scale: float | None = None) -> bool:
    if not _signs_agree(answer_fig, gold):
        return False
    a_abs, g_abs = answer_fig.model_copy(update={"number": abs(answer_fig.number)}), gold.model_copy(update={"number": abs(gold.number)})
    for g_value, g_mult in _candidates(g_abs, question_scale):
        for a_value, _ in _candidates(a_abs, answer_scale or question_scale):
            for converted in _conversions(a_abs.unit, g_abs.unit, a_value):
                if _close(converted, g_abs, g_value, g_mult):
                    return True
    return False


def _conversions(a_unit: Unit, g_unit: Unit, value: float) -> list[float]:
    """The answer's value in the gold's unit: a percentage is also a ratio (35% = 0.35), and a bare number may be
    either; money and percentages never match each other."""
    if g_unit == "percent":
        return {"percent": [value], "plain": [value, value * 100], "money": []}[a_unit]
    if g_unit == "plain":
        return {"percent": [value / 100], "plain": [value], "money": [value]}[a_unit]
    return {"percent": [], "plain": [value], "money": [value]}[a_unit]


# ---------- the verdict ----------
def gold_kind(gold: str) -> Literal["figure", "figures", "yes_no", "text"]:
    """'figure': the gold is a figure and little else; 'figures': prose with figures; 'yes_no': opens with yes or no
    and states no figure; 'text': the rest."""
    found = figures(gold)
    if _POLARITY.match(gold) and not found:
        return "yes_no"
    if not found:
        return "text"
    rest = _blank(gold, _FIGURE)
    words = [w for w in re.findall(r"[A-Za-z]+", rest) if w.lower() not in ("approximately", "about", "around", "usd", "roughly")]
    return "figure" if len(found) == 1 and len(words) <= 3 else "figures"


def polarity(text: str) -> str | None:
    m = _POLARITY.match(text)
    return m.group("word").lower() if m else None


def score_answer(question: str, gold: str, answer: str | None) -> Score:
    """The rules' verdict on one answer (see the module's docstring)."""
    if not answer or not answer.strip():
        return Score(correct=False, method="no_answer", reason="no answer")
    kind = gold_kind(gold)
    gold_figs = figures(gold)
    shown = [f.text for f in gold_figs]
    gold_pol, answer_pol = polarity(gold), polarity(answer)
    if gold_pol and answer_pol and gold_pol != answer_pol:
        return Score(correct=False, method="yes_no", reason=f"the gold says {gold_pol!r}, the answer {answer_pol!r}", gold_figures=shown)
    q_scale = declared_scale(question)
    a_scale = declared_scale(answer)
    stated = stated_figures(answer, question)
    n = len(stated)
    if kind in ("figure", "figures"):
        targets = gold_figs[:1] if kind == "figure" else gold_figs
        hits = [next((a for a in stated if figures_match(a, g, q_scale, a_scale)), None) for g in targets]
        matched = [h.text for h in hits if h is not None]
        if not stated:
            return Score(correct=False, method="numeric", reason="the answer states no figure", gold_figures=shown)
        if all(hits) and (kind == "figure" or not gold_pol or answer_pol == gold_pol):
            return Score(correct=True, method="numeric" if kind == "figure" else "figures",
                         reason="every gold figure is stated" if kind == "figures" else "the gold figure is stated",
                         gold_figures=shown, matched=matched, answer_figures=n)
        if kind == "figure":
            return Score(correct=False, method="numeric", reason=f"none of the answer's {n} figures matches the gold",
                         gold_figures=shown, answer_figures=n)
        why = f"{len(matched)} of {len(targets)} gold figures stated" + ("; the answer does not say yes or no" if gold_pol and all(hits) else "")
        return Score(correct=None, method="unscored", reason=why, gold_figures=shown, matched=matched, answer_figures=n)
    if kind == "yes_no" and not answer_pol:
        return Score(correct=None, method="unscored", reason="the gold is a yes/no; the answer does not say yes or no")
    return _lexical(gold, answer, kind)


def _lexical(gold: str, answer: str, kind: str) -> Score:
    body = _POLARITY.sub("", gold) if kind == "yes_no" else gold
    want = {stem(w) for w in content_words(body)}
    have = {stem(w) for w in content_words(answer)}
    if not want:
        return Score(correct=True, method="yes_no", reason="same yes/no") if kind == "yes_no" else \
            Score(correct=None, method="unscored", reason="nothing in the gold to check")
    recall = len(want & have) / len(want)
    needed = 1.0 if len(want) <= 4 else 0.8
    if recall >= needed:
        return Score(correct=True, method="yes_no" if kind == "yes_no" else "lexical",
                     reason=f"{recall:.0%} of the gold's content words are in the answer")
    return Score(correct=None, method="unscored", reason=f"{recall:.0%} of the gold's content words are in the answer (needs {needed:.0%})")
