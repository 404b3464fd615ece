"""What one coordinator step returns: the calls to fan out next, the events to publish, maybe a result."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from agent.pipeline.models import JobResult

TaskName = Literal["plan", "search", "extract", "compose", "evaluate", "news",
                   "tenk_plan", "tenk_retrieve", "tenk_answer", "tenk_evaluate"]


class TaskCall(BaseModel):
    task: TaskName
    args: dict[str, Any] = Field(default_factory=dict)


class StepOutcome(BaseModel):
    status: str = "running"
    step: str
    calls: list[TaskCall] = Field(default_factory=list)
    events: list[tuple[str, str, dict]] = Field(default_factory=list)
    result: JobResult | None = None
