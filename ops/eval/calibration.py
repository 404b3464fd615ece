"""Is the computed confidence meaningful? Per-question records of every answer eval (one JSONL line per question,
`EvalRecord`), binned by the job's confidence into a reliability table; and per answer mode the agent's average
iterations and early-termination rate, beside the design's figures."""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

EARLY_DEFINITION = ("a completed job terminated early when it used fewer iterations than its answer mode's max_iterations "
                    "(the same rule as the batch report)")


class EvalRecord(BaseModel):
    """One evaluated question; every answer eval writes this shape (more fields are kept)."""

    model_config = ConfigDict(extra="allow")

    id: str
    source: str  # "financebench", "transcripts", ...
    mode: str | None = None
    confidence: float | None = None
    correct: bool | None = None  # None: unscored
    iterations: int | None = None
    early_terminated: bool | None = None
    status: str | None = None  # the job's final status


class RecordsFileError(ValueError):
    """A records file that cannot be read; str() is one line naming the file and line."""


def early_terminated(status: str | None, iterations: int | None, max_iterations: int | None) -> bool | None:
    if status != "completed" or iterations is None or max_iterations is None:
        return None
    return iterations < max_iterations


def load_records(path: Path) -> list[EvalRecord]:
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise RecordsFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(EvalRecord.model_validate_json(line))
        except ValidationError as exc:
            err = exc.errors()[0]
            raise RecordsFileError(f"{path} line {n}: {'.'.join(map(str, err['loc'])) or 'line'}: {err['msg']}") from None
    return out


def write_records(path: Path, records: Iterable[BaseModel]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r.model_dump(mode="json"), ensure_ascii=False) + "\n")
    tmp.replace(path)


# ---------- the reliability table ----------
class ReliabilityBin(BaseModel):
    low: float
    high: float
    questions: int
    correct: int
    accuracy: float | None  # None for an empty bin
    mean_confidence: float | None


class Reliability(BaseModel):
    scored: int  # answers (completed jobs) with a verdict and a confidence
    unscored: int  # the rest: no verdict, or no completed job
    bins: list[ReliabilityBin]
    ece: float | None  # expected calibration error: |accuracy - confidence| weighted by the bins' sizes
    mean_confidence_correct: float | None
    mean_confidence_wrong: float | None
    auroc: float | None  # chance that a right answer has a higher confidence than a wrong one (ties count half)


def reliability(records: list[EvalRecord], n_bins: int = 5) -> Reliability:
    scored = _scored(records)
    edges = [i / n_bins for i in range(n_bins + 1)]
    bins = []
    for low, high in zip(edges, edges[1:]):
        inside = [r for r in scored if low <= _conf(r) < high or (high == 1.0 and _conf(r) == 1.0)]
        right = sum(1 for r in inside if r.correct)
        bins.append(ReliabilityBin(low=low, high=high, questions=len(inside), correct=right,
                                   accuracy=right / len(inside) if inside else None,
                                   mean_confidence=sum(_conf(r) for r in inside) / len(inside) if inside else None))
    ece = (sum(b.questions * abs((b.accuracy or 0) - (b.mean_confidence or 0)) for b in bins) / len(scored)) if scored else None
    good = [_conf(r) for r in scored if r.correct]
    bad = [_conf(r) for r in scored if not r.correct]
    return Reliability(scored=len(scored), unscored=len(records) - len(scored), bins=bins, ece=ece,
                       mean_confidence_correct=sum(good) / len(good) if good else None,
                       mean_confidence_wrong=sum(bad) / len(bad) if bad else None, auroc=auroc(good, bad))


def _scored(records: list[EvalRecord]) -> list[EvalRecord]:
    """The answers with a verdict and a confidence: a job that did not complete has no answer to calibrate."""
    return [r for r in records if r.correct is not None and r.confidence is not None and r.status in (None, "completed")]


def _conf(r: EvalRecord) -> float:
    return min(1.0, max(0.0, r.confidence or 0.0))


def auroc(good: list[float], bad: list[float]) -> float | None:
    if not good or not bad:
        return None
    wins = sum(1.0 if g > b else 0.5 if g == b else 0.0 for g in good for b in bad)
    return wins / (len(good) * len(bad))


# ---------- wrong answers against their mode's threshold ----------
class WrongByMode(BaseModel):
    mode: str
    wrong: int
    mean_confidence: float
    threshold: float


class WrongVsThreshold(BaseModel):
    """Whether a wrong answer's confidence sits below the threshold of its answer mode, on average: `mean_margin` is
    the mean of (confidence - its mode's threshold) over the wrong answers of a mode the settings know."""

    modes: list[WrongByMode]
    mean_margin: float | None
    below: bool | None


def wrong_vs_threshold(records: list[EvalRecord], thresholds: dict[str, float]) -> WrongVsThreshold:
    wrong = [(r.mode, _conf(r)) for r in _scored(records) if not r.correct and r.mode in thresholds]
    modes = []
    for mode in [m for m in thresholds if any(w == m for w, _ in wrong)]:
        conf = [c for w, c in wrong if w == mode]
        modes.append(WrongByMode(mode=mode, wrong=len(conf), mean_confidence=sum(conf) / len(conf), threshold=thresholds[mode]))
    margin = sum(c - thresholds[m] for m, c in wrong) / len(wrong) if wrong else None
    return WrongVsThreshold(modes=modes, mean_margin=margin, below=None if margin is None else margin < 0)


# ---------- iterations and early termination per mode ----------
class ModeRow(BaseModel):
    mode: str
    completed: int
    avg_iterations: float | None
    early_rate: float | None  # None for a mode the settings do not know
    design_avg_iterations: float | None


def _completed(records: list[EvalRecord]) -> dict[str, list[EvalRecord]]:
    """Records of jobs that ran to an answer, by mode (a record without a status counts when it has a mode and iterations)."""
    groups: dict[str, list[EvalRecord]] = {}
    for r in records:
        if r.status in (None, "completed") and r.mode and r.iterations:
            groups.setdefault(r.mode, []).append(r)
    return groups


def mode_rows(records: list[EvalRecord], design: dict[str, float], max_iterations: dict[str, int]) -> list[ModeRow]:
    """Early termination is recomputed here by one rule for every source (EARLY_DEFINITION), whatever each eval wrote."""
    groups = _completed(records)
    order = [m for m in design if m in groups] + sorted(m for m in groups if m not in design)
    rows = []
    for mode in order:
        items = groups[mode]
        limit = max_iterations.get(mode)
        early = sum(1 for r in items if limit is not None and (r.iterations or 0) < limit)
        rows.append(ModeRow(mode=mode, completed=len(items), avg_iterations=sum(r.iterations or 0 for r in items) / len(items),
                            early_rate=early / len(items) if limit is not None else None, design_avg_iterations=design.get(mode)))
    return rows


def overall_early_rate(rows: list[ModeRow]) -> float | None:
    known = [r for r in rows if r.early_rate is not None]
    total = sum(r.completed for r in known)
    return sum((r.early_rate or 0) * r.completed for r in known) / total if total else None
