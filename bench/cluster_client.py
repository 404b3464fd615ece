"""The cluster's client host (bench/cluster.py runs this inside the client namespace): waits for the API's readiness,
submits jobs over HTTP with `finagent.client`, waits for them, and audits them in the database (ops/chaos/audit.py:
completed, failed with a reason, lost, duplicated) and in the tool ledger (which hosts' workers ran their calls).
Prints one JSON object. The database and Redis are reached with the cluster's URLs (TLS, passwords) from the env.

    python bench/cluster_client.py --api http://fa-api:8000 --key KEY [--jobs 4] [--timeout 300]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import BaseModel, Field

QUESTION = "What did {t} say about revenue growth in its latest quarter (cluster job {n})?"
TICKERS = ("NVDA", "AAPL", "MSFT")  # the sample corpus's companies


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


class ClientReport(JobCounts):
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


def run(api: str, key: str, jobs: int, timeout_s: float) -> ClientReport:
    from agent.context import Context
    from agent.services import service_urls
    from agent.settings import get_settings
    from finagent.client import FinagentClient
    from ops.chaos.audit import audit, wait_final

    report = ClientReport(jobs=jobs)
    with FinagentClient(api, api_key=key, timeout=30.0) as client:
        report.ready_after_s = round(wait_ready(client, timeout_s), 1)
        report.job_ids = [client.submit(QUESTION.format(t=TICKERS[n % len(TICKERS)], n=n)).job_id for n in range(jobs)]
    settings = get_settings()
    urls = service_urls(settings)
    ctx = Context(settings, urls.database_url, urls.redis_url)
    wait_final(ctx, report.job_ids, timeout_s)
    tally = audit(ctx, "cluster", report.job_ids)
    report.completed, report.failed_with_reason, report.lost = tally.completed, tally.failed_with_reason, tally.lost
    report.duplicated, report.reasons = tally.duplicated, tally.reasons
    report.worker_hosts_used = ledger_hosts(ctx, report.job_ids)
    return report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    try:
        report = run(args.api, args.key, args.jobs, args.timeout)
    except Exception as exc:
        report = ClientReport(jobs=args.jobs, lost=args.jobs, error=f"{type(exc).__name__}: {exc}"[:1000])
    print(report.model_dump_json())


if __name__ == "__main__":
    main()
