"""10-K tables as the answer step sees them: parsed back from table evidence (caption + markdown),
with value columns labelled by their header (year), and row lookup by label."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from agent.models.research import Evidence
from agent.tenk.calculations import parse_amount

_YEAR = re.compile(r"\b(19\d{2}|20\d{2})\b")
_FOOTNOTE = re.compile(r"\s*\((?:\d{1,2}|[a-z])\)|[*†]+")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True)
class Column:
    index: int
    label: str
    year: int | None


@dataclass
class Table:
    evidence: Evidence
    caption: str
    rows: list[list[str]]
    columns: list[Column] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.evidence.citation_key

    def amounts(self, row: list[str]) -> list[tuple[Column, str]]:
        """The row's reported figures with their columns; year columns only when the table has any."""
        cols = [c for c in self.columns if c.year] or self.columns
        return [(c, row[c.index]) for c in cols if c.index < len(row) and parse_amount(row[c.index]) is not None]

    def value_in(self, row: list[str], year: int) -> tuple[Column, float] | None:
        for col, cell in self.amounts(row):
            if col.year == year:
                value = parse_amount(cell)
                assert value is not None  # amounts() keeps only cells that parse
                return col, value
        return None


@dataclass(frozen=True)
class RowMatch:
    table: Table
    row: list[str]
    score: float

    @property
    def label(self) -> str:
        return display_label(self.row[0])


def split_markdown_row(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [c.strip().replace("\\|", "|") for c in _CELL_SPLIT.split(inner)]


def parse_table(ev: Evidence) -> Table | None:
    """Rebuild a table from '10k_table' evidence (text = caption + '\\n' + markdown)."""
    if ev.source_type != "10k_table":
        return None
    lines = ev.text.split("\n")
    md = [ln for ln in lines if ln.strip().startswith("|")]
    rows = [split_markdown_row(ln) for ln in md if not re.fullmatch(r"\|(\s*---\s*\|)+", ln.strip())]
    if not rows:
        return None
    caption = ev.title or (lines[0] if not lines[0].strip().startswith("|") else "")
    return Table(evidence=ev, caption=caption.strip(), rows=rows, columns=_columns(rows))


def _columns(rows: list[list[str]]) -> list[Column]:
    width = max(len(r) for r in rows)
    header = []
    for row in rows:
        if any(_is_amount(c) for c in row[1:]):
            break
        header.append(row)
    cols = []
    for j in range(1, width):
        cells = [r[j] for r in header if j < len(r) and r[j]]
        dated = [c for c in cells if _YEAR.search(c)]
        label = dated[-1] if dated else (cells[-1] if cells else "")
        years = _YEAR.findall(label)
        cols.append(Column(j, label, int(years[-1]) if years else None))
    return cols


def _is_amount(cell: str) -> bool:
    # a bare year in a header row is a label, not a figure
    return parse_amount(cell) is not None and not re.fullmatch(r"(19|20)\d{2}", cell.strip())


def norm_label(label: str) -> str:
    text = label.lower().replace("’", "'").replace("\xa0", " ")
    text = _FOOTNOTE.sub("", text)
    return re.sub(r"\s+", " ", text).strip(" :")


def display_label(label: str) -> str:
    return re.sub(r"\s+", " ", _FOOTNOTE.sub("", label)).strip(" :")


def label_level(label: str, aliases: tuple[str, ...]) -> tuple[int, int]:
    """(2 exact | 1 prefix | 0 none, alias index) of the best alias a row label matches."""
    norm = norm_label(label)
    for i, alias in enumerate(aliases):
        if norm == alias:
            return 2, i
    for i, alias in enumerate(aliases):
        if norm.startswith(alias) and norm[len(alias):len(alias) + 1] in (" ", ",", "("):
            return 1, i
    return 0, 0


def find_rows(tables: list[Table], aliases: tuple[str, ...], caption_re: re.Pattern | None) -> list[RowMatch]:
    """Rows labelled with one of the aliases and holding figures, best first: an exact label beats a prefix; a
    primary statement's row ('CONSOLIDATED BALANCE SHEETS') beats the same line item in a note (e.g. 'Cost of sales'
    in a stock-compensation table); then the earlier alias wins."""
    out = []
    for order, table in enumerate(tables):
        bonus = 30 if caption_re and caption_re.search(table.caption) else 0
        for row in table.rows:
            level, idx = label_level(row[0], aliases) if row else (0, 0)
            if level and table.amounts(row):
                out.append(RowMatch(table, row, level * 100 + bonus - idx * 0.5 - order * 0.01))
    return sorted(out, key=lambda m: -m.score)


def section_rows(table: Table) -> list[tuple[str, list[str]]]:
    """(section heading, row) for the rows with figures; a heading is a labelled row without figures."""
    section, out = "", []
    for row in table.rows[1:]:
        if not row or not row[0]:
            continue
        if table.amounts(row):
            out.append((section, row))
        else:
            section = display_label(row[0])
    return out


def fiscal_column(table: Table, fiscal_year: int) -> Column | None:
    cols = [c for c in table.columns if c.year == fiscal_year]
    if cols:
        return cols[0]
    years = [c for c in table.columns if c.year]
    return None if years else (table.columns[0] if table.columns else None)
