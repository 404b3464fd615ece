"""The HTTP front door other services call: submit jobs, read results, follow events (SSE with Last-Event-ID)."""
from __future__ import annotations

import asyncio

from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sse_starlette.sse import EventSourceResponse

from agent import submission
from agent.context import Context
from agent.infra.events import TERMINAL_STATUSES, replay
from agent.models.job import JobRequest, JobResult
from agent.persistence import jobstore
from agent.submission import Dispatcher

MAX_BODY_BYTES = 64 * 1024

app = FastAPI(title="finagent", version="0.1.0", description="Research jobs over earnings calls, 10-K filings and news.")


def _ctx() -> Context:
    from workers.app import context

    return context()


def _dispatcher() -> Dispatcher:
    from tasks.dispatch import CeleryDispatcher

    return CeleryDispatcher()


class Submitted(BaseModel):
    job_id: str
    created: bool
    status_url: str
    events_url: str


class JobView(BaseModel):
    job_id: str
    status: str
    step: str
    question: str
    parent_job_id: str | None = None
    error: str | None = None
    result: JobResult | None = None


class Feedback(BaseModel):
    feedback: str


@app.middleware("http")
async def limit_body(request: Request, call_next):
    size = request.headers.get("content-length")
    if size and int(size) > MAX_BODY_BYTES:
        return JSONResponse({"detail": f"request body over {MAX_BODY_BYTES} bytes"}, status_code=413)
    return await call_next(request)


@app.get("/healthz")
def healthz() -> dict:
    ctx = _ctx()
    with ctx.pool.connection() as conn:
        conn.execute("SELECT 1")
    return {"postgres": "ok", "redis": "ok" if ctx.redis.ping() else "down"}


@app.post("/jobs", status_code=202, response_model=Submitted)
def submit(request: JobRequest) -> Submitted:
    job_id, created = submission.create(_ctx(), _dispatcher(), request)
    return Submitted(job_id=job_id, created=created, status_url=f"/jobs/{job_id}", events_url=f"/jobs/{job_id}/events")


@app.get("/jobs/{job_id}", response_model=JobView)
def get_job(job_id: str) -> JobView:
    job = _load(job_id)
    return JobView(job_id=job.id, status=job.status, step=job.step, question=job.question,
                   parent_job_id=job.parent_job_id, error=job.error, result=job.result)


@app.post("/jobs/{job_id}/feedback", status_code=202, response_model=Submitted)
def rerun_with_feedback(job_id: str, body: Feedback) -> Submitted:
    """Re-run a finished job with feedback; creates a new job linked to this one."""
    _load(job_id)
    try:
        new_id, created = submission.rerun_with_feedback(_ctx(), _dispatcher(), job_id, body.feedback)
    except ValueError as exc:
        raise HTTPException(409, str(exc)) from exc
    return Submitted(job_id=new_id, created=created, status_url=f"/jobs/{new_id}", events_url=f"/jobs/{new_id}/events")


@app.get("/jobs/{job_id}/events")
async def events(job_id: str, last_event_id: str | None = Header(default=None)):
    """Server-sent events: replays from Last-Event-ID (or the start), then streams until the job ends."""
    _load(job_id)
    ctx = _ctx()

    async def stream():
        after = last_event_id or "0"
        while True:
            batch = await asyncio.to_thread(replay, ctx.redis, job_id, after)
            for ev in batch:
                assert ev.id is not None  # replay() sets every event's stream id
                after = ev.id
                yield {"id": ev.id, "event": ev.type, "data": ev.model_dump_json()}
                if ev.type == "job_status" and ev.data.get("status") in TERMINAL_STATUSES:
                    return
            await asyncio.sleep(0.2)

    return EventSourceResponse(stream())


def _load(job_id: str) -> jobstore.JobRow:
    try:
        job = jobstore.load_job(_ctx().pool, job_id)
    except Exception:  # a malformed uuid is a client error, not a server one
        job = None
    if job is None:
        raise HTTPException(404, f"no job {job_id}")
    return job
