"""Persistence of research jobs. Only the coordinator writes `state`; fan-out tasks write their own
keyed rows (evidence, step outputs, tool calls) with ON CONFLICT so a redelivered task adds nothing."""
from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, NamedTuple

import psycopg
from psycopg.types.json import Jsonb

from agent.db import one_transaction, reading
from agent.models.corpus import Period
from agent.models.job import FINAL_STATUSES, JobResult, JobState, Outbox
from agent.models.research import Evidence
from agent.models.steps import StepKey, StepOutput
from agent.ownership import scoped_idempotency_key


def async_commit(conn) -> None:
    """Fan-out rows (evidence, step outputs, the ledger) can be recomputed by redelivering their task, so their
    transaction skips the commit fsync. The job row itself (written by the coordinator) keeps synchronous commits."""
    conn.execute("SET LOCAL synchronous_commit = off")


class JobRow:
    def __init__(self, row: dict):
        self.id = str(row["id"])
        self.status: str = row["status"]
        self.step: str = row["step"]
        self.state = JobState.model_validate(row["state"])
        self.result = JobResult.model_validate(row["result"]) if row.get("result") else None
        self.error = row.get("error")
        self.parent_job_id = str(row["parent_job_id"]) if row.get("parent_job_id") else None
        self.question: str = row["question"]
        self.owner: str | None = row.get("owner")  # agent.ownership.owner_id of the API key that created it
        self.cancel_requested = row.get("cancel_requested_at") is not None
        self.created_at: dt.datetime | None = row.get("created_at")
        self.updated_at: dt.datetime | None = row.get("updated_at")


# pg_try_advisory_lock's first key: the namespace of idempotency keys ("fidm" in ASCII); the second is the key's hash
_IDEMPOTENCY_LOCK = 0x6669646D


@contextmanager
def idempotency_claim(pool, key: str) -> Iterator[Any]:
    """A connection holding a session lock on the idempotency key while a submission with it is made (its job saved
    and started), or None when another submission holds it. The lock goes with the session, so a process that dies
    mid-submission holds nothing."""
    with pool.connection() as conn:
        got = conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s)) AS got", (_IDEMPOTENCY_LOCK, key)).fetchone()["got"]
        conn.commit()
        if not got:
            yield None
            return
        try:
            yield conn
        finally:
            with suppress(psycopg.Error):  # a broken connection took its session, and the lock, with it
                conn.rollback()
                conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_IDEMPOTENCY_LOCK, key))
                conn.commit()


def create_job(pool, state: JobState, conn=None, owner: str | None = None) -> tuple[str, bool]:
    """Insert a queued job owned by `owner` (committed on return); with an idempotency key, an existing job with that
    key and owner is returned instead. `conn`: a connection of the caller's to do it on."""
    if conn is None:
        with pool.connection() as own:
            return create_job(pool, state, own, owner)
    req = state.request
    key = scoped_idempotency_key(owner, req.idempotency_key) if req.idempotency_key is not None else None
    job_id = str(uuid.uuid4())
    row = conn.execute(
        "INSERT INTO research_jobs (id, idempotency_key, parent_job_id, question, status, step, state, batch, owner)"
        " VALUES (%s, %s, %s, %s, 'queued', 'start', %s, %s, %s)"
        " ON CONFLICT (idempotency_key) DO NOTHING RETURNING id",
        (job_id, key, req.parent_job_id, req.question, Jsonb(state.model_dump(mode="json")), req.batch, owner),
    ).fetchone()
    if row is None:
        job_id = str(conn.execute("SELECT id FROM research_jobs WHERE idempotency_key = %s", (key,)).fetchone()["id"])
    conn.commit()
    return job_id, row is not None


def release_idempotency_key(pool, job_id: str) -> None:
    """Free a finished job's idempotency key (renamed, still traceable) so a retry under the same key makes a new job."""
    with pool.connection() as conn:
        conn.execute("UPDATE research_jobs SET idempotency_key = idempotency_key || ':retired:' || id::text"
                     " WHERE id = %s AND idempotency_key IS NOT NULL", (job_id,))


def request_cancel(pool, job_id: str) -> bool:
    """Mark an unfinished job cancelled-requested; False when it had already finished."""
    with pool.connection() as conn:
        row = conn.execute(
            "UPDATE research_jobs SET cancel_requested_at = coalesce(cancel_requested_at, now()), updated_at = now()"
            " WHERE id = %s AND status <> ALL(%s) RETURNING id", (job_id, list(FINAL_STATUSES))).fetchone()
    return row is not None


def load_job(pool, job_id: str) -> JobRow | None:
    with reading(pool) as conn:
        row = conn.execute("SELECT * FROM research_jobs WHERE id = %s", (job_id,)).fetchone()
    return JobRow(row) if row else None


def load_state(pool, job_id: str) -> JobState:
    """The state a fan-out task works from; a job that no longer exists is an error."""
    job = load_job(pool, job_id)
    if job is None:
        raise LookupError(f"job {job_id} not found")
    return job.state


class LockedJob(NamedTuple):
    """A job row locked for its coordinator step, with what the step reads besides it (read after the lock)."""

    job: JobRow
    outputs: dict[str, dict] | None  # the step outputs under the prefix asked for (None: none asked for)
    evidence_counts: list[dict[str, Any]]


def lock_job_with_inputs(conn, job_id: str, outputs_prefix: str | None) -> LockedJob | None:
    """The job's row locked (FOR UPDATE: one coordinator step at a time), with the step outputs under `outputs_prefix`
    and the evidence counts, sent to Postgres together (pipeline mode: one round trip instead of one per query, plus
    the transaction's BEGIN) and read in the lock's transaction, which the caller holds `conn` in. None: no such job."""
    with conn.pipeline():
        job_cur = conn.execute("SELECT * FROM research_jobs WHERE id = %s FOR UPDATE", (job_id,))
        out_cur = conn.execute(_OUTPUTS_SQL, (job_id, outputs_prefix + "%")) if outputs_prefix is not None else None
        counts_cur = conn.execute(_EVIDENCE_COUNTS_SQL, (job_id,))
        row = job_cur.fetchone()
        outputs = {r["step_key"]: r["payload"] for r in out_cur.fetchall()} if out_cur is not None else None
        counts = counts_cur.fetchall()
    return LockedJob(JobRow(row), outputs, counts) if row else None


def save_job(conn, job: JobRow, status: str, step: str, result: JobResult | None = None, error: str | None = None) -> None:
    conn.execute(
        "UPDATE research_jobs SET status=%s, step=%s, state=%s, result=%s, error=%s, updated_at=now(),"
        " finished_at = CASE WHEN %s THEN coalesce(finished_at, now()) ELSE finished_at END WHERE id=%s",
        (status, step, Jsonb(job.state.model_dump(mode="json")),
         Jsonb(result.model_dump(mode="json")) if result else None, error, status in FINAL_STATUSES, job.id),
    )


def add_evidence(pool, job_id: str, hits: list[Evidence]) -> int:
    """Add a search's passages to the job's evidence; the number of passages it was the first to add."""
    if not hits:
        return 0
    with pool.connection() as conn:  # in pipeline mode (one_transaction) it measured slower: bench/round_trips.py, in git history
        async_commit(conn)
        return insert_evidence(conn, job_id, hits)


# One statement for all of a search's passages: executemany sends a statement per row, and each one hands the GIL
# away and waits to get it back from the worker's busy threads (bench/round_trips.py in git history, "evidence write").
_INSERT_EVIDENCE_SQL = (
    "INSERT INTO job_evidence (job_id, citation_key, iteration, source_type, score, payload)"
    " SELECT %s, k, (p->>'iteration')::int, p->>'source_type', (p->>'score')::float8, p"
    " FROM ROWS FROM (unnest(%s::text[]), jsonb_array_elements(%s)) WITH ORDINALITY AS r(k, p, n) ORDER BY n"
    " ON CONFLICT (job_id, citation_key) DO UPDATE SET score = EXCLUDED.score, payload = EXCLUDED.payload"
    # a passage two searches of one iteration found keeps the higher score (ties: the smaller payload), whichever
    # search finished first, so the evidence's order, and every prompt built from it, is the same on every run of
    # the same question
    " WHERE EXCLUDED.iteration = job_evidence.iteration AND (EXCLUDED.score > job_evidence.score"
    " OR (EXCLUDED.score = job_evidence.score AND EXCLUDED.payload::text < job_evidence.payload::text))"
    " RETURNING (xmax = 0) AS inserted")


def insert_evidence(conn, job_id: str, hits: list[Evidence]) -> int:
    """`add_evidence` on the caller's connection and transaction."""
    # one row per key, in key order: concurrent tasks adding overlapping evidence then take their row locks in the
    # same order, so they cannot deadlock
    rows = sorted({h.citation_key: h for h in reversed(hits)}.values(), key=lambda h: h.citation_key)
    payloads = Jsonb([h.model_dump(mode="json") for h in rows])  # the other columns are read from each payload
    inserted = conn.execute(_INSERT_EVIDENCE_SQL, (job_id, [h.citation_key for h in rows], payloads)).fetchall()
    return sum(bool(r["inserted"]) for r in inserted)


_EVIDENCE_SQL = ("SELECT payload::text AS payload FROM job_evidence WHERE job_id = %s"
                 " ORDER BY iteration, score DESC, citation_key")


def load_evidence(pool, job_id: str) -> list[Evidence]:
    # as text, parsed by pydantic's own JSON parser: every generation task reads all of its job's evidence first, and
    # this takes half the time of decoding the JSON to dicts and validating those
    with reading(pool) as conn:
        rows = conn.execute(_EVIDENCE_SQL, (job_id,)).fetchall()
    return parse_evidence(rows)


def parse_evidence(rows: list[dict[str, Any]]) -> list[Evidence]:
    return [Evidence.model_validate_json(r["payload"]) for r in rows]


# what generation reads changes only when the job's row is written (its xmin moves) or its evidence is: a row added
# moves the count, and a row a sibling search rescored gets a new xmin, which moves the sum of their xmins
_VERSION = ("j.xmin::text || ':' || (SELECT count(*) || ':' || coalesce(sum(e.xmin::text::bigint), 0)"
            " FROM job_evidence e WHERE e.job_id = j.id)")
# the state and evidence come only when the job is at another version than the one the caller holds parsed
_STATE_UNLESS_SQL = ("SELECT v.version, CASE WHEN v.version IS DISTINCT FROM %s THEN j.state::text END AS state"
                     f" FROM research_jobs j CROSS JOIN LATERAL (SELECT {_VERSION} AS version) v WHERE j.id = %s")
_EVIDENCE_UNLESS_SQL = ("SELECT payload::text AS payload FROM job_evidence WHERE job_id = %s"
                        f" AND (SELECT {_VERSION} FROM research_jobs j WHERE j.id = %s) IS DISTINCT FROM %s"
                        " ORDER BY iteration, score DESC, citation_key")


class GenerationRows(NamedTuple):
    """What every generation call reads first, as stored: the job's state (JSON text) and evidence rows, at `version`
    (equal versions, equal state and evidence), and the step outputs it asked for, by key. The state is None when the
    job was at the version the caller said it holds (and the evidence then empty)."""

    version: str
    state: str | None
    evidence: list[dict[str, Any]]
    outputs: dict[str, dict]


def generation_rows(pool, job_id: str, outputs_prefix: str | None = None, held_version: str | None = None
                    ) -> GenerationRows:
    """The state, the evidence and the outputs under `outputs_prefix`, in one round trip, unparsed. A caller that
    already holds them parsed at `held_version` gets neither the state nor the evidence if the job is still there:
    the later waves of an answer round read what its first wave read, and need none of it sent again."""
    with reading(pool) as conn, conn.pipeline():
        if held_version is None:
            state_cur = conn.execute(f"SELECT j.state::text AS state, {_VERSION} AS version FROM research_jobs j"
                                     " WHERE j.id = %s", (job_id,))
            evidence_cur = conn.execute(_EVIDENCE_SQL, (job_id,))
        else:
            state_cur = conn.execute(_STATE_UNLESS_SQL, (held_version, job_id))
            evidence_cur = conn.execute(_EVIDENCE_UNLESS_SQL, (job_id, job_id, held_version))
        out_cur = conn.execute(_OUTPUTS_SQL, (job_id, outputs_prefix + "%")) if outputs_prefix else None
        row = state_cur.fetchone()
        rows = evidence_cur.fetchall()  # read after the version: evidence added in between is newer, never missing
        outputs = {r["step_key"]: r["payload"] for r in out_cur.fetchall()} if out_cur is not None else {}
    if row is None:
        raise LookupError(f"job {job_id} not found")
    return GenerationRows(row["version"], row["state"], rows, outputs)


def evidence_keys(pool, job_id: str, ticker: str, period: Period, before_iteration: int) -> set[str]:
    """The citation keys the job holds for one company-period from iterations before `before_iteration`. Not its
    own iteration's: those are its sibling searches', and whether a sibling finished first is a race."""
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT citation_key FROM job_evidence WHERE job_id = %s AND iteration < %s AND payload->>'ticker' = %s"
            " AND (payload->>'fiscal_year')::int = %s AND (payload->>'fiscal_quarter')::int = %s",
            (job_id, before_iteration, ticker, period.fiscal_year, period.fiscal_quarter)).fetchall()
    return {r["citation_key"] for r in rows}


def count_evidence(pool, job_id: str) -> int:
    with pool.connection() as conn:
        return conn.execute("SELECT count(*) AS n FROM job_evidence WHERE job_id=%s", (job_id,)).fetchone()["n"]


_EVIDENCE_COUNTS_SQL = (
    "SELECT iteration, source_type, payload->>'ticker' AS ticker, (payload->>'fiscal_year')::int AS fiscal_year,"
    " (payload->>'fiscal_quarter')::int AS fiscal_quarter, count(*) AS n FROM job_evidence WHERE job_id = %s"
    " GROUP BY 1, 2, 3, 4, 5")


def evidence_counts(pool, job_id: str) -> list[dict[str, Any]]:
    """The job's evidence counted by iteration, source type, company and period (one row per group)."""
    with pool.connection() as conn:
        return conn.execute(_EVIDENCE_COUNTS_SQL, (job_id,)).fetchall()


def put_output(pool, job_id: str, key: StepKey, output: StepOutput) -> None:
    with one_transaction(pool) as conn:
        async_commit(conn)
        insert_output(conn, job_id, key, output)


def insert_output(conn, job_id: str, key: StepKey, output: StepOutput) -> None:
    """`put_output` on the caller's connection and transaction (the ledger's, through `CallRecord.store_with`: a
    transaction that commits without waiting for its fsync, as put_output's does)."""
    conn.execute(
        "INSERT INTO job_step_outputs (job_id, step_key, payload) VALUES (%s,%s,%s) ON CONFLICT DO NOTHING",
        (job_id, str(key), Jsonb(output.model_dump(mode="json"))),
    )


def output_writer(job_id: str, key: StepKey, output: StepOutput) -> Callable[[Any], None]:
    """The write of one step output, for `CallRecord.store_with`."""
    return lambda conn: insert_output(conn, job_id, key, output)


_OUTPUTS_SQL = "SELECT step_key, payload FROM job_step_outputs WHERE job_id=%s AND step_key LIKE %s ORDER BY step_key"


def get_outputs(pool, job_id: str, prefix: str) -> dict[str, dict]:
    with reading(pool) as conn:
        rows = conn.execute(_OUTPUTS_SQL, (job_id, prefix + "%")).fetchall()
    return {r["step_key"]: r["payload"] for r in rows}


def output_keys(pool, job_id: str, prefix: str) -> set[str]:
    """The keys of the outputs stored under `prefix`, without their payloads (which calls have finished)."""
    with reading(pool) as conn:
        rows = conn.execute("SELECT step_key FROM job_step_outputs WHERE job_id=%s AND step_key LIKE %s", (job_id, prefix + "%")).fetchall()
    return {r["step_key"] for r in rows}


def statuses(pool, job_ids: list[str]) -> dict[str, str]:
    with pool.connection() as conn:
        rows = conn.execute("SELECT id, status FROM research_jobs WHERE id = ANY(%s::uuid[])", (job_ids,)).fetchall()
    return {str(r["id"]): r["status"] for r in rows}


def list_jobs(pool, limit: int = 20, status: str | None = None) -> list[dict]:
    return page_jobs(pool, limit, [status] if status else None)[0]


class PagePosition(NamedTuple):
    """Where a page of jobs ended: the next page starts strictly after (older than) this job."""

    created_at: dt.datetime
    job_id: str


_PAGE_SQL = ("SELECT id, status, step, question, created_at, updated_at FROM research_jobs"
             " WHERE (%(statuses)s::text[] IS NULL OR status = ANY(%(statuses)s::text[]))"
             " AND (%(created_after)s::timestamptz IS NULL OR created_at > %(created_after)s::timestamptz)"
             " AND (%(after_t)s::timestamptz IS NULL OR (created_at, id) < (%(after_t)s::timestamptz, %(after_id)s::uuid))")
# a plain `owner = ...` (not `IS NULL OR`), so that a key's page is read from its own index, research_jobs_owner
_OWNER_SQL = " AND owner = %(owner)s"
_PAGE_ORDER_SQL = " ORDER BY created_at DESC, id DESC LIMIT %(limit)s"


def page_jobs(pool, limit: int = 20, statuses: list[str] | None = None, created_after: dt.datetime | None = None,
              after: PagePosition | None = None, owner: str | None = None) -> tuple[list[dict], PagePosition | None]:
    """Newest first, keyset-paginated on (created_at, id) (index research_jobs_created, or research_jobs_owner for
    one owner's): a page never repeats or skips a job however many are created while a client pages. `owner`: only
    that owner's jobs (None: every job). Returns the rows and where the next page starts (None on the last page)."""
    sql = _PAGE_SQL + (_OWNER_SQL if owner is not None else "") + _PAGE_ORDER_SQL
    with pool.connection() as conn:
        rows = conn.execute(
            sql, {"statuses": statuses or None, "created_after": created_after, "limit": limit + 1, "owner": owner,
                  "after_t": after.created_at if after else None, "after_id": after.job_id if after else None},
        ).fetchall()
    page = rows[:limit]
    more = len(rows) > limit
    return page, (PagePosition(page[-1]["created_at"], str(page[-1]["id"])) if more and page else None)


def stalled_jobs(pool, stalled_after_s: int) -> list[dict]:
    with pool.connection() as conn:
        return conn.execute(
            "SELECT id FROM research_jobs WHERE status IN ('queued', 'running')"
            " AND NOT (batch AND admitted_at IS NULL AND cancel_requested_at IS NULL)"  # waiting for a batch slot, not stalled
            " AND updated_at < now() - make_interval(secs => %s)", (stalled_after_s,)
        ).fetchall()


def quiet_jobs(pool, quiet_s: float) -> list[str]:
    """Jobs on their way whose row has not changed for `quiet_s` seconds: running (a step waiting on its fan-out),
    or queued and dispatched (waiting on their first step); not batch jobs still waiting for a slot."""
    with pool.connection() as conn:
        rows = conn.execute("SELECT id FROM research_jobs WHERE (status = 'running' OR (status = 'queued'"
                            " AND NOT (batch AND admitted_at IS NULL)))"
                            " AND updated_at < now() - make_interval(secs => %s)", (quiet_s,)).fetchall()
    return [str(r["id"]) for r in rows]


def recent_final_seqs(pool, within_s: int) -> list[tuple[str, int]]:
    """The last step's outbox sequence number of every job that finished within `within_s`, to re-publish its events
    if a crash lost them. Only the numbers: a final outbox carries the whole answer, and a busy hour has thousands."""
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT id, coalesce((state->'outbox'->>'seq')::int, 0) AS seq FROM research_jobs WHERE status = ANY(%s)"
            " AND updated_at > now() - make_interval(secs => %s)", (list(FINAL_STATUSES), within_s)
        ).fetchall()
    return [(str(r["id"]), r["seq"]) for r in rows]


def load_outbox(pool, job_id: str) -> Outbox:
    with pool.connection() as conn:
        row = conn.execute("SELECT state->'outbox' AS outbox FROM research_jobs WHERE id = %s", (job_id,)).fetchone()
    return Outbox.model_validate((row or {}).get("outbox") or {})


def touch(pool, job_id: str) -> None:
    with pool.connection() as conn:
        conn.execute("UPDATE research_jobs SET updated_at = now() WHERE id = %s", (job_id,))
