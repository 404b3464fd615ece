"""Who may change the schema: the embedded stack upgrades itself, a configured Postgres only by `finagent db upgrade`."""
from __future__ import annotations

from agent.settings import Settings
from ops.local.bootstrap import self_upgrading


def test_only_the_embedded_postgres_upgrades_itself(tmp_path):
    assert self_upgrading(Settings(data_dir=tmp_path))
    assert not self_upgrading(Settings(data_dir=tmp_path, database_url="postgresql://finagent@db.invalid/finagent"))


def test_local_workers_start_with_the_embedded_broker_only(tmp_path):
    from agent.services import ServiceURLs
    from ops.local.bootstrap import starts_local_workers
    from ops.local.stack import is_embedded_redis

    settings = Settings(data_dir=tmp_path)
    embedded = f"unix://{tmp_path / 'redis' / 'redis.sock'}"
    assert is_embedded_redis(settings, embedded), "the embedded socket's path moved: update this test"
    db = "postgresql://finagent@db.invalid/finagent"
    assert starts_local_workers(settings, ServiceURLs(database_url=db, redis_url=embedded))
    remote = ServiceURLs(database_url=db, redis_url="rediss://:pw@redis.invalid:6379/0")
    assert not starts_local_workers(settings, remote)  # an analyst's machine pointed at a deployment
    assert not starts_local_workers(settings, ServiceURLs(database_url=db, redis_url=f"unix://{tmp_path}/other.sock"))
    assert starts_local_workers(Settings(data_dir=tmp_path, local_workers="always"), remote)
    assert not starts_local_workers(Settings(data_dir=tmp_path, local_workers="never"),
                                    ServiceURLs(database_url=db, redis_url=embedded))
