"""`finagent statements`: the primary statements stored as line items (agent/statements), by company, concept and
fiscal year, and a measure computed from them with its working, as a research job would show it."""
from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from ops.cli import exit_codes

statements_app = typer.Typer(no_args_is_help=True, help="The statements stored as line items: show them, compute from them.")
console = Console()


def _fail(message: str) -> None:
    Console(stderr=True).print(message, style="red", markup=False, highlight=False)
    raise typer.Exit(code=exit_codes.BAD_INPUT)


def _ticker(ctx, ticker: str) -> str:
    from agent.retrieval.companies import load_companies

    with ctx.pool.connection() as conn:
        known = {c.ticker for c in load_companies(conn)}
    found = ticker.strip().upper()
    if found not in known:
        _fail(f"{ticker!r} is not a company finagent knows (ingest its filings first)")
    return found


@statements_app.command("show")
def show(ticker: str, concept: Optional[list[str]] = typer.Option(None, "--concept", help="a concept (repeatable); default: all"),
         year: Optional[list[int]] = typer.Option(None, "--year", help="a fiscal year (repeatable); default: all"),
         as_json: bool = typer.Option(False, "--json", help="one JSON object per line")):
    """Every annual figure stored for the company: concept, fiscal year, value, the line as printed, its statement,
    document and page (1-based, as a PDF reader shows it)."""
    from agent.statements.line_store import annual_facts
    from agent.statements.models import CONCEPTS
    from ops.local.bootstrap import bootstrap

    unknown = [c for c in concept or [] if c not in CONCEPTS]
    if unknown:
        _fail(f"unknown concept {', '.join(unknown)}; known: {', '.join(CONCEPTS)}")
    ctx = bootstrap()
    facts = annual_facts(ctx.pool, _ticker(ctx, ticker), list(concept or CONCEPTS), list(year) if year else None)
    if as_json:
        for f in facts:
            typer.echo(f.model_dump_json())
        return
    table = Table("concept", "FY", "value", "as printed", "statement", "document", "page")
    for f in facts:
        table.add_row(f.concept, str(f.fiscal_year), f"{f.value:,.2f}".rstrip("0").rstrip("."), f.label[:50], f.statement,
                      f.document, "" if f.page is None else str(f.page + 1))
    console.print(table)
    console.print(f"{len(facts)} figures")


@statements_app.command("compute")
def compute(ticker: str, question: str = typer.Argument(..., help="what to compute, in words: 'FY2023 current ratio'"),
            as_json: bool = typer.Option(False, "--json")):
    """Compute a measure from the stored statements the way a research job does (the question reader, the formula
    library, the filing that prints every year asked) and print the working."""
    from agent.statements.calculator import render
    from agent.statements.questions import measure_query
    from agent.work.computing import compute as compute_from
    from ops.local.bootstrap import bootstrap

    query = measure_query(question)
    if query is None:
        _fail(f"no measure found in {question!r}: name one (e.g. 'FY2023 operating margin', 'total assets FY2022')")
    assert query is not None
    ctx = bootstrap()
    found = _ticker(ctx, ticker)
    latest = max(query.fiscal_years) if query.fiscal_years else None
    if latest is None:
        _fail("name a fiscal year (e.g. FY2023)")
    assert latest is not None
    computation = compute_from(ctx.pool, found, query, latest)
    if computation is None:
        _fail(f"the formula library cannot compute {question!r}")
    assert computation is not None
    if as_json:
        typer.echo(computation.model_dump_json(indent=2))
    else:
        for line in render(computation, lambda fact: ""):
            console.print(line, markup=False, highlight=False)
    if not computation.complete:
        raise typer.Exit(code=1)
