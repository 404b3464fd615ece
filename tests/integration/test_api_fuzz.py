"""Schemathesis against the API's own OpenAPI spec, in-process (ASGI) on the real embedded Postgres and Redis: no
input it generates, valid or not, gets a 5xx, except the 503 that /readyz documents (no worker runs here). Bounded
to a few examples per operation. The jobs its valid requests create are cancelled afterwards, so no later test's
workers inherit them."""
from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from agent import submission
from api_stub.asgi import create_app
from api_stub.runtime import Runtime

pytestmark = pytest.mark.integration

DOCUMENTED_5XX = {("GET", "/readyz"): {503}}


@schemathesis.serializer("application/x-ndjson")
def _ndjson(ctx, value) -> dict:
    """A batch upload is text, one question or JSON object per line; send whatever was generated as such."""
    return {"data": value if isinstance(value, bytes) else (value if isinstance(value, str) else json.dumps(value)).encode("utf-8", "surrogatepass")}

# settings and services resolve on the first request, after the session's fixtures have started them
RUNTIME = Runtime(ready_cache_s=30, inspect_timeout_s=0.2)
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(RUNTIME))


@pytest.fixture(scope="module", autouse=True)
def cancel_what_the_fuzz_made(ctx):
    with ctx.pool.connection() as conn:
        started = conn.execute("SELECT now() AS t").fetchone()["t"]
    yield
    with ctx.pool.connection() as conn:
        made = conn.execute("SELECT id FROM research_jobs WHERE created_at >= %s", (started,)).fetchall()
    for row in made:
        submission.cancel(ctx, RUNTIME.dispatcher, str(row["id"]))


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_no_input_gets_a_server_error(case):
    response = case.call()
    allowed = DOCUMENTED_5XX.get((case.method.upper(), case.path), set())
    assert response.status_code < 500 or response.status_code in allowed, (
        f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}\n{case.as_curl_command()}")
