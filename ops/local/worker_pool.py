"""Local Celery worker processes for the embedded stack, kept running between commands.

Each worker records its pid and a fingerprint of the settings it was started with; a worker
whose settings no longer match is restarted, so `FINAGENT_*` changes take effect.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from agent.context import connect_redis
from agent.services import ServiceURLs
from agent.settings import Settings, env_var, get_settings
from workers.topology import WORKERS, WorkerSpec, worker_argv, worker_cpu

log = logging.getLogger(__name__)


def _dir(settings: Settings) -> Path:
    d = settings.data_dir / "workers"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _code_version() -> float:
    """Newest source file time: workers started before a code change are restarted."""
    root = Path(__file__).resolve().parents[2]
    return max(p.stat().st_mtime for pkg in ("agent", "tasks", "workers") for p in (root / pkg).rglob("*.py"))


def _fingerprint(settings: Settings, urls: ServiceURLs) -> str:
    data = settings.model_dump(mode="json") | urls.model_dump() | {"code": _code_version()}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie child is not a worker
        return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") == -1
    except OSError:
        return True


def _read(settings: Settings, spec: WorkerSpec) -> dict | None:
    f = _dir(settings) / f"{spec.name}.json"
    if not f.exists():
        return None
    info = json.loads(f.read_text())
    return info if _alive(info["pid"]) else None


def worker_env(urls: ServiceURLs, metrics_dir: Path, spec: WorkerSpec | None = None) -> dict[str, str]:
    """A worker process's environment: this one's, with `spec`'s pool defaults underneath (workers/topology.py)."""
    settings = get_settings()
    env = (spec.env_defaults(settings) if spec else {}) | dict(os.environ)
    env.pop(env_var("worker_cpu"), None)  # this process's own, if it is a pinned worker: never passed on
    cpu = worker_cpu(spec, list(os.sched_getaffinity(0))) if spec and settings.worker_cpu_pinning else None
    if cpu is not None:
        env[env_var("worker_cpu")] = str(cpu)
    env["FINAGENT_DATABASE_URL"] = urls.database_url
    env["FINAGENT_REDIS_URL"] = urls.redis_url
    # prometheus-client reads it when first imported; the settings' directory wins over one this process inherited
    env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
    # one machine's workers share that directory: a METRICS_PORT (a deployment's, in .env) would be every worker's
    env[env_var("metrics_port")] = "0"
    return env


def _prepare_metrics_dir(metrics_dir: Path) -> None:
    """Called with no worker running: the metric files of processes that are gone would only pile up."""
    from agent.infra.metrics import clean_dead_process_files

    metrics_dir.mkdir(parents=True, exist_ok=True)
    clean_dead_process_files(metrics_dir)


def _workers_lock(settings: Settings):
    """Two commands starting (or one stopping) the workers at once must not leave a second copy running."""
    import fasteners

    return fasteners.InterProcessLock(str(_dir(settings) / "workers.lock"))


def start_workers(settings: Settings, urls: ServiceURLs, wait_s: float = 60) -> list[str]:
    with _workers_lock(settings):
        return _start_workers(settings, urls, wait_s)


def _start_workers(settings: Settings, urls: ServiceURLs, wait_s: float) -> list[str]:
    started = []
    fp = _fingerprint(settings, urls)
    running = {spec.name: info for spec in WORKERS if (info := _read(settings, spec))}
    # a broker that is down fails the command now, not after wait_s of pings or a job left waiting for it
    connect_redis(urls.redis_url, ride_out=False).ping()
    if not running:
        _prepare_metrics_dir(settings.metrics_path())
    current = {name for name, info in running.items() if info["fingerprint"] == fp}
    stop_pids([info["pid"] for name, info in running.items() if name not in current])  # together, as stop_workers does
    for spec in WORKERS:
        if spec.name in current:
            continue
        log = _dir(settings) / f"{spec.name}.log"
        beat = ["-B", "-s", str(_dir(settings) / "celerybeat-schedule")] if spec.beat else []
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", *worker_argv(spec, spec.name), "-l", "INFO", *beat],
            env=worker_env(urls, settings.metrics_path(), spec), stdout=open(log, "ab"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        (_dir(settings) / f"{spec.name}.json").write_text(json.dumps({"pid": proc.pid, "fingerprint": fp, "log": str(log)}))
        started.append(spec.name)
    if started:
        wait_ready(urls, [f"{s}@" for s in started], wait_s)
    return started


def _ping_names(app, timeout: float) -> list[str]:
    """The names of the workers that answer a broadcast ping. The ping runs in a thread of its own and is given up
    after a bound: right after a broker restart, kombu's reply collection has been seen to block forever."""
    replies: list = []
    errors: list[BaseException] = []

    def ping() -> None:
        try:
            replies.extend(app.control.ping(timeout=timeout) or [])
        except BaseException as exc:  # handed to the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=ping, name="finagent-ping", daemon=True)
    thread.start()
    thread.join(timeout + 5)
    if thread.is_alive():
        raise TimeoutError("the broadcast ping did not return")
    if errors:
        raise errors[0]
    return [name for r in replies for name in r]


def wait_ready(urls: ServiceURLs, prefixes: list[str], wait_s: float) -> None:
    from workers.app import app, renew_broker_connections

    deadline = time.monotonic() + wait_s
    broken: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            names = _ping_names(app, 0.5)
        except (OSError, *app.connection_for_read().connection_errors) as exc:  # a restart broke a pooled broker connection
            log.info("ping failed (%s); reconnecting", exc)
            broken = exc
            renew_broker_connections()
            time.sleep(0.5)
            continue
        broken = None
        if all(any(n.startswith(p) for n in names) for p in prefixes):
            return
    if broken is not None:  # the broker itself stayed out of reach, not the workers
        raise broken
    raise RuntimeError(f"workers {prefixes} did not answer within {wait_s:.0f}s; see the logs under data_dir/workers")


def stop_pids(pids: list[int], timeout: float = 20) -> None:
    """Warm shutdown of several workers at once (each finishes its running tasks; unacked ones go back to the
    queue), so stopping a set takes as long as its slowest worker, not their sum; SIGKILL for any still alive after
    `timeout`."""
    signalled = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
            signalled.append(pid)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in signalled) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in signalled:
        if _alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def stop_workers(settings: Settings) -> list[str]:
    with _workers_lock(settings):
        running = {spec.name: info["pid"] for spec in WORKERS if (info := _read(settings, spec))}
        stop_pids(list(running.values()))
        for spec in WORKERS:
            (_dir(settings) / f"{spec.name}.json").unlink(missing_ok=True)
    return list(running)


def worker_status(settings: Settings) -> list[dict]:
    return [{"name": s.name, "queues": [q.value for q in s.queues], "running": _read(settings, s) is not None}
            for s in WORKERS]


class WorkerManager:
    """Foreground worker processes (tests, benchmarks) in the same layout as WORKERS, restarted when
    their environment overrides change. Only one set runs at a time: two sets would split the tasks.
    """

    def __init__(self, database_url: str, redis_url: str, log_dir: Path, name: str = "fg", metrics_dir: Path | None = None):
        self.urls = ServiceURLs(database_url=database_url, redis_url=redis_url)
        self.log_dir, self.name = log_dir, name
        self.metrics_dir = metrics_dir or get_settings().metrics_path()
        self.procs: list[subprocess.Popen] = []
        self.env_key: tuple | None = None
        self.overrides: dict[str, str] = {}
        self.count = 0

    def ensure(self, **overrides: str) -> list[subprocess.Popen]:
        key = tuple(sorted(overrides.items()))
        if self.procs and all(p.poll() is None for p in self.procs) and key == self.env_key:
            return self.procs
        self.stop()
        _prepare_metrics_dir(self.metrics_dir)
        self.count += 1
        self.overrides = dict(overrides)
        nodes = [self._spawn(spec) for spec in WORKERS]
        self.procs = [proc for proc, _ in nodes]
        self.env_key = key
        self._wait([node for _, node in nodes])
        return self.procs

    def respawn(self, index: int, wait: bool = True) -> subprocess.Popen:
        """Start a fresh process for WORKERS[index] in place of a dead one, as a supervisor would."""
        self.count += 1
        proc, node = self._spawn(WORKERS[index])
        self.procs[index] = proc
        if wait:
            self._wait([node])
        return proc

    def _spawn(self, spec: WorkerSpec, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
        """Start one worker process with the set's overrides (and `env`, this process's own, on top)."""
        node = f"{self.name}{self.count}-{spec.name}-{os.getpid()}"
        log = self.log_dir / f"{node}.log"
        # beat too, as the local workers run it: recovery must happen with no call from the test
        beat = ["-B", "-s", str(self.log_dir / f"{node}-beat-schedule")] if spec.beat else []
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", *worker_argv(spec, node), "-l", "INFO", *beat],
            env=worker_env(self.urls, self.metrics_dir, spec) | self.overrides | (env or {}), stdout=open(log, "wb"),
            stderr=subprocess.STDOUT,
        )
        return proc, node

    def _wait(self, nodes: list[str]) -> None:
        try:
            wait_ready(self.urls, [f"{n}@" for n in nodes], 60)
        except RuntimeError:
            logs = "\n".join((self.log_dir / f"{n}.log").read_text()[-2000:] for n in nodes)
            raise RuntimeError(f"workers {nodes} did not start:\n{logs}") from None

    def stop(self) -> None:
        stop_pids([proc.pid for proc in self.procs if proc.poll() is None])
        for proc in self.procs:
            proc.wait(30)
        self.procs = []
