"""The API's contract without services: one error shape, every error documented in OpenAPI, body caps (declared
and chunked), batch upload parsing, and the page cursor."""
from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
from fastapi.testclient import TestClient

from agent.persistence.jobstore import PagePosition
from agent.settings import Settings
from api_stub.asgi import create_app
from api_stub.batch_routes import decode_lines
from api_stub.cursor import BadCursor, decode_cursor, encode_cursor
from api_stub.error_responses import ApiError
from api_stub.runtime import Runtime
from finagent.models import ErrorBody

SETTINGS = Settings(api_keys=[], api_max_body_bytes=2048, api_max_batch_bytes=4096, api_max_batch_lines=3)


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(Runtime(settings=SETTINGS)))


def _error(resp, status: int) -> ErrorBody:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    return ErrorBody.model_validate(resp.json())


def _chunks(total: int, size: int = 500):
    for _ in range(total // size):
        yield b"x" * size


# ---------- error shape ----------
def test_validation_errors_name_the_field(client):
    body = _error(client.post("/v1/jobs", json={"question": "ok?", "max_iterations": 99}), 422)
    assert body.error.code == "validation_error"
    assert body.error.details[0].loc == ["body", "max_iterations"]
    assert "max_iterations" in body.error.message
    missing = _error(client.post("/v1/jobs", json={}), 422)
    assert missing.error.details[0].loc == ["body", "question"] and missing.error.details[0].type == "missing"


def test_query_errors_name_the_parameter(client):
    assert _error(client.get("/v1/jobs?limit=0"), 422).error.details[0].loc == ["query", "limit"]
    assert _error(client.get("/v1/jobs?limit=201"), 422).error.details[0].loc == ["query", "limit"]
    bad_status = _error(client.get("/v1/jobs?status=queued,finished&status=nope"), 422)
    assert [d.msg for d in bad_status.error.details] == ["unknown status 'finished'", "unknown status 'nope'"]
    assert _error(client.get("/v1/jobs?created_after=yesterday"), 422).error.details[0].loc == ["query", "created_after"]
    assert _error(client.get("/v1/jobs?cursor=bm9wZQ"), 400).error.code == "bad_cursor"


def test_unknown_routes_methods_and_media_types_use_the_same_shape(client):
    assert _error(client.get("/jobs"), 404).error.code == "not_found"  # the unversioned routes are gone
    assert _error(client.put("/v1/jobs"), 405).error.code == "method_not_allowed"
    form = client.post("/v1/jobs", content=b"question=hello", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert _error(form, 415).error.code == "unsupported_media_type"
    events = client.get("/v1/jobs/00000000-0000-0000-0000-000000000000/events", headers={"Last-Event-ID": "drop table"})
    assert _error(events, 400).error.code == "bad_last_event_id"


def test_idempotency_key_header_is_validated(client):
    resp = client.post("/v1/jobs", json={"question": "What was revenue?"}, headers={"Idempotency-Key": "k" * 201})
    assert _error(resp, 422).error.details[0].loc == ["header", "Idempotency-Key"]


# ---------- OpenAPI ----------
def test_openapi_documents_every_error_of_every_route():
    spec = create_app(Runtime(settings=SETTINGS)).openapi()
    error_ref = "#/components/schemas/ErrorBody"
    seen = 0
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            seen += 1
            where = f"{method.upper()} {path}"
            errors = {int(code): r for code, r in op["responses"].items() if int(code) >= 400}
            assert errors or path == "/healthz", f"{where} documents no error"  # liveness has nothing to fail on
            for code, response in errors.items():
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": error_ref}, f"{where} {code} is not the error model"
            expected = set()
            if path not in ("/healthz", "/readyz"):
                expected.add(401)
            if "{" in path:
                expected.add(404)
            if op.get("requestBody"):
                expected |= {413, 415, 422}
            if any(p["in"] == "query" for p in op.get("parameters", [])):
                expected.add(422 if path != "/v1/jobs/{job_id}/events" else 400)
            assert expected <= errors.keys(), f"{where} lacks {sorted(expected - errors.keys())}"
    assert seen >= 11
    assert "HTTPValidationError" not in spec["components"]["schemas"]  # FastAPI's own 422 shape is never used
    assert {"ErrorBody", "Submitted", "JobView", "JobPage", "BatchSubmitted", "BatchProgress"} <= spec["components"]["schemas"].keys()


# ---------- body caps ----------
def test_declared_body_over_the_cap_is_413(client):
    resp = client.post("/v1/jobs", content=json.dumps({"question": "x" * 3000}), headers={"Content-Type": "application/json"})
    assert _error(resp, 413).error.code == "payload_too_large"


def test_chunked_body_over_the_cap_is_413(client):
    resp = client.post("/v1/jobs", content=_chunks(3000), headers={"Content-Type": "application/json"})
    assert resp.request.headers.get("transfer-encoding") == "chunked" and "content-length" not in resp.request.headers
    assert _error(resp, 413).error.code == "payload_too_large"
    # under the cap, a chunked body is read normally (and then validated)
    small = client.post("/v1/jobs", content=iter([b'{"question":', b' ""}']), headers={"Content-Type": "application/json"})
    assert _error(small, 422).error.details[0].loc == ["body", "question"]


def test_batches_have_their_own_caps(client):
    # 3000 bytes: over the job cap, under the batch cap; the line count is then over its cap
    text = "\n".join(f"Question number {i} about revenue growth " + "y" * 200 for i in range(12)).encode()
    assert 2048 < len(text) < 4096
    resp = client.post("/v1/batches", content=text, headers={"Content-Type": "text/plain"})
    assert _error(resp, 413).error.code == "too_many_lines"
    chunked = client.post("/v1/batches", content=_chunks(5000), headers={"Content-Type": "application/x-ndjson"})
    assert _error(chunked, 413).error.code == "payload_too_large"
    # blank and comment lines do not count
    empty = client.post("/v1/batches", content=b"\n# only a comment\n\n", headers={"Content-Type": "text/plain"})
    assert _error(empty, 422).error.message == "the batch has no questions"
    assert _error(client.post("/v1/batches", content=b"<xml/>", headers={"Content-Type": "application/xml"}), 415)


def test_batch_uploads_decode_to_lines():
    assert decode_lines(b'{"question": "a b c"}\nplain question\n', "application/x-ndjson") == ['{"question": "a b c"}', "plain question"]
    assert decode_lines(b'["q one", {"question": "q two", "mode": "direct"}]', "application/json; charset=utf-8") == [
        "q one", {"question": "q two", "mode": "direct"}]
    for body, ctype, status in ((b'{"question": "x"}', "application/json", 422), (b"[1, 2]", "application/json", 422),
                                (b"[", "application/json", 422), (b"\xff\xfe", "text/plain", 400), (b"q", "text/csv", 415)):
        with pytest.raises(ApiError) as exc:
            decode_lines(body, ctype)
        assert exc.value.status == status, body


# ---------- cursor ----------
def test_cursor_round_trip_and_rejects_tampering():
    pos = PagePosition(dt.datetime(2026, 3, 1, 12, 30, 45, 123456, tzinfo=dt.UTC), str(uuid.uuid4()))
    cursor = encode_cursor(pos)
    assert "=" not in cursor and "/" not in cursor and "+" not in cursor  # safe in a query string as is
    assert decode_cursor(cursor) == pos
    for bad in ("", "bm9wZQ", cursor[:-3], encode_cursor(pos).swapcase()):
        with pytest.raises(BadCursor):
            decode_cursor(bad)
