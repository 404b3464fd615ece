"""Overnight batches as data: one line's outcome (a results JSONL line, a report row) and a batch's progress."""
from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, Field

from agent.models.job import JobResult

# a job's status, or what became of a line that never made a job
ItemStatus = Literal["queued", "running", "completed", "failed", "rejected", "cancelled", "invalid"]


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


class BatchReport(BaseModel):
    """What the morning report is made from."""

    name: str
    started_at: dt.datetime
    finished_at: dt.datetime
    items: list[BatchItem]
