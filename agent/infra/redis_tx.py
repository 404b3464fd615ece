"""Optimistic Redis transactions (WATCH/MULTI/EXEC) that also hand back the EXEC results."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import redis as redis_lib

T = TypeVar("T")


def watched_transaction(redis: redis_lib.Redis, fn: Callable[[Any], T], *watch: str) -> tuple[T, list]:
    """Run fn(pipe) under WATCH; fn reads in immediate mode, then may call pipe.multi() and queue writes.
    Re-run when another client touched a watched key in between. Returns (fn's value, EXEC results)."""
    with redis.pipeline() as pipe:
        while True:
            try:
                pipe.watch(*watch)
                value = fn(pipe)
                results = pipe.execute() if pipe.explicit_transaction else []
                pipe.reset()
                return value, results
            except redis_lib.WatchError:
                continue
