"""Chaos on real workers, with no recovery call made by hand.

The soak (default): many jobs (half of them an overnight batch) while a random worker process is SIGKILLed every few
seconds and a supervisor restarts it; with --restarts Redis and Postgres also crash once each. Reports the chaos
suite's counts (ops/chaos/audit.py): submitted, completed, failed with a reason, lost (must be 0), duplicated rows
(must be 0), and seconds from each fault to recovery.

--worker-death: a `direct` job at a time, with an injected LLM latency long enough that a step is in flight; at its
extract step the `llm` worker process (or every worker, --all) is SIGKILLed and the worker set started again at once,
as a supervisor would. The production timings apply (the broker's visibility timeout, the stall window), so what
brings the job back is the heartbeat watchdog (agent/infra/liveness.py). Reports, per trial, the seconds from the
kill to the job's next step and to its end.

    python bench/chaos.py [--jobs 200] [--kill-every 5] [--latency 0.5] [--restarts] [--json] [--no-write]
    python bench/chaos.py --worker-death [--trials 5] [--latency 2.0] [--all] [--json] [--no-write]
"""
from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Clock, finish, machine, parse_stack_bench_args, parser, percentile, sample_stack, today

TICKERS = ("NVDA", "AAPL", "MSFT")
TOPICS = ("revenue", "gross margin", "operating expenses", "guidance", "capital returns", "demand drivers")
TRIAL_QUESTION = "What did {t} say about revenue growth in its latest quarter (trial {n})?"


def _llm_env(latency: float) -> dict[str, str]:
    return {"FINAGENT_LLM_LATENCY_S": str(latency), "FINAGENT_LLM_CACHE_TTL_S": "0"}


# --- the soak --------------------------------------------------------------------------------

def _questions(n: int, rnd: random.Random) -> list[str]:
    return [f"How did {rnd.choice(TICKERS)}'s {rnd.choice(TOPICS)} develop over the last {rnd.choice((1, 2, 3))} quarters? (soak {i})"
            for i in range(n)]


def soak(args) -> dict:
    from agent.batches import batch_items, create_batch, parse_lines
    from agent.models.job import JobRequest
    from agent.settings import get_settings
    from agent.submission import create
    from ops.chaos.audit import ProgressWatch, Supervisor, audit, crash_postgres, crash_redis, start_postgres, start_redis, wait_final
    from tasks.dispatch import CeleryDispatcher

    settings = get_settings()
    rnd = random.Random(args.seed)
    clock = Clock()
    with sample_stack("soak") as (ctx, manager):
        manager.ensure(**_llm_env(args.latency))
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
    return {"line": tally.line(), "tally": tally.model_dump(), "all_ended": ended, "kills": kills, "restarts": restarts_done,
            "worker_restarts": supervisor.restarts, "jobs": args.jobs, "kill_every_s": args.kill_every,
            "latency_s": args.latency, "seconds": clock.seconds(), "machine": machine(),
            "targets": {"lost == 0": tally.lost == 0, "duplicated == 0": tally.duplicated == 0,
                        "recovery < 60 s": bool(tally.recovery_s) and max(tally.recovery_s) < 60}}


def soak_markdown(o: dict, command: str) -> str:
    t = o["tally"]
    rec = sorted(t["recovery_s"])
    p50 = rec[len(rec) // 2] if rec else float("nan")
    worst = rec[-1] if rec else float("nan")
    return f"""## Chaos soak

Measured {today()} on {o['machine']['cpu_count']} CPUs in {o['seconds']} s: `{command}`

{o['jobs']} jobs (half interactive, half one overnight batch), {o['latency_s']:g} s injected per LLM call. A random worker
process was SIGKILLed about every {o['kill_every_s']:g} s ({o['kills']} kills){', Redis and Postgres each crashed once' if o['restarts'] else ''};
a supervisor restarted dead workers ({o['worker_restarts']} restarts). No recovery call was made by hand.

| submitted | completed | failed with a reason | lost | duplicated | faults | recovery p50 | recovery max |
|---|---|---|---|---|---|---|---|
| {t['submitted']} | {t['completed']} | {t['failed_with_reason']} | {t['lost']} | {t['duplicated']} | {t['faults']} | {p50:.1f} s | {worst:.1f} s |

Recovery is per fault: the seconds until every job that was running when it struck had moved to another step.
"""


# --- a worker's death --------------------------------------------------------------------------

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
    job_id, _ = create(ctx, CeleryDispatcher(), JobRequest(question=TRIAL_QUESTION.format(t=TICKERS[n % 3], n=n),
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


def worker_death(args) -> dict:
    from agent.infra.liveness import HEARTBEAT_TTL_S, WATCHDOG_PERIOD_S
    from agent.settings import get_settings

    settings = get_settings()
    clock = Clock()
    with sample_stack() as (ctx, manager):
        trials = [_trial(ctx, manager, n, _llm_env(args.latency), args.all) for n in range(args.trials)]
    moved = [t["moved_s"] for t in trials]
    return {"trials": trials, "killed": "every worker" if args.all else "the llm worker", "latency_s": args.latency,
            "moved_p50_s": round(percentile(moved, 50), 1), "moved_max_s": max(moved),
            "heartbeat_ttl_s": HEARTBEAT_TTL_S, "watchdog_period_s": WATCHDOG_PERIOD_S,
            "visibility_timeout_s": settings.broker_visibility_timeout_s, "stalled_job_after_s": settings.stalled_job_after_s,
            "seconds": clock.seconds(), "machine": machine(),
            "targets": {"moved again < 60 s in every trial": max(moved) < 60}}


def worker_death_markdown(o: dict, command: str) -> str:
    rows = "\n".join(f"| {i + 1} | `{t['step']}` | {t['moved_s']} s | {t['ended_s']} s | {t['status']} |"
                     for i, t in enumerate(o["trials"]))
    return f"""## Recovery after a worker death

Measured {today()} on {o['machine']['cpu_count']} CPUs in {o['seconds']} s: `{command}`

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


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, strict=True)
    p.add_argument("--worker-death", action="store_true", help="kill the llm worker mid-step, trial after trial")
    p.add_argument("--latency", type=float, help="injected seconds per LLM call (default 0.5; --worker-death 2.0)")
    p.add_argument("--jobs", type=int, default=200, help="soak: jobs, half of them one batch")
    p.add_argument("--kill-every", type=float, default=5.0, help="soak: mean seconds between SIGKILLs")
    p.add_argument("--restarts", action="store_true", help="soak: also crash Redis and Postgres once each")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--trials", type=int, default=5, help="--worker-death: trials")
    p.add_argument("--all", action="store_true", help="--worker-death: kill every worker process, not only the llm pool")
    args = parse_stack_bench_args(p, argv)
    if args.worker_death:
        args.latency = 2.0 if args.latency is None else args.latency
        return finish("chaos.py", argv, args, "recovery", worker_death(args), worker_death_markdown)
    args.latency = 0.5 if args.latency is None else args.latency
    return finish("chaos.py", argv, args, "chaos soak", soak(args), soak_markdown)


if __name__ == "__main__":
    sys.exit(main())
