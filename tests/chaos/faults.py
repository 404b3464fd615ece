"""Faults the chaos tier injects into the embedded servers: a crash (SIGKILL) and a restart after some downtime."""
from __future__ import annotations

import os
import signal
import time

from agent.settings import Settings
from ops.stack import _pg_dir, _redis_dir, start_embedded_postgres, start_embedded_redis


def _pid(path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _kill(pid: int | None, sig: signal.Signals = signal.SIGKILL, wait_s: float = 30) -> None:
    if pid is None:
        return
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:  # reap it if it is our child; it is not (daemonized), so this only guards a zombie
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)


def crash_redis(settings: Settings) -> None:
    """SIGKILL: no shutdown save; what survives is what the append-only file (fsync every second) holds."""
    _kill(_pid(_redis_dir(settings) / "redis.pid"))


def start_redis(settings: Settings) -> None:
    start_embedded_redis(settings)


def crash_postgres(settings: Settings) -> None:
    """Immediate shutdown (SIGQUIT): every backend killed, no checkpoint; the next start runs crash recovery."""
    _kill(_pid(_pg_dir(settings) / "postmaster.pid"), signal.SIGQUIT)


def start_postgres(settings: Settings) -> None:
    """pgserver keeps one handle per data dir in a process and checks the server only when it creates it: a restart
    from the process that started it has to ask that handle again."""
    import pgserver

    pgserver.get_server(_pg_dir(settings), cleanup_mode=None).ensure_postgres_running()
    start_embedded_postgres(settings)
