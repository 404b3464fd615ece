"""The sizing bench's arithmetic (per-job costs -> the plan at a rate) and its readings of the run, on invented figures."""
from __future__ import annotations

import pytest

from bench.sizing import (
    inflight_fit,
    key_pattern,
    operators_markdown,
    redis_stores,
    round_ttl,
    search_points,
)
from bench.sizing_plan import Assumptions, JobCosts, PoolCost, RedisStore, plan, pool_plan, working_set_mb

JOB = "0c8f2a8e-1b7d-4e55-9a37-2f0d6c1e9b44"
NO_LLM = Assumptions(llm_latency_s=0.0, headroom=1.0)


def costs(**overrides) -> JobCosts:
    base = dict(
        pools=[PoolCost(name="steps", threads_per_process=8, task_s_per_job=0.5, cpu_s_per_job=0.1, llm_calls_per_job=0),
               PoolCost(name="calls", threads_per_process=16, task_s_per_job=1.0, cpu_s_per_job=0.3, llm_calls_per_job=10)],
        postgres_cpu_s_per_job=0.06, redis_cpu_s_per_job=0.03, job_wall_s=3.0, llm_steps_per_job=5.0,
        llm_tokens_per_call=None, pg_bytes_per_job=200_000, pg_live_bytes_per_job=100_000,
        redis_inflight_bytes_per_job=50_000,
        redis_stored=[RedisStore(pattern="events", bytes_per_job=30_000, ttl_s=7 * 86400),
                      RedisStore(pattern="cache", bytes_per_job=10_000, ttl_s=86400)],
        redis_fixed_bytes=2_000_000, search_working_set_mb=2000.0)
    return JobCosts(**(base | overrides))


def test_threads_are_arrivals_times_seconds_held_and_llm_calls_hold_a_thread_for_their_latency():
    pool = PoolCost(name="calls", threads_per_process=16, task_s_per_job=1.0, cpu_s_per_job=0.0, llm_calls_per_job=10)
    # 2 jobs/s x 1 s of its own work = 2 threads; with 10 calls of 3 s each a job holds 31 thread-seconds: 62
    assert pool_plan(pool, 2.0, NO_LLM).threads == 2
    with_llm = pool_plan(pool, 2.0, Assumptions(llm_latency_s=3.0, headroom=1.0))
    assert (with_llm.threads, with_llm.processes) == (62, 4)  # 62 threads at 16 per process
    assert pool_plan(pool, 2.0, Assumptions(llm_latency_s=3.0, headroom=1.5)).threads == 93


def test_a_pool_gets_a_process_per_core_of_cpu_work_when_that_binds():
    pool = PoolCost(name="steps", threads_per_process=8, task_s_per_job=1.0, cpu_s_per_job=0.9, llm_calls_per_job=0)
    p = pool_plan(pool, 5.0, NO_LLM)  # 5 threads fit one process, but 4.5 cores of Python need 5 GILs
    assert (p.threads, p.cores, p.processes) == (5, 4.5, 5)


def test_the_llm_limits_to_ask_for_are_the_rate_times_calls_per_job():
    p = plan(costs(), 100, Assumptions(llm_latency_s=2.0, headroom=1.5))
    assert p.llm_requests_per_min == 1500  # 100 jobs/min x 10 calls x 1.5
    assert p.llm_tokens_per_min is None  # not measured: the plan says so rather than guess
    assert p.llm_concurrent_calls == pytest.approx(100 / 60 * 10 * 2.0 * 1.5, abs=0.1)
    measured = plan(costs(llm_tokens_per_call=3000), 100, Assumptions(llm_latency_s=2.0, headroom=1.5))
    assert measured.llm_tokens_per_min == 1500 * 3000


def test_a_job_lasts_its_offline_time_plus_its_sequential_llm_steps():
    p = plan(costs(), 60, Assumptions(llm_latency_s=2.0, headroom=1.0))
    assert p.job_latency_s == 13.0  # 3 s + 5 steps x 2 s
    assert p.jobs_in_flight == 13.0  # 1 job/s x 13 s


def test_storage_accumulates_at_the_rate_and_redis_keys_for_their_ttl():
    p = plan(costs(), 10, Assumptions(llm_latency_s=0.0, headroom=1.0))
    assert p.pg_storage_gb_per_day == pytest.approx(10 * 1440 * 200_000 / 1e9, abs=1e-3)
    events = 10 / 60 * 7 * 86400 * 30_000 / 1e9  # a week of event streams
    cache = 10 / 60 * 86400 * 10_000 / 1e9
    assert p.redis_kept_gb == {"events": pytest.approx(events, abs=1e-3), "cache": pytest.approx(cache, abs=1e-3)}
    in_flight = 10 / 60 * 3.0 * 50_000 / 1e9
    assert p.redis_memory_gb == pytest.approx(0.002 + in_flight + events + cache, abs=1e-3)
    assert p.redis_unbounded_gb_per_day == 0


def test_keys_with_no_expiry_are_reported_as_growth_per_day():
    p = plan(costs(redis_stored=[RedisStore(pattern="forever", bytes_per_job=1000, ttl_s=None)]), 100, NO_LLM)
    assert p.redis_unbounded_gb_per_day == pytest.approx(100 * 1440 * 1000 / 1e9)
    assert p.redis_kept_gb == {}


def test_postgres_memory_holds_the_search_indexes_and_the_hot_jobs_and_connections_follow_processes():
    a = Assumptions(llm_latency_s=0.0, headroom=1.0, hot_window_s=3600)
    p = plan(costs(), 60, a)
    hot_jobs = 3600 + 3.0  # an hour of jobs at 1 per second, and those in flight
    assert p.pg_shared_buffers_gb == pytest.approx((2000e6 + hot_jobs * 100_000) / 1e9, abs=0.01)
    assert p.worker_processes == sum(pool.processes for pool in p.pools)
    assert p.pg_connections == p.worker_processes * a.pg_pool_per_process


def test_hosts_cover_the_workers_cores():
    heavy = costs(pools=[PoolCost(name="p", threads_per_process=8, task_s_per_job=1, cpu_s_per_job=1.0, llm_calls_per_job=0)])
    p = plan(heavy, 1200, Assumptions(llm_latency_s=0.0, headroom=1.0, host_cores=8))
    assert p.worker_cores == 20.0 and p.hosts == 3


def test_the_search_working_set_scales_from_the_nearest_measured_corpus():
    points = [(10_000, 26.0), (100_000, 210.0), (1_000_000, 2000.0)]
    assert working_set_mb(points, 100_000) == 210.0
    assert working_set_mb(points, 50_000) == 105.0  # from the 100k measurement
    assert working_set_mb(points, 2_000_000) == 4000.0  # past the largest: from the largest
    with pytest.raises(ValueError):
        working_set_mb([], 10)


def test_search_points_are_read_from_every_search_section():
    doc = ("<!-- bench:search:start -->\n## S\n| figure | 10k | 100k |\n|---|---|---|\n| chunks | 10009 | 100005 |\n"
           "| search_working_set_mb | 26.2 | 210.0 |\n<!-- bench:search:end -->\n"
           "<!-- bench:batch:start -->\n## B\n| chunks | 5 |\n| search_working_set_mb | 9 |\n<!-- bench:batch:end -->\n"
           "<!-- bench:search-1m:start -->\n## T\n| chunks | 1000066 |\n| search_working_set_mb | 1997.6 |\n"
           "<!-- bench:search-1m:end -->\n")
    assert search_points(doc) == [(10009, 26.2), (100005, 210.0), (1000066, 1997.6)]


def test_key_patterns_hide_ids_hashes_and_numbers():
    assert key_pattern(f"finagent:jobs:{JOB}:stream") == "finagent:jobs:{id}:stream"
    assert key_pattern(f"finagent:jobs:{JOB}:published:12") == "finagent:jobs:{id}:published:{n}"
    assert key_pattern("finagent:llmcache:" + "ab12" * 16) == "finagent:llmcache:{hash}"
    assert key_pattern(f"celery-task-meta-{JOB}:2:advance:search") == "celery-task-meta-{id}:*"


def test_redis_stores_are_the_kinds_of_key_every_job_leaves():
    other = JOB.replace("0c8f", "1d9e")
    keys = [(f"finagent:jobs:{JOB}:stream", 3000, 604_790), (f"finagent:jobs:{other}:stream", 5000, 604_795),
            ("finagent:periods:transcript:ACME", 200, 1700), (f"finagent:jobs:{JOB}:mark", 100, -1),
            (f"finagent:jobs:{other}:mark", 100, -1)]
    stores, shared = redis_stores(keys, jobs=2)
    assert [s.model_dump() for s in stores] == [
        {"pattern": "finagent:jobs:{id}:mark", "bytes_per_job": 100.0, "ttl_s": None},
        {"pattern": "finagent:jobs:{id}:stream", "bytes_per_job": 4000.0, "ttl_s": 604_795.0}]
    assert shared == 200  # one company's cache does not grow with jobs


def test_a_ttl_read_after_the_key_was_set_rounds_back_to_what_was_set():
    assert round_ttl(604_795) == 604_800
    assert round_ttl(86_371) == 86_400
    assert round_ttl(7.4) == 7.0


def test_the_in_flight_fit_recovers_bytes_per_job_in_flight_and_finished():
    base = 1_000_000.0
    samples = [(base + 40_000 * f + 9_000 * d, f, d) for f, d in [(1, 0), (3, 1), (5, 4), (4, 9), (2, 14), (0, 18)]]
    a, b = inflight_fit(samples, base)
    assert a == pytest.approx(40_000) and b == pytest.approx(9_000)


def test_the_operators_table_says_what_is_not_measured_and_names_the_big_redis_keys():
    plans = [plan(costs(), r, Assumptions()) for r in (10, 1000)]
    result = {"date": "2031-01-01", "mode": "standard", "machine": {"cpu_count": 2}, "corpus_chunks": 1_000_000,
              "assumptions": Assumptions().model_dump(), "plans": [p.model_dump() for p in plans],
              "measured": {"jobs": 40, "redis": {"stored": [s.model_dump() for s in costs().redis_stored]}}}
    text = operators_markdown(result, ".venv/bin/python bench/sizing.py")
    assert "| 10 jobs/min | 1000 jobs/min |" in text
    assert "not measured (offline provider)" in text
    assert "of which `events` (kept 7 d)" in text and "of which `cache` (kept 1 d)" in text
    assert "`.venv/bin/python bench/sizing.py`" in text
