"""Write a prepared document and its embeddings in one transaction: all of it or none of it."""
from __future__ import annotations

from typing import Literal

import numpy as np

from agent.ingest.documents import PreparedDocument
from agent.models.corpus import FilingDoc, TenKDoc, TranscriptDoc
from agent.retrieval.companies import ensure_company

Outcome = Literal["added", "replaced", "unchanged"]


def existing_hash(conn, prepared: PreparedDocument) -> str | None:
    row = conn.execute(
        "SELECT content_hash FROM documents WHERE kind=%s AND ticker=%s AND fiscal_year=%s AND fiscal_quarter=%s AND variant=%s",
        (prepared.kind, prepared.doc.ticker, prepared.doc.fiscal_year, prepared.fiscal_quarter, prepared.variant),
    ).fetchone()
    return row["content_hash"] if row else None


def stored_hashes(conn, paths: list[str], kinds: list[str] | None = None) -> dict[tuple[str, str], int]:
    """(source path, content hash) -> chunks, of every stored document read from one of `paths` (of `kinds`, when
    given), in one query: a file whose path and hash are stored here was ingested as it is now."""
    rows = conn.execute(
        "SELECT d.source_path, d.content_hash,"
        " (SELECT count(*) FROM transcript_chunks c WHERE c.document_id = d.id)"
        " + (SELECT count(*) FROM tenk_chunks c WHERE c.document_id = d.id) AS chunks"
        " FROM documents d WHERE d.source_path = ANY(%s) AND (%s::text[] IS NULL OR d.kind = ANY(%s::text[]))",
        (paths, kinds, kinds),
    ).fetchall()
    return {(r["source_path"], r["content_hash"]): r["chunks"] for r in rows}


def write_document(pool, prepared: PreparedDocument, embeddings: np.ndarray) -> Outcome:
    doc = prepared.doc
    assert len(embeddings) == len(prepared.chunks)
    with pool.connection() as conn, conn.transaction():
        # serialise writers of the same document so two concurrent ingests cannot both insert
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                     (f"{prepared.kind}:{doc.ticker}:{doc.fiscal_year}:{prepared.fiscal_quarter}:{prepared.variant}",))
        previous = existing_hash(conn, prepared)
        if previous == prepared.content_hash:
            return "unchanged"
        ensure_company(conn, doc.ticker, doc.company_name)
        if previous:
            conn.execute(
                "DELETE FROM documents WHERE kind=%s AND ticker=%s AND fiscal_year=%s AND fiscal_quarter=%s AND variant=%s",
                (prepared.kind, doc.ticker, doc.fiscal_year, prepared.fiscal_quarter, prepared.variant),
            )
        dated = doc.filed_on if isinstance(doc, FilingDoc) else getattr(doc, "call_date", None)
        doc_id = conn.execute(
            "INSERT INTO documents (kind, ticker, fiscal_year, fiscal_quarter, variant, call_date, source_path, content_hash, title)"
            " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
            (prepared.kind, doc.ticker, doc.fiscal_year, prepared.fiscal_quarter, prepared.variant, dated,
             prepared.path, prepared.content_hash, getattr(doc, "title", None) or doc.company_name),
        ).fetchone()["id"]
        with conn.cursor() as cur:
            if prepared.kind == "transcript":
                assert isinstance(doc, TranscriptDoc)  # prepare_transcript pairs the kind with its doc type
                cur.executemany(
                    "INSERT INTO transcript_chunks (document_id, ticker, fiscal_year, fiscal_quarter, call_date, speaker,"
                    " section, chunk_index, text, embedding) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                    [(doc_id, doc.ticker, doc.fiscal_year, doc.fiscal_quarter, doc.call_date, c.speaker, c.section,
                      c.index, c.text, e) for c, e in zip(prepared.chunks, embeddings)],
                )
            elif isinstance(doc, FilingDoc):
                cur.executemany(
                    "INSERT INTO tenk_chunks (document_id, ticker, fiscal_year, fiscal_quarter, item, chunk_index, page,"
                    " statement, text, embedding) VALUES (%s,%s,%s,%s,'',%s,%s,%s,%s,%s)",
                    [(doc_id, doc.ticker, doc.fiscal_year, doc.fiscal_quarter, c.index, c.page, c.statement, c.text, e)
                     for c, e in zip(prepared.chunks, embeddings)],
                )
            else:
                assert isinstance(doc, TenKDoc)  # prepare_10k pairs the kind with its doc type
                cur.executemany(
                    "INSERT INTO tenk_chunks (document_id, ticker, fiscal_year, item, item_title, chunk_index, text, embedding)"
                    " VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
                    [(doc_id, doc.ticker, doc.fiscal_year, c.item, c.item_title, c.index, c.text, e)
                     for c, e in zip(prepared.chunks, embeddings)],
                )
                from psycopg.types.json import Jsonb

                cur.executemany(
                    "INSERT INTO tenk_tables (document_id, ticker, fiscal_year, item, table_index, caption, rows, markdown)"
                    " VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
                    [(doc_id, doc.ticker, doc.fiscal_year, t.item, i, t.caption, Jsonb(t.rows), t.markdown)
                     for i, t in enumerate(doc.tables)],
                )
        return "replaced" if previous else "added"
