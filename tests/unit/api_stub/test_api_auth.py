"""API keys (constant-time, every route but the health checks) and the refusal to bind off loopback without one.
No services: every request here is answered before a route touches Postgres or Redis."""
from __future__ import annotations

import hmac

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from typer.testing import CliRunner

from agent.ownership import OPEN, owner_id
from agent.settings import Settings
from api_stub import auth
from api_stub.asgi import create_app
from api_stub.auth import BindRefused, caller_for, check_bind, is_loopback, key_matches
from api_stub.runtime import Runtime

KEYS = [SecretStr("first-key"), SecretStr("second-key"), SecretStr("third-key")]


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(Runtime(settings=Settings(api_keys=KEYS))))


def test_every_key_is_compared_even_after_a_match(monkeypatch):
    calls: list[bytes] = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append(b)
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    assert key_matches("first-key", KEYS)
    assert calls == [b"first-key", b"second-key", b"third-key"]  # no early exit on the first match
    calls.clear()
    assert not key_matches("first-ke", KEYS) and len(calls) == 3
    assert not key_matches("anything", [])


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/jobs/00000000-0000-0000-0000-000000000000",
                                  "/v1/jobs/x/events", "/v1/batches/x", "/v1/batches/x/results", "/metrics"])
def test_missing_key_is_401_with_a_challenge(client, path):
    resp = client.get(path)
    assert resp.status_code == 401
    assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert resp.json()["error"]["code"] == "unauthorized"


def test_wrong_key_is_401_in_either_header(client):
    for headers in ({"Authorization": "Bearer nope"}, {"X-API-Key": "nope"}, {"Authorization": "Basic Zmlyc3Qta2V5"}):
        resp = client.post("/v1/jobs", json={"question": "What was revenue?"}, headers=headers)
        assert resp.status_code == 401, headers
        assert "invalid_token" in resp.headers["WWW-Authenticate"] or "Basic" in headers.get("Authorization", "")


def test_a_valid_key_in_either_header_passes_auth(client):
    # the request is then judged on its merits (here an invalid body), which it would not reach without the key
    for headers in ({"Authorization": "Bearer second-key"}, {"X-API-Key": "third-key"}):
        resp = client.post("/v1/jobs", json={"question": ""}, headers=headers)
        assert resp.status_code == 422, resp.text


def test_each_accepted_key_is_a_caller_owning_what_it_creates():
    admins = [SecretStr("admin-key")]
    first = caller_for("first-key", KEYS, admins)
    assert first is not None and first.owner == owner_id("first-key") and not first.sees_all
    admin = caller_for("admin-key", KEYS, admins)
    assert admin is not None and admin.owner == owner_id("admin-key") and admin.sees_all
    # a key in both lists is an admin; a key in neither is refused
    both = caller_for("second-key", KEYS, [SecretStr("second-key")])
    assert both is not None and both.sees_all
    assert caller_for("admin-ke", KEYS, admins) is None and caller_for("first-key", [], []) is None


def test_an_admin_key_alone_turns_authentication_on():
    client = TestClient(create_app(Runtime(settings=Settings(api_keys=[], admin_api_keys=[SecretStr("admin-key")]))))
    assert client.post("/v1/jobs", json={"question": ""}).status_code == 401
    assert client.post("/v1/jobs", json={"question": ""}, headers={"X-API-Key": "admin-key"}).status_code == 422
    check_bind("0.0.0.0", Settings(api_keys=[], admin_api_keys=[SecretStr("admin-key")]))


def test_no_keys_configured_is_the_open_caller():
    from api_stub.auth import require_key

    rt = Runtime(settings=Settings(api_keys=[], admin_api_keys=[]))
    assert require_key(None, rt, None, None) is OPEN  # type: ignore[arg-type]


def test_health_checks_need_no_key(client):
    assert client.get("/healthz").json() == {"status": "ok"}


def test_no_keys_configured_means_open():
    client = TestClient(create_app(Runtime(settings=Settings(api_keys=[]))))
    assert client.post("/v1/jobs", json={"question": ""}).status_code == 422


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"])
def test_loopback_binds_without_a_key(host):
    assert is_loopback(host)
    check_bind(host, Settings(api_keys=[]))


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "api.example.com"])
def test_binding_off_loopback_needs_a_key(host):
    assert not is_loopback(host)
    with pytest.raises(BindRefused, match="FINAGENT_API_KEYS"):
        check_bind(host, Settings(api_keys=[]))
    check_bind(host, Settings(api_keys=KEYS))


def test_cli_api_refuses_to_start_off_loopback_without_a_key(monkeypatch):
    from ops.cli.main import app

    monkeypatch.delenv("FINAGENT_API_KEYS", raising=False)
    monkeypatch.setattr("ops.cli.main.get_settings", lambda: Settings(api_keys=[]))
    result = CliRunner().invoke(app, ["api", "--host", "0.0.0.0", "--port", "9"])
    assert result.exit_code == 2
    assert "refusing to bind the API to 0.0.0.0" in result.output
