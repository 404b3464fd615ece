"""The numbers of a batch's morning report: totals, counts by status, and per answer mode the average
iterations and the early-termination rate beside the design's targets."""
from __future__ import annotations

from pydantic import BaseModel

from agent.models.batch import BatchItem, BatchReport
from agent.settings import Settings

# The product design documents' stated targets (not measurements): average answer iterations per mode,
# and the share of questions that stop before their mode's iteration limit.
DESIGN_AVG_ITERATIONS: dict[str, float] = {"direct": 1.3, "standard": 2.1, "detailed": 2.8}
DESIGN_EARLY_TERMINATION_RATE = 0.65

STATUS_ORDER = ("completed", "failed", "rejected", "cancelled", "invalid", "queued", "running")
FAILURE_STATUSES = ("failed", "rejected", "invalid", "cancelled")
UNFINISHED_STATUSES = ("queued", "running")
JOB_FINAL_STATUSES = ("completed", "failed", "rejected", "cancelled")  # a job that ran and ended (invalid lines made none)

# the offline provider answers by rules, with no model: its jobs have no tokens or cost to count, not zero of them
NO_MODEL_PROVIDERS = frozenset({"extractive"})
NOT_APPLICABLE = "not applicable"

EARLY_DEFINITION = ("a completed job is counted as terminating early when it used fewer iterations than its answer "
                    "mode's max_iterations (from the settings)")


class ModeStats(BaseModel):
    mode: str
    completed: int
    avg_iterations: float
    max_iterations: int | None  # None for a mode the settings do not know
    early: int
    early_rate: float | None
    design_avg_iterations: float | None


class Totals(BaseModel):
    questions: int
    counts: dict[str, int]  # every status in STATUS_ORDER, zeros included
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    tokens_apply: bool  # False when every job that ran did so on the offline provider: no tokens or cost to count
    wall_seconds: float
    jobs_finished: int  # jobs that reached a final status (invalid lines are not jobs)
    jobs_per_hour: float | None  # None when the wall time is zero
    early: int
    early_rate: float | None  # over every completed job with a known mode


def item_mode(item: BatchItem) -> str | None:
    return (item.result.mode if item.result and item.result.mode else None) or item.mode


def used_a_model(item: BatchItem) -> bool:
    """The item's job ran on an LLM (False for the offline provider, and for a line with no result)."""
    return item.result is not None and item.result.provider not in NO_MODEL_PROVIDERS


def item_tokens(item: BatchItem) -> tuple[int, int]:
    tokens = item.result.tokens if item.result else {}
    return int(tokens.get("prompt", 0)), int(tokens.get("completion", 0))


def failure_reason(item: BatchItem) -> str:
    result = item.result
    return item.error or (result.error if result else None) or (result.termination_reason if result else None) or "no reason recorded"


def _max_iterations(settings: Settings, mode: str) -> int | None:
    try:
        return settings.mode(mode).max_iterations
    except (ValueError, KeyError):
        return None


def completed_by_mode(report: BatchReport) -> dict[str, list[BatchItem]]:
    groups: dict[str, list[BatchItem]] = {}
    for item in report.items:
        if item.status == "completed" and item.result is not None:
            groups.setdefault(item_mode(item) or "unknown", []).append(item)
    return groups


def mode_stats(report: BatchReport, settings: Settings) -> list[ModeStats]:
    groups = completed_by_mode(report)
    order = [m for m in DESIGN_AVG_ITERATIONS if m in groups] + sorted(m for m in groups if m not in DESIGN_AVG_ITERATIONS)
    rows = []
    for mode in order:
        items = groups[mode]
        iterations = [i.result.iterations for i in items if i.result]
        limit = _max_iterations(settings, mode)
        early = sum(1 for n in iterations if limit is not None and n < limit)
        rows.append(ModeStats(
            mode=mode, completed=len(items), avg_iterations=sum(iterations) / len(iterations), max_iterations=limit,
            early=early, early_rate=early / len(items) if limit is not None else None,
            design_avg_iterations=DESIGN_AVG_ITERATIONS.get(mode),
        ))
    return rows


def totals(report: BatchReport, modes: list[ModeStats]) -> Totals:
    counts = {s: 0 for s in STATUS_ORDER}
    for item in report.items:
        counts[item.status] += 1
    prompt = sum(item_tokens(i)[0] for i in report.items)
    completion = sum(item_tokens(i)[1] for i in report.items)
    wall = max(0.0, (report.finished_at - report.started_at).total_seconds())
    finished = sum(counts[s] for s in JOB_FINAL_STATUSES)
    known = [m for m in modes if m.max_iterations is not None]
    judged = sum(m.completed for m in known)
    early = sum(m.early for m in known)
    return Totals(
        questions=len(report.items), counts=counts, prompt_tokens=prompt, completion_tokens=completion,
        cost_usd=sum(i.result.cost_usd for i in report.items if i.result),
        tokens_apply=any(used_a_model(i) for i in report.items) or not any(i.result for i in report.items),
        wall_seconds=wall, jobs_finished=finished,
        jobs_per_hour=finished / (wall / 3600) if wall > 0 else None,
        early=early, early_rate=early / judged if judged else None,
    )
