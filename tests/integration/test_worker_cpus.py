"""The local workers as the launcher starts them: the coordinator and llm processes keep every thread (the pool's
included, after a job has run through them) on one CPU each, apart; the search and batch processes keep every CPU.
With pinning off, no process is pinned."""
from __future__ import annotations

import os

import pytest

from tests.integration.jobs import run_job
from workers.topology import WORKERS

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin to one")]


def thread_cpus(pid: int) -> dict[int, set[int]]:
    return {int(t): os.sched_getaffinity(int(t)) for t in os.listdir(f"/proc/{pid}/task")}


def test_the_coordinator_and_llm_threads_each_keep_to_one_cpu_of_their_own(ctx, sample_corpus, workers_with):
    procs = workers_with()
    job, _ = run_job(ctx, question="What was NVDA's revenue last quarter and what drove it?")
    assert job.status == "completed"
    every = sorted(os.sched_getaffinity(0))
    pinned: dict[str, int] = {}
    for spec, proc in zip(WORKERS, procs, strict=True):
        threads = thread_cpus(proc.pid)
        assert len(threads) > 2, spec.name  # the pool's threads are there
        cpus = set().union(*threads.values())
        if spec.own_cpu:
            assert len(cpus) == 1 and all(len(c) == 1 for c in threads.values()), (spec.name, threads)
            pinned[spec.name] = cpus.pop()
        else:
            assert all(sorted(c) == every for c in threads.values()), (spec.name, threads)
    assert set(pinned) == {"coordinator", "llm"} and pinned["coordinator"] != pinned["llm"]


def test_with_pinning_off_no_worker_is_pinned(ctx, sample_corpus, workers_with):
    procs = workers_with(FINAGENT_WORKER_CPU_PINNING="false")
    job, _ = run_job(ctx, question="What was NVDA's revenue last quarter and what drove it?")
    assert job.status == "completed"
    every = sorted(os.sched_getaffinity(0))
    for spec, proc in zip(WORKERS, procs, strict=True):
        assert all(sorted(c) == every for c in thread_cpus(proc.pid).values()), spec.name
