"""A filing's pages -> the line items of its primary statements (the pages classified at ingest)."""
from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from agent.statements.models import StatementLine
from agent.tenk.statements import classify_pages


@cache
def reader_version() -> str:
    """Changes whenever the package's code changes (the page reader, the concept vocabulary): stored lines of an older
    version are read again from the filing's pages at the next ingest (a few seconds; nothing is embedded again)."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(here.glob("*.py")):
        digest.update(path.read_bytes())
    digest.update((here.parent / "tenk" / "statements.py").read_bytes())
    return digest.hexdigest()[:12]


def statement_lines(pages: list[tuple[int, str]]) -> list[StatementLine]:
    """Every line item of every statement page; `pages` are (0-based page, tidied text) in page order."""
    from agent.statements.pages import parse_statement_page

    kinds = classify_pages([text for _, text in pages])
    out: list[StatementLine] = []
    for (page, text), kind in zip(pages, kinds):
        if kind is not None:
            out += parse_statement_page(text, kind, page)
    return out
