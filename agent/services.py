"""Where the servers are: the Postgres and Redis URLs every process uses.

The configured URLs (`FINAGENT_DATABASE_URL`, `FINAGENT_REDIS_URL`) come first. Where one is not configured, the URL
that the embedded local stack recorded when it started its server is used (`ops/local/stack.py` writes
`<data_dir>/services.json`); this module starts nothing. The `finagent` commands start the embedded servers before a
worker, the API or beat, so a process started by hand (`celery -A workers.app worker`) needs the URLs configured or
`finagent services start` run first."""
from __future__ import annotations

import json
import threading
from pathlib import Path

from pydantic import BaseModel, ValidationError

from agent.settings import Settings, env_var


class ServiceURLs(BaseModel):
    database_url: str
    redis_url: str


class ServicesNotConfigured(RuntimeError):
    """A server's URL is neither configured nor recorded by a running embedded stack."""


def embedded_record(settings: Settings) -> Path:
    return settings.data_dir / "services.json"


def record_embedded(settings: Settings, urls: ServiceURLs) -> None:
    """Written by the embedded stack once its servers answer (atomically: readers never see half a file)."""
    path = embedded_record(settings)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(urls.model_dump_json())
    tmp.replace(path)


def forget_embedded(settings: Settings) -> None:
    embedded_record(settings).unlink(missing_ok=True)


def _recorded(settings: Settings) -> ServiceURLs | None:
    try:
        return ServiceURLs.model_validate(json.loads(embedded_record(settings).read_text()))
    except (OSError, ValueError, ValidationError):
        return None


_resolved: dict[tuple, ServiceURLs] = {}
_resolved_lock = threading.Lock()


def service_urls(settings: Settings) -> ServiceURLs:
    """The URLs this process uses, resolved once per configuration."""
    key = (str(settings.data_dir), settings.database_url, settings.redis_url)
    with _resolved_lock:
        if key not in _resolved:
            recorded = None if settings.database_url and settings.redis_url else _recorded(settings)
            database_url = settings.database_url or (recorded.database_url if recorded else None)
            redis_url = settings.redis_url or (recorded.redis_url if recorded else None)
            if not database_url or not redis_url:
                missing = env_var("database_url") if not database_url else env_var("redis_url")
                raise ServicesNotConfigured(f"no server configured: set {missing}, or start the embedded servers with "
                                            "`finagent services start`")
            _resolved[key] = ServiceURLs(database_url=database_url, redis_url=redis_url)
        return _resolved[key]


def celery_broker_url(redis_url: str) -> str:
    """kombu spells a unix-socket Redis as redis+socket://."""
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url[len("unix://"):]
    return redis_url
