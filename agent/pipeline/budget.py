"""Limits per job (answer-mode table, request overrides, phase limits) and the budget note for prompts."""
from __future__ import annotations

import time

from agent.models.job import JobState, Limits
from agent.models.research import ResearchPlan
from agent.settings import Settings


def limits_for(settings: Settings, state: JobState, plan: ResearchPlan) -> Limits:
    """The job's limits. An explicit max_iterations (the request's, else the answer mode's) overrides the
    phase sum; when it is larger than execution + refinement, the execution phase grows to fill it."""
    req = state.request
    mode = settings.mode(req.mode or plan.answer_mode)
    phases = settings.phases
    explicit = req.max_iterations or mode.max_iterations
    effective = phases.effective_max_iterations(explicit)
    return Limits(
        max_iterations=effective,
        max_iterations_effective=effective,
        phase_limits={"planning": phases.planning, "execution": max(phases.execution, effective - phases.refinement),
                      "refinement": phases.refinement},
        max_tokens=mode.max_tokens,
        confidence_threshold=mode.confidence_threshold,
        max_duration_seconds=req.max_duration_seconds or settings.max_duration_seconds,
        min_confidence=req.min_confidence,
    )


def elapsed(state: JobState, now: float) -> float:
    return 0.0 if state.started_at is None else now - state.started_at


def seconds_left(state: JobState, now: float) -> float:
    if state.limits is None:
        return float("inf")
    return max(0.0, state.limits.max_duration_seconds - elapsed(state, now))


def out_of_time(state: JobState, now: float) -> bool:
    return state.limits is not None and seconds_left(state, now) <= 0


def budget_note(state: JobState, now: float | None = None) -> str:
    """The line every prompt carries: iterations and seconds left."""
    if state.limits is None:
        return "Budget: planning step; answer concisely."
    now = time.time() if now is None else now
    left = state.limits.max_iterations - state.iteration
    return (f"Budget: iteration {state.iteration} of {state.limits.max_iterations} ({left} left after this one), "
            f"{seconds_left(state, now):.0f} s of {state.limits.max_duration_seconds} s left.")
