"""Overnight batches as the API shows them: the upload's answer, the progress, and one line's outcome (a results
JSONL line)."""
from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, Field

from finagent.models.job_result import JobResult

# a job's status, or what became of a line that never made a job
ItemStatus = Literal["queued", "running", "completed", "failed", "rejected", "cancelled", "invalid"]


class LineError(BaseModel):
    line: int
    error: str


class BatchSubmitted(BaseModel):
    batch_id: str
    name: str
    total: int  # lines received (blank and comment lines excluded)
    jobs: int  # lines that became (or already were) jobs
    invalid: list[LineError] = Field(default_factory=list)
    status_url: str
    results_url: str


class BatchItem(BaseModel):
    """One question of a batch: where it came from, its content key, its job and how the job ended."""

    line: int  # 1-based, as an editor shows it
    key: str | None = None  # the question's own content key (None for an invalid line)
    question: str = ""
    mode: str | None = None
    status: ItemStatus
    job_id: str | None = None
    error: str | None = None  # why the line is invalid, or why its job failed
    seconds: float | None = None  # from the job's creation to its end
    attempts: int = 1  # 1 + the times --retry-failed re-ran it
    result: JobResult | None = None


class BatchProgress(BaseModel):
    batch_id: str
    name: str
    created_at: dt.datetime
    total: int
    counts: dict[str, int] = Field(default_factory=dict)  # status -> lines
    done: int  # lines that reached a final status (invalid lines included)
    finished_at: dt.datetime | None = None  # when the last job ended, once every line is done
    eta_seconds: float | None = None  # from the pace so far


class BatchSummary(BaseModel):
    """A batch in a listing: its lines counted by status."""

    batch_id: str
    name: str
    created_at: dt.datetime
    updated_at: dt.datetime
    total: int
    counts: dict[str, int] = Field(default_factory=dict)  # status -> lines
    done: int  # lines that reached a final status (invalid lines included)


class BatchPage(BaseModel):
    items: list[BatchSummary]
    next_cursor: str | None = None  # opaque; pass it back as `cursor` for the next (older) page


class BatchCancelled(BaseModel):
    """What cancelling a batch did: its unfinished jobs were asked to stop (each ends at its next step as
    `cancelled`); its finished ones are left as they are."""

    batch_id: str
    cancelled: list[str] = Field(default_factory=list)  # the job ids asked to stop
    finished: int = 0  # jobs that had already ended
    status_url: str
