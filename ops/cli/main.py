"""The `finagent` command."""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Optional

import typer
from rich.console import Console
from rich.table import Table

from agent.settings import get_settings
from ops.cli import exit_codes
from ops.cli.batch_runs import batch_app
from ops.cli.eval import eval_app
from ops.cli.redis_users import redis_app
from ops.cli.statement_lines import statements_app
from workers.topology import Queue

if TYPE_CHECKING:
    from agent.ingest.documents import Kind

app = typer.Typer(no_args_is_help=True, help="finagent: iterative research agent over earnings calls, 10-Ks and news.")
config_app = typer.Typer(no_args_is_help=True, help="Inspect the effective settings.")
services_app = typer.Typer(no_args_is_help=True, help="Manage the embedded Redis, Postgres and local workers.")
db_app = typer.Typer(no_args_is_help=True, help="Database schema.")
ingest_app = typer.Typer(no_args_is_help=True, help="Ingest transcripts and 10-K filings.")
index_app = typer.Typer(no_args_is_help=True, help="The BM25 keyword index of unfiltered search (derived from the database).")
app.add_typer(config_app, name="config")
app.add_typer(services_app, name="services")
app.add_typer(db_app, name="db")
app.add_typer(ingest_app, name="ingest")
app.add_typer(index_app, name="index")
app.add_typer(eval_app, name="eval")
app.add_typer(statements_app, name="statements")
app.add_typer(redis_app, name="redis")
console = Console()
err = Console(stderr=True, soft_wrap=True)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"finagent {version('finagent')}")
        raise typer.Exit()


@app.callback()
def _options(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                          help="Print the installed version and exit.")) -> None:
    from agent.infra import logs

    try:
        settings = get_settings()
    except Exception:
        return  # the command reports a bad setting itself, readably (main())
    logs.configure_from(settings, level=logs.command_level(settings))


def _print_json(data) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


@config_app.command("show")
def config_show(as_json: bool = typer.Option(False, "--json")):
    """Print the effective settings, secrets masked."""
    from agent.redact import masked_config

    data = masked_config(get_settings())
    if as_json:
        return _print_json(data)
    table = Table("setting", "value", title="finagent settings (env FINAGENT_*, then .env, then defaults)")
    for key, value in data.items():
        table.add_row(key, json.dumps(value, default=str) if not isinstance(value, str) else value)
    console.print(table)


@services_app.command("status")
def services_status(as_json: bool = typer.Option(False, "--json")):
    from agent.redact import mask_url
    from ops.local.stack import embedded_huge_pages, status
    from ops.local.worker_pool import worker_status

    settings = get_settings()
    rows = [s.model_dump() | {"url": s.url and mask_url(s.url)} for s in status(settings)]  # no password printed
    workers = worker_status(settings)
    huge = embedded_huge_pages(settings)
    if as_json:
        return _print_json({"services": rows, "workers": workers, "postgres_huge_pages": huge.model_dump() if huge else None})
    table = Table("service", "running", "embedded", "where")
    for r in rows:
        table.add_row(r["name"], "yes" if r["running"] else "no", "yes" if r["embedded"] else "no", r["url"] or r["detail"])
    for w in workers:
        table.add_row(f"worker:{w['name']}", "yes" if w["running"] else "no", "yes", ",".join(w["queues"]))
    console.print(table)
    if huge is not None:
        console.print(f"postgres huge pages: {huge.advice}")


@services_app.command("start")
def services_start(workers: bool = typer.Option(True, help="Also start local Celery workers."),
                   as_json: bool = typer.Option(False, "--json")):
    from agent.redact import mask_url
    from ops.local.bootstrap import bootstrap

    ctx = bootstrap(workers=workers)
    if as_json:
        return _print_json({"ready": True, "postgres": mask_url(ctx.database_url), "redis": mask_url(ctx.redis_url),
                            "workers": workers})
    console.print(f"[green]ready[/green] postgres={mask_url(ctx.database_url)} redis={mask_url(ctx.redis_url)}")


@services_app.command("stop")
def services_stop(as_json: bool = typer.Option(False, "--json")):
    from ops.local.stack import stop_embedded
    from ops.local.worker_pool import stop_workers

    settings = get_settings()
    stopped = stop_workers(settings) + stop_embedded(settings)
    if as_json:
        return _print_json({"stopped": stopped})
    console.print("stopped: " + (", ".join(stopped) or "nothing was running"))


@db_app.command("upgrade")
def db_upgrade(as_json: bool = typer.Option(False, "--json")):
    """Apply pending migrations (idempotent); the only command that changes a configured database's schema. Also
    builds the vector indexes a bulk load that died had deferred."""
    from ops.local.bootstrap import upgrade_schema
    from ops.local.stack import ensure_stack

    urls = ensure_stack(get_settings())
    applied, rebuilt = upgrade_schema(urls.database_url)
    if as_json:
        return _print_json({"applied": applied})
    console.print("applied: " + (", ".join(applied) if applied else "nothing, schema is up to date"))
    if rebuilt:
        console.print("rebuilt vector indexes a bulk load had deferred: " + ", ".join(r.name for r in rebuilt))


@index_app.command("sync")
def index_sync(rebuild: bool = typer.Option(False, help="drop the index and build it again from the chunk tables"),
               as_json: bool = typer.Option(False, "--json")):
    """Bring this host's BM25 index up to the chunk tables (the workers that search do it every KEYWORD_INDEX_SYNC_S)."""
    from agent.retrieval import keyword_index
    from ops.local.bootstrap import bootstrap

    ctx = bootstrap(get_settings())
    reports = keyword_index.sync_all(ctx.pool, ctx.settings.data_dir, rebuild=rebuild)
    if as_json:
        _print_json([r.model_dump() for r in reports])
        return
    for r in reports:
        state = "skipped: another process is writing" if r.skipped else f"added {r.added} chunks in {r.seconds} s"
        console.print(f"{r.corpus}: {state}; holds chunks up to id {r.watermark}")


@db_app.command("status")
def db_status(as_json: bool = typer.Option(False, "--json")):
    """Each migration, applied or pending."""
    from agent.db.migrate import available, current
    from ops.local.stack import ensure_stack

    urls = ensure_stack(get_settings())
    done = set(current(urls.database_url))
    if as_json:
        return _print_json([{"version": version, "applied": version in done} for version, _ in available()])
    for version, _ in available():
        console.print(f"{'applied' if version in done else 'pending'}  {version}")


def _run_ingest(kind: Kind, paths: list[Path], inline: bool, as_json: bool) -> None:
    from agent.ingest.runner import ingest
    from ops.local.bootstrap import bootstrap
    from tasks.ingest import EmbedFanOut

    ctx = bootstrap(workers=not inline)
    report = ingest(ctx, kind, paths, fanout=None if inline else EmbedFanOut, quiet=as_json)
    if kind == "10k":
        from agent.statements.line_store import refresh_from_tables

        refresh_from_tables(ctx.pool)  # filings stored before the statement reader changed
    _print_ingest_report(report, as_json)


def _print_ingest_report(report, as_json: bool) -> None:
    if as_json:
        _print_json(report.model_dump() | {"errors": len(report.errors)})
    else:
        table = Table("file", "status", "chunks", "tables", "reason")
        for f in report.files:
            style = "red" if f.status == "error" else ""
            table.add_row(f.path, f"[{style}]{f.status}[/{style}]" if style else f.status, str(f.chunks), str(f.tables), f.reason or "")
        console.print(table)
        console.print(f"{len(report.files)} files, {report.chunks_embedded} chunks embedded in {report.seconds:.1f}s, {len(report.errors)} errors")
        for r in report.index_rebuilds:
            console.print(f"vector index {r.name} built after the load, over {r.rows} chunks, in {r.seconds:.1f}s")
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


@ingest_app.command("pages")
def ingest_pages(data_dir: Path, inline: bool = typer.Option(False, help="Embed in this process instead of on the workers."),
                 as_json: bool = typer.Option(False, "--json")):
    """Ingest filings given as page texts (10-K, 10-Q, 8-K, earnings): DATA_DIR/documents.jsonl (doc_name, company,
    doc_type, doc_period) and DATA_DIR/pages/{doc_name}.jsonl.gz; every chunk keeps its 0-based page."""
    from ops.eval.financebench_ingest import PagesDirError, ingest_financebench, pages_layout
    from ops.local.bootstrap import bootstrap
    from tasks.ingest import EmbedFanOut

    try:
        pages_layout(data_dir)
    except PagesDirError as exc:
        err.print(f"error: {exc}", highlight=False, markup=False)
        raise typer.Exit(code=2) from None
    report = ingest_financebench(bootstrap(workers=not inline), data_dir, fanout=None if inline else EmbedFanOut, quiet=as_json)
    _print_ingest_report(report, as_json)


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
    from agent.search_service import SearchRequest
    from agent.search_service import search as run_search
    from ops.local.bootstrap import bootstrap

    time_refs: list[str] = []
    if quarters is not None:
        try:
            time_refs = quarters_option(quarters)
        except ValueError as exc:
            _input_error(str(exc))
    ctx = bootstrap()
    req = SearchRequest(query=query, tickers=[t.upper() for t in ticker], time_refs=time_refs,
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


def _input_error(message: str) -> NoReturn:
    """Bad input: one plain line on stderr (no markup, no wrapping, no traceback) and exit status 2."""
    err.print(message, style="red", markup=False, highlight=False)
    raise typer.Exit(code=exit_codes.BAD_INPUT)


QUARTERS_FORMS = "latest | last3 | 'Q4 2024' | 2024_q4,2025_q1 | FY2023"


def quarters_option(value: str) -> list[str]:
    """--quarters as time references; ValueError naming the first one that is not a period (or cannot exist)."""
    from agent.retrieval.periods import find_time_refs, impossible_periods, parse_quarters_option

    refs = parse_quarters_option(value)
    if not refs:
        raise ValueError(f"--quarters: {value!r} names no period ({QUARTERS_FORMS})")
    for ref in refs:
        impossible = impossible_periods(ref)
        if impossible:
            raise ValueError(f"--quarters: {impossible[0]}")
        if find_time_refs(ref) != [ref]:
            raise ValueError(f"--quarters: {ref!r} is not a period ({QUARTERS_FORMS})")
    return refs


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
    strategy: str = typer.Option("auto", "--strategy",
                                 help="auto (the router picks from the plan) | transcripts_first | 10k_first | hybrid | "
                                      "broad_window | transcripts_first_fallback"),
    as_json: bool = typer.Option(False, "--json", help="print only the final result object"),
):
    """Ask a research question; prints the live events, then the cited answer and its confidence."""
    from pydantic import ValidationError

    from agent.models.job import JobRequest
    from agent.submission import InvalidRequest, check_question, check_request
    from ops.cli.ask import run_question
    from ops.local.bootstrap import bootstrap

    try:
        if feedback_on:
            if not feedback:
                _input_error("--feedback-on needs --feedback")
            from finagent.models import Feedback
            from ops.cli.ask import rerun_question

            Feedback(feedback=feedback)  # the text is checked before anything starts
            try:
                result = rerun_question(feedback_on, feedback, as_json)
            except (LookupError, ValueError) as exc:  # no such job, or it has not finished
                _input_error(str(exc))
        else:
            if not question:
                _input_error("a question is required")
            request = JobRequest(question=question, mode=mode, tickers=ticker or None, max_iterations=max_iterations,
                                 max_duration_seconds=max_duration, min_confidence=min_confidence, batch=batch,
                                 strategy=strategy)
            check_question(request)
            check_request(bootstrap(), request)  # the tickers need the database; nothing is written or started yet
            result = run_question(request, as_json)
    except ValidationError as exc:
        _input_error("invalid request: " + "; ".join(f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in exc.errors()))
    except InvalidRequest as exc:
        _input_error(f"invalid request: {exc}")
    if result.status in ("failed", "rejected"):
        raise typer.Exit(code=1)


@app.command()
def demo(question: str = typer.Argument("What was NVDA's revenue last quarter and what drove it?")):
    """Zero-config demo: start the embedded services and workers, ingest the sample corpus, ask a question."""
    from agent.ingest.runner import ingest
    from agent.models.job import JobRequest
    from ops.cli.ask import run_question
    from ops.local.bootstrap import bootstrap
    from tasks.ingest import EmbedFanOut

    ctx = bootstrap(workers=True)
    root = sample_corpus_dir()
    corpora: tuple[tuple[Kind, str], ...] = (("transcript", "transcripts"), ("10k", "10k"))
    for kind, sub in corpora:
        report = ingest(ctx, kind, [root / sub], fanout=EmbedFanOut)
        console.print(f"sample {sub}: " + ", ".join(f"{s}={sum(1 for f in report.files if f.status == s)}"
                                                     for s in ("added", "replaced", "unchanged", "error")))
    console.print(f"\n[bold]Q: {question}[/bold]")
    run_question(JobRequest(question=question), as_json=False)


jobs_app = typer.Typer(no_args_is_help=True, help="Inspect and cancel research jobs.")
app.add_typer(jobs_app, name="jobs")
app.add_typer(batch_app, name="batch")


def statuses_option(values: list[str]) -> list[str]:
    """--status, repeated or as a comma list (as the API's `status`); ValueError naming an unknown one."""
    from typing import get_args

    from agent.models.job import JobStatus

    known = get_args(JobStatus)
    wanted = list(dict.fromkeys(s.strip() for v in values for s in v.split(",") if s.strip()))
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise ValueError(f"unknown status {', '.join(map(repr, unknown))}; the statuses are {', '.join(known)}")
    return wanted


@jobs_app.command("list")
def jobs_list(limit: int = typer.Option(20, min=1, max=1000),
              status: list[str] = typer.Option([], "--status", help="repeat it or give a comma list: --status queued,running"),
              as_json: bool = typer.Option(False, "--json")):
    """The most recent jobs, newest first."""
    from agent.persistence.jobstore import page_jobs
    from ops.local.bootstrap import bootstrap

    try:
        statuses = statuses_option(status)
    except ValueError as exc:
        _input_error(str(exc))
    rows, _ = page_jobs(bootstrap().pool, limit, statuses or None)
    if as_json:
        return _print_json(rows)
    table = Table("job", "status", "step", "created", "question")
    for r in rows:
        table.add_row(str(r["id"]), r["status"], r["step"], r["created_at"].strftime("%Y-%m-%d %H:%M:%S"), r["question"][:70])
    console.print(table)


def _find_job(ctx, job_id: str):
    from agent.submission import find_job

    try:
        return find_job(ctx, job_id)
    except LookupError as exc:
        err.print(f"[red]{exc}[/red]")
        raise typer.Exit(code=exit_codes.FAILED) from None


@jobs_app.command("show")
def jobs_show(job_id: str, ledger: bool = typer.Option(False, help="also print the tool ledger")):
    """Print a job's result object (JSON), optionally with its tool ledger; a failed or rejected job's error comes
    with a suggestion when its reason allows one."""
    from agent.failure_hints import job_suggestion
    from agent.persistence.ledger import load_ledger
    from ops.local.bootstrap import bootstrap

    ctx = bootstrap()
    job = _find_job(ctx, job_id)
    suggestion = job_suggestion(ctx, job)
    data = {"job_id": job.id, "status": job.status, "step": job.step, "error": job.error,
            "suggestion": suggestion.model_dump(mode="json") if suggestion else None,
            "result": job.result.model_dump(mode="json") if job.result else None}
    if ledger:
        data["tool_ledger"] = load_ledger(ctx.pool, job.id)
    _print_json(data)


@jobs_app.command("ledger")
def jobs_ledger(job_id: str, as_json: bool = typer.Option(False, "--json")):
    """A job's tool ledger: every tool call with its parameters (secrets masked), timing, retries, error class,
    tokens and cost."""
    from agent.persistence.ledger import job_ledger
    from ops.local.bootstrap import bootstrap

    ctx = bootstrap()
    ledger = job_ledger(ctx.pool, _find_job(ctx, job_id).id)
    if as_json:
        typer.echo(ledger.model_dump_json(indent=2))
        return
    table = Table("started", caption="--json has each call's parameters")
    table.add_column("tool", no_wrap=True)
    for header in ("ms", "retries", "error", "tokens (prompt / completion)", "cost"):
        table.add_column(header)
    for c in ledger.calls:
        table.add_row(c.started_at.strftime("%H:%M:%S.%f")[:-3], c.tool, f"{c.duration_ms:.0f}", str(c.retries), c.error_class or "",
                      f"{c.prompt_tokens:,} / {c.completion_tokens:,}" if c.llm_requests else "",
                      f"${c.cost_usd:.4f}" if c.llm_requests else "")
    console.print(table)
    console.print(f"{len(ledger.calls)} calls, {ledger.errors} failed, {ledger.retries} retries; tokens "
                  f"{ledger.prompt_tokens:,} / {ledger.completion_tokens:,}; cost ${ledger.cost_usd:.4f}")


@jobs_app.command("cancel")
def jobs_cancel(job_id: str, as_json: bool = typer.Option(False, "--json", help="print the job (as GET /v1/jobs/ID shows it)")):
    """Cancel a job: it ends at its next step with status `cancelled`, keeping its answer so far."""
    from agent.models.job import FINAL_STATUSES
    from agent.submission import cancel, find_job, job_view
    from ops.local.bootstrap import bootstrap
    from tasks.dispatch import CeleryDispatcher

    ctx = bootstrap()
    try:
        status = cancel(ctx, CeleryDispatcher(), job_id)
    except LookupError as exc:
        err.print(f"[red]{exc}[/red]")
        raise typer.Exit(code=exit_codes.FAILED) from None
    if as_json:
        typer.echo(job_view(find_job(ctx, job_id)).model_dump_json(indent=2))
    if status in FINAL_STATUSES and status != "cancelled":
        err.print(f"[yellow]job {job_id} already ended: {status}[/yellow]")
        raise typer.Exit(code=exit_codes.FAILED)
    if not as_json:
        console.print(f"job {job_id}: cancel requested (status {status}); `finagent jobs show {job_id}` shows the result")


@jobs_app.command("events")
def jobs_events(job_id: str, follow_live: bool = typer.Option(True, "--follow/--no-follow"),
                as_json: bool = typer.Option(False, "--json", help="one JSON event per line on stdout")):
    """Replay a job's events (and keep following until it ends)."""
    from agent.infra.events import follow, replay
    from ops.cli.ask import print_event
    from ops.local.bootstrap import bootstrap

    ctx = bootstrap()
    job = _find_job(ctx, job_id)
    try:
        for ev in (follow(ctx.redis, job.id, timeout_s=3600) if follow_live else replay(ctx.redis, job.id)):
            if as_json:
                typer.echo(ev.model_dump_json())
            else:
                print_event(ev)
    except BrokenPipeError:
        _reader_left()


def _reader_left() -> NoReturn:
    """stdout's reader has gone (`... | head -1`): it read what it wanted, so stop quietly and successfully, with
    stdout pointed at /dev/null so that the exit's flush has nowhere to fail."""
    import os
    import sys

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(code=exit_codes.OK)


@app.command()
def api(host: str = "127.0.0.1", port: int = 8000):
    """Run the HTTP API (/v1, FastAPI) on the configured services. Off loopback it needs FINAGENT_API_KEYS."""
    import uvicorn

    from api_stub.auth import BindRefused, check_bind
    from ops.local.bootstrap import bootstrap

    try:
        check_bind(host, get_settings())
    except BindRefused as exc:
        err.print(str(exc), soft_wrap=True, highlight=False, markup=False)
        raise typer.Exit(code=2) from None
    settings = get_settings()
    # the embedded stack gets local workers; with configured servers the workers are their own processes
    bootstrap(workers=not (settings.database_url and settings.redis_url))
    from agent.infra import logs

    logs.configure_from(settings)  # a server's level, not the command's; uvicorn's own lines go through it too
    uvicorn.run("api_stub.asgi:app", host=host, port=port, log_config=None)


@app.command()
def flower(host: str = typer.Option("127.0.0.1", help="address to listen on; off loopback needs FINAGENT_FLOWER_BASIC_AUTH"),
           port: int | None = typer.Option(None, help="default FINAGENT_FLOWER_PORT")):
    """Run Flower against the configured broker to watch workers and tasks (basic auth from
    FINAGENT_FLOWER_BASIC_AUTH, task history kept in FINAGENT_DATA_DIR/flower.db)."""
    import os

    from agent.infra.extras import require
    from agent.services import celery_broker_url
    from agent.settings import get_settings
    from ops.cli.flower import FlowerConfigError, check_bind, flower_command
    from ops.local.bootstrap import bootstrap

    require("flower", "flower")  # `celery flower` would only say "No such command"
    settings = get_settings()
    try:
        check_bind(settings, host)
    except FlowerConfigError as exc:
        err.print(f"[red]{exc}[/red]", soft_wrap=True)
        raise typer.Exit(code=2) from None
    # a configured broker is used as it is; the embedded stack is started, with local workers to watch
    redis_url = settings.redis_url or bootstrap(workers=True).redis_url
    cmd = flower_command(settings, celery_broker_url(redis_url), host=host, port=port)
    cmd.db.parent.mkdir(parents=True, exist_ok=True)
    os.execve(cmd.argv[0], cmd.argv, cmd.environ(os.environ))  # Flower gets the signals and saves its state on stop


@app.command()
def worker(queues: str = typer.Option(",".join(q.value for q in Queue), "--queues", "-Q", help="comma-separated queues"),
           concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", help="threads (default: the topology's for that pool)"),
           name: Optional[str] = typer.Option(None, "--name", "-n", help="node name (default: the pool's name)")):
    """Run one production Celery worker in the foreground (threads pool) on the given queues (workers/topology.py)."""
    import os
    import sys

    from ops.local.bootstrap import bootstrap
    from workers.topology import WORKERS, worker_argv

    wanted = [q for q in queues.split(",") if q]
    unknown = sorted(set(wanted) - {q.value for q in Queue})
    if unknown or not wanted:
        err.print(f"[red]unknown queue {', '.join(unknown) or '(none)'}; the queues are {', '.join(q.value for q in Queue)}[/red]")
        raise typer.Exit(code=2)
    pool = next((w for w in WORKERS if {q.value for q in w.queues} == set(wanted)), None)
    spec = (pool or WORKERS[0]).model_copy(update={"queues": [Queue(q) for q in wanted],
                                                   "concurrency": concurrency or (pool.concurrency if pool else 8)})
    bootstrap()
    os.environ.update(spec.env_defaults(get_settings()))
    os.execv(sys.executable, [sys.executable, "-m", "celery", *worker_argv(spec, name or (pool.name if pool else "worker")), "-l", "INFO"])


@app.command()
def beat():
    """Run Celery beat (the stalled-job sweep and the batch admissions) in the foreground; run exactly one."""
    import os
    import sys

    from ops.local.bootstrap import bootstrap

    ctx = bootstrap()
    schedule = ctx.settings.data_dir / "celerybeat-schedule"
    schedule.parent.mkdir(parents=True, exist_ok=True)
    os.execv(sys.executable, [sys.executable, "-m", "celery", "-A", "workers.app", "beat", "-s", str(schedule), "-l", "INFO"])


def main() -> None:
    """The console command: `app`, with three failures reported as one line instead of a traceback, whichever command
    met them: an embedded server that will not start (a setting it cannot run with, a broken data dir: its log's
    reason, exit status 2), a package of an extra that is not installed, a FINAGENT_*_FILE that cannot be read, or a
    configured database whose schema is behind (`finagent db upgrade` not run yet; exit status 2), and Postgres or Redis down
    or unreachable (exit status 3). The exit statuses are in `ops.cli.exit_codes`."""
    from agent.db.migrate import SchemaBehind
    from agent.infra.extras import MissingExtra
    from agent.infra.unavailable import UNAVAILABLE_TYPES, unavailable
    from agent.settings import SecretFileError, env_var
    from ops.local.stack import EmbeddedServerError

    try:
        app()
    except (EmbeddedServerError, MissingExtra, SchemaBehind, SecretFileError) as exc:
        err.print(str(exc), style="red", markup=False, highlight=False)
        raise SystemExit(exit_codes.BAD_INPUT) from None
    except UNAVAILABLE_TYPES as exc:
        down = unavailable(exc)
        if down is None:
            raise
        setting = env_var("database_url" if down.service == "postgres" else "redis_url")
        err.print(f"{down.service} is unavailable: {down.reason} (is it running? {setting} names it; "
                  "`finagent services status` shows what runs here)", style="red", markup=False, highlight=False)
        raise SystemExit(exit_codes.UNAVAILABLE) from None


if __name__ == "__main__":
    main()
