"""`finagent ask` / `finagent demo`: submit a job through Celery, print its events live, then the answer."""
from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel
from rich.table import Table

from agent.infra.events import Event, follow
from agent.models.job import JobRequest, JobResult
from agent.persistence import jobstore
from agent.submission import create, rerun_with_feedback
from ops.cli.exit_codes import TIMED_OUT
from tasks.dispatch import CeleryDispatcher

console = Console(stderr=True)
_STYLE = {"error": "red", "agent_decision": "cyan", "iteration_start": "bold", "result": "green", "job_status": "magenta"}


def _describe(ev: Event) -> str:
    d = ev.data
    if ev.type == "planning":
        extra = f" periods={d.get('periods')}" if d.get("periods") else ""
        extra += f" 10-K={d.get('tenk')}" if d.get("tenk") else ""
        extra += f" problems={d.get('problems')}" if d.get("problems") else ""
        return f"{ev.message} mode={d.get('answer_mode')} sources={d.get('data_sources')} strategy={d.get('strategy')}{extra}"
    if ev.type == "agent_decision":
        return f"{ev.message} will_iterate={d.get('will_iterate')} ({d.get('reason')})"
    if ev.type == "result":
        return "final answer ready"
    return ev.message or json.dumps(d)


def print_event(ev: Event) -> None:
    style = _STYLE.get(ev.type, "")
    label = f"[{style}]{ev.type:<19}[/{style}]" if style else f"{ev.type:<19}"
    console.print(f"{label} {_describe(ev)}")


def print_result(result: JobResult) -> None:
    out = Console()
    title = (f"{result.status} · confidence {result.confidence:.0%} · {result.iterations} iteration(s) · "
             f"{result.chunks_used} chunks · provider {result.provider}")
    out.print(Panel(Markdown(result.answer or "(no answer)"), title=title))
    if result.citations:
        table = Table("marker", "source", "ticker", "period", "excerpt")
        for c in result.citations:
            table.add_row(c.marker, c.source_type, c.ticker or "", c.period, c.text[:140].replace("\n", " ") + "…")
        out.print(table)
    if result.termination_reason:
        out.print(f"stopped because: {result.termination_reason}")
    for p in result.problems:
        out.print(f"[yellow]note:[/yellow] {p}")


def submit_and_follow(ctx, request: JobRequest, timeout_s: float = 900, on_event=None) -> tuple[jobstore.JobRow, list[Event]]:
    """Submit through Celery and follow the job's event stream until its terminal status."""
    job_id, _ = create(ctx, CeleryDispatcher(), request)
    return follow_job(ctx, job_id, timeout_s, on_event)


def follow_job(ctx, job_id: str, timeout_s: float = 900, on_event=None) -> tuple[jobstore.JobRow, list[Event]]:
    """The job's events until its terminal status, then the job. A server that goes down meanwhile ends the command
    (ops.cli.main.main says which), but not the job: where to pick it up again is printed first."""
    from agent.infra.unavailable import UNAVAILABLE_TYPES, unavailable

    events = []
    try:
        for ev in follow(ctx.redis, job_id, timeout_s=timeout_s):
            events.append(ev)
            if on_event:
                on_event(ev)
        job = jobstore.load_job(ctx.pool, job_id)
    except UNAVAILABLE_TYPES as exc:
        down = unavailable(exc)
        if down is not None:
            console.print(f"job {job_id} goes on in the workers; once {down.service} is back, "
                          f"`finagent jobs events {job_id}` follows it and `finagent jobs show {job_id}` has its result", soft_wrap=True)
        raise
    assert job is not None  # the job was created before its events were followed
    return job, events


def rerun_question(parent_id: str, feedback: str, as_json: bool, timeout_s: float = 900) -> JobResult:
    from ops.local.bootstrap import bootstrap

    ctx = bootstrap(workers=True)
    job_id, _ = rerun_with_feedback(ctx, CeleryDispatcher(), parent_id, feedback)
    job, _ = follow_job(ctx, job_id, timeout_s, None if as_json else print_event)
    return _report(job, as_json, timeout_s)


def run_question(request: JobRequest, as_json: bool, timeout_s: float = 900) -> JobResult:
    from ops.local.bootstrap import bootstrap

    ctx = bootstrap(workers=True)
    job, _ = submit_and_follow(ctx, request, timeout_s, on_event=None if as_json else print_event)
    return _report(job, as_json, timeout_s)


def _report(job: jobstore.JobRow, as_json: bool, timeout_s: float) -> JobResult:
    job_id = job.id
    if job.result is None:
        console.print(f"[red]job {job_id} did not finish within {timeout_s:.0f}s (status {job.status}, step {job.step})[/red]")
        raise typer.Exit(code=TIMED_OUT)
    if as_json:
        typer.echo(job.result.model_dump_json(indent=2))
    else:
        print_result(job.result)
    return job.result
