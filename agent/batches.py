"""Overnight batches: many questions submitted at once, run on the low-priority batch queue, at most
`batch_concurrency` at a time.

Each line is keyed by its own content (the question, whitespace-normalised, and its options), not by its
position or the file's digest. Submitting a batch again (after a crash, a Ctrl-C or an edit of the file)
therefore reuses the job of every line whose content is unchanged, and runs only new or edited lines.
`retry_failed` gives the lines whose job failed a new job. A bad line (invalid JSON, a question too short
or too long, an unknown mode) is kept with its line number and reason; every other line still runs.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError, field_validator

from agent.context import Context
from agent.models.batch import BatchItem, BatchProgress, BatchReport
from agent.models.job import FINAL_STATUSES, JobRequest, JobResult
from agent.ownership import OPEN, Caller
from agent.persistence import batchstore, jobstore
from agent.submission import Dispatcher, InvalidRequest, cancel, check_question, check_request, create, known_tickers
from finagent.models import BatchSummary

RETRIED_STATUSES = ("failed",)
# what an invalid line's question may hold that Postgres text cannot, or a terminal should not, show
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


class BatchFileError(ValueError):
    """A batch file that cannot be read as questions at all (binary, not UTF-8, over the caps); nothing is submitted."""


class NoValidLines(ValueError):
    """Every line of the batch is invalid: nothing is submitted and no batch is recorded."""


class BatchLine(BaseModel):
    line: int  # 1-based, as an editor shows it
    request: JobRequest | None = None
    error: str | None = None
    key: str | None = None  # the content key of a valid line
    question: str = ""

    @field_validator("error", "question")
    @classmethod
    def _printable(cls, text: str | None) -> str | None:
        """An invalid line's text is stored and printed as it came, except what Postgres text cannot hold (NUL, lone
        surrogates) or a terminal should not be sent (control characters)."""
        return _UNPRINTABLE.sub("\ufffd", text) if text else text


def content_key(request: JobRequest) -> str:
    """What identifies a question: its normalised text and the options that change its answer."""
    fields = request.model_dump(mode="json", exclude={"idempotency_key", "batch", "parent_job_id"}, exclude_none=True)
    fields["question"] = re.sub(r"\s+", " ", request.question).strip()
    if fields.get("tickers"):
        fields["tickers"] = sorted(t.upper() for t in fields["tickers"])
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:24]


def _error_text(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in exc.errors())


def parse_line(n: int, raw: str | dict[str, Any], mode: str | None = None) -> BatchLine:
    """One line: a question, or a JSON object with "question" and any other JobRequest field."""
    try:
        if isinstance(raw, str):
            text = raw.strip()
            fields: Any = json.loads(text) if text[:1] in "{[" else {"question": text}
        else:
            fields = raw
        if not isinstance(fields, dict):
            raise ValueError("expected a question or a JSON object")
        fields = {k: v for k, v in fields.items() if k not in ("batch", "idempotency_key")}
        request = JobRequest.model_validate(({"mode": mode} if mode else {}) | fields | {"batch": True})
        check_question(request)
        return BatchLine(line=n, request=request, key=content_key(request), question=request.question)
    except InvalidRequest as exc:
        return BatchLine(line=n, error=str(exc), question=request.question)
    except json.JSONDecodeError as exc:
        return BatchLine(line=n, error=f"invalid JSON: {exc.msg} at column {exc.colno}")
    except ValidationError as exc:
        question = fields.get("question") if isinstance(fields, dict) else None
        return BatchLine(line=n, error=_error_text(exc), question=str(question or "")[:200])
    except ValueError as exc:
        return BatchLine(line=n, error=str(exc))


def parse_lines(lines: Sequence[str | dict[str, Any]], mode: str | None = None) -> list[BatchLine]:
    """Lines of a JSONL/text body or the items of a JSON list; blank lines and # comments are skipped."""
    out = []
    for n, raw in enumerate(lines, start=1):
        if isinstance(raw, str) and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        out.append(parse_line(n, raw, mode))
    return out


def read_file(path: Path, mode: str | None = None, max_bytes: int | None = None, max_lines: int | None = None) -> list[BatchLine]:
    """The file's lines, parsed. A file that is not UTF-8 text, or is over `max_bytes` or `max_lines` questions,
    raises BatchFileError: a binary or truncated upload is refused whole, never half-submitted."""
    size = path.stat().st_size
    if max_bytes is not None and size > max_bytes:
        raise BatchFileError(f"{path}: {size} bytes, over the batch limit of {max_bytes}")
    data = path.read_bytes()
    nul = data.find(b"\x00")
    if nul >= 0:
        raise BatchFileError(f"{path}: not a text file (a NUL byte at offset {nul}); save it as UTF-8 text")
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark from a Windows editor is fine
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BatchFileError(f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02X} at offset {exc.start}); "
                             "save the file as UTF-8") from None
    lines = parse_lines(list(text.splitlines()), mode)
    if max_lines is not None and len(lines) > max_lines:
        raise BatchFileError(f"{path}: {len(lines)} questions, over the batch limit of {max_lines}")
    return lines


def validate_lines(ctx: Context, lines: list[BatchLine], caller: Caller = OPEN) -> list[BatchLine]:
    """The lines with those that fail the database's checks (unknown tickers, a parent job `caller` may not see)
    turned into invalid lines."""
    known = known_tickers(ctx)
    out = []
    for line in lines:
        if line.request is not None:
            try:
                check_request(ctx, line.request, known, caller)
            except InvalidRequest as exc:
                line = BatchLine(line=line.line, error=str(exc), question=line.question)
        out.append(line)
    return out


def create_batch(ctx: Context, dispatcher: Dispatcher, name: str, lines: list[BatchLine], retry_failed: bool = False,
                 caller: Caller = OPEN) -> str:
    """Submit the lines as `caller`'s batch `name` (created on first use; the batch and its jobs owned by `caller`)
    and return the batch id. Idempotent: a line whose content already has a job in this batch keeps it; with
    `retry_failed`, a failed one gets a new job. When no line is valid it raises NoValidLines and writes nothing."""
    lines = validate_lines(ctx, lines, caller)
    if not any(line.request for line in lines):
        first = next((f"line {x.line}: {x.error}" for x in lines if x.error), "the batch is empty")
        raise NoValidLines(f"no valid question in the batch ({len(lines)} invalid lines; {first})")
    batch_id = batchstore.upsert_batch(ctx.pool, name, caller.owner)
    attempts = batchstore.previous_attempts(ctx.pool, batch_id)
    items = []
    for line in lines:
        row: dict[str, Any] = {"line": line.line, "key": line.key, "question": line.question, "job_id": None,
                               "error": line.error, "mode": None, "attempts": attempts.get(line.key or "", 1)}
        if line.request is not None:
            row["mode"] = line.request.mode.value if line.request.mode else None
            request = line.request.model_copy(update={"idempotency_key": f"batch:{batch_id}:{line.key}"})
            job_id, created = create(ctx, dispatcher, request, caller)
            if not created and retry_failed:
                job = jobstore.load_job(ctx.pool, job_id)
                if job is not None and job.status in RETRIED_STATUSES:
                    jobstore.release_idempotency_key(ctx.pool, job_id)
                    job_id, _ = create(ctx, dispatcher, request, caller)
                    row["attempts"] += 1
            row["job_id"] = job_id
        items.append(row)
    batchstore.replace_items(ctx.pool, batch_id, items)
    return batch_id


def find(ctx: Context, name_or_id: str) -> str | None:
    row = batchstore.find_batch(ctx.pool, name_or_id)
    return str(row["id"]) if row else None


def batch_summary(row: dict[str, Any]) -> BatchSummary:
    """A row of `batchstore.page_batches` as the API lists it."""
    counts = {str(k): int(v) for k, v in (row["counts"] or {}).items()}
    done = sum(n for s, n in counts.items() if s in FINAL_STATUSES or s == "invalid")
    return BatchSummary(batch_id=str(row["id"]), name=row["name"], created_at=row["created_at"], updated_at=row["updated_at"],
                        total=sum(counts.values()), counts=counts, done=done)


def cancel_batch(ctx: Context, dispatcher: Dispatcher, batch_id: str) -> tuple[list[str], int]:
    """Ask every unfinished job of the batch to stop (each ends at its next step as `cancelled`, a job still waiting
    for a batch slot without running). Returns the jobs asked to stop and how many had already ended."""
    unfinished, finished = batchstore.unfinished_jobs(ctx.pool, batch_id)
    asked = []
    for job_id in unfinished:
        try:
            status = cancel(ctx, dispatcher, job_id)
        except LookupError:
            continue
        if status in FINAL_STATUSES and status != "cancelled":
            finished += 1  # it ended meanwhile
        else:
            asked.append(job_id)
    return asked, finished


def batch_items(pool, batch_id: str) -> list[BatchItem]:
    return _items(batchstore.item_rows(pool, batch_id))


def _items(rows: list[dict[str, Any]]) -> list[BatchItem]:
    items = []
    for r in rows:
        result = JobResult.model_validate(r["result"]) if r["result"] else None
        # the job's own run time (from its start, not from its wait for a batch slot), else since it was created
        seconds = result.timing.get("total") if result else None
        if seconds is None and r["finished_at"] and r["created_at"]:
            seconds = (r["finished_at"] - r["created_at"]).total_seconds()
        error = r["line_error"] or r["job_error"] or (result.error if result else None)
        items.append(BatchItem(line=r["line"], key=r["item_key"], question=r["question"], mode=r["mode"] or (result.mode if result else None),
                               status="invalid" if r["line_error"] else r["status"] or "queued",
                               job_id=str(r["job_id"]) if r["job_id"] else None, error=error,
                               seconds=round(seconds, 3) if seconds is not None else None, attempts=r["attempts"],
                               result=result))
    return items


def batch_progress(pool, batch_id: str) -> BatchProgress | None:
    row = batchstore.find_batch(pool, batch_id)
    if row is None:
        return None
    rows = batchstore.item_rows(pool, batch_id)
    counts: dict[str, int] = {}
    for r in rows:
        status = "invalid" if r["line_error"] else r["status"] or "queued"
        counts[status] = counts.get(status, 0) + 1
    done = sum(n for s, n in counts.items() if s in FINAL_STATUSES or s == "invalid")
    jobs = [r for r in rows if r["job_id"] and r["created_at"]]
    finished = [r["finished_at"] for r in jobs if r["finished_at"]]
    eta = None
    if jobs and finished and done < len(rows):
        started = min(r["created_at"] for r in jobs)
        elapsed = (max(finished) - started).total_seconds()
        per_job = elapsed / len(finished)
        eta = round(per_job * (len(rows) - done), 1)
    return BatchProgress(batch_id=batch_id, name=row["name"], created_at=row["created_at"], total=len(rows), counts=counts,
                         done=done, finished_at=max(finished) if finished and done == len(rows) else None, eta_seconds=eta)


def batch_report(pool, batch_id: str) -> BatchReport | None:
    """The morning report's input: every line, and the batch's wall time from its first job to its last end."""
    row = batchstore.find_batch(pool, batch_id)
    if row is None:
        return None
    rows = batchstore.item_rows(pool, batch_id)
    created = [r["created_at"] for r in rows if r["created_at"]]
    finished = [r["finished_at"] for r in rows if r["finished_at"]]
    started_at = min(created) if created else row["created_at"]
    finished_at = max(finished) if finished else dt.datetime.now(dt.UTC)
    return BatchReport(name=row["name"], started_at=started_at, finished_at=finished_at, items=_items(rows))
