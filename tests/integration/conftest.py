"""Integration fixtures: a real embedded Postgres+pgvector and Redis under a temporary data dir,
and real Celery worker subprocesses. Everything is started by the tests themselves."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from agent.settings import Settings, get_settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def settings(tmp_path_factory) -> Settings:
    data_dir = tmp_path_factory.mktemp("finagent")
    env = {
        "FINAGENT_DATA_DIR": str(data_dir),
        "FINAGENT_EMBEDDING_PROVIDER": "hash",
        "FINAGENT_LLM_PROVIDER": "extractive",
    }
    for key in ("FINAGENT_DATABASE_URL", "FINAGENT_REDIS_URL", "FINAGENT_TAVILY_API_KEY"):
        os.environ.pop(key, None)
    os.environ.update(env)
    get_settings.cache_clear()
    return get_settings()


@pytest.fixture(scope="session")
def ctx(settings):
    from ops.runtime import bootstrap
    from ops.stack import stop_embedded

    context = bootstrap(settings)
    yield context
    from agent.db import close_pools

    close_pools()
    stop_embedded(settings)


@pytest.fixture(scope="session")
def worker(ctx):
    """One real Celery worker process (threads pool) consuming every queue."""
    env = dict(os.environ, FINAGENT_DATABASE_URL=ctx.database_url, FINAGENT_REDIS_URL=ctx.redis_url)
    log = ctx.settings.data_dir / "worker.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "-Q", "coordinator,search,llm,batch",
         "-P", "threads", "-c", "16", "-n", f"test-{os.getpid()}@%h", "-l", "INFO"],
        env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
    )
    from workers.app import app

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if app.control.ping(timeout=0.5):
            break
        assert proc.poll() is None, log.read_text()
    else:
        pytest.fail("worker did not start:\n" + log.read_text())
    yield proc
    proc.terminate()
    proc.wait(30)
