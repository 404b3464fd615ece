"""The `finagent` command."""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.console import Console
from rich.table import Table

from agent.settings import get_settings
from workers.topology import Queue

if TYPE_CHECKING:
    from agent.ingest.documents import Kind

app = typer.Typer(no_args_is_help=True, help="finagent: iterative research agent over earnings calls, 10-Ks and news.")
config_app = typer.Typer(no_args_is_help=True, help="Inspect the effective settings.")
services_app = typer.Typer(no_args_is_help=True, help="Manage the embedded Redis, Postgres and local workers.")
db_app = typer.Typer(no_args_is_help=True, help="Database schema.")
ingest_app = typer.Typer(no_args_is_help=True, help="Ingest transcripts and 10-K filings.")
app.add_typer(config_app, name="config")
app.add_typer(services_app, name="services")
app.add_typer(db_app, name="db")
app.add_typer(ingest_app, name="ingest")
console = Console()
err = Console(stderr=True)


def _print_json(data) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


@config_app.command("show")
def config_show(as_json: bool = typer.Option(False, "--json")):
    """Print the effective settings, secrets masked."""
    data = get_settings().masked()
    if as_json:
        return _print_json(data)
    table = Table("setting", "value", title="finagent settings (env FINAGENT_*, then .env, then defaults)")
    for key, value in data.items():
        table.add_row(key, json.dumps(value, default=str) if not isinstance(value, str) else value)
    console.print(table)


@services_app.command("status")
def services_status(as_json: bool = typer.Option(False, "--json")):
    from ops.stack import status
    from ops.workers import worker_status

    settings = get_settings()
    rows = [s.model_dump() for s in status(settings)]
    workers = worker_status(settings)
    if as_json:
        return _print_json({"services": rows, "workers": workers})
    table = Table("service", "running", "embedded", "where")
    for r in rows:
        table.add_row(r["name"], "yes" if r["running"] else "no", "yes" if r["embedded"] else "no", r["url"] or r["detail"])
    for w in workers:
        table.add_row(f"worker:{w['name']}", "yes" if w["running"] else "no", "yes", ",".join(w["queues"]))
    console.print(table)


@services_app.command("start")
def services_start(workers: bool = typer.Option(True, help="Also start local Celery workers.")):
    from ops.runtime import bootstrap

    ctx = bootstrap(workers=workers)
    console.print(f"[green]ready[/green] postgres={ctx.database_url} redis={ctx.redis_url}")


@services_app.command("stop")
def services_stop():
    from ops.stack import stop_embedded
    from ops.workers import stop_workers

    settings = get_settings()
    stopped = stop_workers(settings) + stop_embedded(settings)
    console.print("stopped: " + (", ".join(stopped) or "nothing was running"))


@db_app.command("upgrade")
def db_upgrade():
    """Apply pending migrations (idempotent)."""
    from agent.db.migrate import upgrade
    from ops.stack import ensure_stack

    urls = ensure_stack(get_settings())
    applied = upgrade(urls.database_url)
    console.print("applied: " + (", ".join(applied) if applied else "nothing, schema is up to date"))


@db_app.command("status")
def db_status():
    from agent.db.migrate import available, current
    from ops.stack import ensure_stack

    urls = ensure_stack(get_settings())
    done = set(current(urls.database_url))
    for version, _ in available():
        console.print(f"{'applied' if version in done else 'pending'}  {version}")


def _run_ingest(kind: Kind, paths: list[Path], inline: bool, as_json: bool) -> None:
    from ops.ingest_runner import ingest
    from ops.runtime import bootstrap

    ctx = bootstrap(workers=not inline)
    report = ingest(ctx, kind, paths, fanout=not inline, quiet=as_json)
    if as_json:
        _print_json(report.model_dump() | {"errors": len(report.errors)})
    else:
        table = Table("file", "status", "chunks", "tables", "reason")
        for f in report.files:
            style = "red" if f.status == "error" else ""
            table.add_row(f.path, f"[{style}]{f.status}[/{style}]" if style else f.status, str(f.chunks), str(f.tables), f.reason or "")
        console.print(table)
        console.print(f"{len(report.files)} files, {report.chunks_embedded} chunks embedded in {report.seconds:.1f}s, {len(report.errors)} errors")
    if report.errors:
        raise typer.Exit(code=2)


@ingest_app.command("transcripts")
def ingest_transcripts(paths: list[Path], inline: bool = typer.Option(False, help="Embed in this process instead of on the workers."),
                       as_json: bool = typer.Option(False, "--json")):
    """Ingest transcripts: JSON ({TICKER}_{YYYY}_q{N}.json) or plain text with a metadata header; directories are walked."""
    _run_ingest("transcript", paths, inline, as_json)


@ingest_app.command("10k")
def ingest_10k(paths: list[Path], inline: bool = typer.Option(False, help="Embed in this process instead of on the workers."),
               as_json: bool = typer.Option(False, "--json")):
    """Ingest 10-K filings: EDGAR HTML / inline XBRL or PDF; directories are walked."""
    _run_ingest("10k", paths, inline, as_json)


def sample_corpus_dir() -> Path:
    return Path(str(resources.files("agent") / "sample_corpus"))


@ingest_app.command("sample")
def ingest_sample(inline: bool = typer.Option(False), as_json: bool = typer.Option(False, "--json")):
    """Ingest the small sample corpus shipped with finagent."""
    root = sample_corpus_dir()
    _run_ingest("transcript", [root / "transcripts"], inline, as_json)
    _run_ingest("10k", [root / "10k"], inline, as_json)


@app.command()
def search(
    query: str,
    ticker: list[str] = typer.Option([], "--ticker", "-t", help="Repeatable."),
    quarters: Optional[str] = typer.Option(None, help="latest | last3 | 'Q4 2024' | 2024_q4,2025_q1 | FY2023"),
    item: list[str] = typer.Option([], "--item", help="10-K item filter (1, 1A, 7, 7A, 8); implies --corpus 10k."),
    corpus: str = typer.Option("transcript", help="transcript | 10k"),
    top_k: int = typer.Option(15, "--top-k"),
    as_json: bool = typer.Option(False, "--json"),
):
    """Hybrid search (0.7 semantic + 0.3 keyword) with per-company period resolution."""
    from agent.retrieval.periods import parse_quarters_option
    from agent.search_service import SearchRequest
    from agent.search_service import search as run_search
    from ops.runtime import bootstrap

    ctx = bootstrap()
    req = SearchRequest(query=query, tickers=[t.upper() for t in ticker], time_refs=parse_quarters_option(quarters) if quarters else [],
                        items=item, corpus="10k" if item else corpus, top_k=top_k)
    resp = run_search(ctx, req)
    if as_json:
        return _print_json(resp.model_dump())
    for p in resp.problems:
        err.print(f"[yellow]note:[/yellow] {p}")
    if resp.periods:
        console.print("periods: " + "; ".join(f"{t}: {', '.join(ps)}" for t, ps in resp.periods.items()))
    if resp.hits:
        table = Table("#", "score", "ticker", "period", "where", "text")
        for i, h in enumerate(resp.hits, 1):
            where = f"Item {h.item}" if h.item else (h.speaker or "")
            table.add_row(str(i), f"{h.score:.3f}", h.ticker or "", h.period, where, h.text[:160].replace("\n", " ") + "…")
        console.print(table)
    else:
        err.print("no results")
        raise typer.Exit(code=1)


@app.command()
def ask(
    question: Optional[str] = typer.Argument(None, help="the question (omit with --feedback-on)"),
    mode: Optional[str] = typer.Option(None, help="direct | standard | detailed | deep_search (default: the planner picks)"),
    ticker: list[str] = typer.Option([], "--ticker", "-t"),
    max_iterations: Optional[int] = typer.Option(None, "--max-iterations"),
    max_duration: Optional[int] = typer.Option(None, "--max-duration", help="seconds"),
    min_confidence: Optional[float] = typer.Option(None, "--min-confidence"),
    feedback_on: Optional[str] = typer.Option(None, "--feedback-on", help="re-run this finished job id with --feedback"),
    feedback: Optional[str] = typer.Option(None, "--feedback"),
    batch: bool = typer.Option(False, help="run on the low-priority batch queue"),
    as_json: bool = typer.Option(False, "--json", help="print only the final result object"),
):
    """Ask a research question; prints the live events, then the cited answer and its confidence."""
    from pydantic import ValidationError

    from agent.models.job import JobRequest
    from ops.ask import run_question

    if feedback_on:
        if not feedback:
            err.print("[red]--feedback-on needs --feedback[/red]")
            raise typer.Exit(code=2)
        from ops.ask import rerun_question

        result = rerun_question(feedback_on, feedback, as_json)
        raise typer.Exit(code=1 if result.status in ("failed", "rejected") else 0)
    if not question:
        err.print("[red]a question is required[/red]")
        raise typer.Exit(code=2)
    try:
        request = JobRequest(question=question, mode=mode, tickers=[t.upper() for t in ticker] or None,
                             max_iterations=max_iterations, max_duration_seconds=max_duration, min_confidence=min_confidence,
                             batch=batch)
    except ValidationError as exc:
        err.print(f"[red]invalid request:[/red] {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}")
        raise typer.Exit(code=2) from None
    result = run_question(request, as_json)
    if result.status in ("failed", "rejected"):
        raise typer.Exit(code=1)


@app.command()
def demo(question: str = typer.Argument("What was NVDA's revenue last quarter and what drove it?")):
    """Zero-config demo: start the embedded services and workers, ingest the sample corpus, ask a question."""
    from agent.models.job import JobRequest
    from ops.ask import run_question
    from ops.ingest_runner import ingest
    from ops.runtime import bootstrap

    ctx = bootstrap(workers=True)
    root = sample_corpus_dir()
    corpora: tuple[tuple[Kind, str], ...] = (("transcript", "transcripts"), ("10k", "10k"))
    for kind, sub in corpora:
        report = ingest(ctx, kind, [root / sub], fanout=True)
        console.print(f"sample {sub}: " + ", ".join(f"{s}={sum(1 for f in report.files if f.status == s)}"
                                                     for s in ("added", "replaced", "unchanged", "error")))
    console.print(f"\n[bold]Q: {question}[/bold]")
    run_question(JobRequest(question=question), as_json=False)


jobs_app = typer.Typer(no_args_is_help=True, help="Inspect research jobs.")
app.add_typer(jobs_app, name="jobs")


@jobs_app.command("list")
def jobs_list(limit: int = 20, status: Optional[str] = None, as_json: bool = typer.Option(False, "--json")):
    from agent.persistence.jobstore import list_jobs
    from ops.runtime import bootstrap

    rows = list_jobs(bootstrap().pool, limit, status)
    if as_json:
        return _print_json(rows)
    table = Table("job", "status", "step", "created", "question")
    for r in rows:
        table.add_row(str(r["id"]), r["status"], r["step"], r["created_at"].strftime("%Y-%m-%d %H:%M:%S"), r["question"][:70])
    console.print(table)


@jobs_app.command("show")
def jobs_show(job_id: str, ledger: bool = typer.Option(False, help="also print the tool ledger")):
    """Print a job's result object (JSON), optionally with its tool ledger."""
    from agent.persistence.jobstore import load_job
    from agent.persistence.ledger import load_ledger
    from ops.runtime import bootstrap

    ctx = bootstrap()
    job = load_job(ctx.pool, job_id)
    if job is None:
        err.print(f"no job {job_id}")
        raise typer.Exit(code=1)
    data = {"job_id": job.id, "status": job.status, "step": job.step, "error": job.error,
            "result": job.result.model_dump(mode="json") if job.result else None}
    if ledger:
        data["tool_ledger"] = load_ledger(ctx.pool, job.id)
    _print_json(data)


@jobs_app.command("events")
def jobs_events(job_id: str, follow_live: bool = typer.Option(True, "--follow/--no-follow")):
    """Replay a job's events (and keep following until it ends)."""
    from agent.infra.events import follow, replay
    from ops.ask import print_event
    from ops.runtime import bootstrap

    ctx = bootstrap()
    for ev in (follow(ctx.redis, job_id, timeout_s=3600) if follow_live else replay(ctx.redis, job_id)):
        print_event(ev)


@app.command()
def batch(path: Path, mode: Optional[str] = None, wait: bool = typer.Option(True, help="wait and write results"),
          out: Optional[Path] = typer.Option(None, help="JSONL of results (default: PATH.results.jsonl)")):
    """Overnight batch: one question per line (or JSONL with a "question" field), on the low-priority batch queue.
    Re-running the same file reuses the jobs already submitted (idempotency key = file + line). Bad lines are
    reported with their line number and skipped; the command then exits with status 1."""
    import time

    from rich.progress import Progress

    from agent.persistence.jobstore import load_job, statuses
    from ops.batch import read_batch, result_record, submit_batch
    from ops.runtime import bootstrap

    if not path.is_file():
        err.print(f"[red]{path}: no such file[/red]")
        raise typer.Exit(code=2)
    lines = read_batch(path, mode)
    bad = [item for item in lines if item.error]
    for item in bad:
        err.print(f"[red]{path}:{item.line}: {item.error}[/red]")
    ctx = bootstrap(workers=True)
    submit_batch(ctx, lines)
    ids = [item.job_id for item in lines if item.job_id]
    console.print(f"submitted {len(ids)} jobs on the batch queue" + (f"; {len(bad)} invalid lines skipped" if bad else ""))
    if wait:
        with Progress(console=err) as progress:
            task = progress.add_task("research jobs", total=len(ids))
            while True:
                done = sum(1 for s in statuses(ctx.pool, ids).values() if s in ("completed", "failed", "rejected"))
                progress.update(task, completed=done)
                if done == len(ids):
                    break
                time.sleep(1)
        target = out or path.with_suffix(".results.jsonl")
        with target.open("w") as fh:
            for item in lines:
                job = load_job(ctx.pool, item.job_id) if item.job_id else None
                fh.write(json.dumps(result_record(item, job)) + "\n")
        console.print(f"results: {target}")
    if bad:
        raise typer.Exit(1)


@app.command()
def api(host: str = "127.0.0.1", port: int = 8000):
    """Run the HTTP API (FastAPI) on the configured services."""
    import uvicorn

    from ops.runtime import bootstrap

    bootstrap(workers=True)
    uvicorn.run("api_stub.app:app", host=host, port=port)


@app.command()
def flower(port: int = 5555):
    """Run Flower against the configured broker to watch workers and tasks."""
    import os
    import subprocess
    import sys

    from ops.runtime import bootstrap
    from ops.stack import celery_broker_url

    ctx = bootstrap(workers=True)
    subprocess.run([sys.executable, "-m", "celery", "-A", "workers.app", "--broker", celery_broker_url(ctx.redis_url),
                    "flower", f"--port={port}"], env=dict(os.environ), check=False)


@app.command()
def worker(queues: str = typer.Option(",".join(q.value for q in Queue), "-Q", help="comma-separated queues"),
           concurrency: int = typer.Option(8, "-c")):
    """Run one Celery worker in the foreground (threads pool) on the given queues (workers/topology.py)."""
    import os
    import sys

    from ops.runtime import bootstrap

    unknown = sorted(set(queues.split(",")) - {q.value for q in Queue})
    if unknown:
        err.print(f"[red]unknown queue {', '.join(unknown)}; the queues are {', '.join(q.value for q in Queue)}[/red]")
        raise typer.Exit(code=2)
    bootstrap()
    os.execv(sys.executable, [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "-Q", queues,
                              "-P", "threads", "-c", str(concurrency), "-E", "-l", "INFO"])


if __name__ == "__main__":
    app()
