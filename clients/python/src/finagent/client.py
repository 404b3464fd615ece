"""A typed Python client of the finagent HTTP API (/v1), over httpx.

    with FinagentClient("http://127.0.0.1:8000", api_key="...") as fa:
        job = fa.submit("What was the revenue last quarter?", mode="direct", idempotency_key="req-42")
        done = fa.wait(job.job_id, timeout=300)
        print(done.result.answer if done.result else done.status)
"""
from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, SSEError, connect_sse

from finagent.errors import FinagentError, NotReady, raise_for_error
from finagent.models import (
    FINAL_STATUSES,
    BatchCancelled,
    BatchItem,
    BatchPage,
    BatchProgress,
    BatchSubmitted,
    BatchSummary,
    Health,
    JobEvent,
    JobLedger,
    JobPage,
    JobRequest,
    JobSummary,
    JobView,
    Readiness,
    Submitted,
)

# an event stream is idle between events except for the server's keep-alive pings (every 15 s by default)
EVENTS_READ_TIMEOUT_S = 60.0


class FinagentClient:
    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 30.0, *,
                 poll_interval: float = 1.0, transport: httpx.BaseTransport | None = None):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout, self.poll_interval = timeout, poll_interval
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> FinagentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self._http.request(method, path, **kwargs)
        raise_for_error(response)
        return response

    # ---------- jobs ----------
    def submit(self, question_or_request: str | JobRequest | Mapping[str, Any], *, idempotency_key: str | None = None,
               **fields: Any) -> Submitted:
        """Submit a job: a question with any JobRequest fields, or a whole request. The same idempotency key with
        the same request returns the existing job (`created` False); with another request it raises BadRequest (code
        "idempotency_key_reused"); while another submission with the key is still being made, Conflict (code
        "idempotency_in_flight": submit again after `retry_after` seconds)."""
        if isinstance(question_or_request, str):
            body: dict[str, Any] = {"question": question_or_request}
        elif isinstance(question_or_request, JobRequest):
            body = question_or_request.model_dump(mode="json", exclude_none=True)
        else:
            body = dict(question_or_request)
        body |= {k: getattr(v, "value", v) for k, v in fields.items()}
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return Submitted.model_validate_json(self._request("POST", "/v1/jobs", json=body, headers=headers).content)

    def get(self, job_id: str) -> JobView:
        return JobView.model_validate_json(self._request("GET", f"/v1/jobs/{job_id}").content)

    def cancel(self, job_id: str) -> JobView:
        """Ask a running job to stop (it ends at its next step as `cancelled`); Conflict if it had finished."""
        return JobView.model_validate_json(self._request("DELETE", f"/v1/jobs/{job_id}").content)

    def ledger(self, job_id: str) -> JobLedger:
        """The job's tool ledger: every tool call with its parameters, timing, retries, error class, tokens and cost."""
        return JobLedger.model_validate_json(self._request("GET", f"/v1/jobs/{job_id}/ledger").content)

    def feedback(self, job_id: str, feedback: str) -> Submitted:
        """Re-run a finished job with feedback: a new job linked to it."""
        return Submitted.model_validate_json(self._request("POST", f"/v1/jobs/{job_id}/feedback", json={"feedback": feedback}).content)

    def list_jobs(self, status: str | Sequence[str] | None = None, created_after: dt.datetime | None = None,
                  limit: int = 20, cursor: str | None = None) -> JobPage:
        params: dict[str, Any] = {"limit": limit}
        if status:
            params["status"] = [status] if isinstance(status, str) else list(status)
        if created_after:
            params["created_after"] = created_after.isoformat()
        if cursor:
            params["cursor"] = cursor
        return JobPage.model_validate_json(self._request("GET", "/v1/jobs", params=params).content)

    def iter_jobs(self, status: str | Sequence[str] | None = None, created_after: dt.datetime | None = None,
                  page_size: int = 100) -> Iterator[JobSummary]:
        """Every matching job, newest first, following the cursor from page to page."""
        cursor: str | None = None
        while True:
            page = self.list_jobs(status, created_after, page_size, cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    # ---------- events ----------
    def _sse(self, job_id: str, last_event_id: str | None, read_timeout: float) -> Iterator[ServerSentEvent]:
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        timeout = httpx.Timeout(self.timeout, read=read_timeout)
        with connect_sse(self._http, "GET", f"/v1/jobs/{job_id}/events", headers=headers, timeout=timeout) as source:
            raise_for_error(source.response)
            yield from source.iter_sse()

    def events(self, job_id: str, last_event_id: str | None = None) -> Iterator[JobEvent]:
        """The job's events after `last_event_id` (or from the start) until it ends; each event's `id` resumes."""
        for sse in self._sse(job_id, last_event_id, EVENTS_READ_TIMEOUT_S):
            if not sse.data:  # a keep-alive ping after the first event (httpx-sse reports it as an empty message)
                continue
            event = JobEvent.model_validate_json(sse.data)
            event.id = sse.id or event.id
            yield event

    def wait(self, job_id: str, timeout: float = 300.0) -> JobView:
        """The job once it has finished. Follows its events (resuming after a dropped connection), falls back to
        polling when the stream fails, keeps asking through a server that answers 503 or cannot be reached, and
        raises TimeoutError when `timeout` seconds pass first."""
        deadline = time.monotonic() + timeout
        last_id: str | None = None
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                for sse in self._sse(job_id, last_id, read_timeout=max(0.1, remaining)):
                    last_id = sse.id or last_id
                    if sse.event == "job_status" and json.loads(sse.data).get("data", {}).get("status") in FINAL_STATUSES:
                        break
                    if time.monotonic() >= deadline:
                        break
            except (httpx.TransportError, SSEError, NotReady):
                pass  # the stream failed, or Redis is down (503): poll below, then try the stream again
            try:
                job: JobView | None = self.get(job_id)
            except (httpx.TransportError, NotReady):
                job = None  # the server or its database is down for now: the job is not lost, ask again
            if job is not None and job.status in FINAL_STATUSES:
                return job
            time.sleep(max(0.0, min(self.poll_interval, deadline - time.monotonic())))
        raise TimeoutError(f"job {job_id} did not finish within {timeout:g} s")

    # ---------- batches ----------
    def submit_batch(self, lines: str | bytes | Sequence[str | Mapping[str, Any]], *, name: str | None = None,
                     mode: str | None = None, retry_failed: bool = False) -> BatchSubmitted:
        """A batch: JSONL or plain text (one question per line), or a list of questions / request objects."""
        params: dict[str, Any] = {"retry_failed": retry_failed}
        if name:
            params["name"] = name
        if mode:
            params["mode"] = mode
        if isinstance(lines, str | bytes):
            content = lines.encode() if isinstance(lines, str) else lines
            response = self._request("POST", "/v1/batches", params=params, content=content,
                                     headers={"Content-Type": "application/x-ndjson"})
        else:
            response = self._request("POST", "/v1/batches", params=params, json=[x if isinstance(x, str) else dict(x) for x in lines])
        return BatchSubmitted.model_validate_json(response.content)

    def batch(self, batch_id: str) -> BatchProgress:
        return BatchProgress.model_validate_json(self._request("GET", f"/v1/batches/{batch_id}").content)

    def list_batches(self, limit: int = 20, cursor: str | None = None) -> BatchPage:
        params: dict[str, Any] = {"limit": limit}
        if cursor:
            params["cursor"] = cursor
        return BatchPage.model_validate_json(self._request("GET", "/v1/batches", params=params).content)

    def iter_batches(self, page_size: int = 100) -> Iterator[BatchSummary]:
        """Every batch, newest first, following the cursor from page to page."""
        cursor: str | None = None
        while True:
            page = self.list_batches(page_size, cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def cancel_batch(self, batch_id: str) -> BatchCancelled:
        """Ask the batch's unfinished jobs to stop; Conflict if every one had finished."""
        return BatchCancelled.model_validate_json(self._request("POST", f"/v1/batches/{batch_id}/cancel").content)

    def batch_results(self, batch_id: str) -> Iterator[BatchItem]:
        """One item per line of the batch, read as the server streams them."""
        with self._http.stream("GET", f"/v1/batches/{batch_id}/results") as response:
            raise_for_error(response)
            for line in response.iter_lines():
                if line.strip():
                    yield BatchItem.model_validate_json(line)

    # ---------- operations ----------
    def health(self) -> Health:
        return Health.model_validate_json(self._request("GET", "/healthz").content)

    def ready(self) -> Readiness:
        """Readiness; raises NotReady (with what is missing in `error.details`) when the server answers 503."""
        return Readiness.model_validate_json(self._request("GET", "/readyz").content)


__all__ = ["FinagentClient", "FinagentError"]
