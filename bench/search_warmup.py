"""How the unfiltered hybrid search warms after a start, on a corpus kept by bench/search.py.

    .venv/bin/python bench/search.py --scale 1m --data-dir DIR      # builds and keeps the corpus (a long run)
    .venv/bin/python bench/search_warmup.py --data-dir DIR [--passes 20] [--json]

The stack starts on the kept data dir (an empty buffer cache; the OS page cache is as the machine left it), then the
same queries (bench/search.py's) run through `hybrid_search` pass after pass. Each pass reports its latency and what
else went on while it ran:
  - the shared-buffer reads (blocks not in Postgres's buffer cache) and hits of the chunk table, its HNSW index and
    its GIN index (pg_statio_user_tables / _indexes; a backend reports them when it goes idle, so each pass is
    followed by a short pause before they are read);
  - the machine's CPU time by kind over the pass (/proc/stat): busy, iowait and steal (time a virtual machine's CPUs
    waited for the host), and the autovacuum workers seen running after it.
A latency that falls while the reads stay at zero is not the buffer cache warming. Prints a markdown table (or one
JSON object); docs/benchmarks.md is not written.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, kept_corpus, search

STATS_FLUSH_S = 1.5  # a backend flushes its pending I/O counters at most once a second, when it goes idle
_IO = """SELECT
    (SELECT heap_blks_read FROM pg_statio_user_tables WHERE relname = 'transcript_chunks') AS heap_read,
    (SELECT heap_blks_hit FROM pg_statio_user_tables WHERE relname = 'transcript_chunks') AS heap_hit,
    (SELECT idx_blks_read FROM pg_statio_user_indexes WHERE indexrelname = 'transcript_chunks_hnsw') AS hnsw_read,
    (SELECT idx_blks_hit FROM pg_statio_user_indexes WHERE indexrelname = 'transcript_chunks_hnsw') AS hnsw_hit,
    (SELECT idx_blks_read FROM pg_statio_user_indexes WHERE indexrelname = 'transcript_chunks_tsv') AS gin_read,
    (SELECT idx_blks_hit FROM pg_statio_user_indexes WHERE indexrelname = 'transcript_chunks_tsv') AS gin_hit,
    (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker') AS autovacuum_workers"""


def cpu_ticks(stat: str) -> dict[str, int]:
    """The machine's CPU time so far, in clock ticks, by kind, from the text of /proc/stat."""
    fields = [int(x) for x in stat.splitlines()[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return {"busy": user + nice + system + irq + softirq, "idle": idle, "iowait": iowait, "steal": steal}


def cpu_shares(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """Each kind's share of the CPU time between two readings."""
    delta = {k: after[k] - before[k] for k in before}
    total = sum(delta.values()) or 1
    return {f"{k}_share": round(delta[k] / total, 3) for k in ("busy", "iowait", "steal")}


def io_counters(ctx) -> dict[str, int]:
    with ctx.pool.connection() as conn:
        return {k: int(v or 0) for k, v in conn.execute(_IO).fetchone().items()}


def pass_row(number: int, since_start_s: float, times: list[float], before: dict, after: dict, cpu: dict) -> dict:
    """One pass: its latency, the block reads and hits it caused, the CPU shares and the autovacuum workers after it."""
    blocks = {k: after[k] - before[k] for k in before if k != "autovacuum_workers"}
    return {"pass": number, "since_start_s": round(since_start_s, 1), "p50_ms": round(common.percentile(times, 50), 2),
            "p95_ms": round(common.percentile(times, 95), 2), **blocks, **cpu,
            "autovacuum_workers": after["autovacuum_workers"]}


def markdown(rows: list[dict], chunks: int) -> str:
    cols = ("pass", "since_start_s", "p50_ms", "p95_ms", "heap_read", "hnsw_read", "gin_read", "heap_hit", "hnsw_hit",
            "busy_share", "iowait_share", "steal_share", "autovacuum_workers")
    return f"{chunks} chunks\n\n" + common.markdown_table([tuple(r[c] for c in cols) for r in rows], cols)


def run(ctx, args, say) -> dict:
    chunks, queries, vecs = kept_corpus.queries(ctx, args, say)
    proc_stat = Path("/proc/stat")
    rows = []
    for p in range(1, args.passes + 1):
        before, ticks = io_counters(ctx), cpu_ticks(proc_stat.read_text())
        at = time.perf_counter() - args.started
        times, _, _ = search.run_pass(ctx, queries, vecs, None, None)
        cpu = cpu_shares(ticks, cpu_ticks(proc_stat.read_text()))
        time.sleep(STATS_FLUSH_S)
        rows.append(pass_row(p, at, times, before, io_counters(ctx), cpu))
        say(f"pass {p}: p50 {rows[-1]['p50_ms']} ms, p95 {rows[-1]['p95_ms']} ms, "
            f"reads heap/hnsw/gin {rows[-1]['heap_read']}/{rows[-1]['hnsw_read']}/{rows[-1]['gin_read']}")
    return {"chunks": chunks, "queries": len(queries), "passes": rows, **common.machine()}


def main(argv: list[str] | None = None) -> int:
    p = kept_corpus.parser(__doc__)
    p.add_argument("--passes", type=int, default=20)
    return kept_corpus.main(kept_corpus.parse(p, argv), "search_warmup", run, lambda r: markdown(r["passes"], r["chunks"]))


if __name__ == "__main__":
    sys.exit(main())
