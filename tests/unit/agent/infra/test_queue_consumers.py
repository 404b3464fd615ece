"""The queues each live worker announces, counted per queue for `finagent_queue_consumers` (fakeredis)."""
from __future__ import annotations

import fakeredis

from agent.infra import queue_consumers as qc
from agent.infra.liveness import HEARTBEAT_TTL_S


def redis():
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


def test_each_live_node_counts_once_for_every_queue_it_consumes():
    r = redis()
    qc.announce(r, "coordinator@w1", ["coordinator", "celery"], HEARTBEAT_TTL_S)
    qc.announce(r, "coordinator@w2", ["celery", "coordinator"], HEARTBEAT_TTL_S)
    qc.announce(r, "llm@w1", ["llm"], HEARTBEAT_TTL_S)
    qc.announce(r, "llm@w1", ["llm"], HEARTBEAT_TTL_S)  # the next beat of the same node
    counts = qc.consumer_counts(r, ["coordinator", "celery", "search", "llm", "batch"])
    assert counts == {"coordinator": 2, "celery": 2, "search": 0, "llm": 1, "batch": 0}
    assert 0 < r.ttl(qc.queues_key("llm@w1")) <= HEARTBEAT_TTL_S  # it lapses on its own when the beats stop


def test_a_node_whose_announcement_lapsed_stops_counting_and_leaves_the_set():
    r = redis()
    qc.announce(r, "search@w1", ["search"], HEARTBEAT_TTL_S)
    qc.announce(r, "search@w2", ["search"], HEARTBEAT_TTL_S)
    r.delete(qc.queues_key("search@w2"))  # its TTL ran out: w2 was lost
    assert qc.consumer_counts(r, ["search"]) == {"search": 1}
    assert r.smembers(qc.NODES) == {b"search@w1", b"search@w2"}  # a scrape only reads
    qc.announce(r, "search@w1", ["search"], HEARTBEAT_TTL_S)  # the next announcement prunes it
    assert r.smembers(qc.NODES) == {b"search@w1"}


def test_a_queue_outside_the_scraped_ones_is_not_reported_and_no_announcement_counts_nothing():
    r = redis()
    assert qc.consumer_counts(r, ["llm"]) == {"llm": 0}
    qc.announce(r, "odd@w1", ["celery", "C.dq2"], HEARTBEAT_TTL_S)
    assert qc.consumer_counts(r, ["celery", "llm"]) == {"celery": 1, "llm": 0}
