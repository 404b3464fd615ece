"""Per-process handles to the shared resources: settings, Postgres pool, Redis, embedder, providers.

Built lazily so a process only opens what it uses. Everything in agent/ receives a Context
instead of reaching for globals.
"""
from __future__ import annotations

import threading
from functools import cached_property

import redis as redis_lib

from agent.settings import Settings


class Context:
    def __init__(self, settings: Settings, database_url: str, redis_url: str):
        self.settings = settings
        self.database_url = database_url
        self.redis_url = redis_url
        self._lock = threading.Lock()

    @cached_property
    def pool(self):
        from agent.db import get_pool

        return get_pool(self.database_url, max_size=16)

    @cached_property
    def redis(self) -> redis_lib.Redis:
        return redis_lib.Redis.from_url(self.redis_url, decode_responses=True)

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
