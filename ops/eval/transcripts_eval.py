"""The transcript-facts eval: is the chunk that states a fact found by the product's search, and does the product's
answer state the fact's figure with a citation that contains it? Plain functions; `finagent eval transcripts`
(ops/cli/eval_transcripts.py) submits the jobs and calls these."""
from __future__ import annotations

import re
from collections import Counter
from typing import Literal

from pydantic import BaseModel, Field

from agent.context import Context
from agent.models.job import JobResult
from agent.providers.llm.extractive import ANSWER_LINE_LABEL
from agent.search_service import SearchRequest, search
from ops.eval.transcript_facts import FIGURE, METRICS, SEGMENT, Fact, is_guidance, names_other_period

TOP_K = 15
FailureKind = Literal["no_answer", "wrong_period", "guidance_as_reported", "reported_as_guidance", "segment_as_total",
                      "wrong_metric", "figure_missing"]
_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_MARKER = re.compile(r"\[(?:10K|N)?\d+\]")


# ---------- figures ----------
def figure_value(figure: str) -> tuple[str, float] | None:
    """('percent' | 'dollars', value): '$1.2 billion' and '$1,200 million' are the same figure."""
    f = figure.lower()
    digits = re.sub(r"[^\d.]", "", f).rstrip(".")
    if not digits or digits == ".":
        return None
    value = float(digits)
    if "%" in f or "percent" in f:
        return "percent", value
    if not f.startswith("$"):
        return None
    return "dollars", value * next((m for s, m in _SCALE.items() if s in f), 1.0)


def states_figure(text: str, figure: str) -> bool:
    want = figure_value(figure)
    if want is None:
        return False
    for m in FIGURE.finditer(text):
        got = figure_value(m.group(0))
        if got and got[0] == want[0] and abs(got[1] - want[1]) <= 0.005 * max(abs(want[1]), 1e-9):
            return True
    return False


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def chunk_states_fact(chunk_text: str, fact: Fact) -> bool:
    """The chunk holds the fact's sentence (whitespace aside), or, where the chunker split that sentence, its figure
    next to most of the sentence's words."""
    if _flat(fact.sentence) in _flat(chunk_text):
        return True
    if not states_figure(chunk_text, fact.figure):
        return False
    words = set(re.findall(r"[a-z]{4,}", fact.sentence.lower()))
    return bool(words) and len(words & set(re.findall(r"[a-z]{4,}", chunk_text.lower()))) >= 0.8 * len(words)


# ---------- retrieval ----------
class RetrievalResult(BaseModel):
    fact_id: str
    question: str
    rank: int | None  # 1-based rank of the first hit that states the fact; None when not in the top TOP_K
    in_corpus: bool  # some ingested chunk of the call states the fact
    problems: list[str] = Field(default_factory=list)


def retrieval_rank(ctx: Context, fact: Fact) -> RetrievalResult:
    """Search as the product does, under the fact's ticker and quarter, with a question built from its metric and period."""
    resp = search(ctx, SearchRequest(query=fact.question, tickers=[fact.ticker], time_refs=[fact.period_label], top_k=TOP_K))
    rank = next((i for i, hit in enumerate(resp.hits[:TOP_K], 1) if chunk_states_fact(hit.text, fact)), None)
    with ctx.pool.connection() as conn:
        rows = conn.execute("SELECT text FROM transcript_chunks WHERE ticker=%s AND fiscal_year=%s AND fiscal_quarter=%s",
                            (fact.ticker, fact.fiscal_year, fact.fiscal_quarter)).fetchall()
    in_corpus = any(chunk_states_fact(r["text"], fact) for r in rows)
    return RetrievalResult(fact_id=fact.id, question=fact.question, rank=rank, in_corpus=in_corpus, problems=resp.problems)


class RetrievalSummary(BaseModel):
    facts: int
    recall_at_5: float
    recall_at_15: float
    not_in_corpus: int
    ranks: dict[str, int]  # '1', '2', ..., '15', 'miss'


def summarise_retrieval(results: list[RetrievalResult]) -> RetrievalSummary:
    n = len(results) or 1
    ranks = Counter(str(r.rank) if r.rank else "miss" for r in results)
    order = [str(i) for i in range(1, TOP_K + 1)] + ["miss"]
    return RetrievalSummary(
        facts=len(results),
        recall_at_5=round(sum(1 for r in results if r.rank and r.rank <= 5) / n, 3),
        recall_at_15=round(sum(1 for r in results if r.rank and r.rank <= TOP_K) / n, 3),
        not_in_corpus=sum(1 for r in results if not r.in_corpus),
        ranks={k: ranks[k] for k in order if ranks[k]},
    )


# ---------- answers ----------
class Statement(BaseModel):
    label: str  # 'Q3 2020', or '' outside a period line
    text: str
    markers: list[str]


def statements(answer: str, ticker: str) -> list[Statement]:
    """The answer's cited sentences in order, each with the period label of its line; lines under another company's
    heading are left out."""
    out: list[Statement] = []
    heading = ""
    for line in answer.splitlines():
        row = line.strip()
        if row.startswith("**"):
            heading = row.strip("* ")
            continue
        if heading and heading != ticker:
            continue
        m = ANSWER_LINE_LABEL.match(row)
        label = m.group(1) if m else ""
        body = row[m.end():] if m else row.removeprefix("-").strip()
        for part in re.split(r"(?<=\])\s+", body):
            markers = _MARKER.findall(part)
            if markers:
                out.append(Statement(label=label, text=_MARKER.sub("", part).strip(), markers=markers))
    return out


class AnswerJudgement(BaseModel):
    fact_id: str
    correct: bool  # the lead statement for the asked period states the figure, citing a chunk of that period that holds it
    stated_anywhere: bool  # some statement states the figure, citing a chunk that holds it
    failure_kind: FailureKind | None = None
    lead: str = ""


def _cites_figure(st: Statement, result: JobResult, fact: Fact) -> bool:
    by_marker = {c.marker: c for c in result.citations}
    return any(m in by_marker and by_marker[m].ticker == fact.ticker and by_marker[m].period == fact.period_label
               and states_figure(by_marker[m].text, fact.figure) for m in st.markers)


def _metric_pattern(metric: str) -> str:
    return next(p for name, p, _ in METRICS if name == metric)


def classify_failure(fact: Fact, lead: Statement | None, cited_periods: list[str]) -> FailureKind:
    """Why a lead statement does not give the fact's figure. Checked in this order: nothing cited, another period,
    guidance for a result (or the reverse), a segment's figure, another metric; otherwise the figure is missing."""
    if lead is None:
        return "no_answer"
    if (lead.label and lead.label != fact.period_label) or any(p != fact.period_label for p in cited_periods):
        return "wrong_period"
    guidance = is_guidance(lead.text)
    if fact.kind == "reported" and guidance:
        return "guidance_as_reported"
    if fact.kind == "reported" and names_other_period(lead.text, fact.fiscal_year, fact.fiscal_quarter):
        return "wrong_period"
    if fact.kind == "guidance" and not guidance:
        return "reported_as_guidance"
    if re.match(r"^[A-Z][\w&\-]*(?: [A-Z][\w&\-]*)*: ", lead.text) or SEGMENT.search(lead.text):
        return "segment_as_total"
    if not re.search(rf"\b(?:{_metric_pattern(fact.metric)})\b", lead.text.lower()):
        return "wrong_metric"
    return "figure_missing"


def judge_answer(fact: Fact, result: JobResult | None) -> AnswerJudgement:
    if result is None or not result.answer:
        return AnswerJudgement(fact_id=fact.id, correct=False, stated_anywhere=False, failure_kind="no_answer")
    sts = statements(result.answer, fact.ticker)
    own = [s for s in sts if s.label == fact.period_label]
    lead = own[0] if own else (sts[0] if sts else None)
    anywhere = any(states_figure(s.text, fact.figure) and _cites_figure(s, result, fact) for s in sts)
    correct = bool(lead and lead.label == fact.period_label and states_figure(lead.text, fact.figure) and _cites_figure(lead, result, fact))
    if correct:
        return AnswerJudgement(fact_id=fact.id, correct=True, stated_anywhere=True, lead=lead.text if lead else "")
    by_marker = {c.marker: c for c in result.citations}
    cited = [by_marker[m].period for m in (lead.markers if lead else []) if m in by_marker]
    return AnswerJudgement(fact_id=fact.id, correct=False, stated_anywhere=anywhere, failure_kind=classify_failure(fact, lead, cited),
                           lead=lead.text if lead else "")


def early_terminated(result: JobResult) -> bool:
    """Stopped because the answer was judged good enough, not because a limit ran out."""
    reason = result.termination_reason or ""
    return ">= threshold" in reason or "judged the answer sufficient" in reason


class AnswerRecord(BaseModel):
    """One line of <data_dir>/eval/transcripts-answers.jsonl (the calibration report reads these)."""

    id: str
    source: Literal["transcripts"] = "transcripts"
    mode: str | None
    confidence: float
    correct: bool
    iterations: int
    early_terminated: bool
    failure_kind: FailureKind | None


def answer_record(fact: Fact, result: JobResult | None, judgement: AnswerJudgement) -> AnswerRecord:
    return AnswerRecord(id=fact.id, mode=result.mode if result else None, confidence=result.confidence if result else 0.0,
                        correct=judgement.correct, iterations=result.iterations if result else 0,
                        early_terminated=early_terminated(result) if result else False, failure_kind=judgement.failure_kind)


def auroc(scores_right: list[float], scores_wrong: list[float]) -> float | None:
    """Probability that a right answer's confidence is above a wrong one's (ties count half)."""
    if not scores_right or not scores_wrong:
        return None
    wins = sum(1.0 if r > w else 0.5 if r == w else 0.0 for r in scores_right for w in scores_wrong)
    return round(wins / (len(scores_right) * len(scores_wrong)), 3)


class AnswerSummary(BaseModel):
    facts: int
    correct_share: float
    stated_anywhere_share: float
    failures: dict[str, int]
    mean_confidence_right: float | None
    mean_confidence_wrong: float | None
    auroc: float | None
    mean_iterations: float
    early_termination_rate: float


def summarise_answers(records: list[AnswerRecord], judgements: list[AnswerJudgement]) -> AnswerSummary:
    n = len(records) or 1
    right = [r.confidence for r in records if r.correct]
    wrong = [r.confidence for r in records if not r.correct]
    return AnswerSummary(
        facts=len(records),
        correct_share=round(len(right) / n, 3),
        stated_anywhere_share=round(sum(1 for j in judgements if j.stated_anywhere) / n, 3),
        failures=dict(Counter(r.failure_kind for r in records if r.failure_kind).most_common()),
        mean_confidence_right=round(sum(right) / len(right), 3) if right else None,
        mean_confidence_wrong=round(sum(wrong) / len(wrong), 3) if wrong else None,
        auroc=auroc(right, wrong),
        mean_iterations=round(sum(r.iterations for r in records) / n, 2),
        early_termination_rate=round(sum(1 for r in records if r.early_terminated) / n, 3),
    )


def halves(facts: list[Fact]) -> dict[str, list[Fact]]:
    """The tickers in sorted order, split in two: the rules were developed on the first half only."""
    tickers = sorted({f.ticker for f in facts})
    first = set(tickers[: (len(tickers) + 1) // 2])
    return {"development": [f for f in facts if f.ticker in first], "held_out": [f for f in facts if f.ticker not in first]}
