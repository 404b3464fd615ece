"""hnsw.ef_search against latency and recall of the unfiltered hybrid search, on a corpus kept by bench/search.py.

    .venv/bin/python bench/search.py --scale 1m --data-dir DIR      # builds and keeps the corpus (a long run)
    .venv/bin/python bench/search_ef.py --data-dir DIR [--ef 400,300,250,200] [--passes 2] [--json]

Each width runs the same queries (bench/search.py's) through `hybrid_search`, `--passes` times, the widths in
alternating order from pass to pass; recall@15 is against the exact (`exact=True`) top 15 of the first
`--exact-queries` queries. Prints a markdown table (or one JSON object); docs/benchmarks.md is not written.
"""
from __future__ import annotations

import sys
from pathlib import Path
from unittest import mock

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, kept_corpus, search


def summary(times: dict[int, list[float]], ids: dict[int, list[list]], exact: list[list]) -> list[dict]:
    """One row per width: p50 and p95 over every pass, and recall@15 of its last pass against the exact top 15."""
    return [{"ef_search": ef, "p50_ms": round(common.percentile(times[ef], 50), 2),
             "p95_ms": round(common.percentile(times[ef], 95), 2),
             "recall_at_15": search.recall(ids[ef][:len(exact)], exact)} for ef in times]


def markdown(rows: list[dict], chunks: int) -> str:
    table = common.markdown_table([(r["ef_search"], r["p50_ms"], r["p95_ms"], r["recall_at_15"]) for r in rows],
                                  ("hnsw.ef_search", "p50 (ms)", "p95 (ms)", "recall@15"))
    return f"{chunks} chunks\n\n{table}"


def run(ctx, args, say) -> dict:
    from agent.retrieval import hybrid

    chunks, queries, vecs = kept_corpus.queries(ctx, args, say)
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
    p = kept_corpus.parser(__doc__)
    p.add_argument("--ef", default="400,300,250,200")
    p.add_argument("--exact-queries", type=int, default=40)
    p.add_argument("--passes", type=int, default=2)
    return kept_corpus.main(kept_corpus.parse(p, argv), "search_ef", run, lambda r: markdown(r["rows"], r["chunks"]))


if __name__ == "__main__":
    sys.exit(main())
