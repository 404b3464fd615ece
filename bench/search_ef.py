"""hnsw.ef_search against latency and recall of the unfiltered hybrid search, on a corpus kept by bench/search.py.

    .venv/bin/python bench/search.py --scale 1m --data-dir DIR      # builds and keeps the corpus (a long run)
    .venv/bin/python bench/search_ef.py --data-dir DIR [--ef 400,300,250,200] [--passes 2] [--json]

Each width runs the same queries (bench/search.py's) through `hybrid_search`, `--passes` times, the widths in
alternating order from pass to pass; recall@15 is against the exact (`exact=True`) top 15 of the first
`--exact-queries` queries. Prints a markdown table (or one JSON object); docs/benchmarks.md is not written.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from unittest import mock

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, search


def summary(times: dict[int, list[float]], ids: dict[int, list[list]], exact: list[list]) -> list[dict]:
    """One row per width: p50 and p95 over every pass, and recall@15 of its last pass against the exact top 15."""
    return [{"ef_search": ef, "p50_ms": round(common.percentile(times[ef], 50), 2),
             "p95_ms": round(common.percentile(times[ef], 95), 2),
             "recall_at_15": search.recall(ids[ef][:len(exact)], exact)} for ef in times]


def markdown(rows: list[dict], chunks: int) -> str:
    lines = [f"{chunks} chunks", "", "| hnsw.ef_search | p50 (ms) | p95 (ms) | recall@15 |", "|---|---|---|---|"]
    lines += [f"| {r['ef_search']} | {r['p50_ms']} | {r['p95_ms']} | {r['recall_at_15']} |" for r in rows]
    return "\n".join(lines)


def run(ctx, args, say) -> dict:
    from agent.providers.embeddings import LocalEmbedder
    from agent.retrieval import hybrid

    with ctx.pool.connection() as conn:
        chunks = conn.execute("SELECT count(*) AS n FROM transcript_chunks").fetchone()["n"]
    if not chunks:
        raise SystemExit(f"{args.data_dir} holds no chunks: build them with bench/search.py --data-dir {args.data_dir}")
    base = common.real_chunks(args.transcripts)
    queries = search.build_queries(base, args.queries)
    # the queries are embedded by the model, one by one, as bench/search.py embeds them (the corpus is already built)
    model = LocalEmbedder()
    vecs = [model.embed([q])[0] for q in queries]
    say(f"BM25 index: {search.bm25_index(ctx, 'run', {})}")
    say(f"exact reference for {args.exact_queries} queries of {chunks} chunks")
    _, exact, _ = search.run_pass(ctx, queries[:args.exact_queries], vecs[:args.exact_queries], None, True)
    efs = [int(x) for x in args.ef.split(",")]
    search.run_pass(ctx, queries, vecs, None, None)  # warm
    times: dict[int, list[float]] = {ef: [] for ef in efs}
    ids: dict[int, list[list]] = {}
    for p in range(args.passes):
        for ef in efs if p % 2 == 0 else efs[::-1]:
            with mock.patch.multiple(hybrid, EF_SEARCH=ef, EF_SEARCH_LARGE=ef):
                t, ids[ef], _ = search.run_pass(ctx, queries, vecs, None, None)
            times[ef] += t
            say(f"pass {p + 1}, ef_search {ef}: p50 {common.percentile(t, 50):.2f} ms")
    return {"chunks": chunks, "queries": len(queries), "exact_queries": len(exact), "passes": args.passes,
            "rows": summary(times, ids, exact), **common.machine()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", required=True, help="a data dir kept by bench/search.py --data-dir")
    p.add_argument("--ef", default="400,300,250,200")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--exact-queries", type=int, default=40)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--transcripts", type=Path, default=search.TRANSCRIPTS)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if not (Path(args.data_dir) / search.REUSED).is_file():
        p.error(f"{args.data_dir} was not kept by bench/search.py --data-dir")
    say = lambda msg: print(f"[bench:search_ef] {msg}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    with common.private_stack(args.data_dir, embedding_provider="hash", llm_provider="extractive") as ctx:
        result = run(ctx, args, say)
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(result) if args.json else markdown(result["rows"], result["chunks"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
