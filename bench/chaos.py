"""The chaos soak: many jobs (half of them an overnight batch) on real workers while a random worker process is
SIGKILLed every few seconds and a supervisor restarts it; optionally Redis and Postgres crash once each on the way.
Nobody calls a recovery function. Reports the chaos suite's counts (ops/chaos/audit.py): submitted, completed, failed with a
reason, lost (must be 0), duplicated rows (must be 0), and seconds from each fault to recovery.

    python bench/chaos.py [--jobs 200] [--kill-every 5] [--latency 0.5] [--restarts] [--json] [--no-write]
"""
from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, parse_stack_bench_args, sample_stack, today, write_section

TICKERS = ("NVDA", "AAPL", "MSFT")
TOPICS = ("revenue", "gross margin", "operating expenses", "guidance", "capital returns", "demand drivers")


def _questions(n: int, rnd: random.Random) -> list[str]:
    return [f"How did {rnd.choice(TICKERS)}'s {rnd.choice(TOPICS)} develop over the last {rnd.choice((1, 2, 3))} quarters? (soak {i})"
            for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--kill-every", type=float, default=5.0, help="mean seconds between SIGKILLs")
    parser.add_argument("--latency", type=float, default=0.5, help="injected seconds per LLM call")
    parser.add_argument("--restarts", action="store_true", help="also crash Redis and Postgres once each")
    parser.add_argument("--seed", type=int, default=7)
    args: Any = parse_stack_bench_args(parser)
    from agent.batches import batch_items, create_batch, parse_lines
    from agent.models.job import JobRequest
    from agent.settings import get_settings
    from agent.submission import create
    from ops.chaos.audit import ProgressWatch, Supervisor, audit, crash_postgres, crash_redis, start_postgres, start_redis, wait_final
    from tasks.dispatch import CeleryDispatcher

    settings = get_settings()
    rnd = random.Random(args.seed)
    env = {"FINAGENT_LLM_LATENCY_S": str(args.latency), "FINAGENT_LLM_CACHE_TTL_S": "0"}
    t0 = time.time()
    with sample_stack("soak") as (ctx, manager):
        manager.ensure(**env)
        half = args.jobs // 2
        jobs = [create(ctx, CeleryDispatcher(), JobRequest(question=q, max_iterations=1))[0] for q in _questions(half, rnd)]
        batch_id = create_batch(ctx, CeleryDispatcher(), "soak", parse_lines(
            [json.dumps({"question": q, "max_iterations": 1}) for q in _questions(args.jobs - half, rnd)]))
        jobs += [i.job_id for i in batch_items(ctx.pool, batch_id) if i.job_id]
        kills, restarts_done = 0, list[str]()
        with ProgressWatch(ctx, jobs) as watch, Supervisor(manager) as supervisor:
            deadline = time.monotonic() + 3600
            while not wait_final(ctx, jobs, 0) and time.monotonic() < deadline:
                time.sleep(rnd.expovariate(1 / args.kill_every))
                if args.restarts and not restarts_done and kills == 4:
                    crash_redis(settings)
                    watch.fault()
                    time.sleep(5)
                    start_redis(settings)
                    restarts_done.append("redis")
                elif args.restarts and restarts_done == ["redis"] and kills == 8:
                    crash_postgres(settings)
                    watch.fault()
                    time.sleep(5)
                    start_postgres(settings)
                    restarts_done.append("postgres")
                proc = rnd.choice(manager.procs)
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    watch.fault()
                    kills += 1
            ended = wait_final(ctx, jobs, 300)
        tally = audit(ctx, "soak", jobs, faults=watch.faults, recovery_s=watch.recovery_s)
    out = {"line": tally.line(), "tally": tally.model_dump(), "all_ended": ended, "kills": kills, "restarts": restarts_done,
           "worker_restarts": supervisor.restarts, "jobs": args.jobs, "kill_every_s": args.kill_every, "latency_s": args.latency,
           "seconds": round(time.time() - t0, 1), "machine": machine(),
           "targets": {"lost == 0": tally.lost == 0, "duplicated == 0": tally.duplicated == 0,
                       "recovery < 60 s": bool(tally.recovery_s) and max(tally.recovery_s) < 60}}
    if not args.no_write:
        write_section("chaos soak", _markdown(out, args))
    print(json.dumps(out, indent=None if args.json else 2, default=str))


def _markdown(o: dict, args) -> str:
    t = o["tally"]
    rec = sorted(t["recovery_s"])
    p50 = rec[len(rec) // 2] if rec else float("nan")
    worst = rec[-1] if rec else float("nan")
    flags = f" --jobs {o['jobs']} --kill-every {o['kill_every_s']:g} --latency {o['latency_s']:g}" + (" --restarts" if o["restarts"] else "")
    return f"""## Chaos soak

Measured {today()} on {o['machine']['cpu_count']} CPUs in {o['seconds']} s:

```
.venv/bin/python bench/chaos.py{flags}
```

{o['jobs']} jobs (half interactive, half one overnight batch), {o['latency_s']:g} s injected per LLM call. A random worker
process was SIGKILLed about every {o['kill_every_s']:g} s ({o['kills']} kills){', Redis and Postgres each crashed once' if o['restarts'] else ''};
a supervisor restarted dead workers ({o['worker_restarts']} restarts). No recovery call was made by hand.

| submitted | completed | failed with a reason | lost | duplicated | faults | recovery p50 | recovery max |
|---|---|---|---|---|---|---|---|
| {t['submitted']} | {t['completed']} | {t['failed_with_reason']} | {t['lost']} | {t['duplicated']} | {t['faults']} | {p50:.1f} s | {worst:.1f} s |

Recovery is per fault: the seconds until every job that was running when it struck had moved to another step.
"""


if __name__ == "__main__":
    main()
