"""The database access shapes on the path between two stages, each against the shape it replaced, interleaved in one
process on a private embedded Postgres: a pooled block with its implicit BEGIN and COMMIT (`pool.connection()`)
against `agent.db.reading` (no transaction) and `agent.db.one_transaction` (pipeline mode).

Each shape runs idle and again beside one busy Python thread, as in a worker whose other threads are parsing: every
round trip hands the GIL away and waits to get it back, so the count of round trips weighs more there.

    .venv/bin/python bench/round_trips.py [--rounds 20] [--only REGEX] [--json] [--no-write]
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import fresh_env, machine, write_section

SAMPLE = Path(__file__).resolve().parents[1] / "agent" / "sample_corpus" / "transcripts"
PER_ROUND = 20


def _shapes(ctx) -> dict[str, dict[str, Callable[[], object]]]:
    """shape -> {variant: one call}; the first variant of each is the shape as it was."""
    from psycopg.types.json import Jsonb

    from agent.db import one_transaction, reading
    from agent.models.corpus import Period, SearchFilters
    from agent.models.job import JobRequest, JobState
    from agent.models.research import Evidence
    from agent.persistence import jobstore
    from agent.retrieval import hybrid

    pool = ctx.pool
    job_id, _ = jobstore.create_job(pool, JobState(request=JobRequest(question="How did revenue change?")))
    state_sql, evidence_sql = "SELECT state FROM research_jobs WHERE id = %s", "SELECT payload::text FROM job_evidence WHERE job_id = %s"
    written = [0]

    def pooled(p):  # the block as it was: BEGIN before the first statement, COMMIT at the end
        return p.connection()

    @contextmanager
    def pipelined_read(p):
        with reading(p) as conn, conn.pipeline():
            yield conn

    def one_read(cm):
        def run():
            with cm(pool) as conn:
                return conn.execute(state_sql, (job_id,)).fetchone()
        return run

    def two_reads(cm):
        def run():
            with cm(pool) as conn:
                a, b = conn.execute(state_sql, (job_id,)), conn.execute(evidence_sql, (job_id,))
                return a.fetchone(), b.fetchall()
        return run

    def ledger_write(cm):  # the ledger row and a call's output, without fsync, as record_call writes them
        def run():
            written[0] += 1
            with cm(pool) as conn:
                conn.execute("SET LOCAL synchronous_commit = off")
                for part in ("ledger", "output"):
                    conn.execute("INSERT INTO job_step_outputs (job_id, step_key, payload) VALUES (%s,%s,%s)",
                                 (job_id, f"9:{part}:{written[0]}", Jsonb({"n": written[0]})))
        return run

    with pool.connection() as conn:
        rows = conn.execute("SELECT DISTINCT ticker, fiscal_year, fiscal_quarter FROM transcript_chunks").fetchall()
    scope = SearchFilters(tickers=[rows[0]["ticker"]],
                          periods=[Period(fiscal_year=rows[0]["fiscal_year"], fiscal_quarter=rows[0]["fiscal_quarter"])])
    query = "revenue growth and operating margin"
    vec = ctx.embedder.embed([query])[0]
    current_fetch = hybrid._fetch

    def transaction_fetch(p, statement, params, ef_search=None, settings=None):  # _fetch as it was (a filtered search sets nothing)
        with p.connection() as conn, conn.transaction():
            return conn.execute(statement, params).fetchall()

    hits = hybrid.hybrid_search(pool, query, vec, filters=scope)
    upsert = jobstore._INSERT_EVIDENCE_SQL
    one_row_sql = ("INSERT INTO job_evidence (job_id, citation_key, iteration, source_type, score, payload)"
                   " VALUES (%s,%s,%s,%s,%s,%s)" + upsert[upsert.index(" ON CONFLICT"):])

    def executemany_evidence(conn, job, rows):  # insert_evidence as it was: a statement per row (executemany)
        with conn.cursor() as cur:
            params = [(job, h.citation_key, h.iteration, h.source_type, h.score, Jsonb(h.model_dump(mode="json")))
                      for h in rows]
            cur.executemany(one_row_sql, params, returning=True)
            added = 0
            while True:
                added += bool((cur.fetchone() or {}).get("inserted"))
                if not cur.nextset():
                    return added

    def evidence_write(cm, insert):  # a search's passages into a job's evidence, without fsync, as add_evidence writes them
        def run():
            written[0] += 1  # keys of their own each call: every row is new, as a search's are
            rows = [Evidence(**h.model_dump() | {"citation_key": f"{h.citation_key}#{written[0]}"}) for h in hits]
            with cm(pool) as conn:
                jobstore.async_commit(conn)
                return insert(conn, job_id, rows)
        return run

    def search(fetch):
        def run():
            hybrid._fetch = fetch
            try:
                return hybrid.hybrid_search(pool, query, vec, filters=scope)
            finally:
                hybrid._fetch = current_fetch
        return run

    return {
        "one read": {"transaction": one_read(pooled), "reading": one_read(reading), "reading + pipeline": one_read(pipelined_read)},
        "two reads": {"transaction": two_reads(pooled), "reading": two_reads(reading),
                      "reading + pipeline": two_reads(pipelined_read)},
        "ledger write": {"transaction": ledger_write(pooled), "one_transaction": ledger_write(one_transaction)},
        "evidence write": {"transaction, executemany": evidence_write(pooled, executemany_evidence),
                           "transaction, one statement": evidence_write(pooled, jobstore.insert_evidence),
                           "one_transaction, one statement": evidence_write(one_transaction, jobstore.insert_evidence)},
        "filtered search": {"transaction": search(transaction_fetch), "reading": search(current_fetch)},
    }


def _spin(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(1000))


def measure(ctx, rounds: int, only: str = "") -> dict:
    shapes = {name: variants for name, variants in _shapes(ctx).items() if re.search(only, name)}
    out: dict = {}
    for load in ("idle", "one busy thread"):
        stop = threading.Event()
        if load != "idle":
            threading.Thread(target=_spin, args=(stop,), daemon=True).start()
        try:
            for shape, variants in shapes.items():
                times: dict[str, list[float]] = {v: [] for v in variants}
                for r in range(rounds):
                    order = list(variants.items())
                    for name, run in order if r % 2 else order[::-1]:
                        t = time.perf_counter()
                        for _ in range(PER_ROUND):
                            run()
                        times[name].append((time.perf_counter() - t) * 1000 / PER_ROUND)
                out.setdefault(shape, {})[load] = {v: round(statistics.median(ts), 3) for v, ts in times.items()}
        finally:
            stop.set()
    return out


def markdown(result: dict, command: str) -> str:
    lines = ["## Round trips between stages", "", f"`{command}`", "",
             "Median ms per call over interleaved rounds (each round runs every variant of a shape "
             f"{PER_ROUND} times, alternating their order). The first variant of each shape is the code as it was.", "",
             "| shape | load | variants (ms) |", "|---|---|---|"]
    for shape, loads in result["shapes"].items():
        for load, variants in loads.items():
            lines.append(f"| {shape} | {load} | " + ", ".join(f"{k} {v}" for k, v in variants.items()) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--only", default="", metavar="REGEX", help="only the shapes whose name matches (implies --no-write)")
    args = parser.parse_args()
    fresh_env(None, embedding_provider="hash", llm_provider="extractive")
    from agent.ingest.runner import ingest
    from agent.settings import get_settings
    from ops.local.bootstrap import bootstrap
    from ops.local.stack import stop_embedded

    settings = get_settings()
    ctx = bootstrap(settings)
    try:
        ingest(ctx, "transcript", sorted(SAMPLE.glob("*.txt")), fanout=None, quiet=True)
        result = {"shapes": measure(ctx, args.rounds, args.only), "machine": machine()}
    finally:
        stop_embedded(settings)
    if not (args.no_write or args.only):
        write_section("round-trips", markdown(result, ".venv/bin/python bench/round_trips.py" +
                                              (f" --rounds {args.rounds}" if args.rounds != 20 else "")))
    if args.json:
        print(json.dumps(result))
    else:
        for shape, loads in result["shapes"].items():
            for load, variants in loads.items():
                print(f"{shape:16s} {load:16s} " + "  ".join(f"{k}: {v} ms" for k, v in variants.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
