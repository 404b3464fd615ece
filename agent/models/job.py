"""The job as data: what a caller submits, the state the coordinator keeps between steps, and the result."""
from __future__ import annotations

import datetime as dt
import re
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from agent.models.research import Answer, Citation, Evaluation, ResearchPlan, SearchPlan
from agent.models.steps import TaskCall
from agent.settings import AnswerMode

JobStatus = Literal["queued", "running", "completed", "failed", "rejected", "cancelled"]
FINAL_STATUSES: tuple[str, ...] = ("completed", "failed", "rejected", "cancelled")
Phase = Literal["planning", "execution", "refinement"]
TimedStage = Literal["reasoning", "retrieval", "generation", "evaluation", "tenk"]
EventType = Literal[
    "job_status", "planning", "search", "iteration_start", "agent_decision", "iteration_followup",
    "iteration_search", "iteration_complete", "news_search", "tenk_search", "error", "result",
]


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
    timestamp: dt.datetime = Field(default_factory=lambda: dt.datetime.now(dt.UTC))


class Limits(BaseModel):
    max_iterations: int  # the answer loop (answer-mode table, or the request's max_iterations)
    max_iterations_effective: int  # all phases together
    phase_limits: dict[str, int] = Field(default_factory=dict)
    max_tokens: int
    confidence_threshold: float
    max_duration_seconds: int
    min_confidence: float | None = None


# C0 and C1 control characters (and DEL) other than tab, newline and carriage return; and lone surrogates, which is
# how Python carries bytes that were not valid UTF-8 (a command-line argument, a file read with surrogateescape)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# an exchange symbol (ABC, BRK.B), or a registry key of a company known only by name (agent.retrieval.companies
# register_company: its name's letters and digits, e.g. 3M or a long name); every registry key must pass, since plans,
# suggestions and re-runs carry the registry's tickers into new requests
_TICKER = re.compile(r"[A-Z0-9][A-Z0-9]{0,19}(?:[.\-][A-Z0-9]{1,3})?")
MAX_TICKERS = 20


def plain_text(value: Any) -> Any:
    """Refuse text no person types (binary, control characters), then fold whitespace runs (a pasted question's tabs
    and line breaks) into single spaces."""
    if not isinstance(value, str):
        return value
    bad = _SURROGATE.search(value)
    if bad:
        raise PydanticCustomError("invalid_text", "contains bytes that are not UTF-8 text (at character {at})", {"at": bad.start() + 1})
    bad = _CONTROL.search(value)
    if bad:
        raise PydanticCustomError("control_character", "contains the control character {code} at character {at} "
                                  "(send plain text; tabs and line breaks are fine)", {"code": f"U+{ord(bad.group()):04X}", "at": bad.start() + 1})
    return " ".join(value.split())


class JobRequest(BaseModel):
    """What a caller submits (Celery `submit_research`, HTTP, CLI). Validation refuses what could never be a research
    request (binary or control characters, empty questions, malformed tickers, unknown fields), so nothing is written
    for it; `agent.submission.check_request` adds the checks that need the periods parser or the database."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=3, max_length=2000)
    mode: AnswerMode | None = None
    tickers: list[str] | None = Field(default=None, max_length=MAX_TICKERS)
    max_iterations: int | None = Field(default=None, ge=1, le=20, strict=True)
    max_duration_seconds: int | None = Field(default=None, ge=5, le=3600, strict=True)
    min_confidence: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)
    batch: bool = False
    feedback: str | None = Field(default=None, min_length=1, max_length=2000)
    parent_job_id: str | None = None

    @field_validator("question", "feedback", "idempotency_key", mode="before")
    @classmethod
    def _text(cls, value: Any, info: ValidationInfo) -> Any:
        text = plain_text(value)
        if info.field_name == "question" and isinstance(text, str) and not text:
            raise PydanticCustomError("empty", "the question is empty")
        return text

    @field_validator("tickers", mode="before")
    @classmethod
    def _tickers(cls, value: Any) -> Any:
        """'$aapl' and ' AAPL ' are AAPL; an empty list is no list. Whether the company is known needs the database."""
        if not isinstance(value, list):
            return value
        out: list[Any] = []
        for raw in value:
            if not isinstance(raw, str):
                return value  # pydantic names the element that is not a string
            ticker = raw.strip().lstrip("$").upper()
            if not _TICKER.fullmatch(ticker):
                raise PydanticCustomError("ticker_format", "{ticker} is not a ticker symbol (letters and digits, e.g. ABC or BRK.B)",
                                          {"ticker": repr(raw[:20])})
            if ticker not in out:
                out.append(ticker)
        return out or None

    @field_validator("parent_job_id")
    @classmethod
    def _job_id(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return str(uuid.UUID(value))
        except ValueError:
            raise PydanticCustomError("job_id", "not a job id (a UUID)") from None


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


class ContextUse(BaseModel):
    """How the latest answer used the evidence: passages read verbatim, and those over the token budget that
    reached it only through the working-memory summary (with the scopes they came from)."""

    verbatim: int = 0
    summarised: int = 0
    summarised_scopes: list[str] = Field(default_factory=list)
    merged: int = 0  # adjacent chunks of one document merged into one passage
    tokens_saved: int = 0  # by the merging: text neighbouring chunks share, sent once


class TenKProgress(BaseModel):
    """The 10-K agent's rounds within one iteration."""

    round: int = 0
    quality: dict[str, float] = Field(default_factory=dict)  # ticker -> quality of its last evaluated answer
    missing: dict[str, list[str]] = Field(default_factory=dict)  # ticker -> missing information to replan from
    open: list[str] = Field(default_factory=list)  # tickers still below the quality threshold
    retrieved: dict[str, list[str]] = Field(default_factory=dict)  # ticker -> sub-question signatures already searched
    last_plan: dict[str, str] = Field(default_factory=dict)  # ticker -> step key of its latest 10-K plan
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


class ThoroughSearch(BaseModel):
    """Offered when a job in a quicker mode stopped below its confidence threshold: the request that would
    search thoroughly (deep_search), ready to submit."""

    message: str = "Want me to search thoroughly?"
    request: JobRequest


class JobResult(BaseModel):
    """The final result object."""

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
    cost_usd: float = 0.0
    cache_hits: int = 0
    context: ContextUse = Field(default_factory=ContextUse)
    provider: str
    mode: str | None = None
    termination_reason: str | None = None
    routing_history: list[RoutingDecision] = Field(default_factory=list)
    reasoning_trace: list[str] = Field(default_factory=list)
    news: str = "not_requested"
    problems: list[str] = Field(default_factory=list)
    parent_job_id: str | None = None
    error: str | None = None
    # a failed job: what failed ('network', 'rate_limit', 'schema', 'internal', ...) and whether `answer` holds the
    # partial answer it reached (cited findings, or an answer from before the failure)
    error_class: str | None = None
    partial: bool = False
    suggestion: ThoroughSearch | None = None
