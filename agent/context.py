"""Per-process handles to the shared resources: settings, Postgres pool, Redis, embedder, providers.

Built lazily so a process only opens what it uses. Everything in agent/ receives a Context
instead of reaching for globals.
"""
from __future__ import annotations

import threading
from functools import cached_property

import redis as redis_lib

from agent.settings import Settings


def connect_redis(url: str, ride_out: bool = True) -> redis_lib.Redis:
    """A client that rides out a Redis restart: a command that meets a dropped connection is retried with
    backoff for about 20 s before the error reaches the caller. With `ride_out=False`, one attempt: for a caller
    that has somewhere better to go when Redis is down (a readiness probe, a submission the reconciler will finish)."""
    from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
    from redis.retry import Retry

    retry = Retry(ExponentialWithJitterBackoff(cap=2.0, base=0.1), retries=12) if ride_out else Retry(NoBackoff(), 0)
    return redis_lib.Redis.from_url(url, decode_responses=True, socket_connect_timeout=2, health_check_interval=15,
                                    retry=retry, retry_on_error=[redis_lib.ConnectionError, redis_lib.TimeoutError])


class Context:
    def __init__(self, settings: Settings, database_url: str, redis_url: str, db_wait_s: float | None = None):
        self.settings = settings
        self.database_url = database_url
        self.redis_url = redis_url
        self.db_wait_s = db_wait_s  # a checkout's wait for a Postgres connection; None: the pool's default
        self._lock = threading.Lock()

    @cached_property
    def pool(self):
        from agent.db import DEFAULT_WAIT_S, get_pool

        return get_pool(self.database_url, max_size=16, wait_s=self.db_wait_s or DEFAULT_WAIT_S)

    @cached_property
    def redis(self) -> redis_lib.Redis:
        return connect_redis(self.redis_url)

    @cached_property
    def redis_one_attempt(self) -> redis_lib.Redis:
        return connect_redis(self.redis_url, ride_out=False)

    @cached_property
    def embedder(self):
        from agent.providers.embeddings import make_embedder

        with self._lock:
            return make_embedder(self.settings, pool=self.pool)

    def embed_query(self, text: str):
        return self.embedder.embed([text])[0]

    @cached_property
    def llm(self):
        from agent.providers.llm.factory import make_llm

        with self._lock:
            return make_llm(self.settings, self.redis)
