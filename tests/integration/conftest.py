"""Integration fixtures: a real embedded Postgres+pgvector and Redis under a temporary data dir,
and real Celery worker subprocesses. Everything is started by the tests themselves."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

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
    for key in ("FINAGENT_DATABASE_URL", "FINAGENT_REDIS_URL", "FINAGENT_TAVILY_API_KEY", "FINAGENT_LLM_LATENCY_S"):
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


class WorkerManager:
    """At most one worker process at a time (they would share the queues); restarted when its env changes."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.proc: subprocess.Popen | None = None
        self.env_key: tuple | None = None
        self.count = 0

    def ensure(self, **overrides: str) -> subprocess.Popen:
        key = tuple(sorted(overrides.items()))
        if self.proc and self.proc.poll() is None and key == self.env_key:
            return self.proc
        self.stop()
        env = dict(os.environ, FINAGENT_DATABASE_URL=self.ctx.database_url, FINAGENT_REDIS_URL=self.ctx.redis_url, **overrides)
        self.count += 1
        log = self.ctx.settings.data_dir / f"worker-{self.count}.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "-Q", "coordinator,search,llm,batch",
             "-P", "threads", "-c", "16", "-n", f"test{self.count}-{os.getpid()}@%h", "-l", "INFO"],
            env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
        )
        self.env_key = key
        self.log = log
        from workers.app import app

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            replies = app.control.ping(timeout=0.5) or []
            if any(f"test{self.count}-" in name for r in replies for name in r):
                return self.proc
            assert self.proc.poll() is None, log.read_text()
        pytest.fail("worker did not start:\n" + log.read_text())

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        self.proc = None


@pytest.fixture(scope="session")
def workers(ctx):
    manager = WorkerManager(ctx)
    yield manager
    manager.stop()


@pytest.fixture
def worker(workers):
    """A real Celery worker process (threads pool) consuming every queue, extractive provider."""
    return workers.ensure()


@pytest.fixture(scope="session")
def script_path(settings) -> Path:
    return settings.data_dir / "llm-script.json"


@pytest.fixture
def scripted_worker(workers, script_path):
    """A real worker whose LLM is the scripted provider; write the script to `script_path` before submitting.
    top-k is small so that a follow-up search still has new chunks to find in the small sample corpus."""
    script_path.write_text("{}")
    return workers.ensure(FINAGENT_LLM_PROVIDER="scripted", FINAGENT_LLM_SCRIPT_PATH=str(script_path),
                          FINAGENT_TOP_K_PER_QUARTER="3")


@pytest.fixture(scope="session")
def sample_corpus(ctx):
    """The shipped sample corpus (NVDA, AAPL, MSFT transcripts and a small NVDA 10-K), ingested once."""
    from ops.cli import sample_corpus_dir
    from ops.ingest_runner import ingest

    root = sample_corpus_dir()
    reports = [ingest(ctx, "transcript", [root / "transcripts"], fanout=False, quiet=True)]
    if any((root / "10k").glob("*.htm*")):
        reports.append(ingest(ctx, "10k", [root / "10k"], fanout=False, quiet=True))
    return reports
