"""Celery's own queue hop on this machine, as the floor under the pipeline's: the product's Celery app (its config,
its batched chord publish, its task signals), worker processes started as the product starts them (threads pool,
task events on), and chords shaped like the pipeline's, with none of the pipeline's work. Leaf tasks sleep (the LLM
call), note when they ended in Redis (as a call writes its ledger row), and the chord body only dispatches the next
chord: no coordinator step, no database.

hop = the next stage's first leaf start - the previous stage's last leaf end, as bench/pipeline.py measures it from
the tool ledger. `bench/pipeline.py` runs this on its own stack after its grid, so the two hops are side by side.

    python bench/hop_floor.py [--leaf-s 0.3] [--json]      (a stack of its own; prints the figures)

`--leaf-s` is how long each leaf sleeps: how long the machine idles between hops (bench/wakeups.py shows why that
moves the hop on a virtual machine).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from celery import chord

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workers.app import app
from workers.pipelined_publish import one_publish_batch
from workers.process_context import context

LEAF_QUEUE, BODY_QUEUE = "hopfloor-llm", "hopfloor-coordinator"
LEAF_S = 0.3


def _note(run: str, kind: str, stage: int, started: float, ended: float) -> None:
    context().redis.rpush(f"finagent:bench:hop:{run}", json.dumps([kind, stage, started, ended]))


@app.task(name="bench.hop.leaf", acks_late=True, track_started=False)
def leaf(run: str, stage: int, seconds: float) -> None:
    started = time.time()
    time.sleep(seconds)
    _note(run, "leaf", stage, started, time.time())


@app.task(name="bench.hop.body", acks_late=True, track_started=False)
def body(run: str, stage: int, stages: int, width: int, seconds: float) -> None:
    started = time.time()
    _note(run, "body", stage, started, started)
    if stage < stages:
        leaves = [leaf.si(run, stage + 1, seconds).set(queue=LEAF_QUEUE) for _ in range(width)]
        with one_publish_batch(app):
            chord(leaves, body.si(run, stage + 1, stages, width, seconds).set(queue=BODY_QUEUE)).apply_async()


def _hops(rows: list[list], stages: int) -> list[float]:
    ends: dict[int, float] = {}
    starts: dict[int, float] = {}
    for kind, stage, started, ended in rows:
        if kind == "leaf":
            ends[stage] = max(ends.get(stage, 0.0), ended)
            starts[stage] = min(starts.get(stage, float("inf")), started)
    return [(starts[s + 1] - ends[s]) * 1000 for s in range(1, stages)]


def measure(ctx, width: int = 6, runs: int = 6, stages: int = 4, timeout_s: float = 60, leaf_s: float = LEAF_S
            ) -> dict:
    """Start a body-queue and a leaf-queue worker process (as the coordinator and llm workers run, with their
    environment), time `runs` chains of `stages` chords of `width` leaves, stop the workers. `ctx`: the running stack."""
    from agent.services import ServiceURLs
    from ops.local.worker_pool import wait_ready, worker_env
    from workers.topology import WORKERS

    urls = ServiceURLs(database_url=ctx.database_url, redis_url=ctx.redis_url)
    root = str(Path(__file__).resolve().parents[1])
    specs = {spec.name: spec for spec in WORKERS}
    nodes = {queue: f"{queue}-{os.getpid()}" for queue in (BODY_QUEUE, LEAF_QUEUE)}
    procs = []
    for queue, name in ((BODY_QUEUE, "coordinator"), (LEAF_QUEUE, "llm")):
        env = worker_env(urls, ctx.settings.metrics_path(), specs[name])
        env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
        procs.append(subprocess.Popen([sys.executable, "-m", "celery", "-A", "bench.hop_floor", "worker", "-Q", queue,
                                       "-P", "threads", "-c", str(specs[name].concurrency), "-E", "-n", f"{nodes[queue]}@%h",
                                       "-l", "WARNING"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    hops: list[float] = []
    try:
        wait_ready(urls, [f"{n}@" for n in nodes.values()], 60)
        for i in range(runs + 1):  # the first run warms the workers up and is not counted
            run = f"{os.getpid()}-{width}-{i}"
            body.si(run, 0, stages, width, leaf_s).set(queue=BODY_QUEUE).apply_async()
            key, deadline = f"finagent:bench:hop:{run}", time.monotonic() + timeout_s
            while True:
                rows = [json.loads(x) for x in ctx.redis.lrange(key, 0, -1)]
                if any(r[0] == "body" and r[1] == stages for r in rows):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"hop floor run {run} did not finish in {timeout_s} s")
                time.sleep(0.05)
            ctx.redis.delete(key)
            if i:
                hops += _hops(rows, stages)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
    ordered = sorted(hops)
    return {"width": width, "leaf_s": leaf_s, "hops": len(hops), "hop_ms": round(statistics.median(hops), 1),
            "hop_ms_p90": round(ordered[int(0.9 * (len(ordered) - 1))], 1)}


def main() -> None:
    from bench.common import fresh_env

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--leaf-s", type=float, default=LEAF_S, help="seconds each leaf sleeps (the LLM call)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    fresh_env(None, embedding_provider="hash", llm_provider="extractive")
    from agent.settings import get_settings
    from ops.local.bootstrap import bootstrap
    from ops.local.stack import stop_embedded

    settings = get_settings()
    ctx = bootstrap(settings)
    try:
        result = measure(ctx, leaf_s=args.leaf_s)
    finally:
        stop_embedded(settings)
    print(json.dumps(result) if args.json else
          f"Celery's own hop (chords of {result['width']}, leaves of {args.leaf_s} s): "
          f"median {result['hop_ms']} ms, p90 {result['hop_ms_p90']} ms")


if __name__ == "__main__":
    main()
