"""`finagent batch run|status|list|cancel`: overnight batches from a file, resumable, with a progress bar and a morning
report."""
from __future__ import annotations

import time
from pathlib import Path
from typing import NoReturn, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

batch_app = typer.Typer(no_args_is_help=True, help="Overnight batches: run a file of questions, watch, list and cancel batches.")
console = Console()
err = Console(stderr=True, soft_wrap=True)


def _fail(message: str, code: int = 2) -> NoReturn:
    err.print(message, style="red", markup=False, highlight=False)
    raise typer.Exit(code=code)


def _report_bad_lines(path: Path, lines) -> int:
    bad = [line for line in lines if line.error]
    for line in bad:
        err.print(f"{path}:{line.line}: {line.error}", style="red", markup=False, highlight=False)
    return len(bad)


@batch_app.command("run")
def run(
    path: Path = typer.Argument(..., help="one question per line, or JSONL objects with \"question\" and JobRequest fields"),
    out: Optional[Path] = typer.Option(None, "--out", help="results as JSONL (default: PATH.results.jsonl)"),
    report: Optional[Path] = typer.Option(None, "--report", help="also write the morning report (HTML, with Markdown beside it)"),
    mode: Optional[str] = typer.Option(None, help="answer mode for lines that do not set one"),
    name: Optional[str] = typer.Option(None, help="the batch's name (default: the file's absolute path)"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="give the lines whose job failed a new job"),
    wait: bool = typer.Option(True, "--wait/--no-wait", help="wait for the jobs, then write the results"),
):
    """Run a batch on the low-priority batch queue. Re-running the same command (after a crash, Ctrl-C or an edit
    of the file) reuses every answered or running question and runs only new or edited lines. Bad lines are reported
    with their line number and skipped; the command then exits with status 1."""
    from agent import batches
    from agent.settings import AnswerMode, get_settings
    from agent.submission import RequestInFlight
    from ops.local.bootstrap import bootstrap
    from tasks.dispatch import CeleryDispatcher

    if not path.is_file():
        _fail(f"{path}: no such file")
    if mode is not None and mode not in {m.value for m in AnswerMode}:
        _fail(f"unknown mode {mode!r}; the modes are {', '.join(m.value for m in AnswerMode)}")
    settings = get_settings()
    try:
        lines = batches.read_file(path, mode, max_bytes=settings.api_max_batch_bytes, max_lines=settings.api_max_batch_lines)
    except batches.BatchFileError as exc:
        _fail(str(exc))
    if not lines:
        _fail(f"{path}: no questions in the file")
    if not any(line.request for line in lines):  # nothing to run: say why without starting anything
        _report_bad_lines(path, lines)
        _fail(f"{path}: no valid question in the file")
    lines = batches.validate_lines(bootstrap(), lines)  # unknown tickers need the database; no worker is started yet
    bad = _report_bad_lines(path, lines)
    if bad == len(lines):
        _fail(f"{path}: no valid question in the file")
    ctx = bootstrap(workers=True)
    batch_name = name or str(path.resolve())
    try:
        batch_id = batches.create_batch(ctx, CeleryDispatcher(), batch_name, lines, retry_failed=retry_failed)
    except batches.NoValidLines:
        _fail(f"{path}: no valid question in the file")
    except RequestInFlight:
        _fail(f"batch {batch_name} is being submitted by another command; run this one again once it has", code=1)
    progress = batches.batch_progress(ctx.pool, batch_id)
    assert progress is not None
    already = progress.counts.get("completed", 0)
    console.print(f"batch {batch_id} ({batch_name}): {len(lines) - bad} questions, {already} already answered"
                  + (f", {bad} invalid lines skipped" if bad else ""))
    if not wait:
        console.print(f"follow it with: finagent batch status {batch_id}")
        raise typer.Exit(1 if bad else 0)
    try:
        _follow(ctx.pool, batch_id)
    except KeyboardInterrupt:
        err.print("[yellow]interrupted: the submitted jobs keep running on the workers; run the same command again "
                  "to pick up where it stopped[/yellow]")
        raise typer.Exit(130) from None
    target = out or path.with_suffix(".results.jsonl")
    items = batches.batch_items(ctx.pool, batch_id)
    with target.open("w") as fh:
        for item in items:
            fh.write(item.model_dump_json() + "\n")
    console.print(f"results: {target}")
    if report is not None:
        from agent.report.morning import write_report

        data = batches.batch_report(ctx.pool, batch_id)
        assert data is not None
        html, md = write_report(data, report, ctx.settings)
        console.print(f"report: {html} (and {md})")
    _print_counts(batches.batch_progress(ctx.pool, batch_id))
    if bad:
        raise typer.Exit(1)


def _follow(pool, batch_id: str, retry_s: float = 2.0) -> None:
    """The batch's progress until every question has ended. An overnight run outlives a database restart: while
    Postgres is unavailable the bar says so and the command keeps waiting (the jobs run on in the workers)."""
    from agent import batches
    from agent.infra.unavailable import UNAVAILABLE_TYPES, unavailable

    columns = (TextColumn("[bold]research jobs"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[counts]}"),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=err) as bar:
        task = None
        while True:
            try:
                p = batches.batch_progress(pool, batch_id)
            except UNAVAILABLE_TYPES as exc:
                down = unavailable(exc)
                if down is None:
                    raise
                if task is not None:
                    bar.update(task, counts=f"waiting for {down.service}: {down.reason}")
                time.sleep(retry_s)
                continue
            assert p is not None
            counts = " ".join(f"{k}={v}" for k, v in sorted(p.counts.items()))
            if task is None:
                task = bar.add_task("batch", total=p.total, counts=counts)
            bar.update(task, completed=p.done, counts=counts)
            if p.done >= p.total:
                return
            time.sleep(1)


def _print_counts(p) -> None:
    if p is None:
        return
    table = Table("status", "lines", title=f"batch {Path(p.name).name}")
    for status, n in sorted(p.counts.items()):
        table.add_row(status, str(n))
    console.print(table)


@batch_app.command("status")
def status(batch: Optional[str] = typer.Argument(None, help="batch id or name (default: the most recent batches)"),
           as_json: bool = typer.Option(False, "--json")):
    """Show a batch's progress (from any terminal, while it runs)."""
    import json

    from agent import batches
    from agent.persistence import batchstore
    from ops.local.bootstrap import bootstrap

    ctx = bootstrap()
    if batch:
        found = batches.find(ctx, batch)
        if found is None:
            _fail(f"no batch {batch!r}", code=1)
        ids = [str(found)]
    else:
        ids = [str(r["id"]) for r in batchstore.latest_batches(ctx.pool)]
        if not ids:
            _fail("no batches yet", code=1)
    progress = [batches.batch_progress(ctx.pool, i) for i in ids]
    if as_json:
        typer.echo(json.dumps([p.model_dump(mode="json") for p in progress if p], indent=2))
        return
    table = Table("batch", "name", "done", "counts", "eta")
    for p in progress:
        if p is None:
            continue
        eta = "finished" if p.done >= p.total else (f"{p.eta_seconds:.0f}s" if p.eta_seconds is not None else "-")
        table.add_row(p.batch_id, Path(p.name).name, f"{p.done}/{p.total}", " ".join(f"{k}={v}" for k, v in sorted(p.counts.items())), eta)
    console.print(table)


@batch_app.command("list")
def list_batches(limit: int = typer.Option(20, min=1, max=1000), as_json: bool = typer.Option(False, "--json")):
    """The most recent batches, newest first, with their lines counted by status."""
    import json

    from agent import batches
    from agent.persistence import batchstore
    from ops.local.bootstrap import bootstrap

    rows, _ = batchstore.page_batches(bootstrap().pool, limit)
    summaries = [batches.batch_summary(r) for r in rows]
    if as_json:
        typer.echo(json.dumps([b.model_dump(mode="json") for b in summaries], indent=2))
        return
    table = Table("name", "created", "done", "counts")
    table.add_column("batch", no_wrap=True)  # an id to copy whole
    for b in summaries:
        table.add_row(Path(b.name).name, b.created_at.strftime("%Y-%m-%d %H:%M:%S"), f"{b.done}/{b.total}",
                      " ".join(f"{k}={v}" for k, v in sorted(b.counts.items())), b.batch_id)
    console.print(table)


@batch_app.command("cancel")
def cancel(batch: str = typer.Argument(..., help="batch id or name"), as_json: bool = typer.Option(False, "--json")):
    """Cancel a batch's queued and running jobs: each ends at its next step as `cancelled` (one still waiting for a
    batch slot never runs); finished jobs keep their results. Exits 1 when every job had already finished."""
    from agent import batches
    from finagent.models import BatchCancelled
    from ops.local.bootstrap import bootstrap
    from tasks.dispatch import CeleryDispatcher

    ctx = bootstrap()
    batch_id = batches.find(ctx, batch)
    if batch_id is None:
        _fail(f"no batch {batch!r}", code=1)
    asked, finished = batches.cancel_batch(ctx, CeleryDispatcher(), batch_id)
    if as_json:
        out = BatchCancelled(batch_id=batch_id, cancelled=asked, finished=finished, status_url=f"/v1/batches/{batch_id}")
        typer.echo(out.model_dump_json(indent=2))
    if not asked:
        _fail(f"batch {batch_id} has no unfinished job ({finished} finished)", code=1)
    if not as_json:
        console.print(f"batch {batch_id}: cancel requested for {len(asked)} jobs ({finished} had finished); "
                      f"`finagent batch status {batch_id}` follows it")
