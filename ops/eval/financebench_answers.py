"""FinanceBench answers: every question through the full pipeline as a batch of research jobs, then scored against
its gold answer.

Two phases that never mix. The answer phase sees only `AnswerPrompt`s (the question's id and text): no gold answer,
justification, evidence, company or document name reaches a job, so the planner finds the company and the period in
the question text as it would for a user. The scoring phase reads the gold answers once every job has ended.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel

from agent import batches
from agent.context import Context
from agent.models.batch import BatchItem
from agent.settings import Settings
from agent.submission import Dispatcher
from ops.eval.calibration import early_terminated
from ops.eval.financebench_questions import FinanceBenchQuestion
from ops.eval.financebench_retrieval import half_of
from ops.eval.scoring import Score, score_answer

SOURCE = "financebench"
QUESTION_TYPES = ("metrics-generated", "domain-relevant", "novel-generated")
# FinanceBench paper (arXiv 2311.11944), GPT-4-Turbo, share of the open-source questions answered correctly
PAPER_REFERENCE = [("GPT-4-Turbo, shared vector store", 0.19), ("GPT-4-Turbo, per-document vector store", 0.50),
                   ("GPT-4-Turbo, long context", 0.79), ("GPT-4-Turbo, oracle (evidence pages given)", 0.85),
                   ("StrataLens (claimed)", 0.91)]


class AnswerPrompt(BaseModel):
    """Everything the answer phase is given about a question."""

    id: str
    question: str


class Answered(BaseModel):
    id: str
    question: str
    status: str  # the job's final status, or "invalid" / "timeout"
    job_id: str | None = None
    answer: str = ""
    confidence: float | None = None
    iterations: int | None = None
    mode: str | None = None
    termination_reason: str | None = None
    citations: int = 0
    seconds: float | None = None
    error: str | None = None


def prompts_for(questions: list[FinanceBenchQuestion]) -> list[AnswerPrompt]:
    return [AnswerPrompt(id=q.financebench_id, question=q.question) for q in questions]


def answer_questions(ctx: Context, dispatcher: Dispatcher, prompts: list[AnswerPrompt], *, mode: str | None = None,
                     batch_name: str | None = None, timeout_s: float = 3600, poll_s: float = 1.0,
                     on_progress: Callable[[int, int], None] | None = None) -> list[Answered]:
    """Submit the prompts as one batch on the batch queue and wait for every job to end (or `timeout_s`).
    A new batch name by default, so every run answers afresh; the same name resumes a run."""
    name = batch_name or f"eval:{SOURCE}:{uuid.uuid4().hex[:12]}"
    lines = [batches.parse_line(n, {"question": p.question} | ({"mode": mode} if mode else {})) for n, p in enumerate(prompts, 1)]
    batch_id = batches.create_batch(ctx, dispatcher, name, lines)
    deadline = time.monotonic() + timeout_s
    while True:
        progress = batches.batch_progress(ctx.pool, batch_id)
        assert progress is not None
        if on_progress:
            on_progress(progress.done, progress.total)
        if progress.done >= progress.total or time.monotonic() > deadline:
            break
        time.sleep(poll_s)
    items = {item.line: item for item in batches.batch_items(ctx.pool, batch_id)}
    return [_answered(p, items.get(n)) for n, p in enumerate(prompts, 1)]


def _answered(prompt: AnswerPrompt, item: BatchItem | None) -> Answered:
    if item is None:
        return Answered(id=prompt.id, question=prompt.question, status="invalid", error="not submitted")
    status = item.status if item.status not in ("queued", "running") else "timeout"
    r = item.result
    return Answered(id=prompt.id, question=prompt.question, status=status, job_id=item.job_id, answer=r.answer if r else "",
                    confidence=r.confidence if r else None, iterations=r.iterations if r else None,
                    mode=(r.mode if r else None) or item.mode, termination_reason=r.termination_reason if r else None,
                    citations=len(r.citations) if r else 0, seconds=item.seconds, error=item.error)


# ---------- scoring ----------
class AnswerRecord(BaseModel):
    """One line of financebench-answers.jsonl (the calibration's EvalRecord shape, and more)."""

    id: str
    source: str = SOURCE
    mode: str | None
    confidence: float | None
    correct: bool | None
    iterations: int | None
    early_terminated: bool | None
    status: str
    question_type: str | None
    question_reasoning: str | None
    method: str  # how `correct` was decided: a rule's method, "judge", or "unscored"
    reason: str
    rule_correct: bool | None
    matched: list[str] = []  # the answer's figures that matched the gold's
    answer_figures: int = 0  # figures the answer states
    judge_correct: bool | None = None
    judge_reasoning: str | None = None
    question: str
    gold: str | None
    answer: str
    job_id: str | None
    termination_reason: str | None
    seconds: float | None


class JudgeVerdictLike(Protocol):
    correct: bool
    reasoning: str


JudgeFn = Callable[[str, str, str], JudgeVerdictLike]


def score_questions(questions: list[FinanceBenchQuestion], answered: list[Answered], settings: Settings,
                    judge: JudgeFn | None = None) -> list[AnswerRecord]:
    """The rules' verdict where they can decide; the judge's (when there is one) for the rest. The judge runs on every
    answered question with a gold, so its agreement with the rules can be reported."""
    by_id = {a.id: a for a in answered}
    out = []
    for q in questions:
        a = by_id[q.financebench_id]
        rule = _rule(q, a)
        judged = judge(q.question, q.answer, a.answer) if judge and q.answer and a.answer.strip() else None
        correct, method = rule.correct, str(rule.method)
        if correct is None and judged is not None:
            correct, method = judged.correct, "judge"
        out.append(AnswerRecord(
            id=q.financebench_id, mode=a.mode, confidence=a.confidence, correct=correct, iterations=a.iterations,
            early_terminated=early_terminated(a.status, a.iterations, _max_iterations(settings, a.mode)), status=a.status,
            question_type=q.question_type, question_reasoning=q.question_reasoning, method=method, reason=rule.reason,
            rule_correct=rule.correct, matched=rule.matched, answer_figures=rule.answer_figures, judge_correct=judged.correct if judged else None,
            judge_reasoning=judged.reasoning if judged else None, question=q.question, gold=q.answer, answer=a.answer,
            job_id=a.job_id, termination_reason=a.termination_reason, seconds=a.seconds))
    return out


def _rule(q: FinanceBenchQuestion, a: Answered) -> Score:
    if q.answer is None:
        return Score(correct=None, method="unscored", reason="no gold answer in the questions file")
    if a.status != "completed":
        return Score(correct=False, method="no_answer", reason=f"the job ended {a.status}" + (f": {a.error}" if a.error else ""))
    return score_answer(q.question, q.answer, a.answer)


def _max_iterations(settings: Settings, mode: str | None) -> int | None:
    try:
        return settings.mode(mode).max_iterations if mode else None
    except (ValueError, KeyError):
        return None


# ---------- the summary ----------
class Split(BaseModel):
    name: str
    questions: int
    correct: int
    wrong: int
    unscored: int
    accuracy: float  # correct / questions: an unscored question counts as not shown correct
    accuracy_scored: float | None  # correct / (correct + wrong)


class AnswersSummary(BaseModel):
    provider: str
    judge: str | None  # the judge's model and endpoint, None when no endpoint is configured
    overall: Split
    by_question_type: list[Split]
    by_reasoning: list[Split]
    by_half: list[Split]  # a fixed split by a hash of the id (financebench_retrieval.half_of)
    by_method: dict[str, int]
    judge_agreement: float | None  # share of rule-decided questions where the judge agrees with the rules
    reference: list[tuple[str, float]] = PAPER_REFERENCE


def split(name: str, records: list[AnswerRecord]) -> Split:
    right = sum(1 for r in records if r.correct is True)
    wrong = sum(1 for r in records if r.correct is False)
    return Split(name=name, questions=len(records), correct=right, wrong=wrong, unscored=len(records) - right - wrong,
                 accuracy=right / len(records) if records else 0.0,
                 accuracy_scored=right / (right + wrong) if right + wrong else None)


def _grouped(records: list[AnswerRecord], key: Callable[[AnswerRecord], str], order: tuple[str, ...] = ()) -> list[Split]:
    groups: dict[str, list[AnswerRecord]] = {}
    for r in records:
        groups.setdefault(key(r), []).append(r)
    names = [n for n in order if n in groups] + sorted(n for n in groups if n not in order)
    return [split(n, groups[n]) for n in names]


def summarise(records: list[AnswerRecord], provider: str, judge: str | None) -> AnswersSummary:
    both = [r for r in records if r.rule_correct is not None and r.judge_correct is not None]
    methods: dict[str, int] = {}
    for r in records:
        methods[r.method] = methods.get(r.method, 0) + 1
    return AnswersSummary(
        provider=provider, judge=judge, overall=split("all", records),
        by_question_type=_grouped(records, lambda r: r.question_type or "unknown", QUESTION_TYPES),
        by_reasoning=_grouped(records, lambda r: r.question_reasoning or "(none given)"),
        by_half=_grouped(records, lambda r: f"half {half_of(r.id)}", ("half a", "half b")),
        by_method=dict(sorted(methods.items())),
        judge_agreement=sum(r.rule_correct == r.judge_correct for r in both) / len(both) if both else None)
