"""Who may change the schema: the embedded stack upgrades itself, a configured Postgres only by `finagent db upgrade`."""
from __future__ import annotations

from agent.settings import Settings
from ops.local.bootstrap import self_upgrading


def test_only_the_embedded_postgres_upgrades_itself(tmp_path):
    assert self_upgrading(Settings(data_dir=tmp_path))
    assert not self_upgrading(Settings(data_dir=tmp_path, database_url="postgresql://finagent@db.invalid/finagent"))
