"""Pipeline benchmark: fan-out vs the critical-path bound vs the same pipeline run sequentially.

The extractive provider gets an injected latency per LLM call (default 1 s), so the run models a
remote LLM. A 2-ticker x 3-quarter detailed question runs twice through real Celery workers:
  - fan-out on (chords): wall_s
  - fan-out off (the same tasks chained one after another): sequential_s
bound_s = (number of sequential LLM steps on the critical path) x latency, read from the tool ledger.

    python bench/pipeline.py [--latency 1.0] [--json] [--no-write]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import fresh_env, machine, today, write_section

QUESTION = "Compare AAPL and MSFT revenue and what drove it over the last 3 quarters"
WARMUP = "What was NVDA's revenue last quarter?"
LLM_TOOLS = ("llm.plan", "llm.extract", "llm.compose", "llm.evaluate")


def _runs(ctx, manager, latency: float, fanout: bool, repeat: int) -> dict:
    """`repeat` runs of the question on one set of workers; the median run is reported, with every wall time."""
    from agent.models.job import JobRequest
    from ops.ask import submit_and_follow

    manager.ensure(FINAGENT_LLM_LATENCY_S=str(latency), FINAGENT_FANOUT=str(fanout).lower())
    # warm-up: fresh worker processes open their DB pools and caches on first use; measure the steady state
    submit_and_follow(ctx, JobRequest(question=WARMUP, mode="direct"), timeout_s=600)
    runs = sorted((_run(ctx) for _ in range(repeat)), key=lambda r: r["wall_s"])
    return runs[len(runs) // 2] | {"walls_s": [r["wall_s"] for r in runs]}


def _run(ctx) -> dict:
    from agent.models.job import JobRequest
    from agent.persistence.ledger import load_ledger
    from ops.ask import submit_and_follow

    t0 = time.perf_counter()
    job, events = submit_and_follow(ctx, JobRequest(question=QUESTION, mode="detailed"), timeout_s=600)
    wall = time.perf_counter() - t0
    ledger = [c for c in load_ledger(ctx.pool, job.id) if c["tool"] in LLM_TOOLS]
    # one sequential step per LLM stage of each iteration: plan, then extract | compose | evaluate
    stages = {":".join(c["call_key"].split(":")[:2]) for c in ledger}
    calls = sorted(load_ledger(ctx.pool, job.id), key=lambda c: c["started_at"])
    t_first = calls[0]["started_at"].timestamp()
    trace = [(c["call_key"], round(c["started_at"].timestamp() - t_first, 2), round(c["duration_ms"] / 1000, 2)) for c in calls]
    return {"trace": trace, "timing": job.result.timing, "wall_s": round(wall, 2), "llm_calls": len(ledger),
            "llm_steps": len(stages), "iterations": job.result.iterations,
            "confidence": job.result.confidence, "status": job.result.status, "events": len(events)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=1.0, help="injected seconds per LLM call")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="runs per mode; the median is reported")
    parser.add_argument("--data-dir")
    args = parser.parse_args()

    fresh_env(args.data_dir, embedding_provider="hash", llm_provider="extractive")
    from agent.settings import get_settings
    from ops.cli import sample_corpus_dir
    from ops.ingest_runner import ingest
    from ops.runtime import bootstrap
    from ops.stack import stop_embedded
    from ops.workers import WorkerManager

    load_start = round(os.getloadavg()[0], 2)
    settings = get_settings()
    ctx = bootstrap(settings)
    ingest(ctx, "transcript", [sample_corpus_dir() / "transcripts"], fanout=False, quiet=True)
    manager = WorkerManager(ctx.database_url, ctx.redis_url, settings.data_dir, name="bench")
    try:
        fan = _runs(ctx, manager, args.latency, fanout=True, repeat=args.repeat)
        seq = _runs(ctx, manager, args.latency, fanout=False, repeat=args.repeat)
    finally:
        manager.stop()
        stop_embedded(settings)
    bound = fan["llm_steps"] * args.latency
    out = {
        "question": QUESTION, "latency_s": args.latency,
        "wall_s": fan["wall_s"], "bound_s": bound, "sequential_s": seq["wall_s"],
        "wall_over_bound": round(fan["wall_s"] / bound, 3),
        "sequential_over_wall": round(seq["wall_s"] / fan["wall_s"], 2),
        "fanout": fan, "sequential": seq, "machine": machine(),
        "load_avg_1m": {"start": load_start, "end": round(os.getloadavg()[0], 2)},
        "targets": {"wall_over_bound <= 1.15": fan["wall_s"] / bound <= 1.15,
                    "sequential_over_wall >= 3": seq["wall_s"] / fan["wall_s"] >= 3},
    }
    if not args.no_write:
        write_section("pipeline", _markdown(out))
    print(json.dumps(out, indent=None if args.json else 2))


def _markdown(o: dict) -> str:
    f, s = o["fanout"], o["sequential"]
    return f"""## Pipeline: fan-out vs critical path vs sequential ({today()})

`python bench/pipeline.py` — extractive provider with {o['latency_s']} s injected per LLM call, real Celery workers
(threads pool, one process per queue as in docker-compose.yml), embedded Redis and Postgres, hash embedder, sample
corpus. Question: "{o['question']}" (detailed mode, 2 tickers x 3 quarters). Each mode runs {len(f['walls_s'])} times
after a warm-up job; the median run is reported.

| run | wall (s), median | every run (s) | LLM calls | LLM steps on the critical path | iterations |
|---|---|---|---|---|---|
| fan-out (chords) | {f['wall_s']} | {', '.join(map(str, f['walls_s']))} | {f['llm_calls']} | {f['llm_steps']} | {f['iterations']} |
| sequential (same tasks chained) | {s['wall_s']} | {', '.join(map(str, s['walls_s']))} | {s['llm_calls']} | {s['llm_steps']} | {s['iterations']} |

Where the fan-out run's time goes (from its tool ledger; s after the plan call started):

| stage | tasks | first start | last start | last end |
|---|---|---|---|---|
{_stages(f['trace'])}

- critical-path bound = {f['llm_steps']} steps x {o['latency_s']} s = **{o['bound_s']} s**; wall / bound = **{o['wall_over_bound']}** (target <= 1.15)
- sequential / fan-out = **{o['sequential_over_wall']}x** (target >= 3x)
- machine: {o['machine']['cpu_count']} CPUs, {o['machine']['platform']},
  1-minute load average {o['load_avg_1m']['start']} at the start, {o['load_avg_1m']['end']} at the end
"""


def _stages(trace: list) -> str:
    stages: dict[str, list] = {}
    for key, start, dur in trace:
        stages.setdefault(":".join(key.split(":")[:2]), []).append((start, start + dur))
    return "\n".join(f"| {name} | {len(v)} | {min(a for a, _ in v):.2f} | {max(a for a, _ in v):.2f} | {max(b for _, b in v):.2f} |"
                     for name, v in stages.items())


if __name__ == "__main__":
    main()
