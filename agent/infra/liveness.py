"""Which running tasks lost their worker: worker heartbeats and task claims in Redis.

Why not wait for the broker: a SIGKILLed worker's unacknowledged message comes back only after the Redis
transport's visibility timeout (10 minutes, and it must stay longer than the longest task), and a stall window
has to outlast the slowest step. Instead every worker refreshes a heartbeat key (TTL `HEARTBEAT_TTL_S`) from a
background thread, and every task claims its id under its worker's name while it runs. A claim whose worker's
heartbeat has expired is an orphan: its worker died mid-task. The beat's `recover_orphans` (every
`WATCHDOG_PERIOD_S`) re-sends such a job's step under the same task ids, so a job moves again within about
TTL + period of the kill, however long its steps take, and a slow but alive task is never mistaken for a dead one.
"""
from __future__ import annotations

HEARTBEAT_TTL_S = 15
HEARTBEAT_EVERY_S = 5.0
WATCHDOG_PERIOD_S = 10.0
BODY_GRACE_S = 20.0  # a fan-out done this long with its job unmoved has lost its chord body
CLAIMS = "finagent:claims"  # hash: task id -> worker node name


def heartbeat_key(node: str) -> str:
    return f"finagent:worker:{node}:alive"


def beat(redis, node: str, ttl_s: int = HEARTBEAT_TTL_S) -> None:
    redis.set(heartbeat_key(node), "1", ex=ttl_s)


def claim(redis, task_id: str, node: str) -> None:
    redis.hset(CLAIMS, task_id, node)


def release(redis, task_id: str) -> None:
    redis.hdel(CLAIMS, task_id)


def orphans(redis) -> dict[str, str]:
    """Claimed task ids whose worker no longer beats: task id -> the dead worker's node."""
    claims = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
              for k, v in redis.hgetall(CLAIMS).items()}
    nodes = sorted(set(claims.values()))
    if not nodes:
        return {}
    alive = dict(zip(nodes, redis.mget([heartbeat_key(n) for n in nodes])))
    return {task_id: node for task_id, node in claims.items() if alive[node] is None}


def forget(redis, task_ids: list[str]) -> None:
    if task_ids:
        redis.hdel(CLAIMS, *task_ids)


def job_of(task_id: str) -> str:
    """Every task id of a job starts with the job id (a UUID)."""
    return task_id[:36]
