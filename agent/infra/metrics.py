"""Prometheus metrics (prometheus-client), every name prefixed `finagent_`; docs/operators.md (Metrics) lists them all.

Two kinds:
- Recorded where things happen, in whichever process does them (API, every Celery worker): job ends, task
  durations, LLM calls, tokens and cost, response-cache lookups, events published. `_Metrics` defines each once.
- Computed at scrape time from the shared state, so they are right however many processes run: jobs by status and
  the oldest job still under way (Postgres `research_jobs`), queue depth (Redis lists of each Celery queue), the
  live workers consuming each queue (agent/infra/queue_consumers.py) and circuit-breaker state (Redis). Only the
  API exports them (`render_metrics`), so a sum over every scraped target does not count them twice.

Two modes, chosen by the METRICS_PORT setting when a process first records a metric:

Per process (METRICS_PORT set: a deployment, its processes on several hosts). A process keeps its metrics in memory
(a registry of its own) and writes no file, so a process that dies leaves nothing behind. Each worker serves them at
:METRICS_PORT/metrics (agent/infra/metrics_server.py, started at worker_ready); the API serves its own plus the
scrape-time metrics there and at its /metrics. Prometheus scrapes every target and labels each series with the
target's `instance`; a restarted process starts its counters at 0, a reset rate() expects.

Shared directory (METRICS_PORT 0, the default: every process on one machine, as the local stack and the tests run
them). Each process writes its counters and histograms to mmap files `{type}_{host}-{pid}.db` in one
directory, `settings.metrics_path()` (FINAGENT_METRICS_DIR, default data_dir/metrics), which is
PROMETHEUS_MULTIPROC_DIR. `render_metrics` merges every process's files (MultiProcessCollector) with the
scrape-time collectors, so the API's `/metrics` shows what the workers did. Why it is set up the way it is:
- prometheus-client picks single- or multi-process values from PROMETHEUS_MULTIPROC_DIR when it is first
  imported, so the local workers get the variable in their environment (ops/local/worker_pool.py), and this module sets
  it (setdefault) before it imports prometheus-client. That import is lazy, on the first metric recorded:
  importing the Celery app or the API must not write the environment or create directories. If some library
  (Flower) imported prometheus-client before the variable was set, `_metrics()` switches its value class to
  the multiprocess one, so our metrics still reach the files (and, per process, back to the in-memory one).
- Counter and histogram files outlive their process (a counter must not go down while the stack runs). Worker
  shutdown calls `mark_process_dead`, which drops the live gauge (tasks in progress) of that pid. The files of
  dead pids pile up across restarts; `clean_dead_process_files` removes them when the workers are (re)started
  with none of them running (a counter reset, which Prometheus' rate() expects after a restart).
- A file is named by host name and pid, and a process only ever cleans up files of its own host.
"""
from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, get_args

from pydantic import BaseModel, Field

from agent.infra.breaker import BreakerState, CircuitBreaker
from agent.infra.error_classes import classify_error
from agent.infra.queue_consumers import consumer_counts
from agent.models.job import FINAL_STATUSES, JobResult, JobState, JobStatus
from agent.settings import Settings, get_settings

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.metrics_core import Metric

    from agent.models.research import Usage

log = logging.getLogger(__name__)

ENV_DIR = "PROMETHEUS_MULTIPROC_DIR"
JOB_STATUSES: tuple[str, ...] = get_args(JobStatus)
BREAKER_STATES: tuple[str, ...] = get_args(BreakerState)
NO_MODE = "none"  # a job that ended before it had an answer mode (rejected at planning, say)

LATENCY_BUCKETS = (1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1800, 3600)
ITERATION_BUCKETS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20)
CONFIDENCE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0)
TASK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class ScrapeContext(Protocol):
    """What the scrape-time collectors read through (agent.context.Context; a Protocol keeps infra below it)."""

    settings: Settings

    @property
    def pool(self) -> Any: ...

    @property
    def redis_one_attempt(self) -> Any:
        """A client that does not ride out an outage: a scrape has a timeout of its own (Prometheus: 10 s)."""
        ...


class _Metrics:
    """Every metric recorded in-process, defined once. `registry` is this process's own in the per-process mode; in
    the shared-directory mode there is none: the values live in the files, and `render_metrics` reads them back."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self.registry = registry

        self.job_latency: Histogram = Histogram(
            "finagent_job_latency_seconds", "Seconds from a job's start to its final status, by answer mode.",
            ["mode"], buckets=LATENCY_BUCKETS, registry=registry)
        self.job_iterations: Histogram = Histogram(
            "finagent_job_iterations", "Iterations a job ran, observed at its end, by answer mode.",
            ["mode"], buckets=ITERATION_BUCKETS, registry=registry)
        self.job_confidence: Histogram = Histogram(
            "finagent_job_confidence", "A job's final confidence, observed at its end, by answer mode.",
            ["mode"], buckets=CONFIDENCE_BUCKETS, registry=registry)
        self.jobs_finished: Counter = Counter(
            "finagent_jobs_finished", "Jobs that reached a final status, by answer mode and status.",
            ["mode", "status"], registry=registry)
        self.task_duration: Histogram = Histogram(
            "finagent_task_duration_seconds", "Celery task run time in the worker, by task name and outcome "
            "(success, failure, retry).", ["task", "outcome"], buckets=TASK_BUCKETS, registry=registry)
        self.task_failures: Counter = Counter(
            "finagent_task_failures", "Celery tasks that raised, by task name and error class.",
            ["task", "error_class"], registry=registry)
        self.tasks_in_progress: Gauge = Gauge(
            "finagent_tasks_in_progress", "Celery tasks running now in live worker processes, by task name.",
            ["task"], multiprocess_mode="livesum", registry=registry)
        self.llm_calls: Counter = Counter(
            "finagent_llm_calls", "LLM calls that returned (not answered by the response cache), by model and role.",
            ["model", "role"], registry=registry)
        self.llm_tokens: Counter = Counter(
            "finagent_llm_tokens", "LLM tokens by model, role and kind (prompt, completion).",
            ["model", "role", "kind"], registry=registry)
        self.llm_cost: Counter = Counter(
            "finagent_llm_cost_usd", "LLM cost in USD at the settings' price table, by model and role.",
            ["model", "role"], registry=registry)
        self.llm_cache_hits: Counter = Counter(
            "finagent_llm_cache_hits", "LLM requests answered from the Redis response cache, by role.",
            ["role"], registry=registry)
        self.llm_cache_misses: Counter = Counter(
            "finagent_llm_cache_misses", "LLM requests the response cache could not answer, by role.",
            ["role"], registry=registry)
        self.llm_throttled: Counter = Counter(
            "finagent_llm_throttled", "LLM calls the shared rate limit held back, by kind (batch, interactive) and "
            "outcome (waited: sent after waiting; gave_up: its task retries later).", ["kind", "outcome"], registry=registry)
        self.events: Counter = Counter(
            "finagent_events_published", "Progress events published to a job's stream, by event type.",
            ["type"], registry=registry)


_lock = threading.Lock()
_instance: _Metrics | None = None


def multiprocess_dir() -> Path:
    """The directory this process writes its metric files to (set on first use)."""
    return Path(os.environ.get(ENV_DIR) or get_settings().metrics_path())


def per_process() -> bool:
    """Whether this process keeps its metrics in memory and serves them itself (METRICS_PORT), as it decided on
    its first metric, or would decide now."""
    if _instance is not None:
        return _instance.registry is not None
    return get_settings().metrics_port > 0


def _metrics() -> _Metrics:
    global _instance
    with _lock:
        if _instance is None:
            from prometheus_client import CollectorRegistry, disable_created_metrics, values

            if get_settings().metrics_port > 0:
                # in memory even when PROMETHEUS_MULTIPROC_DIR was inherited (then prometheus-client chose the files);
                # no `_created` series, as the files have none
                values.ValueClass = values.MutexValue
                disable_created_metrics()
                _instance = _Metrics(CollectorRegistry(auto_describe=True))
                return _instance
            directory = Path(os.environ.setdefault(ENV_DIR, str(get_settings().metrics_path())))
            directory.mkdir(parents=True, exist_ok=True)
            # also when prometheus-client was imported before the variable was set (then it chose MutexValue)
            values.ValueClass = values.MultiProcessValue(process_identifier=lambda: process_id(os.getpid()))
            _instance = _Metrics()
        return _instance


def process_registry() -> CollectorRegistry:
    """This process's own metrics, per process (METRICS_PORT); an error in the shared-directory mode."""
    registry = _metrics().registry
    if registry is None:
        raise RuntimeError("this process writes its metrics to the shared directory (METRICS_PORT is 0)")
    return registry


P = ParamSpec("P")


def _never_raises(fn: Callable[P, None]) -> Callable[P, None]:
    """Metrics must never fail the work they describe: a broken metrics directory costs the numbers only."""

    @wraps(fn)
    def safe(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            fn(*args, **kwargs)
        except Exception:
            log.warning("metrics: %s failed", fn.__name__, exc_info=True)

    return safe


# ---------- recorded where things happen ----------

def job_mode(state: JobState, result: JobResult | None) -> str:
    if result is not None and result.mode:
        return result.mode
    if state.plan is not None:
        return state.plan.answer_mode.value
    return state.request.mode.value if state.request.mode else NO_MODE


@_never_raises
def observe_job_end(state: JobState, result: JobResult | None, status: str, now: float | None = None) -> None:
    """A job reached a final status: its latency, iterations and confidence, by answer mode."""
    if status not in FINAL_STATUSES:
        return
    m, mode = _metrics(), job_mode(state, result)
    m.jobs_finished.labels(mode=mode, status=status).inc()
    if state.started_at is not None:
        ended = time.time() if now is None else now
        m.job_latency.labels(mode=mode).observe(max(0.0, ended - state.started_at))
    iterations = result.iterations if result is not None else state.iteration
    confidence = result.confidence if result is not None else (state.iterations[-1].confidence if state.iterations else 0.0)
    m.job_iterations.labels(mode=mode).observe(iterations)
    m.job_confidence.labels(mode=mode).observe(confidence)


_task_started: dict[str, tuple[str, float]] = {}  # task id -> (name, perf_counter at start); threads pool


@_never_raises
def task_started(task_id: str, task: str) -> None:
    _task_started[task_id] = (task, time.perf_counter())
    _metrics().tasks_in_progress.labels(task=task).inc()


@_never_raises
def task_finished(task_id: str, task: str, state: str | None) -> None:
    started = _task_started.pop(task_id, None)
    if started is None:
        return
    m = _metrics()
    m.tasks_in_progress.labels(task=task).dec()
    m.task_duration.labels(task=task, outcome=(state or "unknown").lower()).observe(time.perf_counter() - started[1])


@_never_raises
def task_failed(task: str, exc: BaseException | None) -> None:
    _metrics().task_failures.labels(task=task, error_class=classify_error(exc) if exc else "unknown").inc()


@_never_raises
def count_llm_call(role: str, usage: Usage, cost_usd: float) -> None:
    """One LLM call charged to the ledger; a cached answer is counted by the cache, not here."""
    if usage.cached:
        return
    m, model = _metrics(), usage.model or NO_MODE
    m.llm_calls.labels(model=model, role=role).inc()
    m.llm_tokens.labels(model=model, role=role, kind="prompt").inc(usage.prompt)
    m.llm_tokens.labels(model=model, role=role, kind="completion").inc(usage.completion)
    m.llm_cost.labels(model=model, role=role).inc(cost_usd)


@_never_raises
def count_cache_lookup(role: str, hit: bool) -> None:
    m = _metrics()
    (m.llm_cache_hits if hit else m.llm_cache_misses).labels(role=role).inc()


@_never_raises
def count_throttled(batch: bool, outcome: str) -> None:
    _metrics().llm_throttled.labels(kind="batch" if batch else "interactive", outcome=outcome).inc()


@_never_raises
def count_events(types: Iterable[str]) -> None:
    m = _metrics()
    for t in types:
        m.events.labels(type=t).inc()


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", ".", socket.gethostname()) or "host"


def process_id(pid: int) -> str:
    """How this host's process `pid` names its metric files: unique across containers sharing the directory."""
    return f"{_host()}-{pid}"


@_never_raises
def mark_process_dead(pid: int, directory: Path | None = None) -> None:
    """Worker shutdown: drop the pid's live gauges (its counters and histograms stay in the totals). Per process
    there is no file: the gauge ends with the process."""
    if directory is None and per_process():
        return
    path = directory or (Path(os.environ[ENV_DIR]) if os.environ.get(ENV_DIR) else None)
    if path is not None and path.is_dir():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(process_id(pid), str(path))


_FILE = re.compile(r"^[a-z]+(?:_[a-z]+)?_(.+)-(\d+)\.db$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def clean_dead_process_files(directory: Path) -> list[str]:
    """Remove the metric files of processes that no longer run; call it only when no worker runs."""
    removed = []
    for f in directory.glob("*.db") if directory.is_dir() else []:
        match = _FILE.match(f.name)
        if match and match.group(1) == _host() and not _alive(int(match.group(2))):
            f.unlink(missing_ok=True)
            removed.append(f.name)
    return removed


# ---------- computed at scrape time ----------

class ScrapeTargets(BaseModel):
    """What the scrape-time collectors report on: the Celery queues and the dependencies behind a breaker.
    The outer layers know them (workers/topology.py, the providers); see `set_scrape_targets`."""

    queues: list[str] = Field(default_factory=list)
    breakers: list[str] = Field(default_factory=list)


_targets: Callable[[Settings], ScrapeTargets] | None = None


def set_scrape_targets(fn: Callable[[Settings], ScrapeTargets]) -> None:
    """Called by workers/signals.py (imported with the Celery app) so `render_metrics(ctx)` needs no arguments."""
    global _targets
    _targets = fn


def queue_keys(queue: str) -> list[str]:
    """Every Redis list kombu's Redis transport keeps for one queue: the queue itself for priority 0 and
    `queue\\x06\\x16{n}` for each further priority step."""
    from kombu.transport.redis import PRIORITY_STEPS, Channel

    return [queue] + [f"{queue}{Channel.sep}{step}" for step in PRIORITY_STEPS if step]


def queue_depths(redis: Any, queues: Sequence[str]) -> dict[str, int]:
    with redis.pipeline(transaction=False) as pipe:
        for q in queues:
            for key in queue_keys(q):
                pipe.llen(key)
        lengths = iter(pipe.execute())
    return {q: sum(next(lengths) for _ in queue_keys(q)) for q in queues}


def breaker_states(redis: Any, names: Sequence[str], settings: Settings) -> dict[str, tuple[BreakerState, int]]:
    """Each dependency's shared breaker state and consecutive failures, read from Redis without changing them."""
    out = {}
    for name in names:
        breaker = CircuitBreaker(redis, name, threshold=settings.circuit_breaker_threshold,
                                 reset_s=settings.circuit_breaker_reset_s)
        out[name] = (breaker.state(), breaker.failures())
    return out


# how long the scrape waits for a Postgres connection: well inside a scrape timeout (Prometheus's default is 10 s),
# so with Postgres down the scrape still answers quickly, with the source marked down
SCRAPE_DB_WAIT_S = 2.0


# the oldest job under way: running, or queued and on its way (not a batch job still waiting for its slot), aged from
# its admission (a batch job) or its creation. Postgres's clock on both sides: no skew between hosts
OLDEST_ACTIVE_SQL = ("SELECT EXTRACT(EPOCH FROM now() - min(COALESCE(admitted_at, created_at)))::float8 AS age"
                     " FROM research_jobs WHERE status IN ('queued', 'running') AND NOT (batch AND admitted_at IS NULL)")


def job_gauges(pool: Any) -> tuple[dict[str, int], float]:
    """Jobs by status, and the age in seconds of the oldest job under way (0 when none), in one checkout."""
    with pool.connection(timeout=SCRAPE_DB_WAIT_S) as conn:
        rows = conn.execute("SELECT status, count(*) AS n FROM research_jobs GROUP BY status").fetchall()
        oldest = conn.execute(OLDEST_ACTIVE_SQL).fetchone()
    return {r["status"]: int(r["n"]) for r in rows}, max(0.0, float(oldest["age"] or 0.0))


def jobs_family(counts: dict[str, int]) -> Metric:
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily("finagent_jobs", "Jobs in Postgres by status (every status, 0 when none).", labels=["status"])
    for status in sorted(set(JOB_STATUSES) | set(counts)):
        family.add_metric([status], counts.get(status, 0))
    return family


def oldest_active_family(age_s: float) -> Metric:
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily("finagent_job_oldest_active_seconds", "Seconds the oldest job under way has been going "
                             "(queued and dispatched, or running; a batch job since its admission); 0 when none.",
                             value=age_s)


def queue_family(depths: dict[str, int]) -> Metric:
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily("finagent_queue_depth", "Messages waiting in each Celery queue (all priority lists).",
                               labels=["queue"])
    for queue, depth in sorted(depths.items()):
        family.add_metric([queue], depth)
    return family


def consumers_family(counts: dict[str, int]) -> Metric:
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily("finagent_queue_consumers", "Live worker nodes consuming each Celery queue (their "
                               "announcements beside the heartbeat); 0: nothing takes that queue's messages.",
                               labels=["queue"])
    for queue, count in sorted(counts.items()):
        family.add_metric([queue], count)
    return family


def breaker_families(states: dict[str, tuple[BreakerState, int]]) -> list[Metric]:
    from prometheus_client.core import GaugeMetricFamily

    state = GaugeMetricFamily("finagent_circuit_breaker_state", "1 for the state each dependency's shared circuit "
                              "breaker is in, 0 for the others.", labels=["dependency", "state"])
    failures = GaugeMetricFamily("finagent_circuit_breaker_failures", "Consecutive counted failures of each dependency.",
                                 labels=["dependency"])
    for name, (current, count) in sorted(states.items()):
        for s in BREAKER_STATES:
            state.add_metric([name, s], 1.0 if s == current else 0.0)
        failures.add_metric([name], count)
    return [state, failures]


def source_up_family() -> GaugeMetricFamily:
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily("finagent_scrape_source_up", "1 if the source of the scrape-time metrics answered.",
                             labels=["source"])


class ScrapeCollector:
    """The scrape-time metrics. A source that does not answer costs its own metrics only, and says so in
    `finagent_scrape_source_up`."""

    def __init__(self, ctx: ScrapeContext, targets: ScrapeTargets):
        self.ctx, self.targets = ctx, targets

    def collect(self) -> Iterator[Metric]:
        up = source_up_family()
        sources: list[tuple[str, Callable[[], list[Metric]]]] = [("postgres", self._postgres), ("redis", self._redis)]
        for source, read in sources:
            try:
                families = read()
            except Exception:
                log.warning("metrics: %s did not answer", source, exc_info=True)
                up.add_metric([source], 0)
                continue
            up.add_metric([source], 1)
            yield from families
        yield up

    def _postgres(self) -> list[Metric]:
        counts, oldest_s = job_gauges(self.ctx.pool)
        return [jobs_family(counts), oldest_active_family(oldest_s)]

    def _redis(self) -> list[Metric]:
        redis, queues = self.ctx.redis_one_attempt, self.targets.queues
        return [queue_family(queue_depths(redis, queues)), consumers_family(consumer_counts(redis, queues)),
                *breaker_families(breaker_states(redis, self.targets.breakers, self.ctx.settings))]


class LazyScrapeCollector:
    """The scrape-time metrics of a context made on the first scrape (the API's, which importing the app must not
    open), for the per-process server."""

    def __init__(self, ctx: Callable[[], ScrapeContext]):
        self.ctx = ctx

    def collect(self) -> Iterator[Metric]:
        try:
            ctx = self.ctx()
        except Exception:
            log.warning("metrics: no context for the scrape-time metrics", exc_info=True)
            return
        yield from ScrapeCollector(ctx, scrape_targets(ctx.settings)).collect()


def scrape_targets(settings: Settings) -> ScrapeTargets:
    if _targets is None:
        log.warning("metrics: no scrape targets registered (import workers.app): no queue or breaker gauges")
        return ScrapeTargets()
    return _targets(settings)


def render_metrics(ctx: ScrapeContext, targets: ScrapeTargets | None = None) -> tuple[bytes, str]:
    """The exposition for GET /metrics: the scrape-time metrics, plus every process's files merged (shared
    directory) or this process's own metrics (per process). Returns (payload, content type)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    targets = targets if targets is not None else scrape_targets(ctx.settings)
    registry = CollectorRegistry()
    registry.register(ScrapeCollector(ctx, targets))
    if per_process():
        registry.register(process_registry())  # this process's own: the workers serve theirs themselves
        return generate_latest(registry), CONTENT_TYPE_LATEST
    directory = ctx.settings.metrics_path()
    directory.mkdir(parents=True, exist_ok=True)
    if os.environ.get(ENV_DIR) and Path(os.environ[ENV_DIR]).resolve() != directory.resolve():
        log.warning("metrics: this process writes to %s but serves %s; set FINAGENT_METRICS_DIR only",
                    os.environ[ENV_DIR], directory)
    MultiProcessCollector(registry, path=str(directory))
    return generate_latest(registry), CONTENT_TYPE_LATEST


def exported_metrics() -> dict[str, str]:
    """Every metric family this module exports, by name and type, read from the definitions above: what a dashboard
    or an alert rule may name (a counter's samples add `_total`; a histogram's `_bucket`, `_sum` and `_count`)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    _Metrics(registry)
    families = [*registry.collect(), jobs_family({}), oldest_active_family(0.0), queue_family({}),
                consumers_family({}), *breaker_families({}), source_up_family()]
    return {f.name: f.type for f in families}
