"""The job as data: the state the coordinator keeps between steps and the events its steps emit. What a caller
submits and the result it reads are the API's contract, defined in the client distribution (`finagent.models`)
and re-exported here."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from agent.models.research import Answer, ResearchPlan, SearchPlan
from agent.models.steps import TaskCall
from finagent.models import (
    FINAL_STATUSES,
    ContextUse,
    IterationRecord,
    JobRequest,
    JobResult,
    JobStatus,
    RoutingDecision,
    ThoroughSearch,
)
from finagent.models.job_request import Strategy

__all__ = ["FINAL_STATUSES", "ContextUse", "EventType", "IterationRecord", "JobRequest", "JobResult", "JobState", "JobStatus",
           "Limits", "Outbox", "Phase", "RoutingDecision", "StepEvent", "Strategy", "TenKProgress", "ThoroughSearch", "TimedStage", "Timing"]

Phase = Literal["planning", "execution", "refinement"]
TimedStage = Literal["reasoning", "retrieval", "generation", "evaluation", "tenk"]
EventType = Literal[
    "job_status", "planning", "search", "iteration_start", "agent_decision", "iteration_followup",
    "iteration_search", "iteration_complete", "news_search", "tenk_search", "error", "result",
]


class Limits(BaseModel):
    max_iterations: int  # the answer loop (answer-mode table, or the request's max_iterations)
    max_iterations_effective: int  # all phases together
    phase_limits: dict[str, int] = Field(default_factory=dict)
    max_tokens: int
    confidence_threshold: float
    max_duration_seconds: int
    min_confidence: float | None = None


class StepEvent(BaseModel):
    """A progress event a step emits; published after the step commits."""

    type: EventType
    message: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class Outbox(BaseModel):
    """The events of one coordinator step, saved with the step so a crash before publishing loses none."""

    seq: int = 0
    events: list[StepEvent] = Field(default_factory=list)

    @field_validator("events", mode="before")
    @classmethod
    def _from_triples(cls, v: Any) -> Any:  # rows written before events were typed hold [type, message, data]
        return [{"type": e[0], "message": e[1], "data": e[2]} if isinstance(e, (list, tuple)) else e for e in v or []]


class TenKProgress(BaseModel):
    """The 10-K agent's rounds within one iteration, one line of work per filing: a company's 10-K for one fiscal
    year, keyed 'ACME:FY2024' (agent.models.tenk.filing_key). A state saved when the rounds were per company keys
    them by ticker alone; it still loads, and its ticker stands for each of that company's filings."""

    round: int = 0
    quality: dict[str, float] = Field(default_factory=dict)  # filing -> quality of its last evaluated answer
    missing: dict[str, list[str]] = Field(default_factory=dict)  # filing -> missing information to replan from
    open: list[str] = Field(default_factory=list)  # filings still below the quality threshold
    retrieved: dict[str, list[str]] = Field(default_factory=dict)  # filing -> sub-question signatures already searched
    last_plan: dict[str, str] = Field(default_factory=dict)  # filing -> step key of its latest 10-K plan
    searched: bool = False  # this iteration's transcript and news searches have been dispatched
    done: bool = False


class Timing(BaseModel):
    """Seconds spent per stage, and when the stage in flight was dispatched."""

    stages: dict[TimedStage, float] = Field(default_factory=dict)
    stage_started: float | None = None

    def add(self, stage: TimedStage, now: float) -> None:
        started = self.stage_started if self.stage_started is not None else now
        self.stages[stage] = round(self.stages.get(stage, 0.0) + now - started, 3)
        self.stage_started = None


def _no_phase_iterations() -> dict[Phase, int]:
    return {"planning": 0, "execution": 0, "refinement": 0}


class JobState(BaseModel):
    """Everything the coordinator needs between steps; persisted in research_jobs.state."""

    request: JobRequest
    limits: Limits | None = None
    plan: ResearchPlan | None = None
    search_plan: SearchPlan | None = None
    iteration: int = 0
    phase: Phase = "planning"
    phase_iterations: dict[Phase, int] = Field(default_factory=_no_phase_iterations)
    pending_keywords: list[str] = Field(default_factory=list)
    pending_news_query: str | None = None
    answer: Answer | None = None
    iterations: list[IterationRecord] = Field(default_factory=list)
    routing_history: list[RoutingDecision] = Field(default_factory=list)
    strategy: str = "transcripts_first"
    router_retries: int = 0
    reasoning_trace: list[str] = Field(default_factory=list)
    timing: Timing = Field(default_factory=Timing)
    tokens: dict[str, int] = Field(default_factory=lambda: {"prompt": 0, "completion": 0})
    cost_usd: float = 0.0  # at the settings' price table
    cache_hits: int = 0  # LLM calls answered from the response cache
    news_status: str = "not_requested"
    news_summary: str | None = None  # the news service's summary of the latest news search
    working_memory: str | None = None
    tenk: TenKProgress = Field(default_factory=TenKProgress)
    revision_notes: list[str] = Field(default_factory=list)  # what a refinement round must fix
    # scopes of this iteration already extracted beside the 10-K agent's answers (their evidence was complete)
    extracted_early: list[str] = Field(default_factory=list)
    context: ContextUse = Field(default_factory=ContextUse)
    started_at: float | None = None
    inflight: list[TaskCall] = Field(default_factory=list)  # the calls of the stage in flight, for resume
    termination_reason: str | None = None
    outbox: Outbox = Field(default_factory=Outbox)

    def trace(self, line: str) -> None:
        self.reasoning_trace.append(line)
