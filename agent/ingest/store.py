"""Write a prepared document and its embeddings in one transaction: all of it or none of it."""
from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np

from agent.ingest.documents import PreparedDocument
from agent.models.corpus import FilingDoc, TenKDoc, TranscriptDoc
from agent.providers.embeddings import as_array
from agent.retrieval.companies import ensure_company

Outcome = Literal["added", "replaced", "unchanged"]


class Stored(NamedTuple):
    """A stored document as the ingest runner compares it: its id, chunks and recipe (None: stored before recipes)."""

    id: int
    chunks: int
    recipe: str | None


def existing_version(conn, prepared: PreparedDocument) -> tuple[str, str | None] | None:
    """(content hash, recipe) of the stored document `prepared` would replace; None: there is none."""
    row = conn.execute(
        "SELECT content_hash, recipe FROM documents"
        " WHERE kind=%s AND ticker=%s AND fiscal_year=%s AND fiscal_quarter=%s AND variant=%s",
        (prepared.kind, prepared.doc.ticker, prepared.doc.fiscal_year, prepared.fiscal_quarter, prepared.variant),
    ).fetchone()
    return (row["content_hash"], row["recipe"]) if row else None


def is_unchanged(prepared: PreparedDocument, stored: tuple[str, str | None] | None) -> bool:
    """The stored version holds these bytes made this way (a document without a recipe is replaced: its vectors may
    be another embedder's)."""
    return stored == (prepared.content_hash, prepared.recipe)


def stored_hashes(conn, paths: list[str], kinds: list[str] | None = None) -> dict[tuple[str, str], Stored]:
    """(source path, content hash) -> the stored document, of every document read from one of `paths` (of `kinds`,
    when given), in one query: a file whose path and hash are stored here, with the current recipe, was ingested as it
    is now."""
    rows = conn.execute(
        "SELECT d.id, d.source_path, d.content_hash, d.recipe,"
        " (SELECT count(*) FROM transcript_chunks c WHERE c.document_id = d.id)"
        " + (SELECT count(*) FROM tenk_chunks c WHERE c.document_id = d.id) AS chunks"
        " FROM documents d WHERE d.source_path = ANY(%s) AND (%s::text[] IS NULL OR d.kind = ANY(%s::text[]))",
        (paths, kinds, kinds),
    ).fetchall()
    return {(r["source_path"], r["content_hash"]): Stored(r["id"], r["chunks"], r["recipe"]) for r in rows}


def first_chunks(conn, doc_ids: list[int]) -> dict[int, tuple[str, np.ndarray]]:
    """document id -> the text and stored vector of its first chunk."""
    rows = conn.execute(
        "SELECT DISTINCT ON (document_id) document_id, text, embedding FROM ("
        " SELECT document_id, chunk_index, text, embedding FROM transcript_chunks WHERE document_id = ANY(%s)"
        " UNION ALL SELECT document_id, chunk_index, text, embedding FROM tenk_chunks WHERE document_id = ANY(%s)"
        ") c ORDER BY document_id, chunk_index",
        (doc_ids, doc_ids),
    ).fetchall()
    return {r["document_id"]: (r["text"], as_array(r["embedding"])) for r in rows}


def adopt_recipe(conn, doc_ids: list[int], recipe: str) -> None:
    """Record the recipe of documents stored before recipes, once their vectors are shown to be the current ones."""
    if doc_ids:
        conn.execute("UPDATE documents SET recipe = %s WHERE id = ANY(%s) AND recipe IS NULL", (recipe, doc_ids))


def chunk_table(prepared: PreparedDocument) -> str:
    """The table `write_document` writes this document's chunks to."""
    return "transcript_chunks" if prepared.kind == "transcript" else "tenk_chunks"


def write_document(pool, prepared: PreparedDocument, embeddings: np.ndarray) -> Outcome:
    doc = prepared.doc
    assert len(embeddings) == len(prepared.chunks)
    with pool.connection() as conn, conn.transaction():
        # serialise writers of the same document so two concurrent ingests cannot both insert
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                     (f"{prepared.kind}:{doc.ticker}:{doc.fiscal_year}:{prepared.fiscal_quarter}:{prepared.variant}",))
        previous = existing_version(conn, prepared)
        if is_unchanged(prepared, previous):
            return "unchanged"
        ensure_company(conn, doc.ticker, doc.company_name)
        if previous:
            conn.execute(
                "DELETE FROM documents WHERE kind=%s AND ticker=%s AND fiscal_year=%s AND fiscal_quarter=%s AND variant=%s",
                (prepared.kind, doc.ticker, doc.fiscal_year, prepared.fiscal_quarter, prepared.variant),
            )
        dated = doc.filed_on if isinstance(doc, FilingDoc) else getattr(doc, "call_date", None)
        doc_id = conn.execute(
            "INSERT INTO documents (kind, ticker, fiscal_year, fiscal_quarter, variant, call_date, source_path, content_hash,"
            " title, recipe) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
            (prepared.kind, doc.ticker, doc.fiscal_year, prepared.fiscal_quarter, prepared.variant, dated,
             prepared.path, prepared.content_hash, getattr(doc, "title", None) or doc.company_name, prepared.recipe or None),
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
                from agent.ingest.filing_pages import statement_lines_of
                from agent.statements.line_store import write_lines
                from agent.statements.reader import reader_version

                write_lines(conn, doc_id, doc.ticker, statement_lines_of(doc), reader_version())
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
                from agent.statements.line_store import write_lines
                from agent.statements.reader import reader_version
                from agent.statements.table_lines import table_lines

                lines = [ln for i, t in enumerate(doc.tables) for ln in table_lines(t.caption, t.rows, i, t.units)]
                write_lines(conn, doc_id, doc.ticker, lines, reader_version())
        return "replaced" if previous else "added"
