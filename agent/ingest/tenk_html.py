"""Parse an HTML 10-K (EDGAR inline XBRL, or plain HTML) into a TenKDoc, offline, with edgartools."""
from __future__ import annotations

import html as html_lib
import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from edgar.documents import parse_html
from edgar.documents.config import ParserConfig
from edgar.documents.nodes import HeadingNode, ListNode, Node, ParagraphNode, TextNode
from edgar.documents.table_nodes import TableNode
from lxml import etree
from pydantic import ValidationError

from agent.ingest.tenk_common import (
    FRAGMENTS,
    Heading,
    TenKParseError,
    check_heading_count,
    clean_section_text,
    find_headings,
    fiscal_year_end_from_text,
    is_numeric_cell,
    item_rank,
    join_fragments,
    make_table,
    match_heading,
    merge_sections,
    normalize_item,
    parse_date,
    pick_caption,
    pick_units,
    select_chain,
    split_by_headings,
)
from agent.models.corpus import TenKDoc, TenKSection, TenKTable


class _ParserFlags(TypedDict):
    optimize_for_ai: bool
    detect_table_types: bool
    extract_table_relationships: bool
    extract_xbrl: bool
    extract_links: bool


# Features we never read; turning them off roughly halves edgartools' parse time.
_FAST = _ParserFlags(optimize_for_ai=False, detect_table_types=False, extract_table_relationships=False,
                     extract_xbrl=False, extract_links=False)
_TEXT_NODES = (ParagraphNode, HeadingNode, TextNode, ListNode)


@dataclass
class _RawTable:
    pos: int
    before: list[str]  # text lines since the previous table, for the caption
    rows: list[list[str]]


@dataclass
class _Flat:
    """The document as plain text in reading order, with item headings and table positions."""

    text: str = ""
    headings: list[Heading] = field(default_factory=list)
    tables: list[_RawTable] = field(default_factory=list)


def parse_10k_html(path: Path, ticker: str | None = None, max_depth: int = 200) -> TenKDoc:
    path = Path(path)
    raw = _read_html(path)
    _check_shape(path, raw, max_depth)
    try:
        doc = parse_html(raw, config=ParserConfig(form="10-K", **_FAST))
    except Exception as exc:
        raise TenKParseError(path, f"HTML could not be parsed ({exc.__class__.__name__}: {exc})") from exc
    flat = _flatten(doc.root)
    check_heading_count(path, flat.headings)
    chain = select_chain(flat.headings, len(flat.text))
    sections, chain = _sections(doc, flat, chain)
    if not sections:
        raise TenKParseError(path, "no 10-K Items found (expected headings such as 'Item 7.')")
    tables = _assign_tables(flat.tables, chain)
    meta = _metadata(raw, flat.text[:20000])
    ticker = ticker or meta["ticker"] or _ticker_from_path(path)
    if not ticker:
        raise TenKParseError(path, "cannot tell the ticker: no dei:TradingSymbol or ticker meta tag; pass ticker=")
    if not meta["fiscal_year"]:
        raise TenKParseError(path, "cannot tell the fiscal year: no dei:DocumentFiscalYearFocus, "
                                   "fiscal_year meta tag or 'fiscal year ended' date")
    try:
        return TenKDoc(ticker=ticker.strip().upper(), company_name=meta["company"], fiscal_year=meta["fiscal_year"],
                       period_end=meta["period_end"], sections=sections, tables=tables)
    except ValidationError as exc:
        raise TenKParseError(path, f"invalid 10-K: {exc.errors()[0]['msg']}") from exc


def _read_html(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TenKParseError(path, f"cannot read file ({exc.__class__.__name__}: {exc})") from exc
    if not data.strip():
        raise TenKParseError(path, "file is empty")
    if b"\x00" in data[:8192]:
        raise TenKParseError(path, "not an HTML document (binary data)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("cp1252", errors="replace")  # older EDGAR filings
    if not re.search(r"<(?:html|body|div|p|table|span|h[1-6])\b", text[:500_000], re.IGNORECASE):
        raise TenKParseError(path, "not an HTML document (no HTML tags found)")
    return text


def _check_shape(path: Path, raw: str, max_depth: int) -> None:
    """Refuse an HTML bomb before the real parse: libxml2 (with its resource limits on) reports nesting past 256
    levels and text or attribute values past 10 MB, and the tree it builds shows the nesting depth. edgartools walks
    the tree recursively, so a deeper document would end in a RecursionError, or worse, inside it."""
    parser = etree.HTMLParser(recover=True, huge_tree=False, no_network=True)
    try:
        root = etree.fromstring(raw.encode("utf-8", errors="replace"), parser)
    except etree.LxmlError as exc:
        raise TenKParseError(path, f"HTML could not be parsed ({exc})") from exc
    limit = next((e.message.lower() for e in parser.error_log if e.type_name == "ERR_RESOURCE_LIMIT"), None)
    if limit:
        raise TenKParseError(path, "HTML nested more than 255 elements deep (an HTML bomb?)" if "depth" in limit
                             else "HTML with a text or attribute value over 10 MB (an HTML bomb?)")
    depth, stack = 0, [(root, 1)] if root is not None else []
    while stack:
        node, level = stack.pop()
        depth = max(depth, level)
        if depth > max_depth:
            raise TenKParseError(path, f"HTML nested more than {max_depth} elements deep (FINAGENT_INGEST_MAX_HTML_DEPTH)")
        stack.extend((child, level + 1) for child in node)


# --- document walk -------------------------------------------------------------------------------

def _blocks(root: Node) -> Iterator[Node]:
    """Paragraph-level text nodes and tables, in reading order. Iterative, and each node's subtree is searched for
    tables once, so a deeply nested document costs neither recursion depth nor quadratic time."""
    has_table: dict[int, bool] = {}
    order: list[Node] = []
    stack = [root]
    while stack:  # pre-order; reversed, children come before their parents
        node = stack.pop()
        order.append(node)
        stack.extend(node.children or [])
    for node in reversed(order):
        has_table[id(node)] = any(isinstance(c, TableNode) or has_table[id(c)] for c in node.children or [])
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, TableNode) or (isinstance(node, _TEXT_NODES) and not has_table[id(node)]):
            yield node
        else:
            stack.extend(reversed(node.children or []))


def _flatten(root: Node) -> _Flat:
    flat, parts, pos = _Flat(), [], 0
    recent: list[str] = []
    for node in _blocks(root):
        rows = [r for r in _table_rows(node) if any(r)] if isinstance(node, TableNode) else []
        if len(rows) > 1:
            flat.tables.append(_RawTable(pos, recent, rows))
            recent = []
            text = "\n".join(" | ".join(c for c in r if c) for r in rows)
        else:  # text, or a one-row layout table such as 'Item 1A. | Risk Factors'
            text = " ".join(c for c in rows[0] if c) if rows else (node.text() or "")
            text = text.replace("\xa0", " ").strip()
            flat.headings += [Heading(pos + h.pos, h.item, h.title) for h in find_headings(text)]
            recent = recent[-8:] + [ln for ln in text.splitlines() if ln.strip()]
        if text:
            parts.append(text)
            pos += len(text) + 2
    flat.text = "\n\n".join(parts)
    return flat


def _table_rows(node: TableNode) -> list[list[str]]:
    spans = [[(c.text() or "", c.colspan) for c in row] for row in node.headers or []]
    spans += [[(c.text() or "", c.colspan) for c in row.cells] for row in node.rows]
    return rows_from_spans(spans)


def rows_from_spans(rows: list[list[tuple[str, int]]]) -> list[list[str]]:
    """Lay out (text, colspan) cells on a grid and group grid columns into logical columns.

    A cell spanning several grid columns (a '2024' header over '$', '391,035' and a spacer)
    makes them one column, unless another row splits that span into two real values, as
    a '2024' header over 'Amount' and '%' columns does.
    """
    placed = [_place(r) for r in rows]
    width = max((end + 1 for cells in placed for _, end, _ in cells), default=0)
    starts = [sorted(s for s, _, t in cells if t and t not in FRAGMENTS) for cells in placed]
    cut = [True] * (width + 1)
    group: dict[tuple[int, int], bool] = {}
    for cells in placed:
        filled = [c for c in cells if c[2]]
        if len(filled) < 2:  # a title or footnote row spanning the table says nothing about columns
            continue
        for start, end, _ in filled:
            if end > start and (start, end) not in group:
                group[start, end] = _is_group_header(start, end, starts)
            if end > start and not group[start, end]:
                cut[start + 1:end + 1] = [False] * (end - start)
    seg_of, seg = [], -1
    for col in range(width):
        seg += int(col == 0 or cut[col])
        seg_of.append(seg)
    out = []
    for cells in placed:
        parts: list[list[str]] = [[] for _ in range(seg + 1)]
        for start, _, text in cells:
            if text:
                parts[seg_of[start]].append(text)
        out.append([join_fragments(p) for p in parts])
    return out


MAX_COLSPAN = 1000  # what browsers honour (the HTML standard's limit); a larger colspan is a hostile one


def _place(row: list[tuple[str, int]]) -> list[tuple[int, int, str]]:
    col, cells = 0, []
    for text, span in row:
        span = min(max(span, 1), MAX_COLSPAN)
        cells.append((col, col + span - 1, re.sub(r"\s+", " ", text.replace("\xa0", " ")).strip()))
        col += span
    return cells


def _is_group_header(start: int, end: int, starts: list[list[int]]) -> bool:
    return any(sum(start <= s <= end for s in row) >= 2 for row in starts)


# --- sections and tables ------------------------------------------------------------------------

def _sections(doc, flat: _Flat, chain: list[Heading]) -> tuple[list[TenKSection], list[Heading]]:
    """Sections, and the heading chain that places tables, agreeing with edgartools' items.

    The chain's own split wins when it finds every item edgartools found: it is the same text
    walk that places the tables, and it skips edgartools' slow per-section text extraction.
    Otherwise edgartools' sections win, the chain adds only items edgartools lacks, and the
    headings of edgartools' extra items join the chain so their tables land in them.
    """
    edgar = _edgar_items(doc)
    ours = split_by_headings(flat.text, chain)
    missing = edgar.keys() - {s.item for s in ours}
    if not missing:
        return ours, chain
    texts = {item: clean_section_text(sec.text() or "") for item, sec in edgar.items()}
    found = [part for item, text in texts.items() if text for part in _split_embedded(item, text)]
    for item in missing:
        chain = _add_heading(chain, item, texts[item].split("\n", 1)[0].strip(), flat.text)
    return merge_sections(found, ours), chain


def _add_heading(chain: list[Heading], item: str, line: str, text: str) -> list[Heading]:
    lo = max((h.pos for h in chain if item_rank(h.item) < item_rank(item)), default=0)
    hi = min((h.pos for h in chain if item_rank(h.item) > item_rank(item)), default=len(text))
    pos = text.find(line, lo, hi) if line else -1
    return sorted([*chain, Heading(pos, item, "")], key=lambda h: h.pos) if pos >= 0 else chain


def _edgar_items(doc) -> dict[str, Any]:
    try:
        found = list(doc.sections.values())
    except Exception:
        return {}
    out: dict[str, Any] = {}
    for sec in found:
        item = normalize_item(sec.item or "")
        if item:
            out.setdefault(item, sec)
    return out


def _split_embedded(item: str, text: str) -> list[TenKSection]:
    """Split off later items whose headings sit inside this section (e.g. Item 1C inside 1B)."""
    first = match_heading(text.split("\n", 1)[0])
    chain = [Heading(0, item, first[1] if first and first[0] == item else "")]
    for h in find_headings(text):
        if h.pos > 0 and h.title and item_rank(h.item) > item_rank(chain[-1].item):
            chain.append(h)
    return split_by_headings(text, chain)


def _assign_tables(raw_tables: list[_RawTable], chain: list[Heading]) -> list[TenKTable]:
    out = []
    for t in raw_tables:
        item = _item_at(t.pos, chain) or (None if chain else _financial_fallback(t.rows))
        table = make_table(item, pick_caption(t.before), t.rows, pick_units(t.before)) if item else None
        if table:
            out.append(table)
    return out


def _item_at(pos: int, chain: list[Heading]) -> str | None:
    i = bisect_right([h.pos for h in chain], pos)
    return chain[i - 1].item if i else None


def _financial_fallback(rows: list[list[str]]) -> str | None:
    numeric = sum(1 for r in rows if sum(is_numeric_cell(c) for c in r if c) >= 2)
    return "8" if numeric >= 3 else None


# --- metadata ------------------------------------------------------------------------------------

def _metadata(raw: str, cover_text: str) -> dict:
    metas = _meta_tags(raw)
    year = _dei(raw, "DocumentFiscalYearFocus") or metas.get("fiscal_year")
    period_end = (parse_date(_dei(raw, "DocumentPeriodEndDate", whole=True) or "")
                  or parse_date(metas.get("period_end", "")) or fiscal_year_end_from_text(cover_text))
    return {
        "ticker": (_dei(raw, "TradingSymbol") or metas.get("ticker") or "").strip().upper() or None,
        "company": _dei(raw, "EntityRegistrantName") or metas.get("company") or metas.get("company_name"),
        "fiscal_year": _year(year) or (period_end.year if period_end else None),
        "period_end": period_end,
    }


def _dei(raw: str, name: str, whole: bool = False) -> str | None:
    """An iXBRL dei fact's text; whole=True reads past nested tags (dates split across tags)."""
    m = re.search(rf'<ix:nonNumeric\b[^>]*\bname="dei:{name}"[^>]*>', raw, re.IGNORECASE)
    if not m:
        return None
    tail = raw[m.end(): m.end() + 600]
    if not whole:
        tail = re.split(r"</ix:nonNumeric>", tail, maxsplit=1, flags=re.IGNORECASE)[0]
    text = re.sub(r"\s+", " ", html_lib.unescape(re.sub(r"<[^>]+>", "", tail)).replace("\xa0", " ")).strip()
    return text or None


def _meta_tags(raw: str) -> dict[str, str]:
    out = {}
    for tag in re.findall(r"<meta\b[^>]*>", raw[:200_000], re.IGNORECASE):
        attrs = {k.lower(): html_lib.unescape(v) for k, v in re.findall(r'([\w-]+)\s*=\s*["\']([^"\']*)["\']', tag)}
        if "name" in attrs and "content" in attrs:
            out[attrs["name"].strip().lower()] = attrs["content"].strip()
    return out


def _year(value: str | None) -> int | None:
    m = re.search(r"\b(19|20)\d{2}\b", value or "")
    return int(m.group()) if m else None


def _ticker_from_path(path: Path) -> str | None:
    if re.fullmatch(r"[A-Z][A-Z.\-]{0,5}", path.parent.name):  # data/10k/AAPL/...; not 'tmp' or 'docs'
        return path.parent.name.upper()
    m = re.match(r"([A-Za-z]{1,5})[-_]", path.name)
    return m[1].upper() if m else None

