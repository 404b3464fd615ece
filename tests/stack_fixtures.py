"""The live-stack fixtures of the integration and chaos tiers: a real embedded Postgres+pgvector and Redis under a
temporary data dir, and real Celery worker subprocesses, all started by the tests themselves. One stack per session,
shared by both tiers (tests/conftest.py imports these)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.settings import Settings, get_settings
from ops.local.worker_pool import WorkerManager

CHAOS_PROPERTY = "chaos"  # the user property that carries a chaos scenario's summary line


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
    from ops.local.bootstrap import bootstrap
    from ops.local.stack import stop_embedded

    context = bootstrap(settings)
    yield context
    from agent.db import close_pools

    close_pools()
    stop_embedded(settings)


@pytest.fixture(scope="session")
def workers(ctx):
    manager = WorkerManager(ctx.database_url, ctx.redis_url, ctx.settings.data_dir, name="test")
    yield manager
    manager.stop()


@pytest.fixture
def workers_with(workers):
    """Start the workers with environment overrides (`workers_with(FINAGENT_X="1")`); the finalizer stops
    them when the test ends, pass or fail, so the next test never inherits its overrides."""
    yield workers.ensure
    workers.stop()


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
    from agent.ingest.runner import ingest
    from ops.cli.main import sample_corpus_dir

    root = sample_corpus_dir()
    reports = [ingest(ctx, "transcript", [root / "transcripts"], fanout=None, quiet=True)]
    if any((root / "10k").glob("*.htm*")):
        reports.append(ingest(ctx, "10k", [root / "10k"], fanout=None, quiet=True))
    return reports
