"""Recovery after a worker death, with no manual call: the time from SIGKILL to the job moving again.

A `direct` job runs with an injected LLM latency (default 2 s per call, so a step is in flight long enough to
kill). When it reaches its extract step, the `llm` worker process (or every worker, `--all`) is SIGKILLed and the
worker set is started again at once, as a supervisor would. The production timings apply: the broker's visibility
timeout (600 s) and the stall window (900 s) are left alone, so what brings the job back is the heartbeat watchdog
(agent/infra/liveness.py). Reported: seconds from the kill to the job's next step, and to its end, per trial.

    python bench/recovery.py [--trials 5] [--latency 2.0] [--all] [--json] [--no-write]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, parse_stack_bench_args, percentile, sample_stack, today, write_section

QUESTION = "What did {t} say about revenue growth in its latest quarter (trial {n})?"


def _job(ctx, job_id: str):
    from agent.persistence import jobstore

    job = jobstore.load_job(ctx.pool, job_id)
    if job is None:
        raise RuntimeError(f"job {job_id} is not in the job store")
    return job


def _trial(ctx, manager, n: int, env: dict[str, str], kill_all: bool) -> dict:
    from agent.models.job import JobRequest
    from agent.submission import create
    from tasks.dispatch import CeleryDispatcher
    from workers.topology import WORKERS

    procs = manager.ensure(**env, BENCH_TRIAL=str(n))
    job_id, _ = create(ctx, CeleryDispatcher(), JobRequest(question=QUESTION.format(t=("NVDA", "AAPL", "MSFT")[n % 3], n=n),
                                                            mode="direct"))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not _job(ctx, job_id).step.endswith(":extract"):
        time.sleep(0.05)
    time.sleep(0.5)  # the extract calls are running
    step = _job(ctx, job_id).step
    victims = procs if kill_all else [procs[[w.name for w in WORKERS].index("llm")]]
    for p in victims:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    killed = time.monotonic()
    manager.procs = [p for p in procs if p not in victims]
    manager.ensure(**env, BENCH_TRIAL=f"{n}-restarted")  # the supervisor restarts the set
    while (job := _job(ctx, job_id)).step == step and time.monotonic() - killed < 600:
        time.sleep(0.2)
    moved = time.monotonic() - killed
    while job.status not in ("completed", "failed", "rejected", "cancelled") and time.monotonic() - killed < 600:
        time.sleep(0.2)
        job = _job(ctx, job_id)
    return {"step": step, "moved_s": round(moved, 1), "ended_s": round(time.monotonic() - killed, 1), "status": job.status}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--latency", type=float, default=2.0, help="injected seconds per LLM call")
    parser.add_argument("--all", action="store_true", help="kill every worker process, not only the llm pool")
    args: Any = parse_stack_bench_args(parser)
    from agent.infra.liveness import HEARTBEAT_TTL_S, WATCHDOG_PERIOD_S
    from agent.settings import get_settings

    settings = get_settings()
    env = {"FINAGENT_LLM_LATENCY_S": str(args.latency), "FINAGENT_LLM_CACHE_TTL_S": "0"}
    t0 = time.time()
    with sample_stack() as (ctx, manager):
        trials = [_trial(ctx, manager, n, env, args.all) for n in range(args.trials)]
    moved = [t["moved_s"] for t in trials]
    out = {"trials": trials, "killed": "every worker" if args.all else "the llm worker", "latency_s": args.latency,
           "moved_p50_s": round(percentile(moved, 50), 1), "moved_max_s": max(moved),
           "heartbeat_ttl_s": HEARTBEAT_TTL_S, "watchdog_period_s": WATCHDOG_PERIOD_S,
           "visibility_timeout_s": settings.broker_visibility_timeout_s, "stalled_job_after_s": settings.stalled_job_after_s,
           "seconds": round(time.time() - t0, 1), "machine": machine(),
           "targets": {"moved again < 60 s in every trial": max(moved) < 60}}
    if not args.no_write:
        write_section("recovery", _markdown(out))
    print(json.dumps(out, indent=None if args.json else 2))


def _markdown(o: dict) -> str:
    rows = "\n".join(f"| {i + 1} | `{t['step']}` | {t['moved_s']} s | {t['ended_s']} s | {t['status']} |" for i, t in enumerate(o["trials"]))
    return f"""## Recovery after a worker death

Measured {today()} on {o['machine']['cpu_count']} CPUs in {o['seconds']} s:

```
.venv/bin/python bench/recovery.py --trials {len(o['trials'])} --latency {o['latency_s']}
```

A `direct` job with {o['latency_s']} s injected per LLM call; at its extract step {o['killed']} is SIGKILLed and the
worker set restarted at once. The broker's visibility timeout ({o['visibility_timeout_s']} s) and the stall window
({o['stalled_job_after_s']} s) are the production ones: the job comes back through the heartbeat watchdog (heartbeat
TTL {o['heartbeat_ttl_s']} s, checked every {o['watchdog_period_s']:g} s), with no manual call.

| trial | step killed | kill to next step | kill to end | status |
|---|---|---|---|---|
{rows}

Kill to next step: p50 {o['moved_p50_s']} s, max {o['moved_max_s']} s (target: under 60 s). The bound is the heartbeat
TTL plus one watchdog period plus the re-sent calls' own time (the LLM latency).
"""


if __name__ == "__main__":
    main()
