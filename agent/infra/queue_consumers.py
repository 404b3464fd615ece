"""Which queues the live workers consume, for the scrape-time gauge `finagent_queue_consumers` (agent/infra/metrics.py).

Each worker announces its node name and queues beside its heartbeat (workers/signals.py): a key with the heartbeat's
TTL, so a worker that dies stops counting within `ttl_s` on its own, and a set of the nodes that announced, so a
scrape reads them in two round trips instead of scanning the keyspace. The set is pruned by the announcers (a scrape
only reads). Why not Celery's broadcast inspect, as /readyz does: a scrape every few seconds would wait on every
worker's reply each time, and count a worker that is cut off the network as gone only after that wait.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

NODES = "finagent:worker-queues"  # set: node names that announced their queues
_PREFIX, _SUFFIX = "finagent:worker:", ":queues"  # beside liveness's `finagent:worker:{node}#{pid}:alive`


def queues_key(node: str) -> str:
    return f"{_PREFIX}{node}{_SUFFIX}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def announce(redis: Any, node: str, queues: Iterable[str], ttl_s: int) -> None:
    """`node` (a worker's `name@host`) consumes `queues` for the next `ttl_s` seconds; nodes whose announcement has
    expired leave the set."""
    with redis.pipeline(transaction=False) as pipe:
        pipe.set(queues_key(node), json.dumps(sorted(set(queues))), ex=ttl_s)
        pipe.sadd(NODES, node)
        pipe.execute()
    nodes = sorted(_text(n) for n in redis.smembers(NODES))
    gone = [n for n, value in zip(nodes, redis.mget([queues_key(n) for n in nodes])) if value is None]
    if gone:
        redis.srem(NODES, *gone)


def consumer_counts(redis: Any, queues: Sequence[str]) -> dict[str, int]:
    """How many live worker nodes consume each of `queues` (0 for a queue nobody consumes)."""
    counts = dict.fromkeys(queues, 0)
    nodes = sorted(_text(n) for n in redis.smembers(NODES))
    for value in redis.mget([queues_key(n) for n in nodes]) if nodes else []:
        if value is None:
            continue  # expired since the set was read: that worker is gone
        for queue in json.loads(_text(value)):
            if queue in counts:
                counts[queue] += 1
    return counts
