"""Orphaned tasks: a claim whose worker stopped beating, seen from another process (one FakeServer)."""
from __future__ import annotations

import fakeredis

from agent.infra import liveness


def test_a_claim_is_orphaned_only_once_its_workers_heartbeat_expires():
    server = fakeredis.FakeServer()
    worker, watchdog = fakeredis.FakeRedis(server=server), fakeredis.FakeRedis(server=server)
    liveness.beat(worker, "llm@a")
    liveness.beat(worker, "search@b")
    job = "0b6f3c3e-8a55-4d47-9d53-2f3f7a3f0a11"
    liveness.claim(worker, f"{job}:1:extract:ACME:2025_q1", "llm@a")
    liveness.claim(worker, f"{job}:1:search:0", "search@b")
    assert liveness.orphans(watchdog) == {}  # both workers beat: slow is not dead
    worker.delete(liveness.heartbeat_key("llm@a"))  # what the TTL does to a killed worker's key
    assert liveness.orphans(watchdog) == {f"{job}:1:extract:ACME:2025_q1": "llm@a"}
    assert liveness.job_of(f"{job}:1:extract:ACME:2025_q1") == job
    liveness.release(worker, f"{job}:1:search:0", "search@b")
    liveness.forget(watchdog, [f"{job}:1:extract:ACME:2025_q1"])
    assert liveness.orphans(watchdog) == {} and watchdog.hlen(liveness.CLAIMS) == 0


def test_the_heartbeat_expires_on_its_own():
    r = fakeredis.FakeRedis()
    liveness.beat(r, "coordinator@a", ttl_s=15)
    assert 0 < r.ttl(liveness.heartbeat_key("coordinator@a")) <= 15
    assert liveness.HEARTBEAT_EVERY_S * 2 < liveness.HEARTBEAT_TTL_S  # a missed beat is not a death


def test_a_broadcast_expects_one_reply_per_beating_worker_name():
    """A worker restarted under its name beats as a new incarnation beside the old one's unexpired key; it replies
    to a broadcast once. A worker whose key expired is not waited for."""
    r = fakeredis.FakeRedis()
    liveness.beat(r, "llm@a#101")
    liveness.beat(r, "llm@a#202")  # the same node, restarted
    liveness.beat(r, "search@b#303")
    liveness.beat(r, "batch@c#404")
    r.delete(liveness.heartbeat_key("batch@c#404"))
    r.set("finagent:claims-unrelated", "x")
    assert liveness.beating_workers(r) == {"llm@a", "search@b"}
