"""The HTTP front door against real services and a real worker."""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

pytestmark = pytest.mark.integration


@pytest.fixture
def client(ctx, sample_corpus, worker):
    from api_stub.app import app

    return TestClient(app)


def _sse(text: str) -> list[dict]:
    events, current = [], {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                events.append(current)
            current = {}
        elif ":" in line:
            key, _, value = line.partition(":")
            current[key] = value.strip()
    return events


def test_submit_follow_and_read_result(client):
    resp = client.post("/jobs", json={"question": "What was NVDA's revenue last quarter?", "idempotency_key": "api-1"})
    assert resp.status_code == 202
    job_id = resp.json()["job_id"]
    again = client.post("/jobs", json={"question": "What was NVDA's revenue last quarter?", "idempotency_key": "api-1"})
    assert again.json()["job_id"] == job_id and again.json()["created"] is False

    stream = client.get(f"/jobs/{job_id}/events")
    events = _sse(stream.text)
    assert events[0]["event"] == "job_status" and events[-1]["event"] == "job_status"
    assert json.loads(events[-1]["data"])["data"]["status"] == "completed"
    assert any(e["event"] == "result" for e in events)

    # a client that saw the first three events resumes after them with Last-Event-ID
    resumed = _sse(client.get(f"/jobs/{job_id}/events", headers={"Last-Event-ID": events[2]["id"]}).text)
    assert [e["id"] for e in resumed] == [e["id"] for e in events[3:]]

    job = client.get(f"/jobs/{job_id}").json()
    assert job["status"] == "completed" and "35.1 billion" in job["result"]["answer"]

    fb = client.post(f"/jobs/{job_id}/feedback", json={"feedback": "use the last 3 quarters"})
    assert fb.status_code == 202 and fb.json()["job_id"] != job_id


def test_bad_requests_get_clear_errors(client):
    assert client.get("/jobs/not-a-uuid").status_code == 404
    assert client.get("/jobs/00000000-0000-0000-0000-000000000000").status_code == 404
    bad = client.post("/jobs", json={"question": ""})
    assert bad.status_code == 422 and "question" in bad.text
    huge = client.post("/jobs", content=json.dumps({"question": "x" * 100_000}), headers={"Content-Type": "application/json"})
    assert huge.status_code == 413
    too_long = client.post("/jobs", json={"question": "x" * 5000})
    assert too_long.status_code == 422
    assert client.get("/healthz").json() == {"postgres": "ok", "redis": "ok"}
