"""The unfiltered search with the embedded Postgres's buffer cache on huge pages and off them, side by side, on a
corpus kept by bench/search.py.

    .venv/bin/python bench/search.py --scale 1m --data-dir DIR      # builds and keeps the corpus (a long run)
    sudo sysctl -w vm.nr_hugepages=N                                # N: `finagent services status`, or this bench's error
    .venv/bin/python bench/search_hugepages.py --data-dir DIR [--rounds 4] [--passes 3] [--json]

Each round starts the kept stack in a process of its own with EMBEDDED_PG_HUGE_PAGES=try (the default: on huge
pages when the host has reserved them) or off, in ABBA order (on, off, off, on, ...), runs the bench's 100 queries
once to fill the buffer cache, then `--passes` measured passes. Reported per side: p50 and p95 over its passes, and
the CPU the Postgres server and the searching process spent per search. A round whose server is not what its side
says (the postmaster's HugetlbPages in /proc) stops the bench with the server's advice: the huge-pages side needs
the host to have reserved them, which takes root. Prints a markdown table (or one JSON object); docs/benchmarks.md
is not written.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, kept_corpus, search

SIDES = ("on", "off")


def order(rounds: int) -> list[str]:
    """ABBA: on, off, off, on, ... `rounds` rounds a side."""
    return [side for r in range(rounds) for side in (SIDES if r % 2 == 0 else SIDES[::-1])]


def measure_side(args: argparse.Namespace) -> dict:
    """One round, in this process: the kept stack with huge pages `args.side`, a warm pass, then the measured ones."""
    from ops.local import pg_memory

    say = lambda msg: print(f"[bench:search_hugepages] {msg}", file=sys.stderr, flush=True)
    data_dir = Path(args.data_dir)
    with common.private_stack(args.data_dir, embedding_provider="hash", llm_provider="extractive",
                              embedded_pg_huge_pages="try" if args.side == "on" else "off") as ctx:
        import psycopg

        pid = common.postmaster_pids(data_dir)[0]
        with psycopg.connect(ctx.database_url) as conn:
            huge = pg_memory.huge_pages_status(conn, pid)
        chunks, queries, vecs = kept_corpus.queries(ctx, args, say)
        search.run_pass(ctx, queries, vecs, None, None)  # fills the buffer cache after the start
        passes = []
        for _ in range(args.passes):
            pids = common.process_tree([pid])
            server, client = common.cpu_seconds(pids), time.process_time()
            times, _, _ = search.run_pass(ctx, queries, vecs, None, None)
            passes.append({"times": times, "server_cpu_s": common.cpu_seconds(pids) - server,
                           "client_cpu_s": time.process_time() - client})
    return {"side": args.side, "chunks": chunks, "huge_pages": huge.model_dump(), "passes": passes}


def run_round(args: argparse.Namespace, side: str) -> dict:
    command = [sys.executable, __file__, "--data-dir", args.data_dir, "--queries", str(args.queries),
               "--transcripts", str(args.transcripts), "--passes", str(args.passes), "--side", side]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the round with huge pages {side} failed; its last lines:\n"
                         + "\n".join(done.stderr.strip().splitlines()[-8:]))
    got = json.loads(done.stdout)
    huge = got["huge_pages"]
    if huge["in_use"] is not (side == "on"):
        raise SystemExit(f"huge pages {side}, but the server's memory says in_use={huge['in_use']}: {huge['advice']}")
    return got


def summary(rounds: list[dict]) -> dict:
    out: dict = {}
    for side in SIDES:
        passes = [p for r in rounds if r["side"] == side for p in r["passes"]]
        times = [t for p in passes for t in p["times"]]
        n = max(1, len(times))
        out[side] = {"p50_ms": round(common.percentile(times, 50), 2), "p95_ms": round(common.percentile(times, 95), 2),
                     "passes_p50_ms": [round(common.percentile(p["times"], 50), 2) for p in passes],
                     "server_cpu_ms_per_search": round(1000 * sum(p["server_cpu_s"] for p in passes) / n, 2),
                     "client_cpu_ms_per_search": round(1000 * sum(p["client_cpu_s"] for p in passes) / n, 2)}
    out["on_over_off"] = {k: round(out["on"][k] / out["off"][k], 3)
                          for k in ("p50_ms", "p95_ms", "server_cpu_ms_per_search", "client_cpu_ms_per_search")
                          if out["off"][k]}
    return out


def markdown(result: dict) -> str:
    s = result["summary"]
    rows = [(side, s[side]["p50_ms"], s[side]["p95_ms"], ", ".join(map(str, s[side]["passes_p50_ms"])),
             s[side]["server_cpu_ms_per_search"], s[side]["client_cpu_ms_per_search"]) for side in SIDES]
    rows.append(("on / off", *(s["on_over_off"].get(k, "") for k in ("p50_ms", "p95_ms")), "",
                 *(s["on_over_off"].get(k, "") for k in ("server_cpu_ms_per_search", "client_cpu_ms_per_search"))))
    table = common.markdown_table(rows, ("huge pages", "p50 (ms)", "p95 (ms)", "passes p50 (ms)",
                                         "Postgres CPU ms / search", "client CPU ms / search"))
    return "\n".join([f"{result['chunks']} chunks, {result['rounds']} rounds a side of {result['passes']} passes, "
                      f"the server on {result['huge_pages_needed']} huge pages when on", "", table])


def main(argv: list[str] | None = None) -> int:
    p = kept_corpus.parser(__doc__)
    p.add_argument("--rounds", type=int, default=4, help="starts of the stack a side")
    p.add_argument("--passes", type=int, default=3, help="measured passes of the queries per start")
    p.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # one round, run by the bench in a child process
    args = kept_corpus.parse(p, argv)
    if args.side:
        print(json.dumps(measure_side(args)))
        return 0
    started = time.perf_counter()
    rounds = [run_round(args, side) for side in order(args.rounds)]
    result = {"chunks": rounds[0]["chunks"], "queries": args.queries, "rounds": args.rounds, "passes": args.passes,
              "huge_pages_needed": rounds[0]["huge_pages"]["needed"], "summary": summary(rounds),
              "seconds": round(time.perf_counter() - started, 1), **common.machine()}
    print(json.dumps(result) if args.json else markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
