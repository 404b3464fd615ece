"""What the API's routes work with, resolved on first use so that importing the app starts nothing."""
from __future__ import annotations

import threading
from functools import cached_property

import redis.asyncio as aioredis
from fastapi import Request

from agent.context import Context
from agent.services import service_urls
from agent.settings import Settings, get_settings
from agent.submission import Dispatcher
from finagent.models import Readiness


class Runtime:
    """Settings, the process context (Postgres pool, Redis), the dispatcher and the API's own tunables."""

    def __init__(self, settings: Settings | None = None, ready_cache_s: float = 5.0, inspect_timeout_s: float = 1.0,
                 sse_ping_s: float = 15.0, ready_deadline_s: float = 3.0):
        self._settings = settings
        self.ready_cache_s = ready_cache_s
        self.inspect_timeout_s = inspect_timeout_s
        self.ready_deadline_s = ready_deadline_s  # /readyz answers within about this long, whatever is down
        self.sse_ping_s = sse_ping_s
        self.lock = threading.Lock()
        self.ready_cache: tuple[float, Readiness] | None = None  # (monotonic time, answer) of the last /readyz

    @cached_property
    def settings(self) -> Settings:
        return self._settings or get_settings()

    @cached_property
    def ctx(self) -> Context:
        urls = service_urls(get_settings())
        # the API's own pool, whose checkouts give up after api_db_wait_s; an app built for given settings (api keys,
        # limits) keeps them, on the same servers as the workers
        return Context(self.settings, urls.database_url, urls.redis_url, db_wait_s=self.settings.api_db_wait_s)

    @cached_property
    def dispatcher(self) -> Dispatcher:
        from tasks.dispatch import CeleryDispatcher

        return CeleryDispatcher()

    @cached_property
    def aredis(self) -> aioredis.Redis:
        """For the events stream: a blocking XREAD per client costs a connection, not a thread."""
        return aioredis.Redis.from_url(self.ctx.redis_url, decode_responses=True)


def runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt
