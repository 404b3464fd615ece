"""The sizing arithmetic of bench/sizing.py, pure: per-job costs measured in one run -> what a deployment needs at a
given rate of jobs per minute. Little's law throughout: what is busy at once = arrivals per second x seconds each
arrival holds it. Load-driven figures (threads, processes, cores, LLM limits, jobs in flight) are planned for
`headroom` x the rate; what accumulates (Postgres rows, Redis keys kept for their TTL) at the rate itself.

With an LLM, each call holds a worker thread for its latency: a pool's threads per job are the run's own task
seconds plus (the pool's LLM calls per job x the latency), and a job lasts its offline wall time plus (its sequential
LLM steps x the latency)."""
from __future__ import annotations

import math

from pydantic import BaseModel

GB = 1e9
# a worker process runs Python under one GIL: past about one core of CPU work it needs another process
CORES_PER_PROCESS = 1.0


class PoolCost(BaseModel):
    """One worker pool's share of a job, measured."""

    name: str
    threads_per_process: int  # the topology's concurrency (workers/topology.py)
    task_s_per_job: float  # thread-seconds its tasks ran per job (Celery task run time)
    cpu_s_per_job: float  # CPU seconds of its processes per job
    llm_calls_per_job: float  # LLM requests its tasks made per job


class RedisStore(BaseModel):
    """A kind of Redis key a job leaves behind, by key pattern: its bytes per job and how long it is kept."""

    pattern: str
    bytes_per_job: float
    ttl_s: float | None  # None: no expiry, it grows without bound


class JobCosts(BaseModel):
    """What one job costs, measured in one run (bench/sizing.py)."""

    pools: list[PoolCost]
    postgres_cpu_s_per_job: float
    redis_cpu_s_per_job: float
    job_wall_s: float  # creation -> end, offline, at the run's load
    llm_steps_per_job: float  # sequential LLM steps on a job's critical path
    llm_tokens_per_call: float | None  # prompt + completion; None: the provider reported none (the offline one)
    pg_bytes_per_job: float  # growth of the job tables (rows, TOAST, indexes, dead versions) per job
    pg_live_bytes_per_job: float  # the job's own rows (pg_column_size): its share of the buffer cache while hot
    redis_inflight_bytes_per_job: float
    redis_stored: list[RedisStore]
    redis_fixed_bytes: float  # used_memory of the idle stack before the run
    search_working_set_mb: float  # the search indexes' hot set for the corpus (docs/benchmarks.md, search)

    @property
    def llm_calls_per_job(self) -> float:
        return sum(p.llm_calls_per_job for p in self.pools)


class Assumptions(BaseModel):
    """What the run cannot measure offline, and the planning margins; each is a bench option."""

    llm_latency_s: float = 2.0  # one LLM call's latency at the deployment's endpoint
    headroom: float = 1.5
    host_cores: int = 8
    hot_window_s: float = 3600.0  # jobs read back (results, events) this long after they end stay in the cache
    pg_pool_per_process: int = 16  # agent/context.py: each process's Postgres pool


class PoolPlan(BaseModel):
    name: str
    threads: int
    processes: int
    cores: float


class RatePlan(BaseModel):
    jobs_per_min: float
    pools: list[PoolPlan]
    worker_processes: int
    worker_cores: float
    hosts: int
    job_latency_s: float
    jobs_in_flight: float
    llm_requests_per_min: float
    llm_tokens_per_min: float | None
    llm_concurrent_calls: float
    pg_storage_gb_per_day: float
    pg_shared_buffers_gb: float
    pg_connections: int
    pg_cores: float
    redis_memory_gb: float
    redis_kept_gb: dict[str, float]  # of which, each kind of key a job leaves, kept for its TTL
    redis_cores: float
    redis_unbounded_gb_per_day: float  # keys with no expiry


def pool_plan(pool: PoolCost, per_s: float, a: Assumptions) -> PoolPlan:
    """Threads = arrivals/s x thread-seconds per job (LLM waits included) x headroom; processes enough for those
    threads at the topology's concurrency and for the CPU at about one core each."""
    busy_s = pool.task_s_per_job + pool.llm_calls_per_job * a.llm_latency_s
    threads = math.ceil(per_s * busy_s * a.headroom)
    cores = per_s * pool.cpu_s_per_job * a.headroom
    processes = max(1, math.ceil(threads / pool.threads_per_process), math.ceil(cores / CORES_PER_PROCESS))
    return PoolPlan(name=pool.name, threads=threads, processes=processes, cores=round(cores, 2))


def plan(costs: JobCosts, jobs_per_min: float, a: Assumptions) -> RatePlan:
    per_s = jobs_per_min / 60
    pools = [pool_plan(p, per_s, a) for p in costs.pools]
    worker_cores = sum(p.cores for p in pools)
    processes = sum(p.processes for p in pools)
    latency = costs.job_wall_s + costs.llm_steps_per_job * a.llm_latency_s
    in_flight = per_s * latency * a.headroom
    calls_per_min = jobs_per_min * costs.llm_calls_per_job * a.headroom
    tokens = None if costs.llm_tokens_per_call is None else calls_per_min * costs.llm_tokens_per_call
    kept = {s.pattern: s.bytes_per_job * per_s * s.ttl_s for s in costs.redis_stored if s.ttl_s is not None}
    unbounded = sum(s.bytes_per_job for s in costs.redis_stored if s.ttl_s is None) * jobs_per_min * 1440
    hot_jobs = per_s * a.hot_window_s + in_flight
    return RatePlan(
        jobs_per_min=jobs_per_min, pools=pools, worker_processes=processes, worker_cores=round(worker_cores, 2),
        hosts=max(1, math.ceil(worker_cores / a.host_cores)), job_latency_s=round(latency, 2),
        jobs_in_flight=round(in_flight, 1), llm_requests_per_min=round(calls_per_min, 1),
        llm_tokens_per_min=None if tokens is None else round(tokens),
        llm_concurrent_calls=round(per_s * costs.llm_calls_per_job * a.llm_latency_s * a.headroom, 1),
        pg_storage_gb_per_day=round(jobs_per_min * 1440 * costs.pg_bytes_per_job / GB, 3),
        pg_shared_buffers_gb=round((costs.search_working_set_mb * 1e6 + hot_jobs * costs.pg_live_bytes_per_job) / GB, 2),
        pg_connections=processes * a.pg_pool_per_process,
        pg_cores=round(per_s * costs.postgres_cpu_s_per_job * a.headroom, 2),
        redis_memory_gb=round((costs.redis_fixed_bytes + in_flight * costs.redis_inflight_bytes_per_job + sum(kept.values())) / GB, 3),
        redis_kept_gb={k: round(v / GB, 3) for k, v in kept.items()},
        redis_cores=round(per_s * costs.redis_cpu_s_per_job * a.headroom, 2),
        redis_unbounded_gb_per_day=round(unbounded / GB, 3))


def working_set_mb(points: list[tuple[int, float]], chunks: int) -> float:
    """The search indexes' hot set for `chunks` chunks, from the measured (chunks, MB) points: scaled from the
    largest measured corpus at or above it, else from the largest measured (the indexes grow about linearly)."""
    if not points:
        raise ValueError("no measured search working set")
    above = [p for p in sorted(points) if p[0] >= chunks]
    base_chunks, base_mb = above[0] if above else max(points)
    return base_mb * chunks / base_chunks
