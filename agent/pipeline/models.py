"""Pipeline boundary models: plan, search plan, evidence, answer, evaluation, job state and result."""
from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

from agent.models import SearchHit
from agent.settings import AnswerMode

DataSource = Literal["earnings_transcripts", "10k", "news", "hybrid"]
QuestionType = Literal["single_company", "multiple_companies", "comparison"]
JobStatus = Literal["queued", "running", "completed", "failed", "rejected"]

WEIGHTS = {"completeness": 0.35, "specificity": 0.30, "accuracy": 0.25, "clarity": 0.10}


class ResearchPlan(BaseModel):
    """Stage 2 (ReasoningPlanner) output: one structured LLM call."""

    reasoning: str
    tickers: list[str] = Field(default_factory=list)
    time_refs: list[str] = Field(default_factory=list)  # preserved exactly as the user wrote them
    intent: str = ""
    topic: str = ""
    question_type: QuestionType = "single_company"
    answer_mode: AnswerMode = AnswerMode.standard
    data_sources: list[DataSource] = Field(default_factory=lambda: ["earnings_transcripts"])
    needs_latest_news: bool = False
    needs_10k: bool = False
    search_queries: list[str] = Field(default_factory=list)  # initial keyword phrases
    is_valid: bool = True
    invalid_reason: str | None = None
    confidence: float = Field(default=0.9, ge=0, le=1)


class TickerPeriods(BaseModel):
    ticker: str
    periods: list[str]  # period keys: '2024_q4' or 'FY2024'


class SearchPlan(BaseModel):
    """Stage 2.1 output: each company's own periods for each data source."""

    transcripts: list[TickerPeriods] = Field(default_factory=list)
    tenk: list[TickerPeriods] = Field(default_factory=list)
    queries: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    reasoning: str = ""


class Evidence(SearchHit):
    iteration: int = 1
    query: str = ""


class Finding(BaseModel):
    citation_key: str
    extra_keys: list[str] = Field(default_factory=list)  # a calculation can cite several sources
    text: str  # a sentence or a short paraphrase supported by the cited evidence


class ScopeFindings(BaseModel):
    scope: str  # 'AAPL:2024_q4', 'AAPL:10k', 'news'
    findings: list[Finding] = Field(default_factory=list)


class Citation(BaseModel):
    marker: str  # '[1]', '[10K1]', '[N1]'
    source_type: str
    ticker: str | None = None
    period: str = ""
    text: str
    citation_key: str
    speaker: str | None = None
    item: str | None = None
    url: str | None = None


class Answer(BaseModel):
    text: str
    citations: list[Citation] = Field(default_factory=list)


class EvaluationScores(BaseModel):
    """What an evaluator returns: Stage 5 scores (0-100) and follow-up requests. The scope and the
    confidence are not in it: both are set in code."""

    completeness_score: int = Field(ge=0, le=100)
    specificity_score: int = Field(ge=0, le=100)
    accuracy_score: int = Field(ge=0, le=100)
    clarity_score: int = Field(ge=0, le=100)
    issues: list[str] = Field(default_factory=list)
    missing_info: list[str] = Field(default_factory=list)
    suggestions: list[str] = Field(default_factory=list)
    is_sufficient: bool = False
    followup_keywords: list[str] = Field(default_factory=list)
    needs_transcript_search: bool = True
    needs_news_search: bool = False
    news_query: str | None = None


class Evaluation(EvaluationScores):
    """An evaluation of one scope. Confidence is computed here, never taken from the LLM."""

    scope: str = "all"

    @computed_field
    @property
    def overall_confidence(self) -> float:
        return round(
            (WEIGHTS["completeness"] * self.completeness_score
             + WEIGHTS["specificity"] * self.specificity_score
             + WEIGHTS["accuracy"] * self.accuracy_score
             + WEIGHTS["clarity"] * self.clarity_score) / 100,
            4,
        )


class IterationRecord(BaseModel):
    iteration: int
    confidence: float
    evaluation: Evaluation
    chunks_total: int
    chunks_added: int
    keywords: list[str] = Field(default_factory=list)
    will_iterate: bool
    reason: str


class RoutingDecision(BaseModel):
    agent_name: str  # strategy name, e.g. 'transcripts_first', '10k_first', 'broad_window'
    confidence: float
    reasoning: str
    timestamp: dt.datetime = Field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))


class Limits(BaseModel):
    max_iterations: int  # the answer loop (answer-mode table, or the request's max_iterations)
    max_iterations_effective: int  # seed 002: all phases together
    phase_limits: dict[str, int] = Field(default_factory=dict)
    max_tokens: int
    confidence_threshold: float
    max_duration_seconds: int
    min_confidence: float | None = None


class JobRequest(BaseModel):
    """What a caller submits (Celery `submit_research`, HTTP, CLI)."""

    question: str = Field(min_length=3, max_length=2000)
    mode: AnswerMode | None = None
    tickers: list[str] | None = None
    max_iterations: int | None = Field(default=None, ge=1, le=20)
    max_duration_seconds: int | None = Field(default=None, ge=5, le=3600)
    min_confidence: float | None = Field(default=None, ge=0, le=1)
    idempotency_key: str | None = Field(default=None, max_length=200)
    batch: bool = False
    feedback: str | None = Field(default=None, max_length=2000)
    parent_job_id: str | None = None


class Outbox(BaseModel):
    """The events of one coordinator step, saved with the step so a crash before publishing loses none."""

    seq: int = 0
    events: list[tuple[str, str, dict[str, Any]]] = Field(default_factory=list)


class JobState(BaseModel):
    """Everything the coordinator needs between steps; persisted in research_jobs.state."""

    request: JobRequest
    limits: Limits | None = None
    plan: ResearchPlan | None = None
    search_plan: SearchPlan | None = None
    iteration: int = 0
    phase: Literal["planning", "execution", "refinement"] = "planning"
    phase_iterations: dict[str, int] = Field(default_factory=lambda: {"planning": 0, "execution": 0, "refinement": 0})
    pending_keywords: list[str] = Field(default_factory=list)
    pending_news_query: str | None = None
    answer: Answer | None = None
    iterations: list[IterationRecord] = Field(default_factory=list)
    routing_history: list[RoutingDecision] = Field(default_factory=list)
    strategy: str = "transcripts_first"
    router_retries: int = 0
    reasoning_trace: list[str] = Field(default_factory=list)
    timing: dict[str, float] = Field(default_factory=dict)
    tokens: dict[str, int] = Field(default_factory=lambda: {"prompt": 0, "completion": 0})
    news_status: str = "not_requested"
    working_memory: str | None = None
    tenk: dict[str, Any] = Field(default_factory=dict)
    started_at: float | None = None
    inflight: list[dict[str, Any]] = Field(default_factory=list)  # the calls of the stage in flight, for resume
    termination_reason: str | None = None
    outbox: Outbox = Field(default_factory=Outbox)

    def trace(self, line: str) -> None:
        self.reasoning_trace.append(line)


class JobResult(BaseModel):
    """Stage 6: the final result object."""

    job_id: str
    question: str
    status: JobStatus
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    confidence: float = 0.0
    chunks_used: int = 0
    iterations: int = 0
    timing: dict[str, float] = Field(default_factory=dict)
    sources: dict[str, int] = Field(default_factory=dict)
    evaluations: list[IterationRecord] = Field(default_factory=list)
    tokens: dict[str, int] = Field(default_factory=dict)
    provider: str
    mode: str | None = None
    termination_reason: str | None = None
    routing_history: list[RoutingDecision] = Field(default_factory=list)
    reasoning_trace: list[str] = Field(default_factory=list)
    news: str = "not_requested"
    problems: list[str] = Field(default_factory=list)
    parent_job_id: str | None = None
    error: str | None = None
