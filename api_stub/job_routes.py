"""/v1/jobs: submit (idempotent), list (filters, cursor pages), read, cancel, feedback, and follow events (SSE).
Each job belongs to the API key that created it: another key is answered 404 (agent/ownership.py)."""
from __future__ import annotations

import asyncio
import datetime as dt
from typing import Annotated, get_args

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from sse_starlette.sse import EventSourceResponse

from agent import submission
from agent.failure_hints import job_suggestion
from agent.models.job import FINAL_STATUSES, JobRequest, JobStatus
from agent.ownership import Caller, listing_owner
from agent.persistence import jobstore
from agent.persistence.ledger import job_ledger
from api_stub.auth import require_key
from api_stub.cursor import BadCursor, decode_cursor, encode_cursor
from api_stub.error_responses import ApiError, error_responses
from api_stub.runtime import Runtime, runtime
from api_stub.sse import check_event_id, job_events
from finagent.models import ErrorBody, ErrorDetail, Feedback, JobLedger, JobPage, JobSummary, JobView, Submitted

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

STATUSES: tuple[str, ...] = get_args(JobStatus)
IN_FLIGHT_RETRY_AFTER_S = 1  # a submission in flight is saving its job and sending its first step: milliseconds
JobId = Annotated[str, Path(description="the job's id (a UUID)")]


def require_json(request: Request) -> None:
    ctype = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise ApiError(415, f"Content-Type {ctype} is not supported here: send application/json")


def load(rt: Runtime, job_id: str, caller: Caller) -> jobstore.JobRow:
    """The job, if `caller` may see it; else 404, as for a job that does not exist."""
    try:
        return submission.find_job(rt.ctx, job_id, caller)
    except LookupError as exc:
        raise ApiError(404, str(exc)) from None


def invalid(exc: submission.InvalidRequest) -> ApiError:
    return ApiError(422, f"invalid request: {exc}", code="invalid_request",
                    details=[ErrorDetail(loc=["body", exc.field], msg=exc.message, type="value_error")])


def submitted(job_id: str, created: bool, status: str) -> Submitted:
    return Submitted(job_id=job_id, created=created, status=status,
                     status_url=f"/v1/jobs/{job_id}", events_url=f"/v1/jobs/{job_id}/events")


@router.post("", status_code=202, response_model=Submitted, dependencies=[Depends(require_json)],
             responses={200: {"model": Submitted, "description": "The Idempotency-Key names an existing job with the same request"},
                        409: {"model": ErrorBody, "description": "A submission with the same Idempotency-Key is still in flight: "
                                                                 "retry after Retry-After seconds"},
                        422: {"model": ErrorBody, "description": "Invalid field values (`details` names each field), or an "
                                                                 "Idempotency-Key already used with a different request"},
                        **error_responses(401, 413, 415)},
             summary="Submit a research job")
def submit(request: JobRequest, response: Response, rt: Runtime = Depends(runtime), caller: Caller = Depends(require_key),
           idempotency_key: str | None = Header(None, alias="Idempotency-Key", min_length=1, max_length=200,
                                                description="overrides the body's idempotency_key")) -> Submitted:
    """202 with a new job; 200 when the key names an existing job with the same request; 422 when the key is
    already used by a different request; 409 while another submission with the key is still being made."""
    if idempotency_key is not None:
        request = request.model_copy(update={"idempotency_key": idempotency_key})
    try:
        submission.check_question(request)  # before any service is touched
        job_id, created = submission.create(rt.ctx, rt.dispatcher, request, caller)
    except submission.InvalidRequest as exc:
        raise invalid(exc) from None
    except submission.RequestInFlight as exc:
        raise ApiError(409, str(exc), code="idempotency_in_flight", headers={"Retry-After": str(IN_FLIGHT_RETRY_AFTER_S)},
                       details=[ErrorDetail(loc=["header", "Idempotency-Key"], msg="a submission with it is in flight")]) from None
    except submission.IdempotencyConflict as exc:
        raise ApiError(422, str(exc), code="idempotency_key_reused",
                       details=[ErrorDetail(loc=["header", "Idempotency-Key"], msg=f"used by job {exc.job_id} with a different request",
                                            type="idempotency_key_reused")]) from None
    response.headers["Location"] = f"/v1/jobs/{job_id}"
    if created:
        return submitted(job_id, True, "queued")
    response.status_code = 200
    return submitted(job_id, False, load(rt, job_id, caller).status)


def _statuses(values: list[str] | None) -> list[str] | None:
    wanted = [s.strip() for v in values or [] for s in v.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in STATUSES]
    if unknown:
        raise ApiError(422, f"unknown status {', '.join(unknown)}: one of {', '.join(STATUSES)}",
                       details=[ErrorDetail(loc=["query", "status"], msg=f"unknown status {s!r}", type="enum") for s in unknown])
    return wanted or None


@router.get("", response_model=JobPage, responses=error_responses(400, 401, 422), summary="List jobs, newest first")
def list_jobs(rt: Runtime = Depends(runtime), caller: Caller = Depends(require_key),
              status: list[str] | None = Query(None, description="repeat it or give a comma list: status=queued,running"),
              created_after: dt.datetime | None = Query(None, description="ISO 8601; without a zone, UTC"),
              limit: int = Query(20, ge=1, le=200),
              cursor: str | None = Query(None, description="the next_cursor of the previous page")) -> JobPage:
    statuses = _statuses(status)
    if created_after is not None and created_after.tzinfo is None:
        created_after = created_after.replace(tzinfo=dt.UTC)
    try:
        after = decode_cursor(cursor) if cursor else None
    except BadCursor as exc:
        raise ApiError(400, str(exc), code="bad_cursor", details=[ErrorDetail(loc=["query", "cursor"], msg=str(exc))]) from None
    rows, next_position = jobstore.page_jobs(rt.ctx.pool, limit, statuses, created_after, after, listing_owner(caller))
    items = [JobSummary(job_id=str(r["id"]), status=r["status"], step=r["step"], question=r["question"],
                        created_at=r["created_at"], updated_at=r["updated_at"]) for r in rows]
    return JobPage(items=items, next_cursor=encode_cursor(next_position) if next_position else None)


@router.get("/{job_id}", response_model=JobView, responses=error_responses(401, 404), summary="A job and its result")
def get_job(job_id: JobId, rt: Runtime = Depends(runtime), caller: Caller = Depends(require_key)) -> JobView:
    """A failed or rejected job's `error` comes with a `suggestion` when its reason allows one."""
    job = load(rt, job_id, caller)
    view = submission.job_view(job)
    view.suggestion = job_suggestion(rt.ctx, job)
    return view


@router.get("/{job_id}/ledger", response_model=JobLedger, responses=error_responses(401, 404),
            summary="A job's tool ledger")
def get_ledger(job_id: JobId, rt: Runtime = Depends(runtime), caller: Caller = Depends(require_key)) -> JobLedger:
    """Every tool call of the job (searches, LLM requests, news) with its parameters (secrets masked), timing,
    retries, error class, tokens and cost, in the order they started; and their totals."""
    job = load(rt, job_id, caller)
    return job_ledger(rt.ctx.pool, job.id)


@router.delete("/{job_id}", status_code=202, response_model=JobView, responses=error_responses(401, 404, 409),
               summary="Cancel a job")
def cancel_job(job_id: JobId, rt: Runtime = Depends(runtime), caller: Caller = Depends(require_key)) -> JobView:
    """The job stops at its next step with status `cancelled`, keeping its answer so far. 409 if it had finished."""
    return _cancel(rt, job_id, caller)


@router.post("/{job_id}/cancel", status_code=202, response_model=JobView, responses=error_responses(401, 404, 409),
             summary="Cancel a job (for clients that cannot send DELETE)")
def cancel_job_post(job_id: JobId, rt: Runtime = Depends(runtime), caller: Caller = Depends(require_key)) -> JobView:
    """The same as DELETE /v1/jobs/{job_id}; no body."""
    return _cancel(rt, job_id, caller)


def _cancel(rt: Runtime, job_id: str, caller: Caller) -> JobView:
    job = load(rt, job_id, caller)
    status = job.status
    if status not in FINAL_STATUSES:
        try:
            status = submission.cancel(rt.ctx, rt.dispatcher, job.id)
        except LookupError as exc:
            raise ApiError(404, str(exc)) from None
    # finished before the request (or while it ran) with another outcome: nothing was cancelled
    if status in FINAL_STATUSES and not (status == "cancelled" and job.status not in FINAL_STATUSES):
        raise ApiError(409, f"job {job.id} has already finished: {status}", code="job_finished",
                       details=[ErrorDetail(loc=["status"], msg=status)])
    return submission.job_view(load(rt, job.id, caller))


@router.post("/{job_id}/feedback", status_code=202, response_model=Submitted, dependencies=[Depends(require_json)],
             responses=error_responses(401, 404, 409, 413, 415, 422), summary="Re-run a finished job with feedback")
def rerun_with_feedback(body: Feedback, job_id: JobId, rt: Runtime = Depends(runtime),
                        caller: Caller = Depends(require_key)) -> Submitted:
    """Creates a new job linked to this one, whose plan takes the feedback into account; it belongs to the key that
    created this one."""
    load(rt, job_id, caller)
    try:
        new_id, created = submission.rerun_with_feedback(rt.ctx, rt.dispatcher, job_id, body.feedback, caller)
    except submission.InvalidRequest as exc:
        raise invalid(exc) from None
    except LookupError as exc:
        raise ApiError(404, str(exc)) from None
    except ValueError as exc:
        raise ApiError(409, str(exc), code="job_not_finished") from None
    return submitted(new_id, created, "queued")


@router.get("/{job_id}/events", responses={200: {"content": {"text/event-stream": {}},
                                                 "description": "One SSE message per event (id, event type, JSON data)"},
                                           **error_responses(400, 401, 404)},
            summary="Follow a job's events (server-sent events)")
async def events(job_id: JobId, rt: Runtime = Depends(runtime), caller: Caller = Depends(require_key),
                 header_id: str | None = Header(None, alias="Last-Event-ID"),
                 query_id: str | None = Query(None, alias="last_event_id",
                                              description="for clients that cannot set Last-Event-ID; the header wins")):
    """Replays the events after Last-Event-ID (or from the start), then streams new ones; ends after the
    terminal job_status event. A comment ping keeps idle connections open through proxies. An open stream waits
    out a Redis outage (an SSE comment says so) and carries on from its last event."""
    after = check_event_id(header_id or query_id)
    await asyncio.to_thread(load, rt, job_id, caller)
    await rt.aredis.ping()  # Redis down is a 503 with Retry-After here, not a 200 whose stream breaks at once
    return EventSourceResponse(job_events(rt, job_id, after), ping=rt.sse_ping_s)
