"""Sizing: worker pools, LLM rate limits, Postgres and Redis for 10, 100 and 1,000 jobs per minute, from per-job costs
measured in one short run.

The run: the embedded stack and the sample corpus (hash embedder, extractive provider), the topology's workers
(workers/topology.py), a warm-up job, then --jobs interactive questions in --mode submitted at --rate per second. Per
job, from that run (and Redis's bytes per job in flight from a --burst of jobs submitted at once after it):
  - per pool (coordinator, search, llm, batch): task seconds (the workers' Celery task run times, from their Prometheus
    files), CPU seconds (the pool's processes) and LLM requests (tool ledger, by the worker that ran each call);
  - Postgres and Redis CPU seconds; a job's wall time (creation -> end) and its sequential LLM steps (ledger);
  - LLM tokens per call, when the provider reports them (the offline one does not: then the tokens a deployment
    will spend are not measured, and the table says so);
  - Postgres: growth of the job tables (pg_total_relation_size after - before) and the jobs' own row bytes;
  - Redis: the keys the run left, by pattern, with MEMORY USAGE and TTL (each kept for its TTL at the rate), the
    idle stack's used_memory, and its keys' memory (used_memory_dataset) sampled during the burst, fitted as
    base + a x jobs in flight + b x jobs finished (a: bytes per job in flight; the clients' buffers, which follow
    connections rather than jobs, are left out of it and reported beside it).
Then bench/sizing_plan.py turns the costs into the plan at each rate (Little's law, with --headroom), given what an
offline run cannot measure: --llm-latency (one call's latency at the endpoint), and the corpus size for the search
indexes' share of shared_buffers (--corpus-chunks, scaled from docs/benchmarks.md's measured search working sets).
Writes its section of docs/benchmarks.md (the per-job costs) and the table in docs/operators.md's Sizing section.

    python bench/sizing.py [--jobs 40] [--rate 1] [--burst 20] [--mode standard] [--rates 10,100,1000]
                           [--llm-latency 2] [--headroom 1.5] [--host-cores 8] [--corpus-chunks 1000000] [--from-json FILE]
                           [--json] [--no-write]
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common
from bench.batch import make_questions, wait_jobs
from bench.pipeline import llm_steps
from bench.sizing_plan import Assumptions, JobCosts, PoolCost, RatePlan, RedisStore, plan, working_set_mb

SECTION = "sizing"
OPERATORS = common.ROOT / "docs" / "operators.md"
JOB_TABLES = ("research_jobs", "job_evidence", "job_step_outputs", "job_tool_calls")
STALL_S = 120.0
BURST_RATE = 1e6  # jobs per second: the whole burst at once
SAMPLE_S = 0.25
_SEARCH_SECTION = re.compile(r"<!-- bench:(search[^:]*):start -->\n(.*?)<!-- bench:\1:end -->", re.S)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEX = re.compile(r"\b[0-9a-f]{16,}\b")
_NUM = re.compile(r"\d+")


# --- pure helpers (bench/tests/test_sizing.py) ----------------------------------------------

def search_points(text: str) -> list[tuple[int, float]]:
    """(chunks, search_working_set_mb) of every search section of docs/benchmarks.md."""
    points = []
    for _, body in _SEARCH_SECTION.findall(text):
        rows = {cells[0]: cells[1:] for line in body.splitlines() if line.startswith("| ")
                for cells in [[c.strip() for c in line.strip("|").split("|")]]}
        if "chunks" in rows and "search_working_set_mb" in rows:
            points += [(int(c), float(mb)) for c, mb in zip(rows["chunks"], rows["search_working_set_mb"]) if c and mb]
    return points


def key_pattern(key: str) -> str:
    """A Redis key with its ids, hashes and numbers replaced: 'finagent:jobs:<uuid>:stream' -> 'finagent:jobs:{id}:stream';
    Celery's result keys end at the job id (what follows is the task's own key: one kind of key, many names)."""
    pattern = _NUM.sub("{n}", _HEX.sub("{hash}", _UUID.sub("{id}", key)))
    return pattern.split("{id}", 1)[0] + "{id}:*" if pattern.startswith("celery-") and "{id}" in pattern else pattern


def redis_stores(keys: list[tuple[str, int, int]], jobs: int) -> tuple[list[RedisStore], float]:
    """The new keys of a run, as (key, bytes, ttl s; -1 none), grouped by pattern: the kinds a job leaves (named by a
    job id, or at least one key per job) with their bytes per job and the longest TTL seen, and the bytes of the
    others (per company, per worker: not growing with jobs)."""
    groups: dict[str, list[tuple[int, int]]] = {}
    for key, size, ttl in keys:
        groups.setdefault(key_pattern(key), []).append((size, ttl))
    stores, shared = [], 0.0
    for pattern, rows in sorted(groups.items()):
        size = sum(s for s, _ in rows)
        if "{id}" not in pattern and len(rows) < jobs:
            shared += size
            continue
        ttl = max(t for _, t in rows)
        stores.append(RedisStore(pattern=pattern, bytes_per_job=round(size / jobs, 1), ttl_s=None if ttl < 0 else float(ttl)))
    return stores, shared


def inflight_fit(samples: list[tuple[float, int, int]], base: float) -> tuple[float, float]:
    """Memory samples (bytes, jobs in flight, jobs finished) fitted as base + a x in flight + b x finished:
    (a, b), bytes per job in flight and per job finished."""
    y = np.asarray([s[0] - base for s in samples], float)
    x = np.asarray([[s[1], s[2]] for s in samples], float)
    (a, b), *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(a), float(b)


def round_ttl(ttl_s: float) -> float:
    """A TTL read some seconds after its key was set, back to the whole minute it was set for (or the second, below)."""
    return float(round(ttl_s / 60) * 60) if ttl_s >= 60 else float(round(ttl_s))


# --- measuring ------------------------------------------------------------------------------

def redis_memory(redis) -> dict[str, int]:
    info = redis.info("memory")
    return {k: int(info[k]) for k in ("used_memory", "used_memory_dataset", "used_memory_overhead", "mem_clients_normal")}


def task_seconds(metrics_dir: Path) -> dict[str, float]:
    """Seconds run so far by each Celery task name, every worker process summed (finagent_task_duration_seconds)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(metrics_dir))
    out: dict[str, float] = {}
    for metric in registry.collect():
        for s in metric.samples:
            if s.name == "finagent_task_duration_seconds_sum":
                out[s.labels["task"]] = out.get(s.labels["task"], 0.0) + s.value
    return out


def pool_of_task() -> dict[str, str]:
    from workers.topology import TASK_ROUTES, WORKERS

    return {task: next(w.name for w in WORKERS if any(q.value == route["queue"] for q in w.queues))
            for task, route in TASK_ROUTES.items()}


class Snapshot:
    """CPU seconds of each pool, Postgres and Redis; task seconds by task; the job tables' sizes."""

    def __init__(self, ctx, manager) -> None:
        from workers.topology import WORKERS

        data_dir = ctx.settings.data_dir
        pg = common.postmaster_pids(data_dir)
        self.cpu = {spec.name: common.cpu_seconds(common.process_tree([proc.pid]), reaped_children=True)
                    for spec, proc in zip(WORKERS, manager.procs)}
        self.cpu["postgres"] = common.cpu_seconds(common.process_tree(pg), reaped_children=True)
        self.cpu["redis"] = common.cpu_seconds([p for p in common.stack_pids(data_dir) if p not in pg])
        self.tasks = task_seconds(manager.metrics_dir)
        with ctx.pool.connection() as conn:
            self.tables = {t: conn.execute("SELECT pg_total_relation_size(%s::regclass) AS b", (t,)).fetchone()["b"]
                           for t in JOB_TABLES}


def redis_keys(redis) -> dict[str, tuple[int, int]]:
    out = {}
    for raw in redis.scan_iter(count=1000):
        key = raw.decode() if isinstance(raw, bytes) else raw
        out[key] = (int(redis.memory_usage(raw, samples=0) or 0), int(redis.ttl(raw)))
    return out


def submit_and_sample(ctx, questions: list[str], mode: str, rate: float) -> tuple[list[str], list[tuple[int, int, int, int]]]:
    """Submit the questions at `rate` per second, sampling Redis used_memory, its dataset part (the keys, without
    the clients' buffers and the server's own overhead), and the jobs in flight and finished until every job has ended."""
    from agent.models.job import JobRequest
    from agent.submission import create
    from tasks.dispatch import CeleryDispatcher

    ids: list[str] = []
    samples: list[tuple[int, int, int, int]] = []
    started, last_done, last_change = time.monotonic(), -1, time.monotonic()
    while True:
        due = min(len(questions), int((time.monotonic() - started) * rate) + 1)
        while len(ids) < due:
            ids.append(create(ctx, CeleryDispatcher(), JobRequest(question=questions[len(ids)], mode=mode))[0])
        with ctx.pool.connection() as conn:
            done = conn.execute("SELECT count(*) AS n FROM research_jobs WHERE id = ANY(%s::uuid[])"
                                " AND finished_at IS NOT NULL", (ids,)).fetchone()["n"]
        memory = ctx.redis.info("memory")
        samples.append((int(memory["used_memory"]), int(memory["used_memory_dataset"]), len(ids) - done, done))
        if done == len(questions):
            return ids, samples
        if done != last_done:
            last_done, last_change = done, time.monotonic()
        elif time.monotonic() - last_change > STALL_S:
            raise TimeoutError(f"{len(ids) - done} jobs did not finish")
        time.sleep(SAMPLE_S)


def redis_fit(samples: list[tuple[int, int, int, int]], before: dict[str, int]) -> dict[str, Any]:
    """Bytes per job in flight and per job finished, fitted over the samples of used_memory and of its keys' part."""
    a, b = inflight_fit([(s[0], s[2], s[3]) for s in samples], before["used_memory"])
    a_data, b_data = inflight_fit([(s[1], s[2], s[3]) for s in samples], before["used_memory_dataset"])
    return {"burst_jobs": max(s[2] + s[3] for s in samples), "peak_in_flight": max(s[2] for s in samples),
            "samples": len(samples), "fit_bytes_per_job_in_flight": round(a), "fit_bytes_per_job_finished": round(b),
            "fit_dataset_bytes_per_job_in_flight": round(a_data), "fit_dataset_bytes_per_job_finished": round(b_data)}


def ledger_costs(ctx, ids: list[str], pids: dict[int, str]) -> dict[str, Any]:
    """LLM requests per job by pool (the worker that ran each call), tokens per request, sequential LLM steps."""
    with ctx.pool.connection() as conn:
        rows = conn.execute("SELECT job_id::text AS job, call_key, worker, duration_ms, llm_requests, cached,"
                            " prompt_tokens + completion_tokens AS tokens, extract(epoch FROM started_at) AS t"
                            " FROM job_tool_calls WHERE job_id = ANY(%s::uuid[]) AND llm_requests > 0", (ids,)).fetchall()
    by_pool: dict[str, int] = {}
    spans: dict[str, list] = {}
    for r in rows:
        pool = pids.get(int(r["worker"].split(":")[1]), "other") if r["worker"] else "other"
        by_pool[pool] = by_pool.get(pool, 0) + r["llm_requests"]
        spans.setdefault(r["job"], []).append((r["call_key"], float(r["t"]), r["duration_ms"] / 1000))
    requests = sum(r["llm_requests"] for r in rows)
    tokens = sum(r["tokens"] for r in rows if not r["cached"])
    return {"llm_requests_by_pool": by_pool, "llm_requests": requests, "llm_cached": sum(1 for r in rows if r["cached"]),
            "llm_tokens_per_call": round(tokens / requests, 1) if tokens and requests else None,
            "llm_steps_per_job": round(sum(llm_steps(s) for s in spans.values()) / len(ids), 2)}


def postgres_costs(ctx, ids: list[str], before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    live = {}
    with ctx.pool.connection() as conn:
        for table in JOB_TABLES:
            column = "id" if table == "research_jobs" else "job_id"
            live[table] = conn.execute(f"SELECT coalesce(sum(pg_column_size(t.*)), 0) AS b FROM {table} t"
                                       f" WHERE {column} = ANY(%s::uuid[])", (ids,)).fetchone()["b"]
    return {"growth_bytes": {t: after[t] - before[t] for t in JOB_TABLES}, "live_bytes": live}


def measure(args) -> dict[str, Any]:
    from workers.topology import WORKERS

    with common.sample_stack("sizing") as (ctx, manager):
        manager.ensure()
        with ctx.pool.connection() as conn:
            periods = [(r["ticker"], r["fiscal_year"], r["fiscal_quarter"]) for r in conn.execute(
                "SELECT DISTINCT ticker, fiscal_year, fiscal_quarter FROM documents WHERE kind = 'transcript'")]
        questions = make_questions(periods, args.jobs + args.burst + 1)
        from agent.models.job import JobRequest
        from agent.submission import create
        from tasks.dispatch import CeleryDispatcher

        # warm-up: fresh workers open their pools and caches on the first job
        wait_jobs(ctx, [create(ctx, CeleryDispatcher(), JobRequest(question=questions[-1], mode=args.mode))[0]])
        time.sleep(1.0)
        keys0, memory0 = redis_keys(ctx.redis), redis_memory(ctx.redis)
        before = Snapshot(ctx, manager)
        t0 = time.monotonic()
        ids, samples = submit_and_sample(ctx, questions[:args.jobs], args.mode, args.rate)
        run_s = time.monotonic() - t0
        time.sleep(1.0)  # the last events and ledger rows of the jobs that just ended
        after = Snapshot(ctx, manager)
        keys1, memory1 = redis_keys(ctx.redis), redis_memory(ctx.redis)
        pids = {pid: spec.name for spec, proc in zip(WORKERS, manager.procs) for pid in common.process_tree([proc.pid])}
        ledger = ledger_costs(ctx, ids, pids)
        pg = postgres_costs(ctx, ids, before.tables, after.tables)
        with ctx.pool.connection() as conn:
            jobs = conn.execute("SELECT status, extract(epoch FROM finished_at - created_at) AS s FROM research_jobs"
                                " WHERE id = ANY(%s::uuid[])", (ids,)).fetchall()
        # then a burst, every job in flight at once: Redis's bytes per job in flight stand out of its noise
        burst_memory = redis_memory(ctx.redis)
        _, burst = submit_and_sample(ctx, questions[args.jobs:args.jobs + args.burst], args.mode, BURST_RATE)
    n = len(ids)
    new = [(k, *v) for k, v in keys1.items() if k not in keys0]
    stores, shared = redis_stores(new, n)
    for s in stores:
        s.ttl_s = None if s.ttl_s is None else round_ttl(s.ttl_s)
    grown = sum(size - keys0[k][0] for k, (size, _) in keys1.items() if k in keys0)
    task_pool = pool_of_task()
    task_s = {spec.name: 0.0 for spec in WORKERS}
    for task, seconds in after.tasks.items():
        if task in task_pool:
            task_s[task_pool[task]] += seconds - before.tasks.get(task, 0.0)
    cpu = {k: after.cpu[k] - before.cpu[k] for k in after.cpu}
    walls = [float(j["s"]) for j in jobs if j["s"] is not None]
    return {
        "jobs": n, "run_s": round(run_s, 1), "statuses": {s: sum(1 for j in jobs if j["status"] == s) for s in {j["status"] for j in jobs}},
        "job_wall_s": round(float(np.mean(walls)), 2), "job_wall_p95_s": round(common.percentile(walls, 95), 2),
        "pools": [{"name": spec.name, "threads_per_process": spec.concurrency,
                   "task_s_per_job": round(task_s[spec.name] / n, 4), "cpu_s_per_job": round(cpu[spec.name] / n, 4),
                   "llm_calls_per_job": round(ledger["llm_requests_by_pool"].get(spec.name, 0) / n, 2)} for spec in WORKERS],
        "postgres_cpu_s_per_job": round(cpu["postgres"] / n, 4), "redis_cpu_s_per_job": round(cpu["redis"] / n, 4),
        "llm": ledger, "postgres": pg,
        "pg_bytes_per_job": round(sum(pg["growth_bytes"].values()) / n), "pg_live_bytes_per_job": round(sum(pg["live_bytes"].values()) / n),
        "redis": {"base_used_memory": memory0["used_memory"], "peak_used_memory": max(s[0] for s in samples),
                  "stored": [s.model_dump() for s in stores], "shared_new_bytes": shared, "grown_old_keys_bytes": grown,
                  "memory_before": memory0, "memory_after": memory1, **redis_fit(burst, burst_memory)},
    }


def job_costs(m: dict[str, Any], corpus_chunks: int, docs_text: str) -> JobCosts:
    return JobCosts(
        # the batch pool runs no interactive job's task: bench/batch.py sizes it
        pools=[PoolCost(**p) for p in m["pools"] if p["task_s_per_job"] > 0], postgres_cpu_s_per_job=m["postgres_cpu_s_per_job"],
        redis_cpu_s_per_job=m["redis_cpu_s_per_job"], job_wall_s=m["job_wall_s"],
        llm_steps_per_job=m["llm"]["llm_steps_per_job"], llm_tokens_per_call=m["llm"]["llm_tokens_per_call"],
        pg_bytes_per_job=m["pg_bytes_per_job"], pg_live_bytes_per_job=m["pg_live_bytes_per_job"],
        redis_inflight_bytes_per_job=max(0.0, m["redis"]["fit_dataset_bytes_per_job_in_flight"]),
        redis_stored=[RedisStore(**s) for s in m["redis"]["stored"]], redis_fixed_bytes=m["redis"]["base_used_memory"],
        search_working_set_mb=round(working_set_mb(search_points(docs_text), corpus_chunks), 1))


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--jobs", type=int, default=40, help="jobs measured (default 40)")
    parser.add_argument("--rate", type=float, default=1.0, help="jobs submitted per second (default 1)")
    parser.add_argument("--burst", type=int, default=20,
                        help="jobs submitted at once after those, for Redis's bytes per job in flight (default 20)")
    parser.add_argument("--mode", default="standard", help="answer mode of the jobs (default standard)")
    parser.add_argument("--rates", default="10,100,1000", help="jobs per minute to plan for (default 10,100,1000)")
    parser.add_argument("--llm-latency", type=float, default=Assumptions().llm_latency_s,
                        help="seconds per LLM call at the deployment's endpoint (not measurable offline)")
    parser.add_argument("--headroom", type=float, default=Assumptions().headroom, help="load planned for, x the rate")
    parser.add_argument("--host-cores", type=int, default=Assumptions().host_cores, help="cores per worker host")
    parser.add_argument("--corpus-chunks", type=int, default=1_000_000,
                        help="chunks in the deployment's corpus, for the search indexes' share of shared_buffers")
    parser.add_argument("--from-json", type=Path,
                        help="plan from the per-job costs of an earlier run's --json output instead of measuring again")
    args: Any = common.parse_stack_bench_args(parser, argv)
    assumptions = Assumptions(llm_latency_s=args.llm_latency, headroom=args.headroom, host_cores=args.host_cores)
    from agent.settings import get_settings

    settings = get_settings()
    t0, load0 = time.time(), round(os.getloadavg()[0], 2)
    if args.from_json:
        earlier = json.loads(args.from_json.read_text())
        measured, args.mode, args.rate = earlier["measured"], earlier["mode"], earlier["rate_per_s"]
        common.remove_dir(settings.data_dir, keep=bool(args.data_dir))
    else:
        try:
            measured = measure(args)
        finally:
            common.remove_dir(settings.data_dir, keep=bool(args.data_dir))
    costs = job_costs(measured, args.corpus_chunks, common.DOCS.read_text())
    plans = [plan(costs, float(r), assumptions) for r in args.rates.split(",")]
    result = {"mode": args.mode, "rate_per_s": args.rate, "corpus_chunks": args.corpus_chunks,
              "assumptions": assumptions.model_dump(), "measured": measured, "costs": costs.model_dump(),
              "plans": [p.model_dump() for p in plans], "seconds": round(time.time() - t0, 1),
              "load_avg_1m": {"start": load0, "end": round(os.getloadavg()[0], 2)},
              "machine": common.machine(), "date": common.today()}
    if args.from_json:  # when and where the costs were measured
        result |= {k: earlier[k] for k in ("seconds", "load_avg_1m", "machine", "date") if k in earlier}
    if not args.no_write:
        common.write_section(SECTION, operators_markdown(result, common.command_line("sizing.py", argv)), OPERATORS)
    return common.finish("sizing.py", argv, args, SECTION, result, markdown, tables)


# --- reporting ------------------------------------------------------------------------------

def _num(x: float) -> str:
    """Three significant figures, whole numbers from 100 up (a plan, not a measurement)."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _gb(x: float | None) -> str:
    return "not measured" if x is None else f"{_num(x)} GB"


def plan_rows(result: dict) -> list[tuple]:
    plans = [RatePlan(**p) for p in result["plans"]]
    a = result["assumptions"]
    rows: list[tuple] = []
    for i, name in enumerate(p.name for p in plans[0].pools):
        rows.append((f"{name} pool: threads / processes / cores",
                     *(f"{p.pools[i].threads} / {p.pools[i].processes} / {_num(p.pools[i].cores)}" for p in plans)))
    tokens = [("not measured (offline provider)" if p.llm_tokens_per_min is None else _num(p.llm_tokens_per_min))
              for p in plans]
    rows += [
        ("worker processes / cores", *(f"{p.worker_processes} / {_num(p.worker_cores)}" for p in plans)),
        (f"worker hosts ({a['host_cores']} cores)", *(p.hosts for p in plans)),
        ("job latency (s) / jobs in flight", *(f"{_num(p.job_latency_s)} / {_num(p.jobs_in_flight)}" for p in plans)),
        ("LLM requests/min (provider limit)", *(_num(p.llm_requests_per_min) for p in plans)),
        ("LLM tokens/min (provider limit)", *tokens),
        ("LLM calls in flight (provider concurrency)", *(_num(p.llm_concurrent_calls) for p in plans)),
        ("Postgres storage growth per day", *(_gb(p.pg_storage_gb_per_day) for p in plans)),
        ("Postgres shared_buffers", *(_gb(p.pg_shared_buffers_gb) for p in plans)),
        ("Postgres connections (at most) / cores", *(f"{p.pg_connections} / {_num(p.pg_cores)}" for p in plans)),
        ("Redis memory / cores", *(f"{_gb(p.redis_memory_gb)} / {_num(p.redis_cores)}" for p in plans)),
    ]
    ttl = {s["pattern"]: s["ttl_s"] for s in result["measured"]["redis"]["stored"]}
    top = plans[-1]
    for pattern, gb in sorted(top.redis_kept_gb.items(), key=lambda kv: -kv[1]):
        if gb >= 0.01 * top.redis_memory_gb:  # the kinds of key that matter
            rows.append((f"of which `{pattern}` (kept {duration(ttl[pattern])})", *(_gb(p.redis_kept_gb[pattern]) for p in plans)))
    if any(p.redis_unbounded_gb_per_day for p in plans):
        rows.append(("Redis keys with no expiry, per day", *(_gb(p.redis_unbounded_gb_per_day) for p in plans)))
    return rows


def plan_header(result: dict) -> tuple:
    return ("", *(f"{p['jobs_per_min']:g} jobs/min" for p in result["plans"]))


def cost_rows(result: dict) -> list[tuple]:
    m = result["measured"]
    rows: list[tuple] = [(f"{p['name']} pool", p["task_s_per_job"], p["cpu_s_per_job"], p["llm_calls_per_job"])
                         for p in m["pools"]]
    rows += [("Postgres", "", m["postgres_cpu_s_per_job"], ""), ("Redis", "", m["redis_cpu_s_per_job"], "")]
    return rows


COST_HEADER = ("per job", "task seconds", "CPU seconds", "LLM requests")


def tables(result: dict) -> list[tuple[str, tuple, list[tuple]]]:
    return [("Per-job costs (measured)", COST_HEADER, cost_rows(result)),
            ("Sizing", plan_header(result), plan_rows(result))]


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "forever"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def _stores(m: dict) -> str:
    return "; ".join(f"`{s['pattern']}` {s['bytes_per_job']:,.0f} B per job, kept {duration(s['ttl_s'])}"
                     for s in m["redis"]["stored"])


def markdown(o: dict, command: str) -> str:
    m, mc, llm, r = o["measured"], o["machine"], o["measured"]["llm"], o["measured"]["redis"]
    tokens = (f"{llm['llm_tokens_per_call']:g} tokens per request" if llm["llm_tokens_per_call"] is not None
              else "no tokens: the offline provider reports none")
    growth = ", ".join(f"{t} {b / m['jobs'] / 1000:,.1f}" for t, b in m["postgres"]["growth_bytes"].items())
    kept = (r["memory_after"]["used_memory_dataset"] - r["memory_before"]["used_memory_dataset"]) / m["jobs"]
    keys = sum(s["bytes_per_job"] for s in r["stored"])
    fits = (f"the keys (used_memory_dataset) {r['fit_dataset_bytes_per_job_in_flight']:,} / "
            f"{r['fit_dataset_bytes_per_job_finished']:,} B, used_memory (with the clients' buffers) "
            f"{r['fit_bytes_per_job_in_flight']:,} / {r['fit_bytes_per_job_finished']:,} B")
    load = o["load_avg_1m"]
    # the load at the start is the rest of the machine's; by the end the run's own burst adds to it
    busy = ("\nThe machine was busy (load above its CPUs): the task seconds and job times include waiting for a CPU.\n"
            if load["start"] > mc["cpu_count"] else "")
    return f"""## Sizing: per-job costs

Measured {o['date']} on {mc['cpu_count']} CPUs (load average {load['start']} at the start, {load['end']} at the end),
{o['seconds']} s: `{command}`{busy}

{m['jobs']} {o['mode']}-mode jobs submitted at {o['rate_per_s']} per second to the topology's workers (sample corpus, hash
embedder, extractive provider), statuses {m['statuses']}; a job took {m['job_wall_s']} s on average (p95
{m['job_wall_p95_s']} s). Task seconds: the pool's Celery task run time per job (they grow with the machine's load;
the CPU seconds hardly do); CPU: its processes'. The table these make at 10, 100 and 1,000 jobs/min is in
[operators.md, Sizing](operators.md#sizing).

{common.markdown_table(cost_rows(o), COST_HEADER)}

LLM: {llm['llm_requests'] / m['jobs']:.2f} requests per job ({llm['llm_cached']} answered by the response cache),
{llm['llm_steps_per_job']} sequential steps per job, {tokens}.
Postgres: the job tables grew {m['pg_bytes_per_job'] / 1000:,.1f} kB per job (kB: {growth}); the jobs' own rows
{m['pg_live_bytes_per_job'] / 1000:,.1f} kB.
Redis: {r['base_used_memory'] / 1e6:.1f} MB idle. Then {r['burst_jobs']} jobs submitted at once, sampled every {SAMPLE_S} s (at most
{r['peak_in_flight']} in flight), per job in flight / finished: {fits}. Over the {m['jobs']} jobs before it, the keys' memory
grew {kept:,.0f} B per job ({keys:,.0f} B in the keys a job leaves): {_stores(m)}.
"""


def operators_markdown(o: dict, command: str) -> str:
    a = o["assumptions"]
    return f"""Measured {o['date']} ({o['measured']['jobs']} {o['mode']}-mode jobs on {o['machine']['cpu_count']} CPUs; the per-job
costs are in [benchmarks.md](benchmarks.md#sizing-per-job-costs)), planned for {a['headroom']}x each rate, an LLM call of
{a['llm_latency_s']} s and a corpus of {o['corpus_chunks']:,} chunks:

{common.markdown_table(plan_rows(o), plan_header(o))}

Re-measure (under 5 minutes): `{command}`"""


if __name__ == "__main__":
    sys.exit(main())
