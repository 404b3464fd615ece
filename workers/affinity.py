"""One CPU for a worker process whose threads hand work to each other on the critical path.

The coordinator's and the llm worker's threads run Python under one GIL: they cannot use two cores at once, but each
hand-off between them (the consumer thread passing a message to a pool thread, a pool thread taking the GIL from
another) wakes a thread, and when the scheduler has put that thread on the other CPU, the wake-up is an interrupt to a
CPU that may be idle. On a virtual machine whose idle vCPUs halt at once, that costs tens of microseconds each
(`bench/wakeups.py`: 45 µs a round trip across CPUs, 5 on one CPU). Kept on one CPU, those hand-offs stay local; the
other processes (Redis, Postgres, the search worker's embedding) keep every core.

The local launcher (`ops/workers.py`), which knows every process it starts, picks each one's CPU and passes it as
FINAGENT_WORKER_CPU; the worker pins every thread it has when it starts, and the threads it starts later inherit it.
Containers get none: their CPUs are the operator's (`cpuset`), and replicas of one service would all pick the same.
"""
from __future__ import annotations

import logging
import os
from typing import Any

from celery import signals

from agent.settings import get_settings

log = logging.getLogger(__name__)


def pin_process(cpu: int) -> bool:
    """Pin every thread of this process to `cpu`. False (nothing changed) when this process may not run there."""
    if cpu not in os.sched_getaffinity(0):
        log.warning("worker CPU %s is not one this process may use (%s): not pinned", cpu, sorted(os.sched_getaffinity(0)))
        return False
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), {cpu})
        except ProcessLookupError:  # a thread that ended meanwhile
            pass
    return True


@signals.celeryd_init.connect(dispatch_uid="finagent-worker-cpu")
def _pin_worker(**_: Any) -> None:
    settings = get_settings()
    cpu = settings.worker_cpu if settings.worker_cpu_pinning else None
    if cpu is not None and pin_process(cpu):
        log.info("worker pinned to CPU %s", cpu)
