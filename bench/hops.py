"""The queue hop alone: many fan-out runs of the pipeline bench's question, no sequential runs, hops by transition.

`bench/pipeline.py` runs each question fanned out and then one call at a time, so its hop median rests on a few
hops per mode and latency. Comparing two commits' hops needs more of them: this runs the question `--repeat` times
on one set of workers (after the same warm-up) and reports the median hop over every run, by what the hop joins.
Run it from each side's checkout, alternating, and compare.

    python bench/hops.py [--repeat 20] [--latency 1] [--mode detailed] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pipeline import MODES, _runs, pipeline_stack


def summarise(run: dict) -> dict:
    by: dict[str, list[float]] = {}
    for label, gap in run["transitions"]:
        by.setdefault(label, []).append(gap)
    return {"hop_ms": round(statistics.median(run["hops_ms"]), 2), "hops": len(run["hops_ms"]),
            "walls_s": run["walls_s"],
            "by_transition": {k: {"median_ms": round(statistics.median(v), 2), "n": len(v)} for k, v in by.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--latency", type=float, default=1.0, help="injected seconds per LLM call")
    parser.add_argument("--mode", choices=MODES, default="detailed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with pipeline_stack() as (ctx, manager):
        out = summarise(_runs(ctx, manager, args.latency, True, args.repeat, args.mode))
    if args.json:
        print(json.dumps(out))
        return
    print(f"hop median {out['hop_ms']} ms over {out['hops']} hops ({args.mode}, {args.latency} s per call)")
    for label, t in out["by_transition"].items():
        print(f"  {label:24s} {t['median_ms']:6.2f} ms  n={t['n']}")


if __name__ == "__main__":
    main()
