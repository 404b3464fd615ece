"""Prometheus metrics on the real stack: a job runs on real Celery worker subprocesses, then `render_metrics` (what
GET /metrics serves) shows what those other processes recorded, merged from their multiprocess files, beside the
scrape-time metrics read from Postgres and Redis."""
from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.infra.metrics import render_metrics
from tests.integration.jobs import run_job
from workers.topology import Queue

pytestmark = pytest.mark.integration


def scrape(ctx) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of one scrape, keyed by sample name and sorted labels."""
    payload, content_type = render_metrics(ctx)
    assert content_type.startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(payload.decode()) for s in family.samples}


def total(samples, name: str, **labels: str) -> float:
    """The sum of the samples named `name` whose labels include `labels`."""
    return sum(v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items())


def growth(before, after):
    """grew(name, **labels): how much the samples matching name and labels grew from one scrape to the other."""
    return lambda name, **labels: total(after, name, **labels) - total(before, name, **labels)


def by_workers_and_steps(job, events) -> tuple[list, int]:
    """The job's events the workers published ("queued" is the submitting process's), and the coordinator steps it
    took: start, plan, then per iteration a search and an answer round."""
    return [e for e in events if e.data.get("status") != "queued"], job.result.iterations * 2 + 2


def pids_with_files(ctx) -> set[int]:
    return {int(p.stem.rsplit("-", 1)[1]) for p in ctx.settings.metrics_path().glob("*.db")}


def one_job_window(ctx, question: str, attempts: int = 3):
    """Scrapes before and after one job, once the workers have recorded all of its end. Another job may end inside
    the window and add to the job-end metrics: one an earlier test left behind, or the previous test's own, whose end
    the worker may still be recording when this test's first scrape reads the files (the counter already, the
    latency not yet). Such a window is measured again with a new job. A job whose own end were counted twice or
    never would show in every attempt."""
    for _ in range(attempts):
        before = scrape(ctx)
        job, events = run_job(ctx, question=question)
        assert job.status == "completed"
        mode = job.result.mode or "none"
        # the worker records the job's end and counts the last events just after it publishes them, and a step's
        # duration only once the step has returned: wait for all of that
        by_workers, steps = by_workers_and_steps(job, events)
        deadline = time.monotonic() + 10
        after = scrape(ctx)
        grew = growth(before, after)
        while time.monotonic() < deadline and not (grew("finagent_jobs_finished_total", mode=mode, status="completed") >= 1
                                                   and grew("finagent_job_latency_seconds_count", mode=mode) >= 1
                                                   and grew("finagent_events_published_total") >= len(by_workers)
                                                   and grew("finagent_task_duration_seconds_count",
                                                            task="tasks.coordinator.advance") >= steps):
            time.sleep(0.2)
            after = scrape(ctx)
            grew = growth(before, after)
        if grew("finagent_jobs_finished_total") == grew("finagent_job_latency_seconds_count") == 1:
            return before, after, job, events
    pytest.fail(f"the job-end metrics grew by other than one job in each of {attempts} windows")


def test_a_scrape_shows_what_the_worker_processes_recorded(ctx, sample_corpus, workers, worker):
    before, after, job, events = one_job_window(ctx, "What was NVDA's revenue last quarter and what drove it?")
    mode = job.result.mode or "none"
    by_workers, steps = by_workers_and_steps(job, events)
    grew = growth(before, after)

    # the workers' own files: every worker process that ran a task wrote its histogram file
    worker_pids = {p.pid for p in worker}
    assert worker_pids & pids_with_files(ctx), "no metric file written by a worker process"

    # task durations, recorded by the Celery signals inside the workers, for the tasks this job ran
    for task in ("tasks.coordinator.advance", "tasks.llm.plan", "tasks.search.search_quarter", "tasks.llm.compose"):
        assert grew("finagent_task_duration_seconds_count", task=task, outcome="success") >= 1, task
        assert grew("finagent_task_duration_seconds_sum", task=task, outcome="success") > 0, task
    assert grew("finagent_task_duration_seconds_count", task="tasks.coordinator.advance") >= steps

    # events published by the coordinator worker: every one the job's stream holds but "queued", which the
    # submitting process published (this one, whose files may sit elsewhere)
    assert len(by_workers) <= grew("finagent_events_published_total") <= len(events)
    assert grew("finagent_events_published_total", type="job_status") >= 2  # running, completed

    # LLM calls through the ledger (the extractive provider reports no model and no tokens), or the response cache
    for role in ("plan", "compose", "evaluate"):
        answered = grew("finagent_llm_calls_total", role=role) + grew("finagent_llm_cache_hits_total", role=role)
        assert answered >= 1, role
    assert grew("finagent_llm_cache_hits_total") + grew("finagent_llm_cache_misses_total") >= 3

    # the job's end, observed by the coordinator task
    assert grew("finagent_job_latency_seconds_count", mode=mode) == 1
    assert 0 < grew("finagent_job_latency_seconds_sum", mode=mode) < 120
    assert grew("finagent_job_iterations_sum", mode=mode) == job.result.iterations
    assert grew("finagent_job_confidence_sum", mode=mode) == pytest.approx(job.result.confidence)
    assert grew("finagent_jobs_finished_total", mode=mode, status="completed") == 1

    # scrape time: jobs by status straight from Postgres, every queue, every breaker
    with ctx.pool.connection() as conn:
        completed = conn.execute("SELECT count(*) AS n FROM research_jobs WHERE status='completed'").fetchone()["n"]
    assert after[("finagent_jobs", (("status", "completed"),))] == completed >= 1
    assert {dict(ls)["queue"] for n, ls in after if n == "finagent_queue_depth"} == {q.value for q in Queue}
    breakers = {dict(ls)["dependency"] for n, ls in after if n == "finagent_circuit_breaker_state"}
    assert "tavily" in breakers and any(b.startswith("llm:") for b in breakers)
    for dep in breakers:
        assert total(after, "finagent_circuit_breaker_state", dependency=dep) == 1  # exactly one state is current
    assert total(after, "finagent_scrape_source_up") == 2


def test_a_worker_shutdown_drops_its_live_gauges_and_keeps_its_totals(ctx, sample_corpus, workers, worker):
    run_job(ctx, question="How did AAPL's revenue change over the last 2 quarters?")
    directory = ctx.settings.metrics_path()
    pids = {p.pid for p in worker}
    live = {f.name for f in directory.glob("gauge_livesum_*.db") if int(f.stem.rsplit("-", 1)[1]) in pids}
    assert live, "the workers keep their tasks-in-progress gauge in live files"
    tasks_before = total(scrape(ctx), "finagent_task_duration_seconds_count")
    totals = {f.name for f in directory.glob("histogram_*.db") if int(f.stem.rsplit("-", 1)[1]) in pids}
    assert totals
    workers.stop()  # warm shutdown: the worker_shutdown signal marks each process dead
    assert not {f.name for f in directory.glob("gauge_livesum_*.db")} & live
    # the totals stay (a task still finishing during the warm shutdown may add to them)
    assert total(scrape(ctx), "finagent_task_duration_seconds_count") >= tasks_before
    assert {f.name for f in directory.glob("histogram_*.db")} >= totals
