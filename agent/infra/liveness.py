"""Which running tasks lost their worker: worker heartbeats and task claims in Redis.

Why not wait for the broker: a SIGKILLed worker's unacknowledged message comes back only after the Redis
transport's visibility timeout (10 minutes, and it must stay longer than the longest task), and a stall window
has to outlast the slowest step. Instead every worker refreshes a heartbeat key (TTL `HEARTBEAT_TTL_S`) from a
background thread, and every task claims its id under its worker's name while it runs. A claim whose worker's
heartbeat has expired is an orphan: its worker died mid-task. The beat's `recover_orphans` (every
`WATCHDOG_PERIOD_S`) re-sends such a job's step under the same task ids, so a job moves again within about
TTL + period of the kill, however long its steps take, and a slow but alive task is never mistaken for a dead one.

A task stuck past its hard time limit on a threads-pool worker (workers/deadlines.py) cannot be killed: its claim
is moved to `expired_name(node)`, a name no worker beats under, so the watchdog treats it as orphaned and re-sends
its step elsewhere. A claim is released only by the node that holds it (compare-and-delete), so a stuck task that
ends after its step was re-sent to another worker leaves that worker's claim alone. The edge that remains: when the
re-sent task lands on the same node, the late release drops its claim, and if that node then dies mid-task the job
waits for `resume_stalled` instead of the watchdog.
"""
from __future__ import annotations

HEARTBEAT_TTL_S = 15
HEARTBEAT_EVERY_S = 5.0
WATCHDOG_PERIOD_S = 10.0
BODY_GRACE_S = 20.0  # a fan-out done this long with its job unmoved has lost its chord body
CLAIMS = "finagent:claims"  # hash: task id -> worker node name
EXPIRED_SUFFIX = "#expired"

# ARGV: task id, the releasing node, that node's expired name
_RELEASE = """
local owner = redis.call('HGET', KEYS[1], ARGV[1])
if owner == ARGV[2] or owner == ARGV[3] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""
# ARGV: task id, the node that should hold it, the name to move it to
_EXPIRE = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) return 1 end
return 0
"""


_HEARTBEAT_PREFIX, _HEARTBEAT_SUFFIX = "finagent:worker:", ":alive"


def heartbeat_key(node: str) -> str:
    return f"{_HEARTBEAT_PREFIX}{node}{_HEARTBEAT_SUFFIX}"


def beat(redis, node: str, ttl_s: int = HEARTBEAT_TTL_S) -> None:
    redis.set(heartbeat_key(node), "1", ex=ttl_s)


def claim(redis, task_id: str, node: str) -> None:
    redis.hset(CLAIMS, task_id, node)


def expired_name(node: str) -> str:
    return node + EXPIRED_SUFFIX


def release(redis, task_id: str, node: str) -> bool:
    """Drop the claim if `node` holds it (or held it until it expired); another node's claim stays."""
    return bool(redis.eval(_RELEASE, 1, CLAIMS, task_id, node, expired_name(node)))


def expire(redis, task_id: str, node: str) -> bool:
    """The task passed its hard time limit on `node`: from now on the watchdog sees it as orphaned."""
    return bool(redis.eval(_EXPIRE, 1, CLAIMS, task_id, node, expired_name(node)))


def orphans(redis) -> dict[str, str]:
    """Claimed task ids whose worker no longer beats (or whose claim expired): task id -> the claim's node name."""
    claims = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
              for k, v in redis.hgetall(CLAIMS).items()}
    nodes = sorted(set(claims.values()))
    if not nodes:
        return {}
    alive = dict(zip(nodes, redis.mget([heartbeat_key(n) for n in nodes])))
    return {task_id: node for task_id, node in claims.items() if alive[node] is None}


def beating_workers(redis) -> set[str]:
    """The node names of the workers whose heartbeat is live, each once however often it was restarted: how many
    replies a broadcast to the workers can expect."""
    names = set()
    for key in redis.scan_iter(match=heartbeat_key("*"), count=1000):
        node = (key.decode() if isinstance(key, bytes) else key).removeprefix(_HEARTBEAT_PREFIX).removesuffix(_HEARTBEAT_SUFFIX)
        names.add(node.rsplit("#", 1)[0])  # `name@host#pid`: one incarnation of the node (workers/signals.py)
    return names


def forget(redis, task_ids: list[str]) -> None:
    if task_ids:
        redis.hdel(CLAIMS, *task_ids)


def job_of(task_id: str) -> str:
    """Every task id of a job starts with the job id (a UUID)."""
    return task_id[:36]
