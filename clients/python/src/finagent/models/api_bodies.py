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
