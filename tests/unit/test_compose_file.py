"""docker-compose.yml is parsed (no Docker engine on these machines): the production shape is all there."""
from pathlib import Path

import yaml

COMPOSE = yaml.safe_load((Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text())


def test_services_cover_every_queue_beat_flower_and_api():
    services = COMPOSE["services"]
    assert services["postgres"]["image"].startswith("pgvector/pgvector:pg16")
    assert services["redis"]["image"] == "redis:7"
    queues = set()
    for name, svc in services.items():
        cmd = svc.get("command", [])
        if "worker" in cmd:
            queues |= set(cmd[cmd.index("-Q") + 1].split(","))
    assert queues == {"coordinator", "search", "llm", "batch"}
    assert any("beat" in s.get("command", []) for s in services.values())
    assert any("flower" in s.get("command", []) for s in services.values())
    assert any("api_stub.app:app" in s.get("command", []) for s in services.values())


def test_app_services_point_at_the_compose_servers():
    worker = COMPOSE["services"]["worker-llm"]
    env = worker["environment"]
    assert env["FINAGENT_DATABASE_URL"].startswith("postgresql://") and "@postgres:5432/" in env["FINAGENT_DATABASE_URL"]
    assert env["FINAGENT_REDIS_URL"] == "redis://redis:6379/0"
    assert set(worker["depends_on"]) == {"postgres", "redis"}
