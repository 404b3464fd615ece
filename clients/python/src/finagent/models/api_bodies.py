"""The bodies of the API's job, event, health and error answers, and of a feedback request."""
from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, Field, field_validator

from finagent.models.job_request import JobStatus, plain_text
from finagent.models.job_result import JobResult


class ErrorDetail(BaseModel):
    """One problem of a request: where it is (e.g. ["body", "question"] or ["query", "status"]) and what is wrong."""

    loc: list[str | int] = Field(default_factory=list)
    msg: str
    type: str | None = None


class ErrorInfo(BaseModel):
    code: str  # stable, machine-readable: not_found, validation_error, idempotency_conflict, ...
    message: str  # one line for a human
    details: list[ErrorDetail] = Field(default_factory=list)


class ErrorBody(BaseModel):
    """Every error response of the API has this shape."""

    error: ErrorInfo


class Submitted(BaseModel):
    job_id: str
    created: bool  # False: the Idempotency-Key named a job that already existed
    status: JobStatus
    status_url: str
    events_url: str


class Suggestion(BaseModel):
    """What to change so that a failed or rejected job can succeed, when the reason allows one: the known tickers
    near an unknown one, or the periods a company has when the one asked for is out of its range. (A completed job's
    offer to search thoroughly is `result.suggestion`.)"""

    message: str  # one line for a human: "did you mean AAPL? (APPL is not a known ticker)"
    tickers: list[str] = Field(default_factory=list)  # known tickers close to the unknown ones, closest first
    available: dict[str, str] = Field(default_factory=dict)  # ticker -> its range, "Q1 2023 to Q4 2024"


class JobView(BaseModel):
    job_id: str
    status: JobStatus
    step: str
    question: str
    mode: str | None = None
    batch: bool = False
    cancel_requested: bool = False
    parent_job_id: str | None = None
    created_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None
    error: str | None = None
    suggestion: Suggestion | None = None  # with `error`, when the reason allows one
    result: JobResult | None = None


class JobSummary(BaseModel):
    """A job in a listing: no result, so a page stays small."""

    job_id: str
    status: JobStatus
    step: str
    question: str
    created_at: dt.datetime
    updated_at: dt.datetime | None = None


class JobPage(BaseModel):
    items: list[JobSummary]
    next_cursor: str | None = None  # opaque; pass it back as `cursor` for the next (older) page


class ToolCall(BaseModel):
    """One tool call of a job (a search, an LLM request, a news lookup), as the tool ledger recorded it."""

    call_key: str  # the call's deterministic key: a retried or redelivered call updates its row
    tool: str  # transcript_search, llm.plan, llm.extract, news_search, ...
    params: dict[str, Any] = Field(default_factory=dict)  # secrets masked
    started_at: dt.datetime
    duration_ms: float
    result_size: int = 0
    retries: int = 0
    error_class: str | None = None  # network, rate_limit, schema, internal, ... (None: it succeeded)
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = False  # answered by the LLM response cache
    llm_requests: int = 0


class JobLedger(BaseModel):
    """A job's tool ledger: every call in the order they started, and their totals."""

    job_id: str
    calls: list[ToolCall]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    retries: int = 0
    errors: int = 0  # calls that failed


class Feedback(BaseModel):
    feedback: str = Field(min_length=1, max_length=2000)

    _plain = field_validator("feedback", mode="before")(plain_text)


class JobEvent(BaseModel):
    """A progress event as the events stream sends it (the `data` of each SSE message; its SSE id is `id`)."""

    type: str
    job_id: str
    message: str = ""
    data: dict[str, Any] = Field(default_factory=dict)
    ts: float | None = None
    id: str | None = None


class Health(BaseModel):
    status: str = "ok"


class Readiness(BaseModel):
    ready: bool
    checks: dict[str, str]  # redis / postgres / queues -> "ok" or what is wrong
