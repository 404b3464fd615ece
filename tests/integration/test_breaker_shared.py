"""The Tavily circuit breaker is shared by separate OS processes through the real embedded Redis.

Process A calls TavilyNews against a local HTTP server that answers 500 until the breaker opens; process B, a
different interpreter with its own Redis client, then gets CircuitOpenError without the server seeing a request.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.integration.tavily_server import tavily_server

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

WORKER = r"""
import json, sys
import redis
from agent.infra.breaker import CircuitBreaker, CircuitOpenError
from agent.providers.news import TavilyNews

role, redis_url, name, base_url = sys.argv[1:5]
client = redis.Redis.from_url(redis_url, decode_responses=True)
breaker = CircuitBreaker(client, name, threshold=3, reset_s=300)
news = TavilyNews("tvly-integration-test", breaker, base_url=base_url, max_retries=0, backoff_s=0, timeout_s=5)
out = {"pid": __import__("os").getpid()}
if role == "fail":
    out["results"] = [news.search("Microsoft Azure AI capacity").model_dump(include={"status", "error_class"})
                      for _ in range(3)]
else:
    try:
        news.fetch("Microsoft Azure AI capacity")
        out["raised"] = None
    except CircuitOpenError as exc:
        out["raised"] = {"name": exc.name, "retry_after_s": exc.retry_after_s, "message": str(exc)}
    out["search"] = news.search("Microsoft Azure AI capacity").model_dump(include={"status", "reason"})
out["state"] = breaker.state()
print(json.dumps(out))
"""


@pytest.fixture
def failing_server():
    with tavily_server(500, {"detail": {"error": "internal error"}}) as server:
        yield server


def run_worker(role: str, redis_url: str, name: str, base_url: str) -> dict:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}  # talk to 127.0.0.1 directly
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-c", WORKER, role, redis_url, name, base_url], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_breaker_opened_by_one_process_blocks_another(ctx, failing_server):
    name = f"tavily-it-{uuid.uuid4().hex[:8]}"
    try:
        a = run_worker("fail", ctx.redis_url, name, failing_server.url)
        assert a["results"] == [{"status": "error", "error_class": "system"}] * 3
        assert a["state"] == "open" and len(failing_server.requests) == 3

        b = run_worker("blocked", ctx.redis_url, name, failing_server.url)
        assert b["pid"] != a["pid"] != os.getpid()
        assert b["raised"] is not None and b["raised"]["name"] == name and 0 < b["raised"]["retry_after_s"] <= 300
        assert "temporarily switched off" in b["raised"]["message"]
        assert b["search"]["status"] == "circuit_open" and b["state"] == "open"
        assert len(failing_server.requests) == 3  # process B never reached the server

        # the parent's own client reads the same shared state
        assert ctx.redis.get(f"finagent:breaker:{name}:failures") == "3"
        assert 0 < ctx.redis.pttl(f"finagent:breaker:{name}:opened_at") <= 300_000
    finally:
        ctx.redis.delete(*(f"finagent:breaker:{name}:{k}" for k in ("failures", "opened_at", "trial")))
