"""Overnight batches as data: what the morning report is made from. One line's outcome and a batch's progress are
the API's contract (`finagent.models`), re-exported here."""
from __future__ import annotations

import datetime as dt

from pydantic import BaseModel

from finagent.models import BatchItem, BatchProgress, ItemStatus

__all__ = ["BatchItem", "BatchProgress", "BatchReport", "ItemStatus"]


class BatchReport(BaseModel):
    """What the morning report is made from."""

    name: str
    started_at: dt.datetime
    finished_at: dt.datetime
    items: list[BatchItem]
