"""The cluster's client host (bench/cluster.py runs this inside the client namespace). It submits jobs the three ways
a service or an analyst does, waits for them, and audits them in the database (ops/chaos/audit.py: completed, failed
with a reason, lost, duplicated) and in the tool ledger (which hosts' workers ran their calls). Prints one JSON object.
The database and Redis are reached with the cluster's URLs (TLS, passwords) from the environment.

    python bench/cluster_client.py run --api http://fa-api:8000 --key KEY [--jobs 4] [--timeout 300]
        HTTP jobs with finagent.client, one job through the Celery contract (a bare Celery app, as a service with
        nothing of finagent's would), and a two-line `finagent batch run`
    python bench/cluster_client.py scenario --api ... --key ... [--jobs 6] [--during 2] [--timeout 300]
        a fault scenario's side: submits the jobs over HTTP and prints {"submitted": [...]}; then reads lines from
        stdin: `fault` marks the fault (and submits `--during` more jobs, each retried until the API takes it) and
        `healed` marks its end; at end of input waits for every job and prints the audit
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import BaseModel, Field

QUESTION = "What did {t} say about revenue growth in its latest quarter (cluster job {n})?"
TICKERS = ("NVDA", "AAPL", "MSFT")  # the sample corpus's companies
SUBMIT_RETRY_S = 1.0


class JobCounts(BaseModel):
    """What became of the jobs a run submitted: the client's report, and the cluster's around it."""

    jobs: int
    completed: int = 0
    failed_with_reason: int = 0
    lost: int = 0
    duplicated: int = 0
    worker_hosts_used: list[str] = Field(default_factory=list)
    ready_after_s: float | None = None
    reasons: dict[str, int] = Field(default_factory=dict)
    duplicates: dict[str, int] = Field(default_factory=dict)  # what was duplicated (evidence, events, ...) -> rows


class RareTerm(BaseModel):
    word: str  # a word of exactly one chunk of its table
    chunk_id: int


class ClientReport(JobCounts):
    job_ids: list[str] = Field(default_factory=list)
    acl_refused_internal_push: bool | None = None  # the Celery contract's Redis user may not push to an internal queue
    other_key_404: bool | None = None  # a job created with one API key is not found with another
    max_chunk_ids: dict[str, int] = Field(default_factory=dict)  # corpus -> the highest chunk id in Postgres
    rare_terms: dict[str, list[RareTerm]] = Field(default_factory=dict)  # corpus -> words each held by one chunk
    by_client: dict[str, int] = Field(default_factory=dict)  # http / celery / batch -> jobs submitted that way
    error: str | None = None


class ScenarioReport(JobCounts):
    """One fault scenario, seen from the client. recovery_s: from the fault until every job that was running then
    had moved on (ProgressWatch); submit_retries: refused or failed submissions made again during the fault."""

    recovery_s: float | None = None
    fault_s: float | None = None  # how long the fault lasted, as the harness marked it
    submit_retries: int = 0
    submit_errors: dict[str, int] = Field(default_factory=dict)
    job_ids: list[str] = Field(default_factory=list)
    error: str | None = None


def wait_ready(client, timeout_s: float) -> float:
    start = time.monotonic()
    last = "no answer"
    while time.monotonic() - start < timeout_s:
        try:
            if client.ready().ready:
                return time.monotonic() - start
        except Exception as exc:  # not up yet, or 503 with what is missing
            last = str(exc)[:300]
        time.sleep(1.0)
    raise TimeoutError(f"the API was not ready within {timeout_s:g} s: {last}")


def ledger_hosts(ctx, job_ids: list[str]) -> list[str]:
    with ctx.pool.connection() as conn:
        rows = conn.execute("SELECT DISTINCT split_part(worker, ':', 1) AS host FROM job_tool_calls "
                            "WHERE job_id = ANY(%s::uuid[]) AND worker IS NOT NULL", (job_ids,)).fetchall()
    return sorted(r["host"] for r in rows)


def _context():
    from agent.context import Context
    from agent.services import service_urls
    from agent.settings import get_settings

    settings = get_settings()
    urls = service_urls(settings)
    return Context(settings, urls.database_url, urls.redis_url)


def _audit_into(report: JobCounts, ctx, name: str, job_ids: list[str], timeout_s: float, recovery_s: list[float] | None = None):
    from ops.chaos.audit import audit, wait_final

    wait_final(ctx, job_ids, timeout_s)
    tally = audit(ctx, name, job_ids, recovery_s=recovery_s)
    report.completed, report.failed_with_reason, report.lost = tally.completed, tally.failed_with_reason, tally.lost
    report.duplicated, report.reasons, report.duplicates = tally.duplicated, tally.reasons, tally.duplicates
    report.worker_hosts_used = ledger_hosts(ctx, job_ids)
    return tally


def celery_contract_job(redis_url: str, question: str, timeout_s: float) -> str:
    """A job through the Celery contract, by a bare Celery app that knows only the broker URL and the task names."""
    from celery import Celery

    app = Celery("cluster-client", broker=redis_url, backend=redis_url)
    try:
        return app.send_task("finagent.v1.submit_research", kwargs={"question": question, "idempotency_key": str(uuid.uuid4())}
                             ).get(timeout=timeout_s)
    finally:
        app.close()


def batch_run_jobs(ctx, lines: list[str], timeout_s: float) -> list[str]:
    """`finagent batch run` on a file of questions, as an analyst runs it, then the batch's job ids."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "overnight.txt"
        path.write_text("\n".join(lines) + "\n")
        name = f"cluster-{uuid.uuid4().hex[:8]}"
        done = subprocess.run(["finagent", "batch", "run", str(path), "--name", name], capture_output=True, text=True,
                              timeout=timeout_s, env=os.environ.copy())
        if done.returncode != 0:
            raise RuntimeError(f"finagent batch run exited {done.returncode}: {(done.stderr or done.stdout)[-600:]}")
    with ctx.pool.connection() as conn:
        rows = conn.execute("SELECT i.job_id::text AS job_id FROM batch_items i JOIN batches b ON b.id = i.batch_id "
                            "WHERE b.name = %s AND i.job_id IS NOT NULL", (name,)).fetchall()
    return [r["job_id"] for r in rows]


RARE_TERMS = 5


def corpus_facts(ctx) -> tuple[dict[str, int], dict[str, list[RareTerm]]]:
    """Per corpus: its highest chunk id, and a few words each found in exactly one chunk (as printed, letters only),
    for checking that every host's BM25 index holds the whole table."""
    from agent.retrieval.keyword_index import TABLES

    max_ids: dict[str, int] = {}
    rare: dict[str, list[RareTerm]] = {}
    with ctx.pool.connection() as conn:
        for corpus, table in TABLES.items():
            row = conn.execute(f"SELECT coalesce(max(id), 0) AS m FROM {table}").fetchone()
            max_ids[corpus] = row["m"]
            rows = conn.execute(
                f"SELECT w.word, min(c.id) AS chunk_id FROM {table} c, "
                "LATERAL (SELECT DISTINCT lower(m[1]) AS word FROM regexp_matches(c.text, '\\m([A-Za-z]{9,})\\M', 'g') m) w "
                "GROUP BY w.word HAVING count(*) = 1 ORDER BY w.word LIMIT %s", (RARE_TERMS,)).fetchall()
            rare[corpus] = [RareTerm(word=r["word"], chunk_id=r["chunk_id"]) for r in rows]
    return max_ids, rare


def internal_push_refused(contract_redis_url: str) -> bool:
    """Whether Redis refuses the Celery contract's user a push to an internal queue (NOPERM)."""
    import redis

    from workers.topology import Queue

    client = redis.Redis.from_url(contract_redis_url)
    try:
        client.lpush(Queue.coordinator.value, "{}")
    except redis.exceptions.NoPermissionError:
        return True
    finally:
        client.close()
    return False


def other_key_sees_nothing(api: str, other_key: str, job_id: str) -> bool:
    from finagent.client import FinagentClient
    from finagent.errors import NotFound

    with FinagentClient(api, api_key=other_key, timeout=30.0) as other:
        try:
            other.get(job_id)
        except NotFound:
            return True
    return False


def run(api: str, key: str, jobs: int, timeout_s: float) -> ClientReport:
    from finagent.client import FinagentClient

    report = ClientReport(jobs=jobs)
    with FinagentClient(api, api_key=key, timeout=30.0) as client:
        report.ready_after_s = round(wait_ready(client, timeout_s), 1)
        http = [client.submit(QUESTION.format(t=TICKERS[n % len(TICKERS)], n=n)).job_id for n in range(jobs)]
    if os.environ.get("CLUSTER_OTHER_API_KEY"):
        report.other_key_404 = other_key_sees_nothing(api, os.environ["CLUSTER_OTHER_API_KEY"], http[0])
    ctx = _context()
    contract_url = os.environ.get("CLUSTER_CONTRACT_REDIS_URL", ctx.redis_url)
    report.acl_refused_internal_push = internal_push_refused(contract_url)
    celery = [celery_contract_job(contract_url, QUESTION.format(t=TICKERS[0], n="celery"), 60.0)]
    batch = batch_run_jobs(ctx, [QUESTION.format(t=t, n="batch") for t in TICKERS[1:]], timeout_s)
    report.job_ids = http + celery + batch
    report.jobs = len(report.job_ids)
    report.by_client = {"http": len(http), "celery": len(celery), "batch": len(batch)}
    _audit_into(report, ctx, "cluster", report.job_ids, timeout_s)
    report.max_chunk_ids, report.rare_terms = corpus_facts(ctx)
    return report


def submit_until_taken(client, question: str, deadline: float, report: ScenarioReport) -> str | None:
    """Submit with one idempotency key until the API takes it (a fault makes it refuse or time out meanwhile)."""
    key = str(uuid.uuid4())
    while time.monotonic() < deadline:
        try:
            return client.submit(question, idempotency_key=key).job_id
        except Exception as exc:
            report.submit_retries += 1
            kind = type(exc).__name__
            report.submit_errors[kind] = report.submit_errors.get(kind, 0) + 1
            time.sleep(SUBMIT_RETRY_S)
    return None


def scenario(name: str, api: str, key: str, jobs: int, during: int, timeout_s: float) -> ScenarioReport:
    from finagent.client import FinagentClient
    from ops.chaos.audit import ProgressWatch

    report = ScenarioReport(jobs=jobs + during)
    ctx = _context()
    with FinagentClient(api, api_key=key, timeout=10.0) as client:
        wait_ready(client, timeout_s)
        report.job_ids = [client.submit(QUESTION.format(t=TICKERS[n % len(TICKERS)], n=f"{name}-{n}")).job_id
                          for n in range(jobs)]
        print(json.dumps({"submitted": report.job_ids}), flush=True)
        extra: list[str] = []
        submitters: list[threading.Thread] = []
        fault_at = healed_at = None
        with ProgressWatch(ctx, report.job_ids) as watch:
            for line in sys.stdin:
                command = line.strip()
                if command == "fault":
                    fault_at = time.monotonic()
                    watch.fault()
                    deadline = fault_at + timeout_s
                    for n in range(during):
                        q = QUESTION.format(t=TICKERS[n % len(TICKERS)], n=f"{name}-during-{n}")
                        t = threading.Thread(target=lambda q=q, d=deadline: extra.append(submit_until_taken(client, q, d, report) or ""))
                        t.start()
                        submitters.append(t)
                elif command == "healed":
                    healed_at = time.monotonic()
            for t in submitters:
                t.join()
            report.job_ids += [j for j in extra if j]
            _audit_into(report, ctx, name, report.job_ids, timeout_s)
            report.lost += sum(1 for j in extra if not j)  # a submission the API never took
            time.sleep(2 * watch.every_s)  # the watch's last poll sees the jobs' final steps
            if watch.recovery_s:
                report.recovery_s = max(watch.recovery_s)
    if fault_at is not None and healed_at is not None:
        report.fault_s = round(healed_at - fault_at, 1)
    return report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("run", "scenario"))
    ap.add_argument("--api", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--during", type=int, default=0)
    ap.add_argument("--name", default="scenario")
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    out: Any
    try:
        if args.mode == "run":
            out = run(args.api, args.key, args.jobs, args.timeout)
        else:
            out = scenario(args.name, args.api, args.key, args.jobs, args.during, args.timeout)
    except Exception as exc:
        cls = ClientReport if args.mode == "run" else ScenarioReport
        out = cls(jobs=args.jobs, lost=args.jobs, error=f"{type(exc).__name__}: {exc}"[:1000])
    print(out.model_dump_json(), flush=True)


if __name__ == "__main__":
    main()
