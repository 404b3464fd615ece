"""How far bench/search.py's MiniLM *geometry* can be trusted: HNSW recall on the model's real chunk vectors
against recall on the bench's sentence-mean vectors of the same chunks, same index definition, same queries.

    .venv/bin/python bench/geometry_check.py [--json] [--no-write] [--data-dir DIR]

Ingests every real transcript through the product's own path with the local all-MiniLM-L6-v2 embedder (about
5,000 chunks, 6-10 minutes on 2 cores; that is also the real ingest rate), copies the same chunks into a second table
with the sentence-mean vectors, indexes both with the migration's HNSW definition and compares recall@15 of the HNSW
top 15 against the exact top 15 at small ef_search values, where the index is not yet exact on 5k chunks.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, search

EF_VALUES = (15, 20, 40, 80)


def recall_by_ef(conn, table: str, vecs: list) -> dict[int, float]:
    truth = [[r[0] for r in conn.execute(f"SELECT id FROM {table} ORDER BY (embedding <=> %s) + 0, id LIMIT 15", (v,))]
             for v in vecs]
    out = {}
    for ef in EF_VALUES:
        conn.execute(f"SET hnsw.ef_search = {ef}")
        got = [[r[0] for r in conn.execute(f"SELECT id FROM {table} ORDER BY embedding <=> %s LIMIT 15", (v,))]
               for v in vecs]
        out[ef] = search.recall(got, truth)
    return out


def run(ctx, args: argparse.Namespace, say) -> dict:
    import psycopg
    from pgvector.psycopg import register_vector

    from agent.ingest.runner import ingest

    files = sorted(args.transcripts.glob("*.json"))
    say(f"ingesting {len(files)} real transcripts with all-MiniLM-L6-v2")
    report = ingest(ctx, "transcript", files, fanout=None, quiet=True)
    if report.errors:
        raise RuntimeError(f"ingest failed: {report.errors}")
    base = common.real_chunks(args.transcripts)
    embedder = common.SentenceMeanEmbedder(base, say)
    vecs = [embedder.embed_query(q) for q in search.build_queries(base, args.queries)]
    index_sql = common.hnsw_definition(ctx).replace("transcript_chunks_hnsw", "geometry_approx_hnsw")
    with psycopg.connect(ctx.database_url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("DROP TABLE IF EXISTS geometry_approx")
        conn.execute("CREATE TABLE geometry_approx (id bigint PRIMARY KEY, embedding vector(384))")
        rows = conn.execute("SELECT id, text FROM transcript_chunks").fetchall()
        with conn.cursor().copy("COPY geometry_approx (id, embedding) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "vector"])
            for chunk_id, text in rows:
                copy.write_row((chunk_id, embedder.embed_one(text)))
        conn.execute(index_sql.replace("ON public.transcript_chunks", "ON geometry_approx"))
        say("comparing recall")
        real, approx = recall_by_ef(conn, "transcript_chunks", vecs), recall_by_ef(conn, "geometry_approx", vecs)
    return {"chunks": len(rows), "queries": len(vecs), "ingest_minilm_chunks_per_s":
            round(report.chunks_embedded / report.seconds, 1), "ingest_seconds": round(report.seconds, 1),
            "recall_real_vectors": real, "recall_sentence_mean": approx,
            "optimism_max": round(max(approx[ef] - real[ef] for ef in EF_VALUES), 4), **common.machine()}


def markdown(result: dict, command: str) -> str:
    rows = [(ef, result["recall_real_vectors"][ef], result["recall_sentence_mean"][ef],
             round(result["recall_sentence_mean"][ef] - result["recall_real_vectors"][ef], 4)) for ef in EF_VALUES]
    table = common.markdown_table(rows, ("ef_search", "recall@15, real MiniLM chunk vectors",
                                         "recall@15, sentence-mean vectors", "difference"))
    return (f"## Search geometry check: real MiniLM vectors vs the bench's sentence means\n\n"
            f"Measured {common.today()} on {result['cpu_count']} CPUs, {result['chunks']} real transcript chunks, "
            f"{result['queries']} queries, in {result['seconds']} s:\n\n```\n{command}\n```\n\n{table}\n\n"
            f"The chunks were ingested through the product's path with the local model: "
            f"{result['ingest_minilm_chunks_per_s']} chunks/s ({result['ingest_seconds']} s). Both tables carry the "
            f"migration's HNSW index; recall is of the HNSW top 15 against the exact top 15 of the same table. "
            f"A positive difference is how much the sentence-mean vectors flatter HNSW at equal ef_search; the "
            f"MiniLM-geometry recall in the search section should be read as that much optimistic.")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--data-dir")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--transcripts", type=Path, default=search.TRANSCRIPTS)
    args = p.parse_args(argv)
    say = lambda msg: print(f"[bench:geometry] {msg}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    with common.private_stack(args.data_dir, embedding_provider="local", llm_provider="extractive") as ctx:
        result = run(ctx, args, say)
    result["seconds"] = round(time.perf_counter() - started, 1)
    command = ".venv/bin/python bench/geometry_check.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if not args.no_write:
        common.write_section("search-geometry", markdown(result, command.strip()))
    print(json.dumps(result) if args.json else markdown(result, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
