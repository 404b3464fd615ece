"""Filtered searches over large scopes: the exact read against pgvector 0.8's iterative HNSW scan, on one server.

A filter on one company (a few of its quarters) selects a few hundred rows and is read exactly on every server. A
filter on a fiscal year or a quarter of every company selects a large share of the table: on pgvector >= 0.8,
`hybrid_search` sends a scope of more than `filtered_hnsw.MIN_SCOPE_ROWS` rows through an iterative HNSW scan
(agent/retrieval/filtered_hnsw.py); on 0.6 (the embedded server) it reads it exactly. This bench loads a synthetic
corpus with MiniLM geometry (as `bench/search.py` does), then runs the same queries over such scopes twice, the
default path and `exact=True`, one after the other, and reports each path's latency and the default's recall@15
against the exact one.

The embedded server has pgvector 0.6.2, where both paths are the exact read. Point `--database-url` at an empty
database on a server with pgvector >= 0.8 (the production image pgvector/pgvector:pg16 has it) to measure the index
path; the bench loads its synthetic chunks there and refuses a database that holds any other transcript.

    python bench/filtered_scopes.py [--database-url URL] [--chunks 100000] [--queries 40] [--json] [--no-write]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common
from bench.search import QUARTERS, TOP_K, TRANSCRIPTS, build_queries, recall, run_pass

SECTION = "filtered-scopes"
SYNTHETIC = "synthetic://"


def scopes() -> list[tuple[str, object]]:
    """(name, filters): the scopes a question about a whole period of the corpus asks for."""
    from agent.models.corpus import Period, SearchFilters

    last = QUARTERS[-1]
    year = last[0]
    return [
        (f"fiscal year {year}, every company",
         SearchFilters(periods=[Period(fiscal_year=y, fiscal_quarter=q) for y, q in QUARTERS if y == year])),
        (f"one quarter ({last[0]} Q{last[1]}), every company",
         SearchFilters(periods=[Period(fiscal_year=last[0], fiscal_quarter=last[1])])),
    ]


def scope_rows(ctx, where, params: dict) -> int:
    from psycopg import sql

    with ctx.pool.connection() as conn:
        return conn.execute(sql.SQL("SELECT count(*) AS n FROM transcript_chunks {w}").format(w=where), params).fetchone()["n"]


def existing_chunks(ctx) -> int:
    """The synthetic chunks a previous run left; a database holding any other transcript is refused."""
    with ctx.pool.connection() as conn:
        row = conn.execute("SELECT count(*) FILTER (WHERE source_path NOT LIKE %s) AS other FROM documents"
                           " WHERE kind = 'transcript'", (SYNTHETIC + "%",)).fetchone()
        if row["other"]:
            raise SystemExit(f"the database holds {row['other']} transcripts that are not this bench's: use an empty one")
        return conn.execute("SELECT count(*) AS n FROM transcript_chunks").fetchone()["n"]


@contextmanager
def every_scope_large(on: bool) -> Iterator[None]:
    """With `on`, every filtered scope counts as large: the iterative scan is measured also where the rule reads the
    scope exactly, to show what the threshold (filtered_hnsw.MIN_SCOPE_ROWS) trades."""
    from agent.retrieval import filtered_hnsw

    rule = filtered_hnsw.scope_is_large
    if on:
        filtered_hnsw.scope_is_large = lambda *args, **kwargs: True
    try:
        yield
    finally:
        filtered_hnsw.scope_is_large = rule


def measure_scope(ctx, queries, vecs, name: str, filters, iterative: bool) -> dict:
    """The default path and exact=True on one scope, and with `iterative` (a server with pgvector >= 0.8) the index
    path forced as well; each path's latency and its recall@15 against the exact one."""
    from agent.retrieval import filtered_hnsw
    from agent.retrieval.hybrid import filter_clause

    where, params = filter_clause("transcript", filters)
    indexed = filtered_hnsw.use_index(ctx.pool, "transcript_chunks", where, params)
    paths = [("default", None, False), ("exact", True, False)] + ([("index", None, True)] if iterative else [])
    each = [filters] * len(queries)
    for _, exact, forced in paths:  # a warm-up pass of each path: the measured passes read cached pages on all
        with every_scope_large(forced):
            run_pass(ctx, queries, vecs, each, exact)
    row: dict = {"scope": name, "rows": scope_rows(ctx, where, params),
                 "default_path": "HNSW, iterative" if indexed else "exact"}
    ids = {}
    for label, exact, forced in paths:
        with every_scope_large(forced):
            times, ids[label], outside = run_pass(ctx, queries, vecs, each, exact)
        row |= {f"{label}_p50_ms": round(common.percentile(times, 50), 2),
                f"{label}_p95_ms": round(common.percentile(times, 95), 2), f"{label}_hits_outside_filter": outside,
                f"{label}_short_results": sum(1 for x in ids[label] if len(x) < TOP_K)}
    return row | {f"{label}_recall_at_15": recall(ids[label], ids["exact"]) for label in ids}


def run(ctx, args, say) -> dict:
    from agent.retrieval import filtered_hnsw

    base = common.real_chunks(args.transcripts)
    queries = build_queries(base, args.queries)
    embedder = common.SentenceMeanEmbedder(base, say)
    vecs = [embedder.embed_query(q) for q in queries]
    have = existing_chunks(ctx)
    out: dict = {"chunks_requested": args.chunks, "queries": len(queries), "top_k": TOP_K, **common.machine(),
                 "load_avg_1m_start": round(os.getloadavg()[0], 2)}
    if have < args.chunks:
        say(f"loading {args.chunks - have} synthetic chunks (the HNSW index rebuilt after)")
        gen = common.synthetic_docs(base, [f"X{i:03d}" for i in range(10_000)], QUARTERS)
        common.take(gen, have)  # the documents a previous run loaded
        grown = common.grow(ctx, gen, embedder, have, args.chunks, common.hnsw_definition(ctx))
        have = grown["chunks"]
        out["hnsw_build_s"] = round(grown["hnsw_build_s"], 1)
    with ctx.pool.connection() as conn:
        server = conn.execute("SHOW server_version").fetchone()["server_version"]
        buffers = conn.execute("SHOW shared_buffers").fetchone()["shared_buffers"]
    out |= {"chunks": have, "server_version": server, "shared_buffers": buffers,
            "pgvector": ".".join(map(str, filtered_hnsw.pgvector_version(ctx.pool))),
            "min_scope_rows": filtered_hnsw.MIN_SCOPE_ROWS, "iterative_settings": filtered_hnsw.SETTINGS,
            "ef_search": filtered_hnsw.EF_SEARCH}
    iterative = filtered_hnsw.has_iterative_scans(filtered_hnsw.pgvector_version(ctx.pool))
    out["scopes"] = []
    for name, filters in scopes():
        say(f"searching {name}")
        out["scopes"].append(measure_scope(ctx, queries, vecs, name, filters, iterative))
    out["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    return out


HEADER = ("scope", "rows", "default path", "path", "p50 (ms)", "p95 (ms)", "recall@15 vs exact", "short results",
          "hits outside the filter")


def table_rows(result: dict) -> list[tuple]:
    names = {"default": "default", "exact": "exact=True", "index": "iterative HNSW, forced"}
    return [(s["scope"], s["rows"], s["default_path"], names[label], s[f"{label}_p50_ms"], s[f"{label}_p95_ms"],
             s[f"{label}_recall_at_15"], s[f"{label}_short_results"], s[f"{label}_hits_outside_filter"])
            for s in result["scopes"] for label in names if f"{label}_p50_ms" in s]


def markdown(result: dict, command: str) -> str:
    settings = ", ".join(f"{k} = {v}" for k, v in result["iterative_settings"].items())
    return "\n".join([
        f"## Filtered searches over large scopes at {result['chunks_requested']:,} chunks: exact read vs pgvector's"
        f" iterative HNSW scan ({common.today()})",
        "",
        f"`{command}` (the server's address written as URL): {result['chunks']} synthetic chunks with MiniLM geometry",
        f"(as in the search bench), {result['queries']} queries per scope on each path, one path after the other after a",
        "warm-up pass of each: the default (what `hybrid_search` picks), `exact=True`, and, on pgvector >= 0.8, the",
        "iterative scan forced whatever the scope's size. Recall@15 is against `exact=True`'s top 15. Server: PostgreSQL",
        f"{result['server_version']}, pgvector {result['pgvector']}, shared_buffers {result['shared_buffers']}. A scope",
        f"of more than {result['min_scope_rows']} rows takes the iterative scan ({settings}, ef_search "
        f"{result.get('ef_search', 'as the table')}) where pgvector >= 0.8; a smaller one, and every scope on 0.6, is read exactly.",
        "",
        common.markdown_table(table_rows(result), HEADER),
        "",
        f"Machine: {result['cpu_count']} CPUs, {result['platform']}; 1-minute load average {result['load_avg_1m_start']} "
        f"at the start, {result['load_avg_1m_end']} at the end.",
    ])


def tables(result: dict) -> list[tuple[str, tuple, list[tuple]]]:
    return [(f"{result['chunks']} chunks, pgvector {result['pgvector']}", HEADER, table_rows(result))]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--database-url", help="an empty database on a server with pgvector (default: the embedded server)")
    p.add_argument("--chunks", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=40)
    p.add_argument("--transcripts", type=Path, default=TRANSCRIPTS)
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--data-dir", help="data dir for the embedded services (default: a fresh temporary dir)")
    p.set_defaults(strict=False)  # no target is set on these figures (common.finish reads it)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    say = lambda msg: print(f"[bench:filtered_scopes] {msg}", file=sys.stderr, flush=True)
    env = {"embedding_provider": "hash", "llm_provider": "extractive"}
    if args.database_url:
        env["database_url"] = args.database_url
    started = time.perf_counter()
    with common.private_stack(args.data_dir, **env) as ctx:
        result = run(ctx, args, say)
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["targets"] = []
    section = f"{SECTION}-{args.chunks}"  # a section per corpus size
    return common.finish("filtered_scopes.py", argv, args, section, result, markdown, tables)


if __name__ == "__main__":
    sys.exit(main())
