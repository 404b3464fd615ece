"""How `finagent flower` runs Flower: against the job broker, with basic auth from the settings, and with its
task history kept on disk across restarts.

Flower can revoke and terminate tasks and shut workers down, so it never listens beyond the loopback
interface without basic auth. The credentials travel in the environment (`FLOWER_BASIC_AUTH`, which Flower
reads itself), never on the command line, where `ps` would show them.
"""
from __future__ import annotations

import ipaddress
import sys
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel

from agent.settings import Settings, env_var

# Flower writes its task history to --db this often (and on a clean stop)
STATE_SAVE_INTERVAL_MS = 60_000
LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


class FlowerConfigError(ValueError):
    """A Flower configuration that must not start; the message is one line for the operator."""


class FlowerCommand(BaseModel, frozen=True):
    argv: list[str]
    env: dict[str, str]  # added to the caller's environment
    db: Path  # Flower's state file

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """The caller's environment without its other FLOWER_ settings and without a prometheus-client multiprocess
        directory (Flower's own metrics would land among finagent's files and in its scrape), plus `env`."""
        keep = {k: v for k, v in base.items() if not k.startswith("FLOWER_") and k != "PROMETHEUS_MULTIPROC_DIR"}
        return keep | self.env


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name, or "" (every interface)
        return False


def basic_auth_entries(settings: Settings) -> list[str]:
    """The `user:password` pairs of FINAGENT_FLOWER_BASIC_AUTH, each checked."""
    if settings.flower_basic_auth is None:
        return []
    raw = settings.flower_basic_auth.get_secret_value().strip()
    entries = [e.strip() for e in raw.split(",") if e.strip()]
    for entry in entries:
        user, sep, password = entry.partition(":")
        if not (sep and user and password):
            raise FlowerConfigError(f"{env_var('flower_basic_auth')} must be user:password[,user2:password2]; "
                                    f"an entry has no user or no password")
    if not entries and raw:
        raise FlowerConfigError(f"{env_var('flower_basic_auth')} has no user:password entry")
    return entries


def check_bind(settings: Settings, host: str) -> list[str]:
    """The basic-auth entries; refuses a non-loopback address without any."""
    entries = basic_auth_entries(settings)
    if not entries and not is_loopback(host):
        raise FlowerConfigError(
            f"refusing to serve Flower on {host or 'every interface'} without basic auth: "
            f"set {env_var('flower_basic_auth')}=user:password, or bind to 127.0.0.1")
    return entries


def flower_command(settings: Settings, broker_url: str, host: str = "127.0.0.1", port: int | None = None) -> FlowerCommand:
    """The Flower process for `broker_url` (see `ops.local.stack.celery_broker_url`)."""
    entries = check_bind(settings, host)
    db = settings.data_dir / "flower.db"
    argv = [sys.executable, "-m", "celery", "-A", "workers.app", "--broker", broker_url, "flower",
            f"--address={host}", f"--port={port or settings.flower_port}",
            "--persistent=True", f"--db={db}", f"--state_save_interval={STATE_SAVE_INTERVAL_MS}"]
    env = {"FLOWER_BASIC_AUTH": ",".join(entries)} if entries else {}
    return FlowerCommand(argv=argv, env=env, db=db)
