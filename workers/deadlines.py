"""Soft and hard time limits on the threads and solo pools, which ignore Celery's `time_limit`/`soft_time_limit`
(prefork enforces them itself, by signal and by killing the child).

`task_prerun` registers the executing thread with its task's deadlines, `task_postrun` unregisters it, and a daemon
thread checks every `CHECK_EVERY_S`:
- past the soft limit, `SoftTimeLimitExceeded` is raised inside the task's thread (`PyThreadState_SetAsyncExc`). It
  lands when the thread next runs Python bytecode: a socket read returns within its own timeout first, a C call that
  never returns never sees it. The exception is also a `TimeoutError`, so it is classified as a retryable timeout,
  and its message names the limit. It is raised once: raising it again could abort the task's own failure handling.
- past the hard limit, the thread is given up for dead (a thread cannot be killed): `on_hard` runs, which expires
  the task's claim so the watchdog re-sends its job's step elsewhere (agent/infra/liveness.py).
Both checks and the unregistering hold one lock, so nothing is raised into a thread whose task has ended. What is
left is the instant between a task's last line and its `task_postrun`; prefork's signal has the same window.
"""
from __future__ import annotations

import ctypes
import functools
import logging
import threading
import time
from collections.abc import Callable

from celery.exceptions import SoftTimeLimitExceeded
from pydantic import BaseModel

log = logging.getLogger(__name__)
CHECK_EVERY_S = 1.0
POOLS_WITHOUT_LIMITS = ("celery.concurrency.thread", "celery.concurrency.solo")


class Deadline(BaseModel):
    task_id: str
    task_name: str
    thread_id: int
    node: str = ""  # the worker's node name, which holds the task's claim
    soft_s: float
    hard_s: float
    started: float
    soft_sent: bool = False
    hard_done: bool = False


@functools.lru_cache
def soft_limit_error(soft_s: float) -> type[SoftTimeLimitExceeded]:
    """The exception class raised at a soft limit of `soft_s` (an async exception is raised by class, so the message
    lives on the class): a SoftTimeLimitExceeded, and a TimeoutError for classify_error."""

    def describe(self: BaseException) -> str:
        return f"soft time limit of {soft_s:g} s exceeded"

    return type("SoftTimeLimitExceeded", (SoftTimeLimitExceeded, TimeoutError), {"__str__": describe, "soft_s": soft_s})


def raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> bool:
    """Schedule `exc_type` to be raised in the thread (None clears a pending one); False if there is no such thread."""
    exc = ctypes.py_object(exc_type) if exc_type is not None else None
    found = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), exc)
    if found > 1:  # never happens with a valid id; the C API asks to undo it
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)
        return False
    return found == 1


def pool_ignores_limits(pool: object) -> bool:
    return type(pool).__module__ in POOLS_WITHOUT_LIMITS


class DeadlineEnforcer:
    """The deadlines of the tasks running in this process, one per executing thread."""

    def __init__(self, on_hard: Callable[[Deadline], None], clock: Callable[[], float] = time.monotonic,
                 raise_in: Callable[[int, type[BaseException] | None], bool] = raise_in_thread):
        self.on_hard = on_hard
        self.clock = clock
        self.raise_in = raise_in
        self._running: dict[int, Deadline] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def register(self, task_id: str, task_name: str, soft_s: float | None, hard_s: float | None, node: str = "",
                 thread_id: int | None = None) -> None:
        if not soft_s and not hard_s:
            return
        hard = hard_s or float("inf")
        deadline = Deadline(task_id=task_id, task_name=task_name, thread_id=thread_id or threading.get_ident(),
                            node=node, soft_s=soft_s or hard, hard_s=hard, started=self.clock())
        with self._lock:
            self._running[deadline.thread_id] = deadline

    def unregister(self, task_id: str, thread_id: int | None = None) -> None:
        thread_id = thread_id or threading.get_ident()
        with self._lock:
            deadline = self._running.get(thread_id)
            if deadline is None or deadline.task_id != task_id:
                return
            del self._running[thread_id]
            if deadline.soft_sent and thread_id == threading.get_ident():
                self.raise_in(thread_id, None)  # a soft limit still pending must not hit the worker's own code

    def running(self) -> list[Deadline]:
        with self._lock:
            return [d.model_copy() for d in self._running.values()]

    def check(self) -> None:
        now = self.clock()
        expired: list[Deadline] = []
        with self._lock:
            for deadline in self._running.values():
                elapsed = now - deadline.started
                if elapsed >= deadline.soft_s and not deadline.soft_sent:
                    deadline.soft_sent = True
                    log.warning("%s[%s] passed its soft time limit of %g s", deadline.task_name, deadline.task_id, deadline.soft_s)
                    self.raise_in(deadline.thread_id, soft_limit_error(deadline.soft_s))
                if elapsed >= deadline.hard_s and not deadline.hard_done:
                    deadline.hard_done = True
                    expired.append(deadline.model_copy())
        for deadline in expired:  # outside the lock: it talks to Redis
            log.error("%s[%s] passed its hard time limit of %g s and still runs: its thread is given up, its step re-sent",
                      deadline.task_name, deadline.task_id, deadline.hard_s)
            try:
                self.on_hard(deadline)
            except Exception:
                log.warning("could not hand %s over to the watchdog", deadline.task_id, exc_info=True)

    def start(self, every_s: float = CHECK_EVERY_S) -> threading.Thread:
        """Check from a daemon thread, once per process."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, args=(every_s,), name="finagent-deadlines", daemon=True)
                self._thread.start()
            return self._thread

    def _run(self, every_s: float) -> None:
        while True:
            try:
                self.check()
            except Exception:
                log.warning("time-limit check failed", exc_info=True)
            time.sleep(every_s)
