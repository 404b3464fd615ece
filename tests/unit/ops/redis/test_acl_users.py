"""The Redis ACL users' rules (ops/redis/acl_users.py) against the key and channel names kombu, Celery and finagent
use: the service client reaches only the public queue and its results; each service reaches what its code touches."""
from __future__ import annotations

import hashlib
import stat

import pytest
from kombu.transport.redis import PRIORITY_STEPS, Channel
from redis.connection import parse_url

from agent.infra import liveness
from agent.infra.events import channel as events_channel
from agent.infra.events import published_marker, stream_key
from ops.redis.acl_users import (
    PASSWORD_ROLES,
    Role,
    acl_file,
    ensure_passwords,
    grants,
    password_variable,
    role_url,
)
from workers.topology import Queue

PASSWORDS = {role: f"{role.value}-pw-0123456789abcdef" for role in PASSWORD_ROLES}
INTERNAL = [q.value for q in Queue if q is not Queue.public]
JOB = "0f0e0d0c-aaaa-bbbb-cccc-000000000001"


def kombu_lists(queue: str) -> list[str]:
    """The lists kombu's Redis transport keeps for one queue: the queue, then one per further priority step."""
    return [queue] + [f"{queue}{Channel.sep}{step}" for step in PRIORITY_STEPS if step]


def test_the_file_turns_the_default_user_off_and_holds_digests_not_passwords():
    text = acl_file(PASSWORDS)
    lines = text.splitlines()
    assert lines[0] == "user default off"
    assert [line.split()[1] for line in lines[1:]] == ["client", "worker", "api", "flower", "beat", "health", "admin"]
    for role, password in PASSWORDS.items():
        assert password not in text
        assert f"user {role.value} on #{hashlib.sha256(password.encode()).hexdigest()} " in text
    assert "user health on nopass resetchannels -@all +ping" in lines  # the health check's PING, nothing else
    assert not any(line.startswith("#") for line in lines)  # Redis refuses comments in an ACL file


def test_the_client_pushes_to_the_public_queue_and_nowhere_else():
    client = grants()[Role.client]
    for key in kombu_lists(Queue.public.value):
        assert client.key_access(key) == {"W"}  # LPUSH, never RPOP: no client takes another's messages
    for queue in INTERNAL:
        for key in kombu_lists(queue) + [f"_kombu.binding.{queue}"]:
            assert client.key_access(key) == set(), key
    assert client.key_access("_kombu.binding.celery") == {"R", "W"}  # binds the queue, looks it up
    assert client.key_access("celeryev.abc") == set() and client.key_access("celery-taskset-meta-g") == set()


def test_the_client_reads_its_results_and_no_internal_key():
    client = grants()[Role.client]
    assert client.key_access("celery-task-meta-5a1d") == {"R"}  # never writes (forges) one
    assert client.may_publish("celery-task-meta-5a1d")  # SUBSCRIBE while .get() waits
    for key in (stream_key(JOB), published_marker(JOB, 1), liveness.CLAIMS, "finagent:llmcache:ab", "unacked"):
        assert client.key_access(key) == set(), key
    assert not client.may_publish(events_channel(JOB)) and not client.may_psubscribe("/0.celeryev/*")
    assert client.commands[0] == "-@all" and "+@all" not in client.commands


def test_each_service_reaches_the_keys_and_channels_its_code_uses():
    rules = grants()
    worker, api, flower, beat = rules[Role.worker], rules[Role.api], rules[Role.flower], rules[Role.beat]
    finagent_keys = [stream_key(JOB), published_marker(JOB, 3), liveness.CLAIMS, liveness.heartbeat_key("llm@h"),
                     "finagent:breaker:llm:failures", "finagent:ratelimit:llm:tokens", "finagent:periods:transcript:ACME"]
    every_queue = [key for q in Queue for key in kombu_lists(q.value)]
    for key in [*finagent_keys, *every_queue, "unacked", "unacked_index", "unacked_mutex", "_kombu.binding.coordinator",
                "_kombu.binding_deadlines", "llm@h.celery.pidbox", "9c1.reply.celery.pidbox", "celeryev.9c1",
                "celery-task-meta-1", "celery-taskset-meta-g.j", "chord-unlock-1"]:
        assert worker.key_access(key) == {"R", "W"}, key
    for key in [stream_key(JOB), *every_queue, "9c1.reply.celery.pidbox", "unacked_mutex"]:
        assert api.key_access(key) == {"R", "W"}, key  # dispatch, /metrics' queue depths, inspect and revoke
    assert api.key_access("celery-task-meta-1") == {"R"}
    assert all(flower.key_access(key) == set() for key in finagent_keys)  # no job data, prompts or cached answers
    assert flower.key_access("coordinator") == {"R", "W"} and flower.key_access("celeryev.9c1") == {"R", "W"}
    assert all(beat.key_access(key) == {"W"} for key in kombu_lists(Queue.coordinator.value))
    assert all(beat.key_access(key) == set() for q in INTERNAL if q != "coordinator" for key in kombu_lists(q))
    assert all(beat.key_access(key) == set() for key in finagent_keys)
    for role in (worker, api, beat):
        assert role.may_publish("/0.celeryev/task.sent") and role.may_publish("celery-task-meta-1")
    assert worker.may_publish(events_channel(JOB)) and api.may_publish(events_channel(JOB))
    assert worker.may_psubscribe("/0.celery.pidbox") and worker.may_psubscribe("/0.celeryev/worker.*")  # control, gossip
    assert flower.may_psubscribe("/0.celeryev/*") and not flower.may_publish(events_channel(JOB))


def test_pattern_subscriptions_name_the_database():
    assert grants(db=2)[Role.flower].may_psubscribe("/2.celeryev/*")
    assert not grants(db=2)[Role.flower].may_psubscribe("/0.celeryev/*")
    assert "&/2.celery.pidbox" in acl_file(PASSWORDS, db=2)


def test_services_run_no_dangerous_command():
    for role in (Role.worker, Role.api, Role.flower, Role.beat):
        commands = grants()[role].commands
        assert commands.index("-@dangerous") > commands.index("+@all"), role
        assert "+script|flush" not in commands and "-@scripting" in commands


def test_every_role_needs_a_password_but_admin():
    without_admin: dict[Role, str] = {r: p for r, p in PASSWORDS.items() if r is not Role.admin}
    assert "user admin" not in acl_file(without_admin)
    with pytest.raises(ValueError, match="no password for api"):
        acl_file({r: p for r, p in without_admin.items() if r is not Role.api})
    for bad in ("short", "has@an-at-sign-in-it", "has a space in it ok?"):
        with pytest.raises(ValueError, match="REDIS_PASSWORD_WORKER"):
            acl_file({**PASSWORDS, Role.worker: bad})


def test_role_url_plain_and_over_tls():
    assert role_url(Role.api, "pw-0123456789abcdef") == "redis://api:pw-0123456789abcdef@redis:6379/0"
    url = role_url(Role.worker, "pw-0123456789abcdef", host="10.0.0.5", port=6380, db=1, ca_file="/run/secrets/ca.crt")
    assert url.startswith("rediss://")
    parsed = parse_url(url)
    assert (parsed["username"], parsed["password"], parsed["host"], parsed["port"], parsed["db"]) == (
        "worker", "pw-0123456789abcdef", "10.0.0.5", 6380, 1)
    assert parsed["ssl_cert_reqs"] == "required" and parsed["ssl_ca_certs"] == "/run/secrets/ca.crt"


def test_passwords_are_kept_in_the_env_file_and_generated_once(tmp_path):
    env = tmp_path / ".env"
    env.write_text("POSTGRES_PASSWORD=pg\nREDIS_PASSWORD_API=api-given-0123456789")  # no final newline
    first, added = ensure_passwords(env)
    assert first[Role.api] == "api-given-0123456789"
    assert added == [password_variable(r) for r in PASSWORD_ROLES if r is not Role.api]
    assert env.read_text().startswith("POSTGRES_PASSWORD=pg\nREDIS_PASSWORD_API=api-given-0123456789\n")
    again, added = ensure_passwords(env)
    assert again == first and added == []
    assert len(set(first.values())) == len(PASSWORD_ROLES)


def test_a_new_env_file_is_its_owners_only(tmp_path):
    env = tmp_path / "redis.env"
    passwords, _ = ensure_passwords(env)
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    assert acl_file(passwords).startswith("user default off\n")
