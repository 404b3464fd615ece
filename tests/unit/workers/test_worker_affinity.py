"""workers/affinity.py pins every thread a process has, and the threads it starts afterwards inherit it."""
from __future__ import annotations

import multiprocessing
import os
import threading

import pytest

from workers.affinity import pin_process

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin to one")


def _child(cpu: int, out) -> None:
    started = threading.Event()
    stop = threading.Event()

    def before() -> None:  # a thread that exists before the pin
        started.set()
        stop.wait(10)

    early = threading.Thread(target=before)
    early.start()
    started.wait(10)
    pinned = pin_process(cpu)
    later: list[set[int]] = []
    late = threading.Thread(target=lambda: later.append(os.sched_getaffinity(0)))
    late.start()
    late.join()
    every = {int(t): os.sched_getaffinity(int(t)) for t in os.listdir("/proc/self/task")}
    stop.set()
    early.join()
    out.put((pinned, every, later[0], pin_process(10_000)))


def test_every_thread_of_the_process_ends_up_on_the_one_cpu():
    cpu = max(os.sched_getaffinity(0))
    out: multiprocessing.Queue = multiprocessing.get_context("spawn").Queue()
    proc = multiprocessing.get_context("spawn").Process(target=_child, args=(cpu, out))
    proc.start()
    pinned, every, later, impossible = out.get(timeout=30)
    proc.join(30)
    assert pinned and len(every) >= 2  # the main thread and the one started before the pin
    assert all(cpus == {cpu} for cpus in every.values()), every
    assert later == {cpu}  # a thread started afterwards inherits it
    assert impossible is False  # a CPU the process may not use changes nothing
