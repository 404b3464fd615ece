"""A filing's primary statement tables (10-Ks parsed from HTML or by item: caption and rows of cells) as line items,
the way pages.py reads a statement page: the caption says which statement, the header rows the fiscal year of each
value column, the caption or header the scale; every row with figures is a line, a row without them a heading."""
from __future__ import annotations

import re

from agent.statements.columns import YEAR, page_scale
from agent.statements.concepts import clean_label, concept_of, is_per_share, is_share_count, is_total_label, letters
from agent.statements.models import ColumnValue, Statement, StatementLine

# the caption must open with a statement's name ("Consolidated Balance Sheets", "CONSOLIDATED STATEMENTS OF
# OPERATIONS (in millions)"); a note's table ("Balance sheet components") does not
_CAPTION: dict[Statement, re.Pattern[str]] = {
    "income": re.compile(r"^(?:consolidated|combined)?(?:statements?of(?:consolidated)?(?:operations|income|earnings)"
                         r"(?!.*comprehensive)|incomestatements?)"),
    "balance": re.compile(r"^(?:consolidated|combined)?(?:balancesheets?|statements?of(?:consolidated)?financial"
                          r"(?:position|condition))"),
    "cash_flow": re.compile(r"^(?:consolidated|combined)?(?:statements?of(?:consolidated)?cashflows?|cashflows?statements?)"),
}
_AMOUNT = re.compile(r"^\(?-?\$?\s*\d[\d,]*(?:\.\d+)?\s*\)?%?$")
_DASH = {"—", "–", "-", "—  ", ""}


_NOT_THE_STATEMENT = re.compile(r"components?|details?|information|parenthetical|supplement|items|accounts")


def table_statement(caption: str) -> Statement | None:
    key = letters(caption)
    found = [(kind, m) for kind, pattern in _CAPTION.items() if (m := pattern.search(key))]
    if len(found) != 1 or _NOT_THE_STATEMENT.match(key[found[0][1].end():]):
        return None
    return found[0][0]


def _amount(cell: str) -> float | None:
    text = cell.strip().replace("\u2212", "-").replace(" ", "").replace("$", "")
    if not text or not _AMOUNT.match(text) or re.fullmatch(r"(?:19|20)\d\d", text):
        return None
    value = float(re.sub(r"[^\d.]", "", text))
    return -value if text.startswith("(") or text.startswith("-") else value


def table_lines(caption: str, rows: list[list[str]], table_index: int, units: str = "") -> list[StatementLine]:
    """The line items of one table, or [] when it is not a primary statement or its columns name no years."""
    statement = table_statement(caption)
    if statement is None or not rows:
        return []
    header: list[list[str]] = []
    for row in rows:
        # the header ends at the first row of figures, or at a labelled row with no dates (a heading: "Net sales:")
        if any(_amount(c) is not None for c in row[1:]) or (row and row[0].strip() and not any(YEAR.search(c) for c in row[1:])):
            break
        header.append(row)
    width = max(len(r) for r in rows)
    years: dict[int, tuple[int, str]] = {}
    for j in range(1, width):
        heads = [r[j] for r in header if j < len(r) and r[j].strip()]
        dated = [c for c in heads if YEAR.search(c)]
        if dated:
            years[j] = (int(YEAR.findall(dated[-1])[-1]), " ".join(heads))
    if not years:
        return []
    scale = page_scale(" ".join([caption, units, *(" ".join(r) for r in header)]))
    out: list[StatementLine] = []
    section = ""
    for row in rows[len(header):]:
        label = clean_label(row[0]) if row else ""
        cells = {j: _amount(row[j]) for j in years if j < len(row)}
        if not any(v is not None for v in cells.values()):
            section = label.rstrip(":") or section
            continue
        if not label:
            continue
        per_share, shares = is_per_share(label, section), is_share_count(label, section)
        unit = "per_share" if per_share else "shares" if shares else "currency"
        factor = 1.0 if per_share else scale.shares if shares else scale.value
        values = [ColumnValue(column=n, period_label=years[j][1], fiscal_year=years[j][0], value=v, scale=factor, unit=unit)
                  for n, (j, v) in enumerate(sorted(cells.items())) if v is not None]
        out.append(StatementLine(statement=statement, page=None, row=len(out), label=label, section=section,
                                 concept=concept_of(label, statement, section), table_index=table_index,
                                 is_total=unit == "currency" and is_total_label(label), values=values))
    return out
