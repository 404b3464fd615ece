"""Prometheus metrics without services: the scrape-time collectors on fakeredis, the instrumentation helpers read
back through prometheus-client's multiprocess files (tests/unit/conftest.py points them at a temporary directory),
and the bookkeeping of the files of processes that are gone."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import fakeredis
import psycopg
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from agent.infra import metrics
from agent.infra.breaker import CircuitBreaker
from agent.infra.events import publish, publish_once
from agent.infra.queue_consumers import announce
from agent.models.job import StepEvent
from agent.models.research import ScopeFindings, Usage
from agent.models.steps import PlanOutput
from agent.persistence.ledger import CallRecord
from agent.providers.llm.cache import CachedProvider
from agent.settings import Settings
from tests.support.machine_driver import USAGE, Job, plan
from tests.unit.agent.providers.test_llm_cache import Counting, request

REPO = Path(__file__).resolve().parents[4]


def sample(name: str, **labels: str) -> float:
    """The value every process has written so far for one series (0 when it has none)."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(metrics.multiprocess_dir()))
    return registry.get_sample_value(name, labels) or 0.0


def settings(**kw) -> Settings:
    return Settings(_env_file=None, **kw)  # type: ignore[call-arg]


# ---------- scrape time ----------

def test_queue_depth_counts_every_priority_list_kombu_keeps_for_a_queue():
    redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    assert metrics.queue_keys("llm") == ["llm", "llm\x06\x163", "llm\x06\x166", "llm\x06\x169"]
    redis.lpush("llm", "a", "b")
    redis.lpush("llm\x06\x163", "c")
    redis.lpush("llm\x06\x169", "d", "e", "f")
    redis.lpush("search", "g")
    redis.lpush("unrelated", "h")
    assert metrics.queue_depths(redis, ["llm", "search", "batch"]) == {"llm": 6, "search": 1, "batch": 0}


def test_breaker_state_is_read_from_the_shared_redis_state():
    server = fakeredis.FakeServer()
    s = settings(circuit_breaker_threshold=2, circuit_breaker_reset_s=300)
    worker = CircuitBreaker(fakeredis.FakeRedis(server=server), "tavily", threshold=2, reset_s=300)
    scraper = fakeredis.FakeRedis(server=server)  # another process, as the API would be
    assert metrics.breaker_states(scraper, ["tavily", "llm:x"], s) == {"tavily": ("closed", 0), "llm:x": ("closed", 0)}
    worker.record_failure()
    worker.record_failure()
    states = metrics.breaker_states(scraper, ["tavily", "llm:x"], s)
    assert states == {"tavily": ("open", 2), "llm:x": ("closed", 0)}
    state, failures = metrics.breaker_families(states)
    values = {tuple(x.labels.values()): x.value for x in state.samples}
    assert values[("tavily", "open")] == 1 and values[("tavily", "closed")] == 0 and values[("tavily", "half_open")] == 0
    assert values[("llm:x", "closed")] == 1 and values[("llm:x", "open")] == 0
    assert {x.labels["dependency"]: x.value for x in failures.samples} == {"tavily": 2, "llm:x": 0}


def test_jobs_by_status_reports_every_status_with_zero_for_the_missing_ones():
    family = metrics.jobs_family({"completed": 3, "running": 1})
    values = {x.labels["status"]: x.value for x in family.samples}
    assert values == {"queued": 0, "running": 1, "completed": 3, "failed": 0, "rejected": 0, "cancelled": 0}


class Rows:
    """Postgres answering the two scrape queries: jobs by status, then the oldest job under way."""

    def __init__(self, counts: dict[str, int], oldest_s: float | None):
        self.counts, self.oldest_s = counts, oldest_s
        self.sql: list[str] = []
        self.timeouts: list[float] = []

    def connection(self, timeout: float):
        self.timeouts.append(timeout)
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql: str):
        self.sql.append(sql)
        return self

    def fetchall(self):
        return [{"status": k, "n": v} for k, v in self.counts.items()]

    def fetchone(self):
        return {"age": self.oldest_s}


def test_the_oldest_job_under_way_is_read_with_the_counts_in_one_checkout_and_is_0_when_none():
    pool = Rows({"running": 2, "completed": 5}, 1234.5)
    assert metrics.job_gauges(pool) == ({"running": 2, "completed": 5}, 1234.5)
    assert pool.timeouts == [metrics.SCRAPE_DB_WAIT_S] and pool.sql[1] == metrics.OLDEST_ACTIVE_SQL
    assert "admitted_at IS NULL" in metrics.OLDEST_ACTIVE_SQL  # a batch job waiting for its slot is not stuck
    assert metrics.job_gauges(Rows({}, None)) == ({}, 0.0)  # min() over no row
    assert [s.value for s in metrics.oldest_active_family(1234.5).samples] == [1234.5]


class DownPool:
    """Postgres not answering, as psycopg reports it; notes how long it was asked to wait."""

    waits: list[float] = []

    def connection(self, timeout: float):
        self.waits.append(timeout)
        raise psycopg.OperationalError("connection refused")


class ScrapeCtx:
    def __init__(self, redis, s: Settings):
        self.redis_one_attempt, self.settings, self.pool = redis, s, DownPool()


def test_render_merges_the_files_with_the_scrape_time_metrics_and_survives_a_source_that_is_down():
    redis = fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
    redis.lpush("coordinator", "m")
    announce(redis, "coordinator@w1", ["coordinator", "celery"], 15)
    metrics.count_events(["planning"])  # something in this process's files
    ctx = ScrapeCtx(redis, settings(metrics_dir=metrics.multiprocess_dir()))
    payload, content_type = metrics.render_metrics(ctx, metrics.ScrapeTargets(queues=["coordinator", "llm"], breakers=["tavily"]))
    assert content_type.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(payload.decode())}
    up = {s.labels["source"]: s.value for s in families["finagent_scrape_source_up"].samples}
    assert up == {"postgres": 0, "redis": 1}
    assert ctx.pool.waits == [metrics.SCRAPE_DB_WAIT_S]  # not the API's 5 s or a worker's 30 s
    assert "finagent_jobs" not in families  # no made-up numbers when Postgres is down
    assert {s.labels["queue"]: s.value for s in families["finagent_queue_depth"].samples} == {"coordinator": 1, "llm": 0}
    assert {s.labels["queue"]: s.value for s in families["finagent_queue_consumers"].samples} == {"coordinator": 1, "llm": 0}
    assert {s.labels["state"] for s in families["finagent_circuit_breaker_state"].samples} == {"closed", "open", "half_open"}
    events = [s for s in families["finagent_events_published"].samples if s.name.endswith("_total")]
    assert any(s.labels["type"] == "planning" and s.value >= 1 for s in events)


def test_render_without_targets_uses_the_ones_the_celery_app_registers():
    import workers.signals  # noqa: F401  (imported with the Celery app; registers the topology's queues)
    from workers.topology import Queue

    ctx = ScrapeCtx(fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True),
                    settings(metrics_dir=metrics.multiprocess_dir()))
    families = {f.name: f for f in text_string_to_metric_families(metrics.render_metrics(ctx)[0].decode())}
    assert {s.labels["queue"] for s in families["finagent_queue_depth"].samples} == {q.value for q in Queue}
    deps = {s.labels["dependency"] for s in families["finagent_circuit_breaker_failures"].samples}
    assert "tavily" in deps and any(d.startswith("llm:") for d in deps)


# ---------- recorded where things happen ----------

def test_publish_and_publish_once_count_each_event_published_by_type():
    redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    search0, status0 = sample("finagent_events_published_total", type="search"), sample("finagent_events_published_total", type="job_status")
    publish(redis, "job-m1", "search", "found 3")
    events = [StepEvent(type="search"), StepEvent(type="job_status", data={"status": "running"})]
    assert publish_once(redis, "job-m1", 1, events)
    assert not publish_once(redis, "job-m1", 1, events)  # a retried step publishes nothing, and counts nothing
    assert sample("finagent_events_published_total", type="search") - search0 == 2
    assert sample("finagent_events_published_total", type="job_status") - status0 == 1


def test_the_ledger_counts_llm_calls_tokens_and_cost_by_model_and_role():
    s = settings()
    labels = {"model": "gpt-4o-mini", "role": "extract"}
    calls0, cost0 = sample("finagent_llm_calls_total", **labels), sample("finagent_llm_cost_usd_total", **labels)
    prompt0 = sample("finagent_llm_tokens_total", kind="prompt", **labels)
    completion0 = sample("finagent_llm_tokens_total", kind="completion", **labels)
    rec = CallRecord("llm.extract")
    rec.use(Usage(prompt=1000, completion=200, model="gpt-4o-mini"), s)
    rec.use(Usage(prompt=500, completion=100, model="gpt-4o-mini"), s)
    rec.use(Usage(model="gpt-4o-mini", cached=True), s)  # the cache answered: counted by the cache, not as a call
    assert sample("finagent_llm_calls_total", **labels) - calls0 == 2
    assert sample("finagent_llm_tokens_total", kind="prompt", **labels) - prompt0 == 1500
    assert sample("finagent_llm_tokens_total", kind="completion", **labels) - completion0 == 300
    assert sample("finagent_llm_cost_usd_total", **labels) - cost0 == pytest.approx(rec.cost_usd)
    assert rec.cost_usd == pytest.approx(s.cost_usd("gpt-4o-mini", 1500, 300))


def test_the_response_cache_counts_its_hits_and_misses_by_role():
    provider = CachedProvider(Counting(), fakeredis.FakeRedis(server=fakeredis.FakeServer()), ttl_s=60)
    hits0, misses0 = sample("finagent_llm_cache_hits_total", role="extract"), sample("finagent_llm_cache_misses_total", role="extract")
    provider.extract(request())
    provider.extract(request())
    provider.extract(request(note="another budget note"))  # same key: the note is left out
    result, usage = provider.extract(request(scope="ACME:2024_q4"))
    assert isinstance(result, ScopeFindings) and not usage.cached
    assert sample("finagent_llm_cache_hits_total", role="extract") - hits0 == 2
    assert sample("finagent_llm_cache_misses_total", role="extract") - misses0 == 2


def test_rate_limit_waits_are_counted_by_traffic_and_outcome():
    waited0 = sample("finagent_llm_throttled_total", kind="batch", outcome="waited")
    gave_up0 = sample("finagent_llm_throttled_total", kind="interactive", outcome="gave_up")
    metrics.count_throttled(True, "waited")
    metrics.count_throttled(True, "waited")
    metrics.count_throttled(False, "gave_up")
    assert sample("finagent_llm_throttled_total", kind="batch", outcome="waited") - waited0 == 2
    assert sample("finagent_llm_throttled_total", kind="interactive", outcome="gave_up") - gave_up0 == 1


def test_task_timings_by_name_and_outcome_and_the_tasks_in_progress():
    task = "tasks.llm.compose"
    ok0 = sample("finagent_task_duration_seconds_count", task=task, outcome="success")
    retry0 = sample("finagent_task_duration_seconds_count", task=task, outcome="retry")
    metrics.task_started("t-1", task)
    metrics.task_started("t-2", task)
    assert sample("finagent_tasks_in_progress", task=task) == 2
    metrics.task_finished("t-1", task, "SUCCESS")
    metrics.task_failed(task, ConnectionError("reset by peer"))
    metrics.task_finished("t-2", task, "RETRY")
    metrics.task_finished("t-3", task, "SUCCESS")  # never started here (a redelivery's postrun): not observed
    assert sample("finagent_tasks_in_progress", task=task) == 0
    assert sample("finagent_task_duration_seconds_count", task=task, outcome="success") - ok0 == 1
    assert sample("finagent_task_duration_seconds_count", task=task, outcome="retry") - retry0 == 1
    assert sample("finagent_task_failures_total", task=task, error_class="network") >= 1


def test_a_job_end_observes_latency_iterations_and_confidence_by_mode():
    job = Job(mode="direct")
    job.advance()
    out = job.respond(lambda c, it: PlanOutput(plan=plan(), usage=USAGE), seconds=4.0, cancel=True)
    assert out.status == "cancelled" and out.result is not None
    count0 = sample("finagent_job_latency_seconds_count", mode="direct")
    sum0 = sample("finagent_job_latency_seconds_sum", mode="direct")
    finished0 = sample("finagent_jobs_finished_total", mode="direct", status="cancelled")
    metrics.observe_job_end(out.state, out.result, out.status, now=job.now)
    assert sample("finagent_job_latency_seconds_count", mode="direct") - count0 == 1
    assert sample("finagent_job_latency_seconds_sum", mode="direct") - sum0 == pytest.approx(4.0)
    assert sample("finagent_jobs_finished_total", mode="direct", status="cancelled") - finished0 == 1
    assert sample("finagent_job_iterations_count", mode="direct") >= 1
    assert sample("finagent_job_confidence_count", mode="direct") >= 1
    before = sample("finagent_job_latency_seconds_count", mode="direct")
    metrics.observe_job_end(out.state, out.result, "running", now=job.now)  # not final: nothing observed
    assert sample("finagent_job_latency_seconds_count", mode="direct") == before


# ---------- the files of other processes ----------

CHILD = """
from agent.infra import metrics
metrics.task_started("t", "tasks.x")
metrics.count_events(["search"])
"""


def test_another_process_s_counters_are_merged_and_its_live_gauge_dropped_when_it_is_marked_dead(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env |= {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "FINAGENT_DATA_DIR": str(tmp_path / "data")}
    child = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, env=env, check=True, timeout=60)
    assert child.returncode == 0
    files = sorted(p.name for p in tmp_path.glob("*.db"))
    pid = int(files[0].rsplit("-", 1)[1].removesuffix(".db"))
    me = metrics.process_id(pid)  # host name and pid: containers sharing the directory all have small pids
    assert files == [f"counter_{me}.db", f"gauge_livesum_{me}.db"]
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(tmp_path))
    assert registry.get_sample_value("finagent_events_published_total", {"type": "search"}) == 1
    assert registry.get_sample_value("finagent_tasks_in_progress", {"task": "tasks.x"}) == 1
    metrics.mark_process_dead(pid, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.db")) == [f"counter_{me}.db"]  # the total stays


def test_only_the_files_of_this_hosts_processes_that_are_gone_are_cleaned(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead, alive = metrics.process_id(gone.pid), metrics.process_id(os.getpid())
    other_host = f"another.container-{gone.pid}"  # same pid on another host sharing the volume: not ours to judge
    for name in (f"counter_{dead}.db", f"gauge_livesum_{dead}.db", f"counter_{alive}.db", f"counter_{other_host}.db", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    removed = metrics.clean_dead_process_files(tmp_path)
    assert sorted(removed) == [f"counter_{dead}.db", f"gauge_livesum_{dead}.db"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"counter_{alive}.db", f"counter_{other_host}.db", "notes.txt"])
