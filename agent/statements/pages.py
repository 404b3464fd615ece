"""A primary statement page as rows: each line item's label, its section, and its figures per column.

pypdf prints a statement's rows in two ways: a label followed by its figures ("Net sales $ 4,210 $ 3,980"), or a
label on one line and its figures at the start of the next, followed there by the next label ("Net sales\n4,210
3,980 Cost of sales"). Both are a stream of text and runs of figures: every run of figures closes the line item
whose label is the text before it. A run sits at a line's end or start, so a figure followed on its line by a
lower-case word ("$0.01 par value", "Notes 1 and 4") is part of a label.

A row's figures are the columns left to right; a dash is an empty cell that still holds its column. A row with more
figures than columns gives its first ones back to the label ("2.5% notes due 2027"); one with fewer keeps none (which
columns they are would be a guess)."""
from __future__ import annotations

import re
from collections import Counter
from typing import NamedTuple

from agent.statements.columns import YEAR, Column, header_columns, page_scale
from agent.statements.concepts import clean_label, concept_of, is_per_share, is_share_count, is_total_label, letters
from agent.statements.models import ColumnValue, Statement, StatementLine

_FIGURE = re.compile(r"(\()?-?\d(?:[\d,]*\d)?(?:\.\d+)?(?(1)\))")
_DASHES = {"—", "–", "-", "--", "−"}
_CONNECTOR = re.compile(r"(?:,|-|&|/|\(|\b(?:and|of|to|for|in|on|from|by|the|or|at|with|net of))$", re.I)
_LABEL_NUMBER_AFTER = re.compile(r"(?:notes?|and|due|series|of|in|to|level|tier|class)$", re.I)


MAX_HEADING_WORDS = 16
KEEP_HEADING_WORDS = 3  # a short heading stays part of the label it heads ("Earnings per share: Basic")


class Tok(NamedTuple):
    text: str
    line: int
    kind: str  # "fig", "dash" or "word"


def _prepare(text: str) -> list[str]:
    text = text.replace("$", " ")
    text = re.sub(r"(?:[ \t]?\.){3,}", " ", text)  # dot leaders between a label and its figures
    text = re.sub(r"(?<=[A-Za-z])\((?:[a-z]|\d)\)", " ", text)  # a footnote marker glued to a label: "Revenues(1)"
    text = re.sub(r"\s*([—–−])\s*", r" \1 ", text)
    text = re.sub(r"(?<=\d)\s+\)", ")", text)  # "(4,321 )"
    text = re.sub(r"\(\s+(?=-?\d)", "(", text)
    text = text.replace(")(", ") (")
    # a figure glued to the end of a wrapped label ("Other, n\net49 16 20") when more figures follow it
    text = re.sub(r"(?<=[A-Za-z’':)])(\(?\d(?:[\d,]*\d)?(?:\.\d+)?\)?)(?=[ \t]+[(\d—–-])", r" \1", text)
    return [line.strip() for line in text.split("\n") if line.strip()]


def _tokens(lines: list[str]) -> list[Tok]:
    out = []
    for n, line in enumerate(lines):
        for word in line.split():
            kind = "dash" if word in _DASHES else "fig" if _FIGURE.fullmatch(word) else "word"
            out.append(Tok(word, n, kind))
    return out


def _runs(toks: list[Tok], ncols: int | None) -> list[tuple[int, int]]:
    """The [start, end) of every run of figures that is a row's values, not part of a label."""
    sizes = Counter(t.line for t in toks)
    solo = {t.line: sizes[t.line] == 1 and t.kind != "word" for t in toks}
    runs, i = [], 0
    while i < len(toks):
        if toks[i].kind == "word":
            i += 1
            continue
        j = i
        while j < len(toks) and toks[j].kind != "word" and toks[j].line == toks[i].line:
            j += 1
        # the vertical layout: one figure a line, the row's figures on consecutive lines
        while j < len(toks) and solo[toks[j - 1].line] and solo[toks[j].line] and toks[j].line == toks[j - 1].line + 1:
            j += 1
        after = toks[j] if j < len(toks) and toks[j].line == toks[i].line else None
        before = toks[i - 1] if i and toks[i - 1].line == toks[i].line else None
        inside = after is not None and (after.text[0].islower() or after.text.startswith("%") or
                                        (ncols is not None and before is not None and j - i < ncols and
                                         all(t.kind == "dash" for t in toks[i:j])))
        if not inside:
            runs.append((i, j))
        i = j
    return runs


def _is_year(tok: Tok) -> bool:
    return tok.kind == "fig" and YEAR.fullmatch(tok.text) is not None


def _value(text: str) -> float:
    negative = text.startswith("(")
    number = float(text.strip("()").replace(",", ""))
    return -abs(number) if negative else number


def _label_lines(words: list[Tok]) -> list[str]:
    lines: list[str] = []
    last = None
    for tok in words:
        if tok.line == last:
            lines[-1] += " " + tok.text
        else:
            lines.append(tok.text)
        last = tok.line
    return lines


def _split_label(lines: list[str]) -> tuple[list[str], str]:
    """The headings above a row, and its label: a line that continues the one before (starts lower-case, or the one
    before ends with a comma or a joining word) is joined to it with one space."""
    joined: list[str] = []
    for line in lines:
        if joined and not joined[-1].endswith(":") and (line[0].islower() or _CONNECTOR.search(joined[-1])):
            joined[-1] += " " + line
        else:
            joined.append(line)
    return (joined[:-1], joined[-1]) if joined else ([], "")


def _heading(line: str) -> str:
    return clean_label(line).rstrip(":").strip()


def parse_statement_page(text: str, statement: Statement, page: int) -> list[StatementLine]:
    """The line items of a primary statement page, in order, with their figures per column."""
    toks = _tokens(_prepare(text))
    first = _runs(toks, None)
    data = [(i, j) for i, j in first if not all(_is_year(t) for t in toks[i:j])]
    if not data:
        return []
    lengths = Counter(j - i for i, j in data)
    ncols = max(lengths, key=lambda n: (n >= 2, lengths[n], n))
    runs = [(i, j) for i, j in _runs(toks, ncols) if not all(_is_year(t) for t in toks[i:j])]
    start = next((k for k, (i, j) in enumerate(runs) if j - i >= min(2, ncols)), None)
    if start is None:
        return []
    head_end = runs[start][0]
    years_at = [k for k in range(head_end) if _is_year(toks[k])]
    columns = header_columns([t.text for t in toks[:head_end]], years_at, ncols, statement)
    if columns is None:
        return []
    scale = page_scale(text)
    out: list[StatementLine] = []
    section = ""
    cursor = years_at[-1] + 1
    for i, j in runs[start:]:
        words, cells, cursor = toks[cursor:i], toks[i:j], j
        headings, raw = _split_label(_label_lines(words))
        if headings:
            section = _heading(headings[-1])
        while len(cells) > ncols or (cells and _bare_int(cells[0]) and _LABEL_NUMBER_AFTER.search(raw)):
            raw = f"{raw} {cells[0].text}".strip()
            cells = cells[1:]
        if ":" in raw.rstrip(":"):  # a heading and a label on one line: "Changes in assets and liabilities: Inventories"
            head, rest = raw.split(":", 1)
            if head.strip() and rest.strip() and len(head.split()) <= MAX_HEADING_WORDS:
                section = _heading(head)
                if len(head.split()) > KEEP_HEADING_WORDS:
                    raw = rest
        label = clean_label(raw)
        if not label and section and out and out[-1].section == section:
            label = f"Total {section[:1].lower()}{section[1:]}"  # a section's total printed without a label
        if not label or (label.endswith(".") and len(label.split()) > 3) or len(label.split()) > 30:
            continue
        out.append(_line(label, section, statement, page, len(out), cells, columns, scale, ncols))
        if is_total_label(label) and section and _ends_section(label, section):
            section = ""
    return out


def _bare_int(tok: Tok) -> bool:
    return tok.kind == "fig" and tok.text.isdigit()


def _ends_section(label: str, section: str) -> bool:
    """Whether a total closes its section ("Total current assets" under "Current assets")."""
    head, key = letters(section), letters(label)
    opened = re.sub(r"^(?:cashflows?|cash)?(?:providedby|usedin|from|by)?", "", head)
    closed = re.sub(r"^(?:total|netcash(?:providedby|usedin|usedfor|from|by|in)*)", "", key)
    return bool(opened) and opened in key or bool(closed) and head.endswith(closed)


def _line(label: str, section: str, statement: Statement, page: int, row: int, cells: list[Tok],
          columns: list[Column], scale: tuple[float, float], ncols: int) -> StatementLine:
    if is_share_count(label, section):
        unit, factor = "shares", scale[1]
    elif is_per_share(label, section):
        unit, factor = "per_share", 1.0
    else:
        unit, factor = "currency", scale[0]
    values = []
    if len(cells) == ncols:
        for n, (cell, column) in enumerate(zip(cells, columns)):
            if cell.kind == "dash":
                continue
            values.append(ColumnValue(column=n, period_label=column.period_label, fiscal_year=column.fiscal_year,
                                      months=column.months, value=_value(cell.text), scale=factor, unit=unit))
    return StatementLine(statement=statement, page=page, row=row, label=label, section=section,
                         concept=concept_of(label, statement, section),
                         is_total=unit == "currency" and is_total_label(label), values=values)
