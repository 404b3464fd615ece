"""A job request may name its strategy: the OpenAPI schema lists the names, and an unknown one is a 422 naming the
field and the names there are (checked before anything is written: no services needed)."""
from __future__ import annotations

from typing import get_args

from fastapi.testclient import TestClient

from agent.settings import Settings
from api_stub.asgi import create_app
from api_stub.runtime import Runtime
from finagent.models import ErrorBody
from finagent.models.job_request import Strategy

APP = create_app(Runtime(settings=Settings(api_keys=[])))


def test_an_unknown_strategy_is_a_422_that_names_the_known_ones():
    resp = TestClient(APP).post("/v1/jobs", json={"question": "What was revenue last quarter?", "strategy": "fastest"})
    assert resp.status_code == 422, resp.text
    detail = ErrorBody.model_validate(resp.json()).error.details[0]
    assert detail.loc == ["body", "strategy"]
    assert all(name in detail.msg for name in get_args(Strategy))


def test_the_openapi_schema_lists_the_strategies():
    schema = APP.openapi()["components"]["schemas"]["JobRequest"]["properties"]["strategy"]
    assert schema["default"] == "auto" and schema["enum"] == list(get_args(Strategy))
