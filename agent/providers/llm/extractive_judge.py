"""Substance checks of a cited statement, shared by the extractive provider's answering (to rank sentences) and its
evaluator (to judge the answer): does it address the asked metric with a figure, is it about the asked period, and
is it a reported result when the question asks what something was (not a forecast), or the reverse?"""
from __future__ import annotations

import math
import re

from pydantic import BaseModel

from agent.providers.llm.extractive_rules import (
    ABBREVIATIONS,
    ANNUAL_QUESTION,
    METRIC_SYNONYMS,
    NON_NUMERIC,
    NOT_METRIC,
    asks_outlook,
    concepts_asked,
    is_forward_looking,
    other_period,
)
from agent.text import content_words, numbers, stem

_HYPOTHETICAL = re.compile(r"^\W*(?:if|suppose|imagine|say)\b", re.I)  # 'if you're running at 50% occupancy, ...'
_SEGMENT_LABEL = re.compile(r"^([A-Z][\w&\-]*(?:\s+[A-Z][\w&\-]*)*):\s")
_SCOPE = re.compile(r":(\d{4})_q([1-4])$")
_LABEL = re.compile(r"^Q([1-4]) (\d{4})$")


FORWARD_WORDS = {"<forward-looking>"}  # the outlook part of a question: any statement about the future answers it
_TOKEN = re.compile(r"\$?\d[\d,]*(?:\.\d+)?%?|[A-Za-z][A-Za-z&\-']*|[,;:]")
_BREAK = {",", ";", ":"}
# words that may stand inside a metric's name without changing it ('earnings per diluted share')
_FILLERS = {"per", "of", "on", "the", "a", "an", "diluted", "adjusted", "average", "common", "total", "gaap", "reported", "core",
            "tangible", "fully", "profit"}
_SCALE_WORDS = {"million", "billion", "thousand", "percent", "bps", "basis"}
# what may stand between a figure and the metric after it: '$X of <metric>', '$X in total <metric>'
_JOINS = _FILLERS | _SCALE_WORDS | {"in", "basi", "point"}


def _expanded(words: list[str]) -> list[str]:
    out: list[str] = []
    for w in words:
        out += ABBREVIATIONS[w].split() if w in ABBREVIATIONS else [w]
    return out


def stems(text: str) -> set[str]:
    """Stemmed content words, abbreviations spelt out ('EPS' -> earn, share)."""
    return {stem(w) for w in content_words(" ".join(_expanded(content_words(text))))}


def _tokens(text: str) -> list[tuple[str, bool]]:
    """(stem, is a figure) for each word or number; a number is a figure with '$', '%' or a scale word after it."""
    raw = _TOKEN.findall(text)
    out: list[tuple[str, bool]] = []
    for i, tok in enumerate(raw):
        if tok in _BREAK:
            out.append((tok, False))
        elif tok[0] in "$0123456789":
            nxt = raw[i + 1].lower() if i + 1 < len(raw) else ""
            out.append((tok, "$" in tok or "%" in tok or nxt in _SCALE_WORDS))
        else:
            out += [(stem(w), False) for w in _expanded([tok.lower().strip("'")])]
    return out


_CHANGE_BEFORE = {"up", "down", "by", "increas", "decreas", "grew", "rose", "fell", "declin", "improv", "expand", "contract",
                  "growth"}
_CHANGE_AFTER = {"increase", "decrease", "decline", "higher", "lower", "below", "above", "improvement", "reduction", "growth",
                 "increas", "decreas", "declin"}


def _is_level(toks: list[tuple[str, bool]], at: int) -> bool:
    """The figure at `at` is a level ('was $X', 'to $X'), not a change ('up $X', '$X increase')."""
    before = [w for w, _ in toks[max(0, at - 2):at]]
    after = [w for w, fig in toks[at + 1:at + 3] if not fig]
    if before and before[-1] == "to":
        return True
    if any(w in _CHANGE_BEFORE for w in before):
        return False
    skip = 1 if after and after[0] in {"million", "billion", "thousand", "percent", "basi", "bps"} else 0
    return not (len(after) > skip and after[skip] in _CHANGE_AFTER)


# The kind of figure a metric is stated in: a ratio in percent or basis points, an amount in currency. A percent next
# to an amount metric is something else ("deposits grew 5%", "30% of revenue"); so is an amount next to a ratio.
_RATIO = {stem(w) for w in """margin ratio yield return growth percentage percent occupancy utilization conversion
    retention churn penetration comparable organic""".split()}
_WEAK_RATIO = {stem("rate")}  # "tax rate" is a ratio, "revenue run rate" an amount
_AMOUNT = {stem(w) for w in """revenue revenues sales income earnings ebitda loans deposits assets expenses profit
    cash flow debt equity provision loss losses backlog bookings""".split()}
_PERCENT_AFTER = {"percent", "percentage", "bps", "basi", "basis", "point"}


def metric_kind(words: set[str]) -> str | None:
    """'ratio', 'amount', or None when the metric's words do not say."""
    if words & _RATIO or {"market", "share"} <= words:
        return "ratio"
    if words & _WEAK_RATIO:
        return None if words & _AMOUNT else "ratio"
    return "amount" if words & _AMOUNT else None


def _is_percent(toks: list[tuple[str, bool]], at: int) -> bool:
    return "%" in toks[at][0] or (at + 1 < len(toks) and toks[at + 1][0] in _PERCENT_AFTER)


def _fits(toks: list[tuple[str, bool]], at: int, kind: str | None) -> bool:
    return kind is None or _is_percent(toks, at) == (kind == "ratio")


def _nearest(toks: list[tuple[str, bool]], figures: list[int], first: int, last: int, reach: int) -> list[int]:
    """The metric's own figures: those after it in the same clause ('<metric> was $X'), and one just before it
    ('$X of <metric>'); a figure further on, past a comma, belongs to something else."""
    stop = next((i for i in range(last + 2, len(toks)) if toks[i][0] in _BREAK), len(toks))
    out = [f for f in figures if last < f <= min(last + reach, stop)]
    before = next((f for f in reversed(figures) if first - 4 <= f < first), None)
    # '$X of <metric>', '$X in total <metric>'; not '$X and the <metric>', whose figure is another clause's
    if before is not None and all(toks[i][0] in _JOINS for i in range(before + 1, first)):
        out.append(before)
    return out


def _runs(toks: list[tuple[str, bool]], words: set[str], need: int) -> list[tuple[int, int]]:
    """(first, last) token of each run of the metric's words with only fillers between them, holding `need` of them."""
    out = []
    for start, (w, _) in enumerate(toks):
        if w not in words:
            continue
        window = [start]
        for i in range(start + 1, len(toks)):
            if toks[i][0] in words:
                window.append(i)
            elif toks[i][0] not in _FILLERS:
                break
        if len({toks[i][0] for i in window}) >= need and not _qualified(toks, window[0], window[-1], words):
            out.append((window[0], window[-1]))
    return out


# the nouns a metric's name ends in: a partial run of the metric's words followed by another of them names another
# metric ('net interest' + 'income' is not 'net interest margin')
_HEADS = {stem(w) for w in """income margin expense expenses revenue revenues sales ratio rate yield loss losses assets
    deposits loans earnings cost costs profit cash flow capital equity debt spread""".split()}
# nouns that turn a metric into another measure of it: a flow ('loan production'), a change, a pipeline
_MEASURES_OF = {stem(w) for w in """production originations origination pipeline commitments growth mix count
    beta""".split()}
# a comparable-unit measure ('same-store sales', 'comparable sales') is a growth rate, not the company's total
_COMPARABLE = re.compile(r"^(?:same-\w+|comparable|comp|like-for-like)$")


def _qualified(toks: list[tuple[str, bool]], first: int, last: int, words: set[str]) -> bool:
    """The run names another measure built on the metric: a per-unit one ('sales per store'), one of a level
    below the company ('store-level margin', 'segment level'), or another metric sharing some of its words."""
    after = [w for w, _ in toks[last + 1:last + 3]]
    partial = {w for w, _ in toks[first:last + 1]} & words != words
    head = after[0] if after and after[0] not in words else None
    # 'loan yield', 'loan production'; a filler head ('profit') only after a partial run: 'gross' + 'profit'
    if head in _MEASURES_OF or (head in _HEADS and (partial or head not in _FILLERS)):
        return True
    if after[:1] == ["per"] and (len(after) < 2 or after[1] not in words):
        return True
    before = toks[first - 1][0] if first else ""
    return before.endswith("-level") or before == "level" or bool(_COMPARABLE.match(before))


def names_metric(text: str, words: set[str], need: int) -> bool:
    """The text names the metric: its words in a run ('net income'; not 'net interest income')."""
    return bool(_runs(_tokens(text), words, need))


def states_metric(text: str, words: set[str], need: int, reach: int = 8, change_ok: bool = False) -> bool:
    """The metric's words stand together with a figure of its kind close by, before or after ('<metric> was $X', '$X
    of <metric>'); a change ('up $X') counts only when the question asks for one."""
    toks = _tokens(text)
    figures = [i for i, (_, fig) in enumerate(toks) if fig]
    kind = None if change_ok else metric_kind(words)  # a change of an amount is often a percent
    return any((change_ok or _is_level(toks, f)) and _fits(toks, f, kind)
               for first, last in _runs(toks, words, need) for f in _nearest(toks, figures, first, last, reach))


def metric_stems(topic: str) -> set[str]:
    """The words of a question's topic that name what is measured ('net interest margin'), not how it is asked."""
    return {w for w in stems(topic) if w not in NOT_METRIC}


def scope_period(scope: str) -> tuple[int, int] | None:
    """(fiscal year, quarter) of a company-quarter scope ('ACME:2021_q3'), else None."""
    m = _SCOPE.search(scope)
    return (int(m.group(1)), int(m.group(2))) if m else None


def label_period(label: str) -> tuple[int, int] | None:
    m = _LABEL.match(label)
    return (int(m.group(2)), int(m.group(1))) if m else None


def addresses(text: str, words: set[str], numeric: bool = True, need: int = 1, near: bool = False, change_ok: bool = False) -> bool:
    """The statement speaks of at least `need` of these words, with a figure when the part is numeric (`near`: the
    words together, with the figure close by)."""
    if words == FORWARD_WORDS:
        return is_forward_looking(text)
    if not words or (numeric and not numbers(text)):
        return False
    if near:
        return any(states_metric(text, alt, need if alt is words else math.ceil(2 * len(alt) / 3), change_ok=change_ok)
                   for alt in [words, *metric_alternatives(words)])
    return len(words & stems(text)) >= need


def metric_alternatives(words: set[str]) -> list[set[str]]:
    """The metric's words with a phrase replaced by another name for it ('net income' -> 'earnings')."""
    out = []
    for phrase, names in METRIC_SYNONYMS.items():
        own = stems(phrase)
        if own <= words:
            out += [(words - own) | stems(name) for name in names]
    return out


def problems(text: str, question: str, period: tuple[int, int] | None) -> list[str]:
    """Why a statement does not answer the question as asked (empty when it does)."""
    found = []
    outlook = asks_outlook(question)
    forward = is_forward_looking(text)
    if not outlook and forward:
        found.append("an outlook, not the reported figure")
    if outlook and not forward:
        found.append("a reported figure, not the outlook")
    if period and not outlook and not ANNUAL_QUESTION.search(question):
        named = other_period(text, *period)
        if named:
            found.append(f"about {named}, not Q{period[1]} {period[0]}")
    if text.rstrip().endswith("?"):
        found.append("a question, not a statement")
    if _HYPOTHETICAL.match(text):
        found.append("a hypothetical, not a reported figure")
    label = _SEGMENT_LABEL.match(text)
    if label and not stems(label.group(1)) <= stems(question):
        found.append(f"a figure for {label.group(1)}, not the total")
    return found


class Part(BaseModel):
    """A part of a question an answer must address: a concept it asks about, or the metric its topic names."""

    name: str
    words: set[str]
    numeric: bool
    need: int = 1  # how many of the words a statement must speak of
    metric: bool = False  # the metric the question names: its words must stand together, with a figure close by
    change_ok: bool = False  # the question asks how the metric changed: a change is an answer, not only a level


def asks_change(question: str) -> bool:
    return any(name == "growth" for name, _ in concepts_asked(question))


def question_parts(question: str, topic: str) -> list[Part]:
    asked = concepts_asked(question)
    parts = [Part(name=name, words=FORWARD_WORDS if name == "guidance" else words, numeric=name not in NON_NUMERIC) for name, words in asked]
    metric = metric_stems(topic)
    if metric:
        name = " ".join(dict.fromkeys(w for w in content_words(topic) if stems(w) & metric))
        parts.append(Part(name=name, words=metric, numeric=True, need=math.ceil(2 * len(metric) / 3), metric=True,
                          change_ok=asks_change(question)))
    return parts


# ---------- the answer as a whole ----------
# a question that sets things side by side
_COMPARES = re.compile(r"\b(?:compar\w*|versus|vs\.?|relative to|against|than|differ\w*|outperform\w*|ahead of|behind|"
                       r"better|worse|which (?:one|company|of))\b", re.I)


def asks_comparison(question: str) -> bool:
    return bool(_COMPARES.search(question))


class Side(BaseModel):
    """One side of what the answer must set side by side: a company, or the first or last period of a change."""

    name: str  # 'ACME', 'ACME Q1 2025'
    group: str  # the sides of one comparison share it: 'companies', or the company whose periods are compared
    statements: list[str]
    keyword: str  # what to search for when the side is missing


class WholeGaps(BaseModel):
    """What only the whole answer shows: how many of its sides state the asked figure, and what is wrong."""

    sides: int = 0
    stated: int = 0
    missing: list[str] = []
    issues: list[str] = []
    keywords: list[str] = []

    @property
    def share(self) -> float:
        """The part of the comparison answered: a comparison set in terms that cannot be compared answers half."""
        if not self.sides:
            return 1.0
        return self.stated / self.sides * (0.5 if self.issues else 1.0)


def answer_sides(question: str, metric_name: str, tickers: list[str], periods: dict[str, list[str]],
                 blocks: dict[str, dict[str, list[str]]]) -> list[Side]:
    """Every company the question names, when it names several; and when it asks for a change or a comparison,
    each company's first and last targeted period. `blocks`: the answer's statements by company and period label."""
    sides = []
    if len(tickers) > 1:
        sides += [Side(name=t, group="companies", statements=[s for said in blocks.get(t, {}).values() for s in said],
                       keyword=f"{metric_name} results") for t in tickers]
    if asks_change(question) or asks_comparison(question):
        for ticker, labels in periods.items():
            ordered = sorted((lb for lb in labels if label_period(lb)), key=lambda lb: label_period(lb) or (0, 0))
            if len(ordered) > 1:
                sides += [Side(name=f"{ticker} {lb}", group=ticker, statements=blocks.get(ticker, {}).get(lb, []),
                               keyword=f"{metric_name} {lb}") for lb in (ordered[0], ordered[-1])]
    return sides


def whole_answer_gaps(question: str, topic: str, tickers: list[str], periods: dict[str, list[str]],
                      blocks: dict[str, dict[str, list[str]]]) -> WholeGaps:
    """Does the answer cover every company and period the question sets side by side, each with a figure of the
    asked metric, and does each comparison set like against like (two levels, or two changes)?"""
    metric = next((p for p in question_parts(question, topic) if p.metric), None)
    name = metric.name if metric else "the figures asked for"
    change = asks_change(question)
    sides = answer_sides(question, metric.name if metric else topic, tickers, periods, blocks)
    gaps = WholeGaps(sides=len(sides))
    kinds: dict[str, dict[str, str]] = {}
    for side in sides:
        if metric is None:
            first = next((s for s in side.statements if numbers(s)), None)
        else:
            first = next((s for s in side.statements
                          if addresses(s, metric.words, True, metric.need, near=True, change_ok=change)), None)
        if first is None:
            what = "the comparison" if side.group == "companies" else "the change across periods"
            gaps.missing.append(f"{what} lacks {side.name}: nothing on '{name}'")
            gaps.keywords.append(side.keyword)
            continue
        gaps.stated += 1
        if metric is not None and change:
            level = addresses(first, metric.words, True, metric.need, near=True)
            kinds.setdefault(side.group, {})[side.name] = "level" if level else "change"
    for group in kinds.values():
        if len(set(group.values())) > 1:
            levels = [n for n, k in group.items() if k == "level"]
            changes = [n for n, k in group.items() if k == "change"]
            gaps.issues.append(f"the comparison sets a change ({', '.join(changes)}) against a level ({', '.join(levels)})")
    return gaps
