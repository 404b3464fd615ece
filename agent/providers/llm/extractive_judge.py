"""Substance checks of a cited statement, shared by the extractive provider's answering (to rank sentences) and its
evaluator (to judge the answer): does it address the asked metric with a figure, is it about the asked period, and
is it a reported result when the question asks what something was (not a forecast), or the reverse?"""
from __future__ import annotations

import math
import re

from pydantic import BaseModel

from agent.providers.llm.lexicon import (
    ANNUAL_QUESTION,
    NON_NUMERIC,
    NOT_METRIC,
    asks_outlook,
    concepts_asked,
    is_forward_looking,
    other_period,
)
from agent.text import content_words, numbers, stem

_SEGMENT_LABEL = re.compile(r"^([A-Z][\w&\-]*(?:\s+[A-Z][\w&\-]*)*):\s")
_SCOPE = re.compile(r":(\d{4})_q([1-4])$")
_LABEL = re.compile(r"^Q([1-4]) (\d{4})$")


def stems(text: str) -> set[str]:
    return {stem(w) for w in content_words(text)}


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


def addresses(text: str, words: set[str], numeric: bool = True, need: int = 1) -> bool:
    """The statement speaks of at least `need` of these words, with a figure when the part is numeric."""
    if not words or (numeric and not numbers(text)):
        return False
    return len(words & stems(text)) >= need


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


def question_parts(question: str, topic: str) -> list[Part]:
    parts = [Part(name=name, words=words, numeric=name not in NON_NUMERIC) for name, words in concepts_asked(question)]
    metric = metric_stems(topic)
    if metric:
        parts.append(Part(name=" ".join(sorted(metric)), words=metric, numeric=True, need=math.ceil(2 * len(metric) / 3)))
    return parts
