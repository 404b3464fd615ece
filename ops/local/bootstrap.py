"""Bring the stack to a usable state for a command: servers, schema, company registry, workers."""
from __future__ import annotations

import os

from agent.context import Context
from agent.db.migrate import upgrade
from agent.ingest.vector_index import restore_abandoned
from agent.retrieval.companies import seed_companies
from agent.services import ServiceURLs
from agent.settings import Settings, get_settings
from ops.local.stack import ensure_stack


def bootstrap(settings: Settings | None = None, workers: bool = False) -> Context:
    settings = settings or get_settings()
    urls = ensure_stack(settings)
    # every module that reads settings later (workers.app, child processes) sees the same servers
    os.environ["FINAGENT_DATABASE_URL"] = urls.database_url
    os.environ["FINAGENT_REDIS_URL"] = urls.redis_url
    upgrade(urls.database_url)
    ctx = Context(settings, urls.database_url, urls.redis_url)
    with ctx.pool.connection() as conn:
        seed_companies(conn)
    restore_abandoned(ctx.pool)  # a bulk load that died left its tables' vector indexes to build
    if workers:
        from ops.local.worker_pool import start_workers

        start_workers(settings, ServiceURLs(database_url=urls.database_url, redis_url=urls.redis_url))
    return ctx
