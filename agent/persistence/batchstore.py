"""Persistence of overnight batches: the batch, its lines and their jobs, and the batch-concurrency slots."""
from __future__ import annotations

import uuid
from typing import Any

from agent.models.job import FINAL_STATUSES
from agent.persistence.jobstore import PagePosition

# pg_advisory_xact_lock key serialising slot claims (any constant; "fbat" in ASCII)
_ADMISSION_LOCK = 0x66626174


def upsert_batch(pool, name: str, owner: str | None = None) -> str:
    """The batch `owner` (agent.ownership.owner_id; None: ownerless) has named `name`, created on first use: a name is
    unique per owner (index batches_owner_name), so two API keys naming a batch alike make two batches."""
    with pool.connection() as conn:
        row = conn.execute(
            "INSERT INTO batches (id, name, owner) VALUES (%s, %s, %s)"
            " ON CONFLICT ((coalesce(owner, '')), name) DO UPDATE SET updated_at = now() RETURNING id",
            (str(uuid.uuid4()), name, owner)).fetchone()
    return str(row["id"])


def find_batch(pool, name_or_id: str) -> dict[str, Any] | None:
    """The batch with this id, else the latest with this name (owners may share a name; the ownerless one first,
    as the CLI names its batches)."""
    with pool.connection() as conn:
        return conn.execute("SELECT * FROM batches WHERE name = %s OR id::text = %s"
                            " ORDER BY id::text = %s DESC, owner IS NULL DESC, updated_at DESC LIMIT 1",
                            (name_or_id, name_or_id, name_or_id)).fetchone()


def latest_batches(pool, limit: int = 5) -> list[dict[str, Any]]:
    with pool.connection() as conn:
        return conn.execute("SELECT * FROM batches ORDER BY updated_at DESC LIMIT %s", (limit,)).fetchall()


def page_batches(pool, limit: int = 20, after: PagePosition | None = None, owner: str | None = None
                 ) -> tuple[list[dict[str, Any]], PagePosition | None]:
    """Newest first, keyset-paginated on (created_at, id) as jobs are, each batch with its lines counted by status
    ('invalid' for a line that made no job, 'queued' for a job not yet visible). `owner`: only that owner's batches
    (None: every batch). Returns the rows and where the next page starts (None on the last page)."""
    with pool.connection() as conn:
        rows = conn.execute(
            "WITH page AS (SELECT id, name, created_at, updated_at FROM batches"
            "  WHERE (%(after_t)s::timestamptz IS NULL OR (created_at, id) < (%(after_t)s::timestamptz, %(after_id)s::uuid))"
            "  AND (%(owner)s::text IS NULL OR owner = %(owner)s::text)"
            "  ORDER BY created_at DESC, id DESC LIMIT %(limit)s)"
            " SELECT p.id, p.name, p.created_at, p.updated_at, coalesce(c.counts, '{}'::jsonb) AS counts FROM page p"
            " LEFT JOIN LATERAL (SELECT jsonb_object_agg(s.status, s.n) AS counts FROM ("
            "   SELECT CASE WHEN i.error IS NOT NULL THEN 'invalid' ELSE coalesce(j.status, 'queued') END AS status, count(*) AS n"
            "   FROM batch_items i LEFT JOIN research_jobs j ON j.id = i.job_id WHERE i.batch_id = p.id GROUP BY 1) s) c ON true"
            " ORDER BY p.created_at DESC, p.id DESC",
            {"limit": limit + 1, "owner": owner, "after_t": after.created_at if after else None,
             "after_id": after.job_id if after else None},
        ).fetchall()
    page = rows[:limit]
    more = len(rows) > limit
    return page, (PagePosition(page[-1]["created_at"], str(page[-1]["id"])) if more and page else None)


def unfinished_jobs(pool, batch_id: str) -> tuple[list[str], int]:
    """The batch's jobs that have not ended, and how many have."""
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT j.id, j.status FROM batch_items i JOIN research_jobs j ON j.id = i.job_id WHERE i.batch_id = %s ORDER BY i.line",
            (batch_id,)).fetchall()
    unfinished = [str(r["id"]) for r in rows if r["status"] not in FINAL_STATUSES]
    return unfinished, len(rows) - len(unfinished)


def previous_attempts(pool, batch_id: str) -> dict[str, int]:
    """item key -> attempts so far, from the batch's last run."""
    with pool.connection() as conn:
        rows = conn.execute("SELECT item_key, max(attempts) AS n FROM batch_items WHERE batch_id = %s AND item_key IS NOT NULL"
                            " GROUP BY item_key", (batch_id,)).fetchall()
    return {r["item_key"]: r["n"] for r in rows}


def replace_items(pool, batch_id: str, items: list[dict[str, Any]]) -> None:
    """The batch's lines as the file has them now (an edited file drops the lines it no longer has)."""
    with pool.connection() as conn, conn.transaction():
        conn.execute("DELETE FROM batch_items WHERE batch_id = %s", (batch_id,))
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO batch_items (batch_id, line, item_key, question, mode, job_id, error, attempts)"
                " VALUES (%(batch_id)s, %(line)s, %(key)s, %(question)s, %(mode)s, %(job_id)s, %(error)s, %(attempts)s)",
                [{"batch_id": batch_id} | item for item in items])
        conn.execute("UPDATE batches SET updated_at = now() WHERE id = %s", (batch_id,))


def item_rows(pool, batch_id: str) -> list[dict[str, Any]]:
    """Each line with its job's status, result and times, in line order."""
    with pool.connection() as conn:
        return conn.execute(
            "SELECT i.line, i.item_key, i.question, i.mode, i.job_id, i.error AS line_error, i.attempts,"
            " j.status, j.result, j.error AS job_error, j.created_at, j.finished_at"
            " FROM batch_items i LEFT JOIN research_jobs j ON j.id = i.job_id WHERE i.batch_id = %s ORDER BY i.line",
            (batch_id,)).fetchall()


def claim_batch_slots(pool, concurrency: int) -> list[str]:
    """Admit the oldest waiting batch jobs into the free slots of `concurrency` (jobs admitted and not yet
    finished hold a slot). Serialised by an advisory lock, so two callers never hand out the same slot."""
    with pool.connection() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ADMISSION_LOCK,))
        held = conn.execute("SELECT count(*) AS n FROM research_jobs WHERE batch AND admitted_at IS NOT NULL"
                            " AND status <> ALL(%s)", (list(FINAL_STATUSES),)).fetchone()["n"]
        free = concurrency - held
        if free <= 0:
            return []
        rows = conn.execute(
            "UPDATE research_jobs SET admitted_at = now(), updated_at = now() WHERE id IN ("
            " SELECT id FROM research_jobs WHERE batch AND admitted_at IS NULL AND status = 'queued'"
            " ORDER BY created_at, id LIMIT %s) RETURNING id", (free,)).fetchall()
    return [str(r["id"]) for r in rows]
