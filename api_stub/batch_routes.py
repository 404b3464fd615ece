"""/v1/batches: upload a batch (JSONL, plain text, or a JSON list), list batches, read a batch's progress, stream its
results as JSONL, cancel its unfinished jobs. A batch and its jobs belong to the API key that uploaded it: another key
is answered 404 (agent/ownership.py).

The batch domain (parsing lines, creating the jobs on the batch queue, progress, items) is `agent.batches`;
this module only moves bytes in and out of it.
"""
from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import StreamingResponse

from agent.models.batch import BatchProgress
from agent.ownership import Caller, can_see, listing_owner
from agent.settings import AnswerMode
from agent.submission import RequestInFlight
from api_stub.auth import require_key
from api_stub.cursor import BadCursor, decode_cursor, encode_cursor
from api_stub.error_responses import ApiError, error_responses
from api_stub.runtime import Runtime, runtime
from finagent.models import BatchCancelled, BatchPage, BatchSubmitted, ErrorDetail, LineError

router = APIRouter(prefix="/v1/batches", tags=["batches"])

NDJSON = "application/x-ndjson"
LINE_TYPES = (NDJSON, "application/jsonl", "application/x-jsonlines", "text/plain")
BatchId = Annotated[str, Path(description="the batch's id (a UUID)")]

UPLOAD_BODY = {"content": {
    NDJSON: {"schema": {"type": "string"}, "example": '{"question": "What drove revenue growth?", "mode": "direct"}\nHow did margins change?\n'},
    "text/plain": {"schema": {"type": "string"}, "example": "One question per line\n"},
    "application/json": {"schema": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "object"}]}}},
}, "required": True}


def _is_content_line(text: str) -> bool:
    stripped = text.strip()
    return bool(stripped) and not stripped.startswith("#")


def decode_lines(body: bytes, content_type: str) -> list[str | dict]:
    """The lines of an upload, in the form `agent.batches.parse_lines` takes: each a question or a JSON line (text),
    or an element of a JSON list (a question string or a JobRequest-like object)."""
    ctype = content_type.split(";")[0].strip().lower() or NDJSON
    if ctype not in (*LINE_TYPES, "application/json"):
        raise ApiError(415, f"Content-Type {ctype} is not a batch: send {NDJSON}, text/plain or a JSON list")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"the batch is not UTF-8 text (byte {exc.start})", code="bad_encoding") from None
    if ctype != "application/json":
        return [*text.splitlines()]
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ApiError(422, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                       details=[ErrorDetail(loc=["body"], msg=exc.msg, type="json_invalid")]) from None
    if not isinstance(data, list):
        raise ApiError(422, "a JSON batch is a list of questions (strings) or request objects",
                       details=[ErrorDetail(loc=["body"], msg="expected a list", type="list_type")])
    bad = [i for i, item in enumerate(data) if not isinstance(item, str | dict)]
    if bad:
        raise ApiError(422, "each element of a JSON batch is a question (string) or a request object",
                       details=[ErrorDetail(loc=["body", i], msg="expected a string or an object") for i in bad[:20]])
    return data


def _check_line_count(lines: list[str | dict], limit: int) -> int:
    count = sum(1 for x in lines if not isinstance(x, str) or _is_content_line(x))
    if count > limit:
        raise ApiError(413, f"the batch has {count} lines, over the limit of {limit}", code="too_many_lines")
    if count == 0:
        raise ApiError(422, "the batch has no questions", details=[ErrorDetail(loc=["body"], msg="empty batch")])
    return count


def _no_valid_lines(lines, exc: Exception) -> ApiError:
    details = [ErrorDetail(loc=["body", x.line], msg=x.error) for x in lines if x.error][:20]
    return ApiError(422, str(exc), code="no_valid_lines", details=details)


def _progress(rt: Runtime, batch_id: str, caller: Caller) -> BatchProgress:
    """The batch's progress, if `caller` may see it; else 404, as for a batch that does not exist."""
    from agent import batches
    from agent.persistence import batchstore

    try:
        uuid.UUID(batch_id)
    except ValueError:
        raise ApiError(404, f"no batch {batch_id}: not a batch id") from None
    row = batchstore.find_batch(rt.ctx.pool, batch_id)
    progress = batches.batch_progress(rt.ctx.pool, batch_id) if row is not None and can_see(caller, row["owner"]) else None
    if progress is None:
        raise ApiError(404, f"no batch {batch_id}")
    return progress


@router.post("", status_code=202, response_model=BatchSubmitted, openapi_extra={"requestBody": UPLOAD_BODY},
             responses=error_responses(400, 401, 409, 413, 415, 422), summary="Submit a batch of questions")
async def submit_batch(request: Request, rt: Runtime = Depends(runtime), caller: Caller = Depends(require_key),
                       name: str | None = Query(None, min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f-\x9f]+$",
                                                description="the batch's name; default: from the upload's content, so "
                                                            "uploading the same lines again returns the same batch"),
                       mode: AnswerMode | None = Query(None, description="the answer mode of lines that name none"),
                       retry_failed: bool = Query(False, description="re-run the lines of this batch whose jobs failed")):
    """One question per line (text/plain), or JSON lines each a question string or a JobRequest-like object
    (application/x-ndjson), or a JSON list of either. Invalid lines are reported, the rest run on the batch queue."""
    body = bytearray()
    async for chunk in request.stream():  # the body cap counts these bytes, with or without Content-Length
        body.extend(chunk)
    lines = decode_lines(bytes(body), request.headers.get("content-type", ""))
    _check_line_count(lines, rt.settings.api_max_batch_lines)
    from agent import batches

    batch_name = name or "api-" + hashlib.sha256(bytes(body)).hexdigest()[:16]
    parsed = batches.parse_lines(lines, mode.value if mode else None)
    if not any(x.request for x in parsed):
        raise _no_valid_lines(parsed, batches.NoValidLines(f"no valid question in the batch ({len(parsed)} invalid lines)"))

    def create() -> tuple[str | None, list[batches.BatchLine]]:
        checked = batches.validate_lines(rt.ctx, parsed, caller)  # unknown tickers
        if not any(x.request for x in checked):
            return None, checked
        return batches.create_batch(rt.ctx, rt.dispatcher, batch_name, checked, retry_failed=retry_failed, caller=caller), checked

    try:
        batch_id, checked = await anyio.to_thread.run_sync(create)
    except RequestInFlight:
        raise ApiError(409, f"batch {batch_name!r} is being submitted by another request; retry it shortly",
                       code="batch_in_flight", headers={"Retry-After": "1"}) from None
    if batch_id is None:
        raise _no_valid_lines(checked, batches.NoValidLines(f"no valid question in the batch ({len(checked)} invalid lines)"))
    invalid = [LineError(line=x.line, error=x.error) for x in checked if x.error]
    return BatchSubmitted(batch_id=batch_id, name=batch_name, total=len(parsed), jobs=len(parsed) - len(invalid),
                          invalid=invalid, status_url=f"/v1/batches/{batch_id}", results_url=f"/v1/batches/{batch_id}/results")


@router.get("", response_model=BatchPage, responses=error_responses(400, 401, 422), summary="List batches, newest first")
def list_batches(rt: Runtime = Depends(runtime), caller: Caller = Depends(require_key), limit: int = Query(20, ge=1, le=200),
                 cursor: str | None = Query(None, description="the next_cursor of the previous page")) -> BatchPage:
    """Each batch with its lines counted by status; paged with a cursor as GET /v1/jobs is."""
    from agent import batches
    from agent.persistence import batchstore

    try:
        after = decode_cursor(cursor) if cursor else None
    except BadCursor as exc:
        raise ApiError(400, str(exc), code="bad_cursor", details=[ErrorDetail(loc=["query", "cursor"], msg=str(exc))]) from None
    rows, next_position = batchstore.page_batches(rt.ctx.pool, limit, after, listing_owner(caller))
    return BatchPage(items=[batches.batch_summary(r) for r in rows],
                     next_cursor=encode_cursor(next_position) if next_position else None)


@router.post("/{batch_id}/cancel", status_code=202, response_model=BatchCancelled, responses=error_responses(401, 404, 409),
             summary="Cancel a batch's unfinished jobs")
def cancel_batch(batch_id: BatchId, rt: Runtime = Depends(runtime), caller: Caller = Depends(require_key)) -> BatchCancelled:
    """Every queued or running job of the batch stops at its next step with status `cancelled` (a job still waiting
    for a batch slot never runs); finished jobs keep their results. 409 if every job had already finished."""
    from agent import batches

    progress = _progress(rt, batch_id, caller)
    asked, finished = batches.cancel_batch(rt.ctx, rt.dispatcher, progress.batch_id)
    if not asked:
        raise ApiError(409, f"batch {progress.batch_id} has no unfinished job ({finished} finished)", code="batch_finished",
                       details=[ErrorDetail(loc=["batch_id"], msg=f"{finished} jobs finished")])
    return BatchCancelled(batch_id=progress.batch_id, cancelled=asked, finished=finished,
                          status_url=f"/v1/batches/{progress.batch_id}")


@router.get("/{batch_id}", response_model=BatchProgress, responses=error_responses(401, 404), summary="A batch's progress")
def batch_progress(batch_id: BatchId, rt: Runtime = Depends(runtime), caller: Caller = Depends(require_key)) -> BatchProgress:
    return _progress(rt, batch_id, caller)


@router.get("/{batch_id}/results", responses={200: {"content": {NDJSON: {}}, "description": "One BatchItem per line, in line order"},
                                              **error_responses(401, 404)},
            response_class=StreamingResponse, summary="A batch's results as JSON lines")
def batch_results(batch_id: BatchId, rt: Runtime = Depends(runtime), caller: Caller = Depends(require_key)) -> StreamingResponse:
    from agent import batches

    _progress(rt, batch_id, caller)
    items = batches.batch_items(rt.ctx.pool, batch_id)

    def lines() -> Iterator[str]:
        for item in items:
            yield item.model_dump_json() + "\n"

    return StreamingResponse(lines(), media_type=NDJSON)
