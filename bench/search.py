"""Search: recall@15 and latency of hybrid_search at 10k and 100k (or 1M) transcript chunks, and the ingestion rate;
with --scopes, filtered searches over large scopes (a period of every company), exact read against pgvector's
iterative HNSW scan.

    .venv/bin/python bench/search.py [--json] [--quick] [--strict] [--no-write] [--data-dir DIR] [--scale 100k|1m]
                                     [--embedder minilm|hash] [--reuse]
    .venv/bin/python bench/search.py --scopes [--database-url URL] [--chunks 100000] [--queries 40] [--json]

Builds synthetic chunks from the real transcripts (varied copies over synthetic tickers and quarters) in a private
embedded Postgres + pgvector. Vectors: all-MiniLM-L6-v2 geometry (--embedder minilm, the default: each chunk is the
mean of its sentences' real model vectors, queries are embedded by the model) or the hash test embedder (--embedder
hash, a stress case for HNSW). Each embedder, scale and scope size writes its own section of docs/benchmarks.md.
Side by side on two commits: `bench/compare.py search.py --base REV` (each side loads its own corpus).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common

if TYPE_CHECKING:
    from agent.models.corpus import SearchFilters

TRANSCRIPTS = common.SHARED_DATA / "transcripts"
QUARTERS = [(y, q) for y in (2022, 2023) for q in range(1, 5)]
TOP_K = 15
REPEAT = 30  # queries run twice to check that the default search is repeatable
TARGETS = [("filtered_recall_at_15", ">=", 1.0), ("unfiltered_recall_at_15", ">=", 0.95), ("p95_ms_100k", "<", 20.0),
           ("rare_term_keyword_side_recall_at_15", ">=", 0.95), ("rare_term_hybrid_recall_at_15", ">=", 0.95)]
TARGETS_1M = [("p95_ms_1m", "<=", 25.0), ("unfiltered_recall_at_15_1m", ">=", 0.95),
              ("filtered_recall_at_15_1m", ">=", 1.0), ("filtered_p95_ms_1m", "<=", 15.0),
              ("rare_term_keyword_side_recall_at_15_1m", ">=", 0.95), ("rare_term_hybrid_recall_at_15_1m", ">=", 0.95)]
SEED_QUERIES = [
    "net interest margin outlook", "loan growth guidance", "capex guidance", "deposit costs", "credit quality trends",
    "share repurchase program", "free cash flow", "operating margin expansion", "pricing power inflation",
    "supply chain constraints", "full year guidance", "expense management", "capital allocation priorities",
    "demand environment", "customer acquisition", "gross margin pressure", "dividend increase", "reserve release",
    "inventory levels", "interest rate sensitivity",
]
_STOP = set("""the and that this with for are was were have has had our your their its from you they will would
about there what which just into also been then than them very more some like going think know really those these
can could should over well other much when where who how all any not but out get got one two see because yes okay
thank thanks question quarter year years little bit lot morning good now right open line turn everyone guys come back
make sure same time first second third half next last ago million billion percent call today let said mentioned
earlier pretty kind things thing want way sort able talk talked look looking forward statements remarks""".split())


def build_queries(base: list, n: int) -> list[str]:
    """The seed phrases, then the corpus's most frequent content bigrams (every third one with a suffix)."""
    counts: Counter[str] = Counter()
    for doc in base:
        for _, _, text in doc:
            words = re.findall(r"\b[a-z]{3,}\b", text.split(": ", 1)[-1])
            counts.update(f"{a} {b}" for a, b in zip(words, words[1:]) if a != b and not {a, b} & _STOP)
    queries = list(SEED_QUERIES)
    for i, (bigram, _) in enumerate(counts.most_common(n)):
        queries.append(bigram + (" " + ("outlook", "guidance", "trends")[i % 9 // 3] if i % 3 == 0 else ""))
    return list(dict.fromkeys(queries))[:n]


def make_filters(tickers: list[str], n: int, seed: int = 3) -> list:
    """Per query: one loaded ticker and three of its quarters (the shape of a per-quarter agent search)."""
    import numpy as np

    from agent.models.corpus import Period, SearchFilters

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        picks = rng.choice(len(QUARTERS), 3, replace=False)
        periods = [Period(fiscal_year=QUARTERS[i][0], fiscal_quarter=QUARTERS[i][1]) for i in sorted(picks)]
        out.append(SearchFilters(tickers=[tickers[int(rng.integers(len(tickers)))]], periods=periods))
    return out


# --- searching -------------------------------------------------------------------------------

def outside(hits: list, f) -> int:
    """Hits outside the filter's companies (when it names any) or its periods."""
    periods = {(p.fiscal_year, p.fiscal_quarter) for p in f.periods}
    return sum(1 for h in hits if (f.tickers and h.ticker not in f.tickers) or (h.fiscal_year, h.fiscal_quarter) not in periods)


def run_pass(ctx, queries: list[str], vecs, filters: list | None, exact: bool | None) -> tuple[list[float], list[list], int]:
    """Warm, one-at-a-time hybrid_search calls: (milliseconds, top-k chunk ids, hits outside their filter)."""
    from agent.retrieval.hybrid import hybrid_search

    times, ids, bad = [], [], 0
    for i, (q, v) in enumerate(zip(queries, vecs)):
        f = filters[i] if filters else None
        started = time.perf_counter()
        hits = hybrid_search(ctx.pool, q, v, f, top_k=TOP_K, exact=exact)
        times.append((time.perf_counter() - started) * 1000)
        ids.append([h.chunk_id for h in hits])
        bad += outside(hits, f) if f else 0
    return times, ids, bad


def recall(got: list[list], truth: list[list]) -> float:
    pairs = list(zip(got, truth))
    return round(sum(len(set(g) & set(t)) / max(1, min(TOP_K, len(t))) for g, t in pairs) / max(1, len(pairs)), 4)


def measure(ctx, queries: list[str], vecs, filters: list, label: str, n_exact: int) -> tuple[dict, list[list]]:
    """Latency of the four paths, recall of the default against exact=True, and run-to-run repeatability."""
    # the first pass of the queries is the cold one (a server just started, or pages never read): reported apart,
    # and it warms the caches for the measured passes
    cold = {prefix: run_pass(ctx, queries, vecs, f, None)[0] for prefix, f in (("", None), ("filtered_", filters))}
    passes = {"": (len(queries), None, None), "filtered_": (len(queries), filters, None),
              "exact_": (n_exact, None, True), "exact_filtered_": (len(queries), filters, True)}
    out: dict = {f"cold_{prefix}{q}_ms_{label}": round(common.percentile(times, int(q[1:])), 2)
                 for prefix, times in cold.items() for q in ("p50", "p95")}
    ids: dict[str, list] = {}
    for prefix, (n, f, exact) in passes.items():
        times, ids[prefix], bad = run_pass(ctx, queries[:n], vecs[:n], f, exact)
        out[f"{prefix}p50_ms_{label}"] = round(common.percentile(times, 50), 2)
        out[f"{prefix}p95_ms_{label}"] = round(common.percentile(times, 95), 2)
        if f:
            out[f"{prefix}hits_outside_filter_{label}"] = bad
    _, again, _ = run_pass(ctx, queries[:REPEAT], vecs[:REPEAT], None, None)
    out |= {f"unfiltered_recall_at_15_{label}": recall(ids[""], ids["exact_"]), f"exact_queries_{label}": n_exact,
            f"filtered_recall_at_15_{label}": recall(ids["filtered_"], ids["exact_filtered_"]),
            f"filtered_short_results_{label}": sum(1 for x in ids["filtered_"] if len(x) < TOP_K),
            f"unfiltered_repeat_overlap_{label}": recall(again, ids[""][:REPEAT]),
            f"indexed_vs_exact_speedup_{label}": round(out[f"exact_p50_ms_{label}"] / out[f"p50_ms_{label}"], 1),
            f"filtered_vs_exact_unfiltered_speedup_{label}": round(out[f"exact_p50_ms_{label}"] / out[f"filtered_p50_ms_{label}"], 1)}
    return out, ids["exact_"]


def breakdown(ctx, queries: list[str], vecs) -> dict:
    """Where an unfiltered search spends its time: the HNSW read of the candidates' ids alone, the semantic statement
    the search runs (that read, then each candidate's similarity and per-term ranks), the keyword side alone (the capped
    match set and the ranking of at most `cap` rows), BM25's candidates, the share of chunks in the keyword match set
    (rows holding every query word, else any), the share of queries whose match set is over the cap, and the share of
    queries that get no keyword-only candidates at all."""
    import functools

    from agent.retrieval import hybrid, keyword_index

    cap = hybrid.KEYWORD_MATCH_CAP
    keyword_sql = hybrid._indexed_query("transcript", "keyword")
    semantic_sql = hybrid._indexed_query("transcript", "semantic_terms")
    hnsw, sem, kw, bm25, share, over, empty = [], [], [], [], [], [], []
    ms_since = lambda started: (time.perf_counter() - started) * 1000
    with ctx.pool.connection() as conn:
        total = conn.execute("SELECT count(*) AS n FROM transcript_chunks").fetchone()["n"]
        for text, vec in zip(queries, vecs):
            started = time.perf_counter()
            p = hybrid._with_bm25(hybrid.search_params(text, vec, 60),
                                  functools.partial(keyword_index.candidates, ctx.pool, "transcript", text, 60))
            bm25.append(ms_since(started))
            with conn.transaction():
                conn.execute(f"SET LOCAL hnsw.ef_search = {hybrid.ef_search_for(ctx.pool, 'transcript')}")
                started = time.perf_counter()
                conn.execute("SELECT id FROM transcript_chunks ORDER BY embedding <=> %s LIMIT 60", (vec,)).fetchall()
                hnsw.append(ms_since(started))
                started = time.perf_counter()
                conn.execute(semantic_sql, p).fetchall()
                sem.append(ms_since(started))
            started = time.perf_counter()
            got = conn.execute(keyword_sql, p).fetchall()
            kw.append(ms_since(started))
            empty.append(0.0 if any(r["id"] is not None for r in got) else 1.0)
            count = "SELECT count(*) AS n FROM transcript_chunks WHERE tsv @@ to_tsquery('english', %s)"
            matches = conn.execute(count, (p["andq"],)).fetchone()["n"] or conn.execute(count, (p["orq"],)).fetchone()["n"]
            share.append(matches / max(1, total))
            over.append(1.0 if matches > cap else 0.0)
            conn.commit()
    p50 = lambda xs: round(common.percentile(xs, 50), 2)
    return {"hnsw_part_p50_ms": p50(hnsw), "semantic_part_p50_ms": p50(sem), "keyword_part_p50_ms": p50(kw),
            "bm25_part_p50_ms": p50(bm25), "keyword_match_share_p50": round(common.percentile(share, 50), 4),
            "keyword_over_cap_share": round(sum(over) / max(1, len(over)), 3),
            "keyword_no_candidates_share": round(sum(empty) / max(1, len(empty)), 3)}


# --- rare exact terms --------------------------------------------------------------------------

RARE_TERMS = 30  # queries per size
RARE_MAX_DOCS = 5  # a rare term is held by at most this many chunks
RARE_SUFFIXES = ("outlook", "guidance", "trends")  # a common word beside it, as an analyst would type it


def rare_terms(ctx, n: int = RARE_TERMS) -> list[tuple[str, set[int]]]:
    """(term, ids of the chunks holding it) for up to `n` words held by 1..RARE_MAX_DOCS chunks, spread over the
    alphabet, each a word whose own stem is itself (so the query finds exactly those chunks)."""
    with ctx.pool.connection() as conn:
        words = [r["word"] for r in conn.execute(
            "SELECT word FROM ts_stat('SELECT tsv FROM transcript_chunks') WHERE ndoc BETWEEN 1 AND %s"
            " AND word ~ '^[a-z][a-z0-9]{3,}$' AND plainto_tsquery('english', word)::text = quote_literal(word)"
            " ORDER BY md5(word)", (RARE_MAX_DOCS,))][: n * 3]
        out = []
        for word in words:
            ids = {r["id"] for r in conn.execute("SELECT id FROM transcript_chunks WHERE tsv @@ to_tsquery('english', %s)", (word,))}
            if ids:
                out.append((word, ids))
            if len(out) == n:
                break
    return out


def rare_term_recall(ctx, embed_query, label: str) -> dict:
    """For queries of one rare word and a common one: is a chunk holding the rare word in the top 15 of hybrid
    search's own keyword side (its keyword-only candidates), of the keyword-only search (mode="keyword", which ranks
    every row holding a query word) and of the default hybrid search?"""
    from agent.retrieval import hybrid
    from agent.retrieval.hybrid import hybrid_search

    terms = rare_terms(ctx)
    found = {"keyword_side": 0, "keyword": 0, "hybrid": 0}
    side_sql = hybrid._indexed_query("transcript", "keyword")
    for i, (word, ids) in enumerate(terms):
        query = f"{word} {RARE_SUFFIXES[i % len(RARE_SUFFIXES)]}"
        vec = embed_query(query)
        with ctx.pool.connection() as conn:
            side = conn.execute(side_sql, hybrid.search_params(query, vec, TOP_K)).fetchall()
        found["keyword_side"] += any(r["id"] in ids for r in side)
        for mode in ("keyword", "hybrid"):
            hits = hybrid_search(ctx.pool, query, vec, None, top_k=TOP_K, mode=mode)
            found[mode] += any(h.chunk_id in ids for h in hits)
    n = max(1, len(terms))
    return {f"rare_term_queries_{label}": len(terms)} | {
        f"rare_term_{name}_recall_at_15_{label}": round(count / n, 3) for name, count in found.items()}


# --- ingestion through the real path ----------------------------------------------------------

def measure_ingest(ctx, files: list[Path]) -> dict:
    from agent.ingest.runner import ingest

    report = ingest(ctx, "transcript", files, fanout=None, quiet=True)
    if report.errors:
        raise RuntimeError(f"ingest failed: {report.errors}")
    return {"ingest_files": len(files), "ingest_chunks": report.chunks_embedded,
            "ingest_chunks_per_s": round(report.chunks_embedded / report.seconds, 1)}


# --- the run ---------------------------------------------------------------------------------

def full_tickers(ctx) -> list[str]:
    with ctx.pool.connection() as conn:
        rows = conn.execute("SELECT ticker FROM documents WHERE source_path LIKE 'synthetic:%%' GROUP BY ticker"
                            " HAVING count(*) = %s ORDER BY ticker", (len(QUARTERS),)).fetchall()
    return [r["ticker"] for r in rows]


SCALES = {"100k": [(10_000, "10k"), (100_000, "100k")],
          "1m": [(10_000, "10k"), (100_000, "100k"), (1_000_000, "1m")]}
REUSED = "search-bench.json"  # in a kept --data-dir: the figures of every size built there, for --reuse


def memory(ctx) -> dict:
    """MB on disk of the chunk table (with its TOAST) and of each index family, and the search's working set: the
    indexes a search reads (HNSW graph, GIN, btrees), which must stay in shared_buffers for warm latencies."""
    with ctx.pool.connection() as conn:
        row = conn.execute("""
            SELECT pg_table_size('transcript_chunks') AS table_b,
                   pg_relation_size('transcript_chunks_hnsw') AS hnsw_b,
                   pg_relation_size('transcript_chunks_tsv') AS gin_b,
                   pg_indexes_size('transcript_chunks') AS all_b""").fetchone()
    mb = lambda b: round(b / (1 << 20), 1)
    return {"table_mb": mb(row["table_b"]), "hnsw_index_mb": mb(row["hnsw_b"]), "gin_index_mb": mb(row["gin_b"]),
            "btree_indexes_mb": mb(row["all_b"] - row["hnsw_b"] - row["gin_b"]), "search_working_set_mb": mb(row["all_b"])}


def bm25_index(ctx, label: str, saved: dict) -> dict:
    """Bring the BM25 keyword index (agent/retrieval/keyword_index.py) up to the table: its build (or catch-up)
    seconds and its size on disk. A reused size keeps the figures of the build that made it."""
    from agent.retrieval import keyword_index

    index = keyword_index.KeywordIndex(keyword_index.index_dir(ctx.settings.data_dir, "transcript"))
    report = index.sync(ctx.pool, "transcript")
    size = sum(f.stat().st_size for f in index.path.rglob("*") if f.is_file())
    if report.added == 0 and f"bm25_build_s_{label}" in saved:
        return {f"bm25_build_s_{label}": saved[f"bm25_build_s_{label}"], f"bm25_index_mb_{label}": round(size / (1 << 20), 1)}
    return {f"bm25_build_s_{label}": report.seconds, f"bm25_added_{label}": report.added,
            f"bm25_index_mb_{label}": round(size / (1 << 20), 1)}


def pg_memory_settings(ctx) -> dict:
    with ctx.pool.connection() as conn:
        return {f"pg_{k}": conn.execute(f"SHOW {k}").fetchone()[k] for k in ("shared_buffers", "maintenance_work_mem")}


def reused_sizes(ctx, args, gen) -> tuple[int, dict]:
    """With --reuse: the chunks already in the kept data dir (the generator is moved past them) and the figures of
    the run that built them."""
    saved = Path(args.data_dir or "") / REUSED
    if not (args.reuse and saved.is_file()):
        return 0, {}
    with ctx.pool.connection() as conn:
        have = conn.execute("SELECT count(*) AS n FROM transcript_chunks c JOIN documents d ON d.id = c.document_id"
                            " WHERE d.source_path LIKE 'synthetic:%%'").fetchone()["n"]
    common.take(gen, have) if have else None
    return have, json.loads(saved.read_text())


def run(ctx, args: argparse.Namespace, say) -> dict:
    sizes = [(10_000, "10k")] if args.quick else SCALES[args.scale]
    n_exact = {"10k": args.queries, "100k": args.exact_queries, "1m": args.exact_queries_1m}
    base = common.real_chunks(args.transcripts)
    queries = build_queries(base, min(30, args.queries) if args.quick else args.queries)
    geometry: dict = {}
    embedder: common.SentenceMeanEmbedder | common.FastHashEmbedder
    if args.embedder == "minilm":
        embedder = common.SentenceMeanEmbedder(base, say)
        embed_query = embedder.embed_query
        say("comparing sentence-mean vectors with the model's own chunk vectors")
        geometry = embedder.agreement([t for doc in base for _, _, t in doc])
    else:
        embedder, embed_query = common.FastHashEmbedder(), ctx.embed_query
    vecs = [embed_query(q) for q in queries]
    gen = common.synthetic_docs(base, [f"X{i:03d}" for i in range(10_000)], QUARTERS)
    index_sql = common.hnsw_definition(ctx)
    have, saved = reused_sizes(ctx, args, gen)
    out: dict = {"embedder": args.embedder, "queries": len(queries), "top_k": TOP_K, "real_transcript_docs": len(base),
                 **common.machine(), **geometry, **pg_memory_settings(ctx),
                 "load_avg_1m_start": round(os.getloadavg()[0], 2), "reused_sizes": []}
    for i, (target, label) in enumerate(sizes):
        if have >= target and f"chunks_{label}" in saved:
            next_size = sizes[i + 1][0] if i + 1 < len(sizes) else None
            if next_size is not None and have >= next_size:  # a smaller corpus than the table holds: its saved figures
                out |= {k: v for k, v in saved.items() if k.endswith(f"_{label}")}
                out["reused_sizes"].append(label)
                continue
            out |= {f"{k}_{label}": saved[f"{k}_{label}"] for k in BUILD_FIGURES if f"{k}_{label}" in saved}
            out["reused_sizes"].append(label)
        else:
            say(f"loading {target} chunks")
            g = common.grow(ctx, gen, embedder, have, target, index_sql)
            have = g["chunks"]
            out |= {f"chunks_{label}": have, f"bulk_load_chunks_per_s_{label}": round(g["loaded"] / g["load_s"], 1),
                    f"hnsw_build_s_{label}": round(g["hnsw_build_s"], 1)}
            out |= {f"{k}_{label}": v for k, v in memory(ctx).items()}
        out |= bm25_index(ctx, label, saved)
        from agent.retrieval import hybrid

        hybrid._sizes.clear()  # the table just grew: read its size again now, not a minute from now
        out[f"ef_search_{label}"] = hybrid.ef_search_for(ctx.pool, "transcript")
        say(f"searching {have} chunks")
        n = min(len(queries), n_exact[label])
        figures, _ = measure(ctx, queries, vecs, make_filters(full_tickers(ctx), len(queries)), label, n)
        out |= figures | {f"{k}_{label}": v for k, v in breakdown(ctx, queries[:REPEAT], vecs[:REPEAT]).items()}
        say(f"rare-term queries at {label}")
        out |= rare_term_recall(ctx, embed_query, label)
        if f"indexed_insert_chunks_per_s_{label}" not in out:
            added, rate = common.indexed_insert(ctx, gen, embedder)
            have += added
            out[f"indexed_insert_chunks_per_s_{label}"] = round(rate, 1)
        if args.data_dir:
            (Path(args.data_dir) / REUSED).write_text(json.dumps(saved | out))
    say("ingesting real transcripts")
    out |= measure_ingest(ctx, sorted(args.transcripts.glob("*.json"))[:args.ingest_files])
    out["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    return headline(out, [label for _, label in sizes])


BUILD_FIGURES = ["chunks", "bulk_load_chunks_per_s", "hnsw_build_s", "indexed_insert_chunks_per_s", "table_mb",
                 "hnsw_index_mb", "gin_index_mb", "btree_indexes_mb", "search_working_set_mb"]


def headline(out: dict, labels: list[str]) -> dict:
    """The headline figures: worst recall over the sizes, the bulk load rate of the largest load."""
    for key in ("filtered_recall_at_15", "unfiltered_recall_at_15", "rare_term_keyword_side_recall_at_15",
                "rare_term_hybrid_recall_at_15"):
        out[key] = min(out[f"{key}_{label}"] for label in labels)
    for key in ("p50_ms_100k", "p95_ms_100k"):
        out.setdefault(key, None)
    out["bulk_load_chunks_per_s"] = out[f"bulk_load_chunks_per_s_{labels[-1]}"]
    out["sizes"] = labels
    return out


PATHS = [("unfiltered, default (HNSW)", ""), ("unfiltered, exact=True", "exact_"),
         ("filtered, default (always exact)", "filtered_"), ("filtered, exact=True", "exact_filtered_")]
PER_SIZE = ["chunks", "cold_p50_ms", "cold_p95_ms", "cold_filtered_p50_ms", "cold_filtered_p95_ms", "ef_search",
            "hnsw_part_p50_ms", "semantic_part_p50_ms", "keyword_part_p50_ms", "bm25_part_p50_ms", "keyword_match_share_p50",
            "keyword_over_cap_share", "keyword_no_candidates_share",
            "unfiltered_recall_at_15", "exact_queries", "unfiltered_repeat_overlap", "filtered_recall_at_15",
            "filtered_short_results", "filtered_hits_outside_filter", "indexed_vs_exact_speedup",
            "filtered_vs_exact_unfiltered_speedup", "bulk_load_chunks_per_s", "hnsw_build_s", "indexed_insert_chunks_per_s",
            "rare_term_queries", "rare_term_keyword_side_recall_at_15", "rare_term_keyword_recall_at_15",
            "rare_term_hybrid_recall_at_15", "table_mb", "hnsw_index_mb", "gin_index_mb", "btree_indexes_mb",
            "search_working_set_mb", "bm25_build_s", "bm25_index_mb"]
# the figures per size the docs keep (the console and --json have every one of PER_SIZE)
DOC_PER_SIZE = ["chunks", "ef_search", "unfiltered_recall_at_15", "filtered_recall_at_15", "rare_term_hybrid_recall_at_15",
                "semantic_part_p50_ms", "keyword_part_p50_ms", "bm25_part_p50_ms", "hnsw_build_s",
                "indexed_insert_chunks_per_s", "search_working_set_mb"]
ONCE = ["embedder", "minilm_agreement_cosine_mean", "minilm_agreement_cosine_p5", "ingest_chunks_per_s", "ingest_chunks",
        "ingest_files", "queries", "top_k", "real_transcript_docs", "cpu_count",
        "load_avg_1m_start", "load_avg_1m_end", "pgvector", "pg_shared_buffers", "pg_maintenance_work_mem",
        "reused_sizes", "seconds"]


Table = tuple[str, tuple, list[tuple]]  # (title, header, rows)


def latency_table(result: dict) -> Table:
    labels = result["sizes"]
    rows = [(name, *(result.get(f"{prefix}{k}_ms_{label}") for label in labels for k in ("p50", "p95")))
            for name, prefix in PATHS]
    return "latency of hybrid_search, ms", ("search", *(f"{k} {label}" for label in labels for k in ("p50", "p95"))), rows


def tables(result: dict) -> list[Table]:
    """(title, header, rows) for the console."""
    labels = result["sizes"]
    return [latency_table(result),
            ("per corpus size", ("figure", *labels), [(k, *(result.get(f"{k}_{label}") for label in labels)) for k in PER_SIZE]),
            ("run", ("figure", "value"), [(k, result.get(k)) for k in ONCE])]


def markdown(result: dict, command: str) -> str:
    labels = result["sizes"]
    _, _, title, vectors = PROFILES[result["embedder"]]
    sizes = [label.upper() if label == "1m" else label for label in labels]
    title += f", at {', '.join(sizes[:-1])} and {sizes[-1]} chunks" if len(sizes) > 1 else f", at {sizes[0]} chunks"
    size_rows = [(k, *(result.get(f"{k}_{label}") for label in labels)) for k in DOC_PER_SIZE]
    per_size = common.markdown_table([r for r in size_rows if any(v is not None for v in r[1:])], ("figure", *labels))
    _, header, rows = latency_table(result)
    plot = f"\n\n![search cost against corpus size]({GROWTH_PLOT[result['embedder']].name})" if "1m" in labels else ""
    reused = result.get("reused_sizes") or []
    if reused:
        plot += (f"\n\nReused data dir (`--reuse`): {', '.join(reused)} were loaded and built by an earlier run, whose "
                 "build figures (and all figures of the smaller sizes) these are.")
    geometry = (f" MiniLM agreement cosine {result['minilm_agreement_cosine_mean']} (p5 "
                f"{result['minilm_agreement_cosine_p5']})." if result.get("minilm_agreement_cosine_mean") else "")
    buffers = f" (shared_buffers {result['pg_shared_buffers']})" if result.get("pg_shared_buffers") else ""
    return (f"## {title}\n\nMeasured {common.today()} on {result['cpu_count']} CPUs ({result['platform']}, load "
            f"average {result['load_avg_1m_start']}), {result['queries']} queries, embedded Postgres {result.get('postgres', '16')} + pgvector "
            f"{result['pgvector']}{buffers}, in {result['seconds']} s:\n\n"
            f"```\n{command}\n```\n\nTargets: {common.targets_line(result['targets']) or 'none (a stress case)'}. Real "
            f"ingest path (hash embedder, {result['ingest_files']} transcript files): {result['ingest_chunks_per_s']} "
            f"chunks/s.{geometry}\n\n{common.markdown_table(rows, header)}\n\n{per_size}{plot}"
            f"\n\n{'Method as in the 100k section.' if '1m' in labels and vectors == MINILM else vectors}")


MINILM = """Method: synthetic chunks (real calls, a quarter of the sentences swapped, every number nudged) over synthetic
tickers and 8 quarters, bulk-loaded with the HNSW index dropped, then rebuilt (`hnsw_build_s`). Warm latencies, one
`hybrid_search` at a time; filtered = one ticker and 3 of its quarters. Recall@15 = overlap with the `exact=True` top
15; `rare_term_*` = a word held by at most 5 chunks beside a common one; `*_part` = one statement of the search alone.
Vectors: a chunk is the length-weighted mean of its sentences' all-MiniLM-L6-v2 vectors (cached in
~/.cache/finagent/bench); on the 5,145 real chunks these means gave HNSW at most 0.017 more recall@15 than the
model's own chunk vectors (2026-11-23). Queries are embedded by the model."""

HASH = """Vectors: the hash test embedder, the worst case for HNSW (short queries far from every chunk, many near-ties):
no target is set on it; a change that hurts the index shows here first. Method as in the MiniLM section."""


# per --embedder: docs section, targets, title, what the vectors are
PROFILES = {"minilm": ("search", TARGETS, "Search (all-MiniLM-L6-v2 geometry)", MINILM),
            "hash": ("search-hash", [], "Search, hash-embedder stress case", HASH)}


GROWTH_PLOT = {"minilm": common.DOCS.parent / "search-growth.png", "hash": common.DOCS.parent / "search-growth-hash.png"}


def growth_plot(result: dict) -> bytes:
    """p50 / p95 of the default unfiltered and filtered searches, and the HNSW build time, against corpus size."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    labels = result["sizes"]
    chunks = [result[f"chunks_{label}"] for label in labels]
    fig = Figure(figsize=(10, 4))
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    for prefix, name in (("", "unfiltered"), ("filtered_", "filtered")):
        for q, style in (("p50", "o-"), ("p95", "s--")):
            left.plot(chunks, [result[f"{prefix}{q}_ms_{label}"] for label in labels], style, label=f"{name} {q}")
    left.set(xscale="log", xlabel="chunks", ylabel="ms", title="hybrid_search latency (warm)")
    left.legend()
    right.plot(chunks, [result[f"hnsw_build_s_{label}"] for label in labels], "o-", label="HNSW build")
    right.plot(chunks, [result[f"search_working_set_mb_{label}"] / 1024 for label in labels], "s--",
               label="indexes, GB")
    right.set(xscale="log", yscale="log", xlabel="chunks", title="build seconds and index size")
    right.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def server_versions(ctx) -> dict[str, str]:
    """The Postgres server's major version and pgvector's, for the report's header."""
    with ctx.pool.connection() as conn:
        pgvector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()["extversion"]
        major = conn.execute("SHOW server_version").fetchone()["server_version"].split(".")[0]
    return {"pgvector": pgvector, "postgres": major}


# --- filtered searches over large scopes (--scopes) ------------------------------------------------

SYNTHETIC = "synthetic://"


def scopes() -> list[tuple[str, SearchFilters]]:
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
    from psycopg import sql

    from agent.retrieval import filtered_hnsw
    from agent.retrieval.hybrid import filter_clause

    where, params = filter_clause("transcript", filters)
    indexed = filtered_hnsw.use_index(ctx.pool, "transcript_chunks", where, params)
    paths = [("default", None, False), ("exact", True, False)] + ([("index", None, True)] if iterative else [])
    each = [filters] * len(queries)
    for _, exact, forced in paths:  # a warm-up pass of each path: the measured passes read cached pages on all
        with every_scope_large(forced):
            run_pass(ctx, queries, vecs, each, exact)
    with ctx.pool.connection() as conn:
        rows = conn.execute(sql.SQL("SELECT count(*) AS n FROM transcript_chunks {w}").format(w=where), params).fetchone()["n"]
    row: dict = {"scope": name, "rows": rows, "default_path": "HNSW, iterative" if indexed else "exact"}
    ids = {}
    for label, exact, forced in paths:
        with every_scope_large(forced):
            times, ids[label], outside_hits = run_pass(ctx, queries, vecs, each, exact)
        row |= {f"{label}_p50_ms": round(common.percentile(times, 50), 2),
                f"{label}_p95_ms": round(common.percentile(times, 95), 2), f"{label}_hits_outside_filter": outside_hits,
                f"{label}_short_results": sum(1 for x in ids[label] if len(x) < TOP_K)}
    return row | {f"{label}_recall_at_15": recall(ids[label], ids["exact"]) for label in ids}


def run_scopes(ctx, args, say) -> dict:
    from agent.retrieval import filtered_hnsw

    base = common.real_chunks(args.transcripts)
    queries = build_queries(base, args.queries or 40)
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
    version = filtered_hnsw.pgvector_version(ctx.pool)
    out |= {"chunks": have, "server_version": server, "shared_buffers": buffers, "pgvector": ".".join(map(str, version)),
            "min_scope_rows": filtered_hnsw.MIN_SCOPE_ROWS, "iterative_settings": filtered_hnsw.SETTINGS,
            "ef_search": filtered_hnsw.EF_SEARCH, "scopes": []}
    for name, filters in scopes():
        say(f"searching {name}")
        out["scopes"].append(measure_scope(ctx, queries, vecs, name, filters, filtered_hnsw.has_iterative_scans(version)))
    out["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    return out


SCOPE_HEADER = ("scope", "rows", "default path", "path", "p50 (ms)", "p95 (ms)", "recall@15 vs exact", "short results",
                "hits outside the filter")


def scope_rows(result: dict) -> list[tuple]:
    names = {"default": "default", "exact": "exact=True", "index": "iterative HNSW, forced"}
    return [(s["scope"], s["rows"], s["default_path"], names[label], s[f"{label}_p50_ms"], s[f"{label}_p95_ms"],
             s[f"{label}_recall_at_15"], s[f"{label}_short_results"], s[f"{label}_hits_outside_filter"])
            for s in result["scopes"] for label in names if f"{label}_p50_ms" in s]


def scope_markdown(result: dict, command: str) -> str:
    settings = ", ".join(f"{k} = {v}" for k, v in result["iterative_settings"].items())
    return "\n".join([
        f"## Filtered searches over large scopes at {result['chunks_requested']:,} chunks: exact read vs pgvector's"
        " iterative HNSW scan",
        "",
        f"Measured {common.today()}: `{command}`, {result['chunks']} synthetic chunks (MiniLM geometry),"
        f" {result['queries']} queries a path, PostgreSQL {result['server_version']}, pgvector {result['pgvector']},"
        f" shared_buffers {result['shared_buffers']}. A scope of more than {result['min_scope_rows']} rows takes the"
        f" iterative scan ({settings}, ef_search {result.get('ef_search')}) where pgvector >= 0.8.",
        "",
        common.markdown_table(scope_rows(result), SCOPE_HEADER),
    ])


def scope_tables(result: dict) -> list[Table]:
    return [(f"{result['chunks']} chunks, pgvector {result['pgvector']}", SCOPE_HEADER, scope_rows(result))]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = common.parser(__doc__, strict=True)
    p.add_argument("--quick", action="store_true", help="10k chunks and 30 queries only (a smoke run: writes no docs)")
    p.add_argument("--queries", type=int, help="queries (default 100; with --scopes 40)")
    p.add_argument("--exact-queries", type=int, default=100,
                   help="queries given the exact unfiltered reference at 100k (about 1-2 s each); all of them at 10k")
    p.add_argument("--ingest-files", type=int, default=4)
    p.add_argument("--scale", choices=tuple(SCALES), default="100k",
                   help="the largest corpus: 100k chunks (default, ~7 min) or 1m (10k, 100k and 1M: a longer run)")
    p.add_argument("--exact-queries-1m", type=int, default=40, help="queries given the exact reference at 1M (~4 s each)")
    p.add_argument("--reuse", action="store_true",
                   help="with --data-dir: keep the chunks a previous run loaded there and measure again")
    p.add_argument("--transcripts", type=Path, default=TRANSCRIPTS)
    p.add_argument("--embedder", choices=tuple(PROFILES), default="minilm",
                   help="chunk and query vectors: all-MiniLM-L6-v2 geometry (default; the product's local embedder) "
                        "or the hash test embedder (a stress case for HNSW)")
    p.add_argument("--scopes", action="store_true",
                   help="filtered searches over a period of every company instead: exact read vs iterative HNSW scan")
    p.add_argument("--chunks", type=int, default=100_000, help="with --scopes: the corpus size")
    p.add_argument("--database-url", help="with --scopes: an empty database on a server with pgvector >= 0.8 "
                                          "(default: the embedded server)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    say = lambda msg: print(f"[bench:search] {msg}", file=sys.stderr, flush=True)
    clock = common.Clock()
    env = {"embedding_provider": "hash", "llm_provider": "extractive"}
    if args.scopes:
        if args.database_url:
            env["database_url"] = args.database_url
        with common.private_stack(args.data_dir, **env) as ctx:
            result = run_scopes(ctx, args, say)
        result |= {"seconds": clock.seconds(), "targets": []}
        return common.finish("search.py", argv, args, f"filtered-scopes-{args.chunks}", result, scope_markdown, scope_tables)
    args.queries = args.queries or 100
    args.no_write = args.no_write or args.quick
    with common.private_stack(args.data_dir, **env) as ctx:
        result = run(ctx, args, say) | server_versions(ctx)
    result["seconds"] = clock.seconds()
    section, targets, _, _ = PROFILES[args.embedder]
    if "1m" in result["sizes"]:  # the longer run keeps its own section beside the default's
        section = f"{section}-1m"
        targets = targets + TARGETS_1M if args.embedder == "minilm" else targets
    result["targets"] = common.check_targets(result, targets)
    if not args.no_write and "1m" in result["sizes"]:
        GROWTH_PLOT[args.embedder].write_bytes(growth_plot(result))
    return common.finish("search.py", argv, args, section, result, markdown, tables)


if __name__ == "__main__":
    sys.exit(main())
