"""The local workers as the launcher starts them: the coordinator keeps every thread (the pool's included, after a
job has run through it) on one CPU, the search and llm processes on another; the batch process keeps every CPU. With
pinning off, no process is pinned."""
from __future__ import annotations

import os

import pytest

from tests.integration.jobs import run_job
from workers.topology import WORKERS

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin to one")]


def thread_cpus(pid: int) -> dict[int, set[int]]:
    return {int(t): os.sched_getaffinity(int(t)) for t in os.listdir(f"/proc/{pid}/task")}


def test_the_coordinator_threads_keep_to_one_cpu_and_the_call_pools_to_another(ctx, sample_corpus, workers, workers_with):
    procs = workers_with()
    job, _ = run_job(ctx, question="What was NVDA's revenue last quarter and what drove it?")
    assert job.status == "completed"
    every = sorted(os.sched_getaffinity(0))
    pinned: dict[str, int] = {}
    for spec, proc in zip(WORKERS, procs, strict=True):
        threads = thread_cpus(proc.pid)
        assert len(threads) > 2, spec.name  # the pool's threads are there
        cpus = set().union(*threads.values())
        if spec.cpu_group is not None:
            assert len(cpus) == 1 and all(len(c) == 1 for c in threads.values()), (spec.name, threads)
            pinned[spec.name] = cpus.pop()
        else:
            assert all(sorted(c) == every for c in threads.values()), (spec.name, threads)
    assert set(pinned) == {"coordinator", "search", "llm"}
    assert pinned["search"] == pinned["llm"] != pinned["coordinator"]
    logs = {p.name.split("-")[1]: p.read_text() for p in workers.log_dir.glob(f"{workers.name}{workers.count}-*.log")}
    assert f"worker threads pinned to CPU {pinned['coordinator']}" in logs["coordinator"]
    assert "pinned to CPU" not in logs["batch"]


def test_with_pinning_off_no_worker_is_pinned(ctx, sample_corpus, workers_with):
    procs = workers_with(FINAGENT_WORKER_CPU_PINNING="false")
    job, _ = run_job(ctx, question="What was NVDA's revenue last quarter and what drove it?")
    assert job.status == "completed"
    every = sorted(os.sched_getaffinity(0))
    for spec, proc in zip(WORKERS, procs, strict=True):
        assert all(sorted(c) == every for c in thread_cpus(proc.pid).values()), spec.name
