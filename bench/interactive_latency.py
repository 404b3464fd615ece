"""Interactive jobs while an overnight batch runs: how long until an interactive job starts, and ends.

The extractive provider gets an injected latency per LLM call (default 0.5 s) to model a remote LLM. In one run,
on one set of real Celery workers:
  - idle: interactive direct-mode jobs, submitted one every `--gap` seconds with nothing else running;
  - under batch: the same number of interactive jobs, submitted the same way while a batch of `--batch` questions
    runs (batch_concurrency jobs at a time, every task of theirs on the batch queue);
  - the counterfactual: the same flood submitted as ordinary jobs (interactive queues, no slots), then the same
    interactive jobs.
Start latency = the job's first coordinator step (state.started_at) minus its creation; end latency = its
finish minus its creation. The figures are p50 / p95 of each, and the under-batch / idle ratios.

    python bench/interactive_latency.py [--latency 0.5] [--jobs 12] [--batch 40] [--json] [--no-write]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Clock, finish, machine, parse_stack_bench_args, parser, percentile, sample_stack, today

TOPICS = ("revenue", "gross margin", "operating expenses", "data center demand", "guidance", "buybacks", "cash flow",
          "capital expenditure", "supply constraints", "pricing")
TICKERS = ("NVDA", "AAPL", "MSFT")


def _questions(n: int, tag: str) -> list[str]:
    return [f"What did {TICKERS[i % 3]} say about {TOPICS[i % len(TOPICS)]} ({tag} {i})?" for i in range(n)]


def _latencies(ctx, job_ids: list[str], timeout_s: float = 900) -> list[dict]:
    """Wait for the jobs to end; each one's start and end latency from its creation, in seconds."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        with ctx.pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, status, extract(epoch FROM created_at) AS created, extract(epoch FROM finished_at) AS finished,"
                " (state->>'started_at')::float AS started FROM research_jobs WHERE id = ANY(%s::uuid[])", (job_ids,)).fetchall()
        if len(rows) == len(job_ids) and all(r["finished"] for r in rows):
            return [{"start_s": float(r["started"]) - float(r["created"]), "end_s": float(r["finished"]) - float(r["created"]),
                     "status": r["status"]} for r in rows]
        time.sleep(0.5)
    raise TimeoutError("interactive jobs did not finish")


def _interactive(ctx, n: int, gap: float, tag: str) -> list[dict]:
    from agent.models.job import JobRequest
    from agent.submission import create
    from tasks.dispatch import CeleryDispatcher

    ids = []
    for q in _questions(n, tag):
        ids.append(create(ctx, CeleryDispatcher(), JobRequest(question=q, mode="direct"))[0])
        time.sleep(gap)
    return _latencies(ctx, ids)


def _summary(runs: list[dict]) -> dict:
    starts, ends = [r["start_s"] for r in runs], [r["end_s"] for r in runs]
    return {"start_p50_s": round(percentile(starts, 50), 2), "start_p95_s": round(percentile(starts, 95), 2),
            "end_p50_s": round(percentile(ends, 50), 2), "end_p95_s": round(percentile(ends, 95), 2),
            "statuses": sorted({r["status"] for r in runs})}


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, strict=True)
    p.add_argument("--latency", type=float, default=0.5, help="injected seconds per LLM call")
    p.add_argument("--jobs", type=int, default=12, help="interactive jobs per phase")
    p.add_argument("--gap", type=float, default=2.0, help="seconds between interactive submissions")
    p.add_argument("--batch", type=int, default=40, help="questions in the batch")
    args = parse_stack_bench_args(p, argv)
    from agent import batches
    from agent.models.job import JobRequest
    from agent.settings import get_settings
    from agent.submission import create
    from tasks.dispatch import CeleryDispatcher

    settings = get_settings()
    clock = Clock()
    with sample_stack() as (ctx, manager):
        manager.ensure(FINAGENT_LLM_LATENCY_S=str(args.latency))
        _interactive(ctx, 2, 0.0, "warm-up")
        idle = _interactive(ctx, args.jobs, args.gap, "idle")
        lines = batches.parse_lines(_questions(args.batch, "batch"), mode="standard")
        batch_id = batches.create_batch(ctx, CeleryDispatcher(), f"bench-{time.time():.0f}", lines)
        time.sleep(3)  # the batch's first jobs are running
        busy = _interactive(ctx, args.jobs, args.gap, "busy")
        progress = batches.batch_progress(ctx.pool, batch_id)
        assert progress is not None
        running_batch = progress.total - progress.done
        _latencies(ctx, [i.job_id for i in batches.batch_items(ctx.pool, batch_id) if i.job_id])  # let the batch end
        # the counterfactual: the same flood submitted as ordinary jobs, on the interactive queues, all at once
        flood = [create(ctx, CeleryDispatcher(), JobRequest(question=q, mode="standard"))[0] for q in _questions(args.batch, "flood")]
        time.sleep(3)
        shared = _interactive(ctx, args.jobs, args.gap, "shared")
        _latencies(ctx, flood)
    a, b, c = _summary(idle), _summary(busy), _summary(shared)
    out = {
        "latency_s": args.latency, "jobs": args.jobs, "gap_s": args.gap, "batch": args.batch,
        "batch_concurrency": settings.batch_concurrency, "batch_unfinished_when_done": running_batch,
        "idle": a, "under_batch": b, "without_batch_queue": c,
        "start_p95_ratio": round(b["start_p95_s"] / a["start_p95_s"], 2) if a["start_p95_s"] else None,
        "end_p95_ratio": round(b["end_p95_s"] / a["end_p95_s"], 2) if a["end_p95_s"] else None,
        "shared_start_p95_ratio": round(c["start_p95_s"] / a["start_p95_s"], 2) if a["start_p95_s"] else None,
        "shared_end_p95_ratio": round(c["end_p95_s"] / a["end_p95_s"], 2) if a["end_p95_s"] else None,
        "seconds": clock.seconds(), "machine": machine(),
        "targets": {"start p95 under batch <= 5 s": b["start_p95_s"] <= 5.0},
    }
    return finish("interactive_latency.py", argv, args, "interactive-under-batch", out, _markdown)


def _markdown(o: dict, command: str) -> str:
    a, b, c = o["idle"], o["under_batch"], o["without_batch_queue"]
    return f"""## Interactive jobs while a batch runs

Measured {today()} on {o['machine']['cpu_count']} CPUs in {o['seconds']} s, extractive provider with {o['latency_s']} s
injected per LLM call, local workers of `workers/topology.py`: `{command}`

{o['jobs']} interactive direct-mode jobs, one every {o['gap_s']} s, first with nothing else running, then while a batch of
{o['batch']} standard-mode questions runs ({o['batch_concurrency']} at a time; {o['batch_unfinished_when_done']} of them
were still unfinished when the last interactive job ended).

| | start p50 | start p95 | end p50 | end p95 |
|---|---|---|---|---|
| idle | {a['start_p50_s']} s | {a['start_p95_s']} s | {a['end_p50_s']} s | {a['end_p95_s']} s |
| under batch | {b['start_p50_s']} s | {b['start_p95_s']} s | {b['end_p50_s']} s | {b['end_p95_s']} s |
| under batch / idle | | {o['start_p95_ratio']} | | {o['end_p95_ratio']} |
| the same flood as ordinary jobs | {c['start_p50_s']} s | {c['start_p95_s']} s | {c['end_p50_s']} s | {c['end_p95_s']} s |
| flood / idle | | {o['shared_start_p95_ratio']} | | {o['shared_end_p95_ratio']} |

The last rows are the counterfactual, in the same run: the same {o['batch']} questions submitted at once as ordinary
jobs (interactive queues, no slots). Start = the job's first coordinator step minus its creation; end = its finish
minus its creation. A batch job's
tasks run on the `batch` queue and its own worker pool, and batch jobs wait in Postgres for a slot instead of filling
the broker; what they still share is the machine's cores and the database.
"""


if __name__ == "__main__":
    sys.exit(main())
