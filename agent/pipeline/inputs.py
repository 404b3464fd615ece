"""What a coordinator step is handed (everything it reads, loaded by the caller) and what it returns."""
from __future__ import annotations

from pydantic import BaseModel, Field

from agent.models.corpus import Period
from agent.models.job import JobResult, JobState, StepEvent
from agent.models.research import Answer
from agent.models.steps import JobStep, StepOutputs, TaskCall


class EvidenceSummary(BaseModel):
    """The job's accumulated evidence, counted: the step needs the numbers, never the passages."""

    per_iteration: dict[int, int] = Field(default_factory=dict)  # iteration -> chunks first found then
    scopes: list[str] = Field(default_factory=list)  # 'AAPL:2024_q4', 'AAPL:10k', 'news'
    sources: dict[str, int] = Field(default_factory=dict)  # 'earnings_transcripts' / '10k' / 'news' -> chunks

    @property
    def total(self) -> int:
        return sum(self.per_iteration.values())

    def added(self, iteration: int) -> int:
        return self.per_iteration.get(iteration, 0)


class Availability(BaseModel):
    """The periods ingested for each company, oldest first: transcript quarters, and the fiscal years of its filings
    (`tenk`: any form, a 10-K, 10-Q, earnings release or 8-K, each year as quarter 0)."""

    transcripts: dict[str, list[Period]] = Field(default_factory=dict)
    tenk: dict[str, list[Period]] = Field(default_factory=dict)
    names: dict[str, str] = Field(default_factory=dict)  # ticker -> company name

    def has_10k(self, tickers: list[str]) -> bool:
        return any(self.tenk.get(t) for t in tickers)


class StepInput(BaseModel):
    """Everything one step reads besides the job's state."""

    job_id: str
    done: JobStep  # the stage whose calls just finished
    outputs: StepOutputs = Field(default_factory=StepOutputs)  # the outputs of that stage's iteration
    evidence: EvidenceSummary = Field(default_factory=EvidenceSummary)
    availability: Availability = Field(default_factory=Availability)
    now: float  # wall-clock seconds: budgets and stage timing are computed from it, never from a clock read
    provider: str  # the LLM provider's name, for the result
    # the LLM provider reworks an answer from an evaluation's feedback; if not (the extractive one), a refinement
    # round, which searches nothing new, could not change the answer and is skipped
    provider_revises: bool = True
    cancel_requested: bool = False  # a caller cancelled the job: this step ends it
    # composing failed for good: the iteration's cited findings, which a failed job keeps as its partial answer
    partial_answer: Answer | None = None


class StepOutcome(BaseModel):
    """The new state, the next step, the calls to fan out, the events to publish and, at the end, the result."""

    state: JobState
    status: str = "running"
    step: JobStep
    calls: list[TaskCall] = Field(default_factory=list)
    events: list[StepEvent] = Field(default_factory=list)
    result: JobResult | None = None
