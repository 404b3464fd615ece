"""One CPU for each worker pool whose hand-offs make a job's critical path: the coordinator's, and the calls' (search
and llm) on another.

Each pool is Python threads under one GIL: a process never uses more than one core at a time, but each hand-off
between its threads (the consumer passing a message to a pool thread, a thread taking the GIL) wakes a thread, and
when the scheduler has put that thread on the other CPU, the wake-up is an interrupt to a CPU that may be idle. On a
virtual machine whose idle vCPUs halt at once, that costs tens of microseconds each (`bench/wakeups.py` in git history: 45 µs a round
trip across CPUs, 5 on one CPU). The coordinator's step runs on its own CPU, beside the calls it has just sent rather
than on theirs; a stage's calls hand over to the next stage's on one CPU. Redis, Postgres and the batch pool (the
ingestion's embedding) keep every core.

The local launcher (`ops/local/worker_pool.py`), which knows every process it starts, picks each one's CPU and passes it as
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
    allowed = os.sched_getaffinity(0)
    if cpu not in allowed:
        log.warning("worker CPU %s is not one this process may use (%s): not pinned", cpu, sorted(allowed))
        return False
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), {cpu})
        except ProcessLookupError:  # a thread that ended meanwhile
            pass
    return True


def _cpu() -> int | None:
    settings = get_settings()
    return settings.worker_cpu if settings.worker_cpu_pinning else None


@signals.celeryd_init.connect(dispatch_uid="finagent-worker-cpu")
def _pin_worker(**_: Any) -> None:
    if (cpu := _cpu()) is not None:
        pin_process(cpu)


@signals.worker_ready.connect(dispatch_uid="finagent-worker-cpu-log")
def _log_pin(**_: Any) -> None:
    # logged once the worker's logging is set up, which it is not yet at celeryd_init
    if (cpu := _cpu()) is not None and os.sched_getaffinity(0) == {cpu}:
        log.info("worker threads pinned to CPU %s (FINAGENT_WORKER_CPU_PINNING=false turns it off)", cpu)
