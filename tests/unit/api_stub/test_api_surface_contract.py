"""The routes this API added without services: the ledger, POST cancel, listing and cancelling batches, and the
submission's two idempotency answers, as OpenAPI documents them; the batch listing's parameter checks."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from agent.settings import Settings
from api_stub.asgi import create_app
from api_stub.runtime import Runtime
from finagent.models import ErrorBody

SETTINGS = Settings(api_keys=[])


@pytest.fixture(scope="module")
def spec() -> dict:
    return create_app(Runtime(settings=SETTINGS)).openapi()


def _ok_schema(op: dict, status: str = "200") -> str:
    return op["responses"][status]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]


def test_the_new_routes_are_documented(spec):
    paths = spec["paths"]
    assert _ok_schema(paths["/v1/jobs/{job_id}/ledger"]["get"]) == "JobLedger"
    assert _ok_schema(paths["/v1/jobs/{job_id}/cancel"]["post"], "202") == "JobView"
    assert _ok_schema(paths["/v1/jobs/{job_id}"]["delete"], "202") == "JobView"
    assert _ok_schema(paths["/v1/batches"]["get"]) == "BatchPage"
    assert _ok_schema(paths["/v1/batches/{batch_id}/cancel"]["post"], "202") == "BatchCancelled"
    for path, method, codes in (("/v1/jobs/{job_id}/ledger", "get", {"401", "404"}),
                                ("/v1/jobs/{job_id}/cancel", "post", {"401", "404", "409"}),
                                ("/v1/batches/{batch_id}/cancel", "post", {"401", "404", "409"}),
                                ("/v1/batches", "get", {"400", "401", "422"})):
        assert codes <= paths[path][method]["responses"].keys(), (path, method)
    schemas = spec["components"]["schemas"]
    assert "suggestion" in schemas["JobView"]["properties"] and "Suggestion" in schemas
    assert {"tool", "params", "duration_ms", "retries", "error_class", "prompt_tokens", "cost_usd"} <= schemas["ToolCall"]["properties"].keys()


def test_a_submission_documents_both_idempotency_answers(spec):
    responses = spec["paths"]["/v1/jobs"]["post"]["responses"]
    assert "in flight" in responses["409"]["description"] and "Retry-After" in responses["409"]["description"]
    assert "Idempotency-Key already used with a different request" in responses["422"]["description"]


def test_the_batch_listing_checks_its_parameters_before_any_service():
    client = TestClient(create_app(Runtime(settings=SETTINGS)))
    for query, status, loc in (("limit=0", 422, ["query", "limit"]), ("limit=201", 422, ["query", "limit"]),
                               ("cursor=bm9wZQ", 400, ["query", "cursor"])):
        resp = client.get(f"/v1/batches?{query}")
        assert resp.status_code == status, resp.text
        assert ErrorBody.model_validate(resp.json()).error.details[0].loc == loc
