"""The process-wide Context (Postgres pool, Redis client) that tasks and worker signals use, built on first use."""
from __future__ import annotations

import threading

from agent.context import Context
from agent.services import service_urls
from agent.settings import get_settings

_ctx: Context | None = None
_ctx_lock = threading.Lock()


def context() -> Context:
    global _ctx
    with _ctx_lock:
        if _ctx is None:
            settings = get_settings()
            urls = service_urls(settings)
            _ctx = Context(settings, urls.database_url, urls.redis_url)
        return _ctx
