"""The fault scenarios of bench/cluster.py, each while jobs are in flight and with no recovery call made by hand.

A scenario starts the client's side (bench/cluster_client.py scenario) on the client host, which submits its jobs
over HTTP and watches them; once they have had SETTLE_S to start, the fault is made and the client told, the fault is
held, healed (if it heals) and the client told again; the client then waits for every job and audits them.

    worker_partition     fa-w1's link down for 30 s, then up
    api_redis_partition  fa-api cut off Redis's address for 20 s (a blackhole route), while the client submits more
    redis_restart        the data host's Redis SIGKILLed and started again on its AOF
    worker_host_lost     every process of fa-w1 SIGKILLed and its link down for good: fa-w2 finishes the jobs

Each scenario's result: submitted, completed, failed_with_reason, lost, duplicated, recovery_s (from the fault until
every job running at that moment had moved on), and what the fault was.
"""
from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel

from bench import cluster_net as net


class Cluster(Protocol):
    """What a scenario needs of bench/cluster.py's Cluster."""

    worker_hosts: list[net.Host]
    api_host: net.Host
    redis_address: str

    def start_scenario_client(self, name: str, jobs: int, during: int, timeout_s: float) -> subprocess.Popen[str]: ...

    def restart_redis(self) -> None: ...

    def lose_host(self, host: net.Host) -> None: ...

SETTLE_S = 3.0  # after the jobs are submitted: long enough for their first steps to be running on the workers


class FaultSpec(BaseModel):
    description: str
    hold_s: float  # how long the fault lasts before it is healed (0: healed at once, or never)
    jobs_during: int = 0  # jobs the client submits while the fault holds


def worker_partition(cluster: Cluster) -> tuple[FaultSpec, Callable[[], None], Callable[[], None] | None]:
    host = cluster.worker_hosts[0]
    return (FaultSpec(description=f"{host.name}'s link down for 30 s, then up", hold_s=30.0),
            lambda: net.set_link(host, up=False), lambda: net.set_link(host, up=True))


def worker_host_lost(cluster: Cluster) -> tuple[FaultSpec, Callable[[], None], Callable[[], None] | None]:
    host = cluster.worker_hosts[0]
    return (FaultSpec(description=f"every process on {host.name} SIGKILLed and its link down for good", hold_s=0.0),
            lambda: cluster.lose_host(host), None)


def api_redis_partition(cluster: Cluster) -> tuple[FaultSpec, Callable[[], None], Callable[[], None] | None]:
    api, redis = cluster.api_host, cluster.redis_address
    return (FaultSpec(description=f"{api.name} cut off Redis ({redis}) for 20 s; the client submits meanwhile",
                      hold_s=20.0, jobs_during=2),
            lambda: net.set_route_to(api, redis, reachable=False),
            lambda: net.set_route_to(api, redis, reachable=True))


def redis_restart(cluster: Cluster) -> tuple[FaultSpec, Callable[[], None], Callable[[], None] | None]:
    return (FaultSpec(description="Redis SIGKILLed and started again on its AOF (appendonly yes)", hold_s=0.0),
            cluster.restart_redis, None)


# in this order: the host lost for good goes last, so every other scenario has both worker hosts
SCENARIOS: dict[str, Callable[[Cluster], tuple[FaultSpec, Callable[[], None], Callable[[], None] | None]]] = {
    "worker_partition": worker_partition,
    "api_redis_partition": api_redis_partition,
    "redis_restart": redis_restart,
    "worker_host_lost": worker_host_lost,
}


def run_scenario(cluster: Cluster, name: str, jobs: int, timeout_s: float) -> dict[str, Any]:
    spec, inject, heal = SCENARIOS[name](cluster)
    client = cluster.start_scenario_client(name, jobs, spec.jobs_during, timeout_s)
    assert client.stdin is not None and client.stdout is not None
    try:
        first = client.stdout.readline()
        if not first.startswith('{"submitted"'):
            raise RuntimeError(f"the scenario client did not submit: {first.strip() or 'no output'}")
        time.sleep(SETTLE_S)
        client.stdin.write("fault\n")
        client.stdin.flush()
        inject()
        time.sleep(spec.hold_s)
        if heal is not None:
            heal()
        client.stdin.write("healed\n")
        client.stdin.close()
        out = client.stdout.read()  # the client ends by itself: it waits for its jobs at most timeout_s
        client.wait(timeout=60)
    except BaseException:
        client.kill()
        if heal is not None:
            heal()
        raise
    lines = out.strip().splitlines()
    report = json.loads(lines[-1]) if lines else {"error": f"the scenario client exited {client.returncode}"}
    report.pop("job_ids", None)
    return {"fault": spec.description, **report}
