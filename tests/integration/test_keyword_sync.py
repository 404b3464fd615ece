"""Every worker node that searches keeps its own host's BM25 index in sync (workers/keyword_sync.py): two real search
workers with different data dirs (two hosts' index directories) each bring theirs up to the chunk tables, at start
and again after an ingest, with no beat and no call from the test."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.ingest.runner import ingest
from agent.retrieval import keyword_index
from agent.services import ServiceURLs
from ops.local.worker_pool import stop_pids, wait_ready, worker_env
from workers.topology import Queue, WorkerSpec, worker_argv

pytestmark = pytest.mark.integration

RARE = "vellumorphic"  # invented: no other chunk holds it
TRANSCRIPT = f"""ticker: TKSV
company: Tarkessa Valves
fiscal_year: 2034
fiscal_quarter: 1
call_date: 2034-04-27
title: Tarkessa Valves Q1 2034 Earnings Call
---
== Prepared Remarks ==
Operator: Good afternoon and welcome to the Tarkessa Valves first quarter 2034 earnings call. The chief financial
officer will review the quarter and then take questions from analysts on the line.

Morgan Eddleston -- Chief Financial Officer: Revenue for the quarter was $88 million, up 6% year on year. Our
{RARE} seal line, launched last autumn, shipped to four new pipeline operators and lifted gross margin to 37%.

== Questions and Answers ==
Analyst: How large can the {RARE} seal line become over the next two years?

Morgan Eddleston -- Chief Financial Officer: We expect it to reach a tenth of revenue by the end of next year.
"""
DEADLINE_S = 90.0


def meta(data_dir: Path) -> keyword_index.IndexMeta | None:
    path = keyword_index.index_dir(data_dir, "transcript") / "finagent-meta.json"
    try:
        return keyword_index.IndexMeta.model_validate_json(path.read_text())
    except (FileNotFoundError, ValueError):  # not written yet, or read between a write and its rename
        return None


def max_chunk_id(ctx) -> int:
    with ctx.pool.connection() as conn:
        return conn.execute("SELECT coalesce(max(id), 0) AS top FROM transcript_chunks").fetchone()["top"]


def wait_until_synced(data_dirs: list[Path], watermark: int) -> None:
    """Poll both hosts' index meta until each holds the chunks up to `watermark` (a deadline, not a timing)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if all((m := meta(d)) is not None and m.watermark >= watermark for d in data_dirs):
            return
        time.sleep(0.2)
    pytest.fail(f"the indexes did not reach chunk {watermark}: {[meta(d) for d in data_dirs]}")


@pytest.fixture
def two_hosts(ctx, tmp_path) -> Iterator[list[Path]]:
    """Two search-queue workers, each with a data dir of its own and a short sync period."""
    urls = ServiceURLs(database_url=ctx.database_url, redis_url=ctx.redis_url)
    spec = WorkerSpec(name="search", queues=[Queue.search], concurrency=1)
    dirs, procs, nodes = [], [], []
    for host in ("host-a", "host-b"):
        data_dir = tmp_path / host
        (data_dir / "metrics").mkdir(parents=True)
        node = f"kwsync-{host}-{os.getpid()}"
        env = worker_env(urls, data_dir / "metrics") | {"FINAGENT_DATA_DIR": str(data_dir),
                                                          "FINAGENT_METRICS_DIR": str(data_dir / "metrics"),
                                                          "FINAGENT_KEYWORD_INDEX_SYNC_S": "0.5"}
        log = open(tmp_path / f"{node}.log", "wb")
        procs.append(subprocess.Popen([sys.executable, "-m", "celery", *worker_argv(spec, node), "-l", "INFO"],
                                      env=env, stdout=log, stderr=subprocess.STDOUT))
        dirs.append(data_dir)
        nodes.append(node)
    try:
        wait_ready(urls, [f"{n}@" for n in nodes], 60)
        yield dirs
    finally:
        stop_pids([p.pid for p in procs])
        for p in procs:
            p.wait(30)


def test_each_search_worker_syncs_its_own_host_s_index(ctx, two_hosts, tmp_path):
    wait_until_synced(two_hosts, max_chunk_id(ctx))  # the sync soon after start
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "TKSV_2034_q1.txt").write_text(TRANSCRIPT)
    report = ingest(ctx, "transcript", [corpus], fanout=None, quiet=True)  # syncs this process's data dir, not theirs
    assert [f.status for f in report.files] == ["added"]
    with ctx.pool.connection() as conn:
        rare = {r["id"] for r in conn.execute("SELECT id FROM transcript_chunks WHERE ticker = 'TKSV' AND text ILIKE %s",
                                              (f"%{RARE}%",))}
    assert rare
    top = max_chunk_id(ctx)
    assert top >= max(rare)

    wait_until_synced(two_hosts, top)  # the periodic sync, on each host by itself
    sid = keyword_index.system_id(ctx.pool)
    for data_dir in two_hosts:
        found = keyword_index.KeywordIndex(keyword_index.index_dir(data_dir, "transcript")).ranked(RARE, 10, system_id=sid)
        assert set(found.ids) == rare and found.watermark >= top
