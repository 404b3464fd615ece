"""The Redis ACL users (ops/redis/acl_users.py) on a real Redis 7 started with the generated ACL file: the service
client reaches the public queue and its results and Redis refuses it everything else; real workers, the API, Flower
and beat, each under its own user, run jobs end to end, and Redis logs no refusal for any of them (ACL LOG)."""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
import redis
from celery import Celery
from kombu.transport.redis import Channel
from pydantic import BaseModel, SecretStr

from agent.infra.events import channel as events_channel
from agent.infra.events import stream_key
from agent.infra.liveness import heartbeat_key
from agent.services import ServiceURLs, celery_broker_url
from ops.cli.flower import flower_command
from ops.local.worker_pool import stop_pids, worker_env
from ops.redis.acl_users import PASSWORD_ROLES, Role, acl_file, role_url
from workers.topology import WORKERS, worker_argv

pytestmark = pytest.mark.integration

QUESTION = "What was NVDA's revenue last quarter?"  # the sample corpus's (tests/stack_fixtures.py)
FINAL = ("completed", "failed", "rejected", "cancelled")
# redis-py names its library on connecting (CLIENT SETINFO, Redis 7.2+) and carries on when refused: the client
# user is not given it
QUIET_REFUSALS = {"client|setinfo"}


class AclRedis(BaseModel):
    port: int
    urls: dict[Role, str]
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _redis_7() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no redis-server on PATH (Debian: apt-get install -y redis-server)")
    version = re.search(r"v=(\d+)\.", subprocess.run([binary, "--version"], capture_output=True, text=True).stdout)
    if version is None or int(version.group(1)) < 7:
        pytest.skip(f"{binary} is older than Redis 7 (read-only and write-only keys)")
    return binary


def _until(what: str, check: Callable[[], object], timeout_s: float = 120, every_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every_s)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s")


def _stop(proc: subprocess.Popen) -> None:
    stop_pids([proc.pid], timeout=30)
    proc.wait(10)


@pytest.fixture(scope="module")
def acl_redis(tmp_path_factory) -> Iterator[AclRedis]:
    """redis-server on a free loopback port with the generated users; every role has a random password."""
    binary = _redis_7()
    root = tmp_path_factory.mktemp("acl-redis")
    passwords = {role: secrets.token_urlsafe(18) for role in PASSWORD_ROLES}
    (root / "users.acl").write_text(acl_file(passwords))
    port = _free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--aclfile", str(root / "users.acl"),
                             "--save", "", "--appendonly", "no", "--dir", str(root), "--logfile", str(root / "redis.log")])
    health = redis.Redis(host="127.0.0.1", port=port, username="health", password="any")

    def pong() -> bool:
        try:
            return bool(health.ping())
        except redis.ConnectionError:
            assert proc.poll() is None, (root / "redis.log").read_text()
            return False

    _until("redis-server answers the health user's PING", pong, 30, 0.1)
    yield AclRedis(port=port, urls={r: role_url(r, p, host="127.0.0.1", port=port) for r, p in passwords.items()},
                   log=root / "redis.log")
    proc.terminate()
    proc.wait(10)


def _connect(server: AclRedis, role: Role) -> redis.Redis:
    return redis.Redis.from_url(server.urls[role], decode_responses=True)


def _refusals(admin: redis.Redis) -> list[tuple[str, str, str]]:
    """Everything Redis refused since the last reset, as (user, reason, object)."""
    return [(str(e["username"]), str(e["reason"]), str(e["object"])) for e in admin.acl_log()
            if e["object"] not in QUIET_REFUSALS]


def test_nobody_gets_in_without_a_user(acl_redis):
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=acl_redis.port).ping()
    with pytest.raises(redis.AuthenticationError):  # a user's name with another's password
        redis.Redis.from_url(acl_redis.urls[Role.worker].replace("//worker:", "//client:")).ping()
    health = redis.Redis(host="127.0.0.1", port=acl_redis.port, username="health", password="any")
    assert health.ping()
    with pytest.raises(redis.exceptions.NoPermissionError):
        health.get("finagent:claims")


def test_the_client_reaches_the_public_queue_and_its_results_and_nothing_else(acl_redis):
    admin, client = _connect(acl_redis, Role.admin), _connect(acl_redis, Role.client)
    admin.delete("celery")
    app = Celery("some-other-service", broker=acl_redis.urls[Role.client], backend=acl_redis.urls[Role.client])
    try:
        sent = app.send_task("finagent.v1.submit_research", kwargs={"question": "How did ACME's margins move?"})
        queued = [json.loads(m) for m in admin.lrange("celery", 0, -1)]
        assert [(m["headers"]["task"], m["headers"]["id"]) for m in queued] == [("finagent.v1.submit_research", sent.id)]
        with pytest.raises(Exception) as refused:  # routed to an internal queue: refused when binding it
            app.send_task("tasks.coordinator.advance", args=["job", "start"], queue="coordinator")
        assert "no permissions" in str(refused.value) and admin.llen("coordinator") == 0
    finally:
        app.close()
    secret = stream_key("0f0e")
    admin.xadd(secret, {"event": "{}"})
    for refuse in (lambda: client.lpush("coordinator", "{}"),
                   lambda: client.lpush(f"llm{Channel.sep}3", "{}"),  # a priority list of an internal queue
                   lambda: client.xrange(secret), lambda: client.get("finagent:claims"),
                   lambda: client.rpop("celery"),  # another client's message
                   lambda: client.set(f"celery-task-meta-{sent.id}", "{}"),  # a forged result
                   lambda: client.publish(events_channel("0f0e"), "{}"),
                   lambda: client.flushall(), lambda: client.keys("*"), lambda: client.config_get("*")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            refuse()
    assert admin.llen("coordinator") == 0 and admin.llen("celery") == 1
    assert {(user, reason) for user, reason, _ in _refusals(admin)} <= {("client", "key"), ("client", "command")}
    admin.delete("celery", secret)


@pytest.fixture
def stack(ctx, sample_corpus, workers, acl_redis, tmp_path) -> Iterator[Callable[..., subprocess.Popen]]:
    """Starts processes on the ACL Redis (each stopped at the end, whatever happened); the session's own workers,
    on the embedded Redis, are stopped first: two sets would share two cores."""
    workers.stop()
    with ExitStack() as stack:
        def start(argv: list[str], env: dict[str, str], log: str) -> subprocess.Popen:
            proc = subprocess.Popen(argv, env=env, stdout=open(tmp_path / log, "wb"), stderr=subprocess.STDOUT)
            stack.callback(_stop, proc)
            return proc

        yield start


def _env(ctx, server: AclRedis, role: Role, data_dir: Path) -> dict[str, str]:
    """A process of `role`: its own user's URL; its own data dir, so no record of the session's servers is touched."""
    return dict(os.environ) | {"FINAGENT_DATABASE_URL": ctx.database_url, "FINAGENT_REDIS_URL": server.urls[role],
                               "FINAGENT_DATA_DIR": str(data_dir), "PROMETHEUS_MULTIPROC_DIR": str(data_dir / "metrics")}


def test_workers_api_flower_and_beat_run_jobs_under_their_own_users(ctx, acl_redis, stack, tmp_path):
    admin = _connect(acl_redis, Role.admin)
    admin.acl_log_reset()
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    urls = ServiceURLs(database_url=ctx.database_url, redis_url=acl_redis.urls[Role.worker])
    workers = [stack([sys.executable, "-m", "celery", *worker_argv(spec, f"acl-{spec.name}"), "-l", "INFO"],
                     worker_env(urls, metrics, spec), f"acl-{spec.name}.log") for spec in WORKERS]
    _until("every worker's heartbeat", lambda: len(admin.keys(heartbeat_key("acl-*"))) == len(WORKERS))

    (tmp_path / "api").mkdir()
    port = _free_port()
    api = stack([sys.executable, "-m", "ops.cli.main", "api", "--port", str(port)],
                _env(ctx, acl_redis, Role.api, tmp_path / "api"), "api.log")
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert api.poll() is None, (tmp_path / "api.log").read_text()[-3000:]
        try:
            return httpx.get(f"{base}/readyz", timeout=5).status_code == 200  # PING, and an inspect of the queues
        except httpx.TransportError:
            return False

    _until("the API is ready", ready)
    job_id = httpx.post(f"{base}/v1/jobs", json={"question": QUESTION}, timeout=10).json()["job_id"]
    cancelled_id = httpx.post(f"{base}/v1/jobs", json={"question": QUESTION, "mode": "detailed"}, timeout=10).json()["job_id"]
    assert httpx.post(f"{base}/v1/jobs/{cancelled_id}/cancel", timeout=10).status_code == 202  # revoke: a broadcast
    view = _until("the API's job ends", lambda: (v := httpx.get(f"{base}/v1/jobs/{job_id}", timeout=10).json())
                  ["status"] in FINAL and v, 240)
    assert view["status"] == "completed" and view["result"]["answer"]
    with httpx.stream("GET", f"{base}/v1/jobs/{job_id}/events", timeout=30) as events:  # the job's stream, replayed
        types = [json.loads(line[5:])["type"] for line in events.iter_lines() if line.startswith("data:")]
    assert types[0] == "job_status" and "planning" in types and types[-1] == "job_status"
    assert _until("the cancelled job ends", lambda: httpx.get(f"{base}/v1/jobs/{cancelled_id}", timeout=10).json()
                  ["status"] in FINAL)
    assert httpx.get(f"{base}/v1/jobs/{cancelled_id}", timeout=10).json()["status"] == "cancelled"
    scrape = httpx.get(f"{base}/metrics", timeout=10)
    assert scrape.status_code == 200 and "finagent_queue_depth" in scrape.text  # every queue's length

    client = Celery("some-other-service", broker=acl_redis.urls[Role.client], backend=acl_redis.urls[Role.client])
    try:
        contract_job = client.send_task("finagent.v1.submit_research", kwargs={"question": QUESTION}).get(timeout=120)
        assert client.send_task("finagent.v1.get_job", args=[contract_job]).get(timeout=60)["job_id"] == contract_job
    finally:
        client.close()

    flower_dir = tmp_path / "flower"
    flower_dir.mkdir()
    flower_port = _free_port()
    auth = ("ops", secrets.token_urlsafe(12))  # Flower's HTTP API answers only with basic auth
    cmd = flower_command(ctx.settings.model_copy(update={"data_dir": flower_dir, "flower_basic_auth": SecretStr(":".join(auth))}),
                         celery_broker_url(acl_redis.urls[Role.flower]), port=flower_port)
    flower = stack(cmd.argv, cmd.environ(_env(ctx, acl_redis, Role.flower, flower_dir)), "flower.log")
    flower_base = f"http://127.0.0.1:{flower_port}"

    def flower_workers() -> dict:
        assert flower.poll() is None, (tmp_path / "flower.log").read_text()[-3000:]
        try:  # an inspect of every worker, from Flower
            found = httpx.get(f"{flower_base}/api/workers", params={"refresh": 1}, auth=auth, timeout=20).json()
        except (httpx.TransportError, ValueError):
            return {}
        return found if all(any(n.startswith(f"acl-{s.name}@") for n in found) for s in WORKERS) else {}

    _until("Flower sees every worker", flower_workers)
    lengths = httpx.get(f"{flower_base}/api/queues/length", auth=auth, timeout=20).json()["active_queues"]
    assert {q["name"] for q in lengths} >= {"coordinator", "search", "llm", "batch", "celery"}  # the broker view

    (tmp_path / "beat").mkdir()
    beat = stack([sys.executable, "-m", "celery", "-A", "workers.app", "beat", "-s", str(tmp_path / "beat" / "schedule"),
                  "-l", "INFO"], _env(ctx, acl_redis, Role.beat, tmp_path / "beat"), "beat.log")
    coordinator_log = tmp_path / "acl-coordinator.log"
    _until("the coordinator runs a task beat sent",  # every WATCHDOG_PERIOD_S
           lambda: re.search(r"tasks\.coordinator\.recover_orphans\[[^\]]+\] succeeded", coordinator_log.read_text()))

    for proc in (beat, flower, api, *workers):  # their shutdown too: deleting their control and event queues
        _stop(proc)
    assert _refusals(admin) == []
    logs = {f.name: f.read_text() for f in tmp_path.glob("*.log")}
    assert len(logs) == len(WORKERS) + 3 and not [name for name, text in logs.items() if "no permissions" in text]
