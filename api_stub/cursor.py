"""Opaque page cursors: the (created_at, id) of the last job of a page, as URL-safe base64 JSON."""
from __future__ import annotations

import base64
import datetime as dt
import json
import uuid

from agent.persistence.jobstore import PagePosition


class BadCursor(ValueError):
    pass


def encode_cursor(position: PagePosition) -> str:
    raw = json.dumps({"t": position.created_at.isoformat(), "id": position.job_id}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> PagePosition:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
        created_at = dt.datetime.fromisoformat(data["t"])
        job_id = str(uuid.UUID(data["id"]))
    except (ValueError, TypeError, KeyError) as exc:  # binascii.Error and JSONDecodeError are ValueErrors
        raise BadCursor("not a cursor this API returned") from exc
    if created_at.tzinfo is None:
        raise BadCursor("not a cursor this API returned")
    return PagePosition(created_at=created_at, job_id=job_id)
