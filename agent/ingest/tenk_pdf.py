"""Parse a PDF 10-K into a TenKDoc: page text, item headings past the table of contents, statement tables."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from pydantic import ValidationError

from agent.ingest.tenk_common import (
    TenKParseError,
    check_heading_count,
    find_headings,
    fiscal_year_end_from_text,
    make_table,
    pick_caption,
    pick_units,
    select_chain,
    split_by_headings,
)
from agent.models.corpus import TenKDoc, TenKSection, TenKTable

_TICKERS = {"MICROSOFT": "MSFT", "AMAZON": "AMZN", "APPLE": "AAPL", "ALPHABET": "GOOGL", "GOOGLE": "GOOGL",
            "NVIDIA": "NVDA", "TESLA": "TSLA", "META": "META", "NETFLIX": "NFLX"}
_FILE_NAME = re.compile(r"^(?P<name>.+?)_(?P<year>(?:19|20)\d{2})_10-?K", re.IGNORECASE)
_VALUE = re.compile(r"^\(?[-+]?\$?\d(?:[\d,]*\d)?(?:\.\d+)?\)?%?$|^[—–-]+$")
_FOOTNOTE = re.compile(r"^\(\d\)$")
_STATEMENT_TITLE = re.compile(r"\b(?:STATEMENTS?|BALANCE SHEETS?)\b|^NOTE \d+")  # starts a new table
_MIN_TABLE_ROWS = 3  # numeric lines in a block before it counts as a table
_MAX_LABEL_ROW = 100  # chars; a longer line without numbers is prose and ends a table


def parse_10k_pdf(path: Path, ticker: str | None = None, max_pages: int = 2000) -> TenKDoc:
    path = Path(path)
    pages = _strip_running_lines(_page_texts(path, max_pages))
    text = "\n".join(pages)
    if not text.strip():
        raise TenKParseError(path, "no extractable text (an image-only or empty PDF?)")
    headings = find_headings(text)
    check_heading_count(path, headings)
    chain = select_chain(headings, len(text))
    if not chain:
        raise TenKParseError(path, "no 10-K Items found (expected headings such as 'Item 7.')")
    sections = [_tidy(s) for s in split_by_headings(text, chain)]
    ends = [h.pos for h in chain[1:]] + [len(text)]
    tables = [t for h, end in zip(chain, ends) for t in _tables(h.item, text[h.pos:end])]
    cover = "\n".join(pages[:3])
    name_m = _FILE_NAME.match(path.stem)
    period_end = fiscal_year_end_from_text(cover)
    year = int(name_m["year"]) if name_m else (period_end.year if period_end else None)
    if year is None:
        raise TenKParseError(path, "cannot tell the fiscal year: name the file {NAME}_{YYYY}_10K.pdf")
    try:
        return TenKDoc(ticker=(ticker or _ticker_from_name(path)).strip().upper(), company_name=_company(cover), fiscal_year=year,
                       period_end=period_end, sections=sections, tables=tables)
    except ValidationError as exc:
        raise TenKParseError(path, f"invalid 10-K: {exc.errors()[0]['msg']}") from exc


# --- text extraction -----------------------------------------------------------------------------

# the text-yield check: a PDF whose first pages give almost no text is image-only (or empty), and reading the rest
# of its pages would only cost time
YIELD_PAGES = 30
YIELD_MIN_CHARS = 200


def _check_pages(path: Path, count: int, max_pages: int) -> None:
    if count > max_pages:
        raise TenKParseError(path, f"{count} pages, over the limit of {max_pages} (FINAGENT_INGEST_MAX_PDF_PAGES)")


def _read_pages(path: Path, count: int, page_text) -> list[str]:
    pages: list[str] = []
    for i in range(count):
        pages.append(page_text(i))
        if i + 1 == YIELD_PAGES < count and sum(len(p.strip()) for p in pages) < YIELD_MIN_CHARS:
            raise TenKParseError(path, f"no extractable text in the first {YIELD_PAGES} of {count} pages (an image-only or empty PDF?)")
    return pages


def _page_texts(path: Path, max_pages: int = 2000) -> list[str]:
    """Text per page. pypdfium2, when installed, is ~15x faster than pypdf on these files."""
    try:
        import pypdfium2  # noqa: F401
    except ImportError:
        return _pypdf_pages(path, max_pages)
    return _pdfium_pages(path, max_pages)


def _pypdf_pages(path: Path, max_pages: int = 2000) -> list[str]:
    from pypdf import PdfReader

    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise TenKParseError(path, "encrypted PDF that the empty password does not open")
        _check_pages(path, len(reader.pages), max_pages)
        return _read_pages(path, len(reader.pages), lambda i: _pypdf_page_text(reader.pages[i]))
    except TenKParseError:
        raise
    except Exception as exc:
        raise TenKParseError(path, f"cannot read PDF ({exc.__class__.__name__}: {exc})") from exc


def _pypdf_page_text(page) -> str:
    # layout mode keeps table rows on one line (label ... values); plain mode scatters them
    try:
        return page.extract_text(extraction_mode="layout") or ""
    except Exception:
        return page.extract_text() or ""


def _pdfium_pages(path: Path, max_pages: int = 2000) -> list[str]:
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(str(path))
    except Exception as exc:
        raise TenKParseError(path, f"cannot read PDF ({exc.__class__.__name__}: {exc})") from exc
    try:
        _check_pages(path, len(pdf), max_pages)
        pages = _read_pages(path, len(pdf), lambda i: pdf[i].get_textpage().get_text_range())
    except TenKParseError:
        raise
    except Exception as exc:
        raise TenKParseError(path, f"cannot read PDF ({exc.__class__.__name__}: {exc})") from exc
    finally:
        pdf.close()
    return [p.replace("\r\n", "\n").replace("\r", "\n").replace("\x02", "-").replace("\ufffe", "-") for p in pages]


def _strip_running_lines(pages: list[str]) -> list[str]:
    """Drop page headers and footers: short lines at a page's edge that recur on many pages."""

    def key(line: str) -> str:
        return re.sub(r"\d+", "#", re.sub(r"\s+", " ", line.strip().lower()))

    def edges(lines: list[str]) -> set[int]:
        idx = [i for i, ln in enumerate(lines) if ln.strip()]
        return {i for i in idx[:3] + idx[-3:] if len(lines[i].strip()) <= 80}

    split = [(lines, edges(lines)) for lines in (p.replace("\xa0", " ").splitlines() for p in pages)]
    counts = Counter(k for lines, edge in split for k in {key(lines[i]) for i in edge})
    running = {k for k, n in counts.items() if n >= max(3, len(pages) // 10)}
    return ["\n".join(ln for i, ln in enumerate(lines) if not (i in edge and key(ln) in running))
            for lines, edge in split]


def _tidy(section: TenKSection) -> TenKSection:
    lines = (re.sub(r"[ \t]+", " ", ln).strip() for ln in section.text.splitlines())
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return section.model_copy(update={"text": text})


# --- tables --------------------------------------------------------------------------------------

def _numeric_row(line: str) -> tuple[str, list[str]] | None:
    """'Total net sales $ 177,866 $ 232,887' -> ('Total net sales', ['177,866', '232,887'])."""
    tokens = line.split()
    i = len(tokens)
    while i > 0 and (_VALUE.match(tokens[i - 1]) or tokens[i - 1] in {"$", ")", "%", ")%"}):
        i -= 1
    values: list[str] = []
    for tok in tokens[i:]:
        if tok == "$":
            continue
        if tok in {")", "%", ")%"} and values:
            values[-1] += tok
        else:
            values.append(tok.lstrip("$"))
    return (" ".join(tokens[:i]), values) if len(values) >= 2 else None


def _tables(item: str, text: str) -> list[TenKTable]:
    out: list[TenKTable] = []
    block: list[tuple[str, list[str]] | str] = []
    recent: list[str] = []
    caption_lines: list[str] = []
    for raw in text.splitlines():
        line = re.sub(r"\s+", " ", raw).strip()
        if not line:
            continue
        row = _numeric_row(line)
        if row:
            if not block:  # label rows such as 'ASSETS:' just above the first numbers belong to the table
                while recent and _is_label_row(recent[-1]) and len(block) < 2:
                    block.insert(0, recent.pop())
                caption_lines = recent[-10:]
            block.append(row)
            continue
        if block and len(line) <= _MAX_LABEL_ROW and not all(isinstance(r, str) for r in block[-3:]) \
                and not _STATEMENT_TITLE.search(line):
            block.append(line)  # a label row such as 'Current assets:' inside a statement
            continue
        recent = [*recent[-20:], *_flush(item, block, caption_lines, out), line]
        block = []
    _flush(item, block, caption_lines, out)
    return out


def _is_label_row(line: str) -> bool:
    return len(line) <= 60 and line[0].isupper() and line.endswith(":") and not line.endswith("):")


def _flush(item: str, block: list, caption_lines: list[str], out: list[TenKTable]) -> list[str]:
    """Turn a block into a table if it has enough numeric rows; return its trailing text lines."""
    trailing: list[str] = []
    while block and isinstance(block[-1], str):
        trailing.insert(0, block.pop())
    numeric = [r for r in block if not isinstance(r, str)]
    if len(numeric) >= _MIN_TABLE_ROWS:
        block = _fold_footnotes(block)
        width = max(len(r[1]) for r in block if not isinstance(r, str))
        rows = [[r] if isinstance(r, str) else [r[0], *[""] * (width - len(r[1])), *r[1]] for r in block]
        table = make_table(item, pick_caption(caption_lines), rows, pick_units(caption_lines))
        if table:
            out.append(table)
    elif block:
        trailing = [r if isinstance(r, str) else " ".join([r[0], *r[1]]) for r in block] + trailing
    return trailing


def _fold_footnotes(block: list) -> list:
    """'Online stores (1) 108,354 ...' has one value too many: the '(1)' is a footnote mark."""
    usual = Counter(len(r[1]) for r in block if not isinstance(r, str)).most_common(1)[0][0]
    return [(f"{r[0]} {r[1][0]}", r[1][1:]) if not isinstance(r, str) and len(r[1]) == usual + 1
            and _FOOTNOTE.match(r[1][0]) else r for r in block]


# --- metadata ------------------------------------------------------------------------------------

def _ticker_from_name(path: Path) -> str:
    prefix = re.split(r"[_\-\s]", path.stem, maxsplit=1)[0].upper()
    return _TICKERS.get(prefix, prefix)


def _company(cover: str) -> str | None:
    m = re.search(r"([^\n]+)\n[^\n]*\(\s*Exact name of registrant", cover, re.IGNORECASE)
    name = re.sub(r"\s+", " ", m[1]).strip(" _-") if m else ""
    if name:
        return name
    m = re.search(r"^\s*([A-Z][A-Za-z0-9.,&' ]+?(?:CORPORATION|Corporation|INC\.|Inc\.|COMPANY|Company|PLC|plc))\s*$",
                  cover, re.MULTILINE)
    return m[1].strip() if m else None
