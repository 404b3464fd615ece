"""The cluster's network (bench/cluster.py): one Linux network namespace per host, each with a veth pair whose other end
is on a bridge in a namespace of its own (the switch), so nothing is added to the root namespace's network. Every
name starts with `fa-`; `cleanup()` removes whatever carries the prefix, this run's or a crashed run's.

Hosts find each other by name: `ip netns exec` bind-mounts /etc/netns/<ns>/hosts over /etc/hosts, so compose's service
names (`postgres`, `redis`) resolve inside the namespaces as they do on compose's network.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from pydantic import BaseModel

PREFIX = "fa-"
SWITCH = "fa-switch"
BRIDGE = "fa-br0"
SUBNET = "10.213.47"  # a private /24, used only inside the namespaces
ETC_NETNS = Path("/etc/netns")


class Host(BaseModel, frozen=True):
    name: str  # the namespace, and the hostname its processes see
    octet: int
    aliases: tuple[str, ...] = ()  # compose service names served here
    # more addresses on the host's link, each for one service name: a fault can then cut a host off that one
    # service alone (a blackhole route to its address), as iptables would, which these namespaces do not have
    extra: tuple[tuple[int, str], ...] = ()

    @property
    def address(self) -> str:
        return f"{SUBNET}.{self.octet}"

    @property
    def switch_port(self) -> str:
        return f"fa-p{self.octet}"  # the switch-side end of the host's veth (interface names max 15 characters)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def netns_available() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root (ip netns add)"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    probe = f"{PREFIX}probe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def namespaces() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(PREFIX)]


def root_links() -> list[str]:
    out = _ip("-o", "link", "show", check=False).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]
    return [n for n in names if n.startswith(PREFIX)]


def leftovers() -> list[str]:
    """What a run left behind: namespaces, root-namespace links, /etc/netns entries."""
    etc = [str(p) for p in ETC_NETNS.glob(f"{PREFIX}*")] if ETC_NETNS.is_dir() else []
    return namespaces() + root_links() + etc


def kill_namespace_processes(ns: str, grace_s: float = 5.0) -> None:
    """SIGTERM every process inside the namespace, then SIGKILL what is left after `grace_s`."""
    def pids() -> list[int]:
        out = _ip("netns", "pids", ns, check=False).stdout
        return [int(p) for p in out.split() if p.isdigit()]

    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        for pid in pids():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while pids() and time.monotonic() < deadline:
            time.sleep(0.1)


def cleanup(grace_s: float = 5.0) -> None:
    """Idempotent: every process in a `fa-` namespace stopped, every `fa-` namespace and link deleted."""
    for ns in namespaces():
        kill_namespace_processes(ns, grace_s)
    for ns in namespaces():
        _ip("netns", "del", ns, check=False)  # its interfaces (veth ends, the bridge) go with it
    for link in root_links():
        _ip("link", "del", link, check=False)
    if ETC_NETNS.is_dir():
        for entry in ETC_NETNS.glob(f"{PREFIX}*"):
            shutil.rmtree(entry, ignore_errors=True)


def create(hosts: list[Host]) -> None:
    _ip("netns", "add", SWITCH)
    _ip("-n", SWITCH, "link", "add", BRIDGE, "type", "bridge")
    _ip("-n", SWITCH, "link", "set", BRIDGE, "up")
    hosts_file = "127.0.0.1 localhost\n" + "".join(f"{h.address} {h.name} {' '.join(h.aliases)}\n" for h in hosts)
    hosts_file += "".join(f"{SUBNET}.{octet} {alias}\n" for h in hosts for octet, alias in h.extra)
    for h in hosts:
        _ip("netns", "add", h.name)
        _ip("link", "add", f"{PREFIX}h{h.octet}", "type", "veth", "peer", "name", h.switch_port)
        _ip("link", "set", f"{PREFIX}h{h.octet}", "netns", h.name, "name", "eth0")
        _ip("link", "set", h.switch_port, "netns", SWITCH)
        _ip("-n", SWITCH, "link", "set", h.switch_port, "master", BRIDGE, "up")
        _ip("-n", h.name, "addr", "add", f"{h.address}/24", "dev", "eth0")
        for octet, _alias in h.extra:
            _ip("-n", h.name, "addr", "add", f"{SUBNET}.{octet}/24", "dev", "eth0")
        _ip("-n", h.name, "link", "set", "eth0", "up")
        _ip("-n", h.name, "link", "set", "lo", "up")
        etc = ETC_NETNS / h.name
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "hosts").write_text(hosts_file)
        (etc / "hostname").write_text(h.name + "\n")


def set_link(host: Host, up: bool) -> None:
    """Cut a host off the network (its switch port down), or bring it back: the fault scenarios' partition."""
    _ip("-n", SWITCH, "link", "set", host.switch_port, "up" if up else "down")


def set_route_to(host: Host, address: str, reachable: bool) -> None:
    """Cut `host` off one address (a blackhole route: its packets to it are dropped, as on a partitioned network),
    or give the address back."""
    if reachable:
        _ip("-n", host.name, "route", "del", "blackhole", f"{address}/32", check=False)
    else:
        _ip("-n", host.name, "route", "add", "blackhole", f"{address}/32")


def kill_all(host: Host) -> None:
    """SIGKILL every process on the host at once: the machine is gone, with no shutdown of any kind."""
    out = _ip("netns", "pids", host.name, check=False).stdout
    for pid in (int(p) for p in out.split() if p.isdigit()):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def exec_argv(host: Host, argv: list[str]) -> list[str]:
    """`argv` run on `host`: in its network namespace, and in a UTS namespace of its own whose hostname is the host's
    name (the tool ledger's `worker` column and Celery's `%h` node names then tell the hosts apart)."""
    return ["ip", "netns", "exec", host.name, "unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', host.name, *argv]
