"""Redis ACL users, one per role: what each of finagent's processes may do on the shared Redis.

A service using the Celery contract (docs/services.md) connects as `client`: it may push to the public queue and
read its results, and nothing else. The workers, the API, Flower and beat each connect as their own user, with the
keys and channels they use and no dangerous command (FLUSHALL, CONFIG, DEBUG, SHUTDOWN, KEYS, ACL, MONITOR, ...).
The `default` user is off. `acl_file` writes the users for Redis's `aclfile` (passwords as SHA-256 digests) and
`role_url` the URL each process is given as FINAGENT_REDIS_URL.

The names come from kombu's Redis transport (kombu/transport/redis.py) and Celery's Redis result backend:

- a queue is one list per priority step: `celery`, then `celery` + Channel.sep + 3, 6, 9 (PRIORITY_STEPS);
- a publisher adds its queue's binding to `_kombu.binding.<exchange>` (and `_kombu.binding_permanent.<exchange>`)
  and looks the queue up there; `_kombu.binding_deadlines` holds the expiring bindings (control and event queues);
- `unacked`, `unacked_index`, `unacked_mutex`: delivered, unacknowledged messages, which any consumer (an inspect's
  reply queue too) puts back on their queue once the visibility timeout has passed;
- `<node>.celery.pidbox` and `<id>.reply.celery.pidbox`: remote control (inspect, ping, revoke) and its replies;
  `celeryev.<id>`: an event receiver's queue; a consumer of such an auto-delete queue deletes its lists at close;
- `celery-task-meta-<id>` (a result: a key and a channel), `celery-taskset-meta-<id>[.j/.t/.s/.d/.c]` and
  `chord-unlock-<id>` (groups and chords);
- pub/sub `/<db>.celeryev/<routing key>` (task and worker events) and `/<db>.celery.pidbox` (broadcast control).

finagent's own keys are all under `finagent:` (a job's events: the stream `finagent:jobs:<id>:stream` and the channel
`finagent:jobs:<id>:events`). A pattern subscription (PSUBSCRIBE) is allowed only when its pattern is literally one
of the user's channel patterns, so those name the database number.
"""
from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from enum import Enum
from fnmatch import fnmatchcase
from pathlib import Path
from urllib.parse import quote

from kombu.transport.redis import PRIORITY_STEPS, Channel
from pydantic import BaseModel

from workers.topology import RECOVER_ORPHANS, RESUME_STALLED, Queue


class Role(str, Enum):
    client = "client"  # a service using the Celery contract
    worker = "worker"  # every worker pool, and the one-shot `finagent db upgrade`
    api = "api"
    flower = "flower"
    beat = "beat"
    health = "health"  # PING and nothing else, with no password: a container's health check
    admin = "admin"  # every command and key: an operator's redis-cli; no service uses it


# the roles that have a password (health has none)
PASSWORD_ROLES = [Role.client, Role.worker, Role.api, Role.flower, Role.beat, Role.admin]
# what a password may hold: it goes into a URL as it is
PASSWORD_RE = re.compile(r"[A-Za-z0-9._~-]{16,}")


class Grant(BaseModel, frozen=True):
    """One user's rules: key patterns (`~` read and write, `%R~` read, `%W~` write), channel patterns, commands."""

    keys: list[str]
    channels: list[str]
    commands: list[str]

    def key_access(self, key: str) -> set[str]:
        """What the user may do to `key`: {"R", "W"}, one of them, or nothing. (Redis's glob: `*`, `?`, `[...]`, as
        fnmatch reads them.)"""
        access: set[str] = set()
        for rule in self.keys:
            modes, _, pattern = rule.partition("~")
            if fnmatchcase(key, pattern):
                access |= set(modes.removeprefix("%")) if modes else {"R", "W"}
        return access

    def may_publish(self, channel: str) -> bool:
        """PUBLISH and SUBSCRIBE: the channel matches a pattern."""
        return any(fnmatchcase(channel, pattern) for pattern in self.channels)

    def may_psubscribe(self, pattern: str) -> bool:
        """PSUBSCRIBE: the pattern is literally one of the user's."""
        return pattern in self.channels or "*" in self.channels


# a connection's own commands (AUTH and HELLO need none, but are named for older servers)
CONNECTION = ["+auth", "+hello", "+ping", "+select", "+quit", "+reset", "+echo", "+client|setname", "+client|getname",
              "+client|id"]
# the services: every command but the dangerous ones and, of scripting, only what redis-py's scripts send
SERVICE_COMMANDS = ["+@all", "-@dangerous", "-@scripting", "+eval", "+evalsha", "+script|load", "+script|exists"]
# a Celery client's send_task and AsyncResult.get(): declare the queue (LLEN of its lists), bind it (SADD), look it up
# (SMEMBERS) and push (LPUSH), then wait on the result's channel and read its key
CLIENT_COMMANDS = ["-@all", *CONNECTION, "+llen", "+lpush", "+sadd", "+smembers", "+multi", "+exec", "+discard", "+get",
                   "+mget", "+subscribe", "+unsubscribe"]

FINAGENT_KEYS = "finagent:*"
JOB_EVENTS_CHANNEL = "finagent:jobs:*:events"
RESULT = "celery-task-meta-*"
GROUP_RESULTS = ["celery-taskset-meta-*", "chord-unlock-*"]
UNACKED = ["unacked", "unacked_index", "unacked_mutex"]
CONTROL_QUEUES = "*.celery.pidbox*"  # a worker's own control queue (deleted when it stops) and inspect replies
CONTROL_REPLIES = "*.reply.celery.pidbox*"
EVENT_QUEUES = "celeryev.*"  # an event receiver's queue (Flower's, a worker's gossip): its lists are deleted at close


def queue_keys(queue: str) -> list[str]:
    """The key patterns of one queue's lists: the queue itself (priority 0) and one per further priority step."""
    steps = "".join(str(step) for step in PRIORITY_STEPS if step)
    return [queue, f"{queue}{'?' * len(Channel.sep)}[{steps}]"]


def binding_keys(exchange: str) -> list[str]:
    return [f"_kombu.binding.{exchange}", f"_kombu.binding_permanent.{exchange}"]


def _all_queues(access: str) -> list[str]:
    return [access + key for queue in Queue for key in queue_keys(queue.value)]


def grants(db: int = 0) -> dict[Role, Grant]:
    """Every role's rules on database `db`."""
    events, gossip, control = f"/{db}.celeryev/*", f"/{db}.celeryev/worker.*", f"/{db}.celery.pidbox"
    public = Queue.public.value
    beat_queues = sorted({RESUME_STALLED.queue.value, RECOVER_ORPHANS.queue.value})
    return {
        # push to the public queue (never read it: no client takes another's messages), read results (never write)
        Role.client: Grant(keys=[*(f"%W~{k}" for k in queue_keys(public)), f"~{binding_keys(public)[0]}",
                                 f"%W~{binding_keys(public)[1]}", f"%R~{RESULT}"],
                           channels=[RESULT], commands=CLIENT_COMMANDS),
        Role.worker: Grant(keys=[f"~{FINAGENT_KEYS}", *_all_queues("~"), "~_kombu.*", *(f"~{k}" for k in UNACKED),
                                 f"~{CONTROL_QUEUES}", f"~{EVENT_QUEUES}", f"~{RESULT}", *(f"~{k}" for k in GROUP_RESULTS)],
                           channels=[JOB_EVENTS_CHANNEL, RESULT, GROUP_RESULTS[0], events, gossip, control],
                           commands=SERVICE_COMMANDS),
        # dispatch (coordinator and batch queues), queue depths for /metrics, inspect and revoke; every queue is
        # writable because an inspect's consumer may put an expired unacked message back on its queue (kombu)
        Role.api: Grant(keys=[f"~{FINAGENT_KEYS}", *_all_queues("~"), "~_kombu.*", *(f"~{k}" for k in UNACKED),
                              f"~{CONTROL_REPLIES}", f"%R~{RESULT}"],
                        channels=[JOB_EVENTS_CHANNEL, RESULT, events, control], commands=SERVICE_COMMANDS),
        # queue lengths, events, inspect and control; no finagent key: no job data, prompts or cached answers
        Role.flower: Grant(keys=[*_all_queues("~"), "~_kombu.*", *(f"~{k}" for k in UNACKED), f"~{CONTROL_REPLIES}",
                                 f"~{EVENT_QUEUES}", f"%R~{RESULT}"],
                           channels=[RESULT, events, control], commands=SERVICE_COMMANDS),
        # sends the periodic tasks to their queue (with a task-sent event), nothing else
        Role.beat: Grant(keys=[*(f"%W~{k}" for q in beat_queues for k in queue_keys(q)),
                               *(f"~{binding_keys(q)[0]}" for q in beat_queues),
                               *(f"%W~{binding_keys(q)[1]}" for q in beat_queues), f"%R~{RESULT}"],
                         channels=[RESULT, events], commands=SERVICE_COMMANDS),
        Role.health: Grant(keys=[], channels=[], commands=["-@all", "+ping"]),
        Role.admin: Grant(keys=["~*"], channels=["*"], commands=["+@all"]),
    }


def password_digest(password: str) -> str:
    return hashlib.sha256(password.encode()).hexdigest()


def acl_line(role: Role, grant: Grant, password: str | None) -> str:
    """One user of an ACL file; None: no password (`nopass`)."""
    auth = "nopass" if password is None else f"#{password_digest(password)}"
    rules = ["resetchannels", *grant.keys, *(f"&{c}" for c in grant.channels), *grant.commands]
    return " ".join(["user", role.value, "on", auth, *rules])


def check_password(role: Role, password: str) -> str:
    if not PASSWORD_RE.fullmatch(password):
        raise ValueError(f"{password_variable(role)}: at least 16 characters of A-Z a-z 0-9 . _ ~ - (it goes into a "
                         "URL as it is)")
    return password


def acl_file(passwords: Mapping[Role, str], db: int = 0) -> str:
    """The ACL file (Redis's `aclfile`; no comments allowed there): the default user off, then every role. `admin`
    is left out when it has no password; every other role must have one."""
    missing = [r.value for r in PASSWORD_ROLES if r not in passwords and r is not Role.admin]
    if missing:
        raise ValueError(f"no password for {', '.join(missing)}")
    lines = ["user default off"]
    for role, grant in grants(db).items():
        if role is Role.health:
            lines.append(acl_line(role, grant, None))
        elif role in passwords:
            lines.append(acl_line(role, grant, check_password(role, passwords[role])))
    return "\n".join(lines) + "\n"


def role_url(role: Role, password: str, host: str = "redis", port: int = 6379, db: int = 0,
             ca_file: str | None = None) -> str:
    """The FINAGENT_REDIS_URL of a process in `role`; with `ca_file`, over TLS, checking the server's certificate."""
    auth = f"{quote(role.value, safe='')}:{quote(password, safe='')}@"
    if ca_file is None:
        return f"redis://{auth}{host}:{port}/{db}"
    return f"rediss://{auth}{host}:{port}/{db}?ssl_cert_reqs=required&ssl_ca_certs={quote(ca_file)}"


def password_variable(role: Role) -> str:
    """The variable of `.env` that holds the role's password (ops/compose/redis-acl.override.yml interpolates it)."""
    return f"REDIS_PASSWORD_{role.value.upper()}"


def ensure_passwords(env_file: Path) -> tuple[dict[Role, str], list[str]]:
    """Every role's password from `env_file`, a random one added to the file for each role it lacks. Returns the
    passwords and the variables added."""
    from dotenv import dotenv_values

    values = dotenv_values(env_file) if env_file.exists() else {}
    passwords: dict[Role, str] = {}
    added: dict[str, str] = {}
    for role in PASSWORD_ROLES:
        given = values.get(password_variable(role))
        passwords[role] = check_password(role, given) if given else secrets.token_urlsafe(24)
        if not given:
            added[password_variable(role)] = passwords[role]
    if added:
        if not env_file.exists():
            env_file.touch(mode=0o600)  # it holds secrets: its owner's only
        text = env_file.read_text()
        lines = "".join(f"{name}={value}\n" for name, value in added.items())
        env_file.write_text(text + ("\n" if text and not text.endswith("\n") else "") + lines)
    return passwords, list(added)
