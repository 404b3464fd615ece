"""Overnight batches: one question per line, or JSONL objects with "question" and any other JobRequest field.

A bad line (invalid JSON, a question too short or too long, an unknown mode) is reported with its line number
and written to the results as invalid; every other line still runs. Jobs go to the low-priority batch queue
with the idempotency key file-digest:line, so re-running the same file reuses the jobs already submitted.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from agent.models.job import JobRequest


class BatchLine(BaseModel):
    line: int  # 1-based, as an editor shows it
    request: JobRequest | None = None
    error: str | None = None
    job_id: str | None = None


def _error_text(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in exc.errors())


def read_batch(path: Path, mode: str | None = None) -> list[BatchLine]:
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()[:12]
    out: list[BatchLine] = []
    for n, text in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
        text = text.strip()
        if not text or text.startswith("#"):
            continue
        try:
            fields: dict[str, Any] = json.loads(text) if text[0] in "{[" else {"question": text}
            if not isinstance(fields, dict):
                raise ValueError("expected a JSON object")
            fields = {"mode": mode} | fields | {"batch": True, "idempotency_key": f"batch:{digest}:{n}"}
            out.append(BatchLine(line=n, request=JobRequest.model_validate(fields)))
        except json.JSONDecodeError as exc:
            out.append(BatchLine(line=n, error=f"invalid JSON: {exc.msg} at column {exc.colno}"))
        except ValidationError as exc:
            out.append(BatchLine(line=n, error=_error_text(exc)))
        except ValueError as exc:
            out.append(BatchLine(line=n, error=str(exc)))
    return out


def submit_batch(ctx, lines: list[BatchLine]) -> None:
    from agent.submission import create
    from tasks.dispatch import CeleryDispatcher

    dispatcher = CeleryDispatcher()
    for item in lines:
        if item.request is not None:
            item.job_id = create(ctx, dispatcher, item.request)[0]


def result_record(item: BatchLine, job) -> dict[str, Any]:
    if item.error is not None:
        return {"line": item.line, "status": "invalid", "error": item.error}
    if job is None or job.result is None:
        return {"line": item.line, "job_id": item.job_id, "status": job.status if job else "missing"}
    return {"line": item.line, **job.result.model_dump(mode="json")}
