"""Bring the stack to a usable state for a command: servers, schema, company registry, workers.

The schema: the embedded stack (no DATABASE_URL) upgrades itself; against a configured Postgres only
`finagent db upgrade` (compose's `migrate` service) changes it, and every other command refuses to start while it is
behind (agent.db.migrate.SchemaBehind), so that one new worker never migrates a schema under older ones.
"""
from __future__ import annotations

import os

import psycopg
from psycopg.rows import dict_row

from agent.context import Context
from agent.db.migrate import require_current, upgrade
from agent.ingest.vector_index import IndexRebuild, restore, restore_abandoned
from agent.retrieval.companies import seed_companies
from agent.services import ServiceURLs
from agent.settings import Settings, get_settings
from ops.local.stack import ensure_stack, is_embedded_redis


def self_upgrading(settings: Settings) -> bool:
    """The embedded Postgres is this host's own: its schema is upgraded by whichever command starts first."""
    return not settings.database_url


def starts_local_workers(settings: Settings, urls: ServiceURLs) -> bool:
    """A command that needs workers starts this machine's own only with the embedded broker (LOCAL_WORKERS auto):
    pointed at a deployment, `finagent batch run` on an analyst's machine must not become one of its workers."""
    if settings.local_workers != "auto":
        return settings.local_workers == "always"
    return is_embedded_redis(settings, urls.redis_url)


def upgrade_schema(database_url: str) -> tuple[list[str], list[IndexRebuild]]:
    """`finagent db upgrade`: apply the pending migrations, then build the vector indexes a bulk load that died had
    deferred (none while a load is running). Returns the versions applied and the indexes built."""
    applied = upgrade(database_url)
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        rebuilt = restore(conn, abandoned_only=True)
    return applied, rebuilt


def bootstrap(settings: Settings | None = None, workers: bool = False) -> Context:
    settings = settings or get_settings()
    urls = ensure_stack(settings)
    # every module that reads settings later (workers.app, child processes) sees the same servers
    os.environ["FINAGENT_DATABASE_URL"] = urls.database_url
    os.environ["FINAGENT_REDIS_URL"] = urls.redis_url
    if self_upgrading(settings):
        upgrade(urls.database_url)
    else:
        require_current(urls.database_url)  # SchemaBehind: the one line naming `finagent db upgrade`
    ctx = Context(settings, urls.database_url, urls.redis_url)
    with ctx.pool.connection() as conn:
        seed_companies(conn)
    if self_upgrading(settings):
        restore_abandoned(ctx.pool)  # a bulk load that died left its tables' vector indexes to build
    if workers and starts_local_workers(settings, urls):
        from ops.local.worker_pool import start_workers

        start_workers(settings, ServiceURLs(database_url=urls.database_url, redis_url=urls.redis_url))
    return ctx
