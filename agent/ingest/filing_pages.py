"""Filings given as page texts: a manifest (documents.jsonl: doc_name, company, doc_type, doc_period) and one
`pages/{doc_name}.jsonl.gz` per document, each line {"doc_name", "page" (0-based), "text"}.

Every chunk keeps its page, so a search hit maps back to a page of the PDF. A document's period comes from the
manifest: its year, and a fiscal quarter written as `_{YYYY}Q{N}` in its name (10-Q, earnings release); an 8-K's
date (`dated-YYYY-MM-DD`) tells one company's 8-Ks of a year apart."""
from __future__ import annotations

import datetime as dt
import gzip
import re
import zlib
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError

from agent.ingest.chunking import split_text
from agent.ingest.failures import IngestError
from agent.models.corpus import FilingDoc, FilingKind, FilingPage, Period
from agent.tenk.statements import Statement, classify_pages

PAGES_SUFFIX = ".jsonl.gz"
_KINDS: dict[str, FilingKind] = {"10k": "10k", "10-k": "10k", "10q": "10q", "10-q": "10q", "8k": "8k", "8-k": "8k",
                                 "earnings": "earnings"}
FORM_LABELS: dict[FilingKind, str] = {"10k": "10-K", "10q": "10-Q", "8k": "8-K", "earnings": "earnings release"}
_QUARTER = re.compile(r"(?:^|_)((?:19|20)\d{2})Q([1-4])(?:_|$)", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_DATE = re.compile(r"((?:19|20)\d{2})-(\d{2})-(\d{2})")


class FilingMeta(BaseModel):
    """One manifest row (documents.jsonl); other fields are kept."""

    model_config = ConfigDict(extra="allow")

    doc_name: str
    company: str
    doc_type: str
    doc_period: int

    @property
    def kind(self) -> FilingKind:
        kind = _KINDS.get(self.doc_type.strip().lower())
        if kind is None:
            raise ValueError(f"{self.doc_name}: unknown doc_type {self.doc_type!r} (expected one of 10k, 10q, 8k, earnings)")
        return kind

    @property
    def period(self) -> Period:
        m = _QUARTER.search(self.doc_name)
        if m:
            return Period(fiscal_year=int(m[1]), fiscal_quarter=int(m[2]))
        return Period(fiscal_year=self.doc_period)

    @property
    def filed_on(self) -> dt.date | None:
        m = _DATE.search(self.doc_name)
        if not m:
            return None
        try:
            return dt.date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            return None


class ManifestError(ValueError):
    """A manifest that cannot be read; str() names the file and line."""


def read_manifest(path: Path) -> dict[str, FilingMeta]:
    """doc_name -> its manifest row."""
    if not path.is_file():
        raise ManifestError(f"{path}: no such manifest (expected documents.jsonl next to pages/)")
    out: dict[str, FilingMeta] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            meta = FilingMeta.model_validate_json(line)
            meta.kind  # noqa: B018 - an unknown doc_type fails here, with its line
        except (ValidationError, ValueError) as exc:
            reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise ManifestError(f"{path} line {n}: {reason}") from None
        out[meta.doc_name] = meta
    return out


def doc_name_of(path: Path) -> str:
    return path.name.removesuffix(PAGES_SUFFIX)


def read_pages(path: Path, max_pages: int) -> list[FilingPage]:
    """The pages of one file, in page order; IngestError when the file is not gzip JSONL of pages."""
    pages: dict[int, FilingPage] = {}
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    page = FilingPage.model_validate_json(line)
                except ValidationError as exc:
                    raise IngestError(path, f"line {n}: not a page object ({exc.errors()[0]['msg']})") from None
                if page.page in pages:
                    raise IngestError(path, f"line {n}: page {page.page} appears twice")
                # PDF text extraction turns form check boxes and glyphs it cannot map into control characters
                pages[page.page] = page.model_copy(update={"text": _CONTROL.sub(" ", page.text)})
                if len(pages) > max_pages:
                    raise IngestError(path, f"more than {max_pages} pages (FINAGENT_INGEST_MAX_PDF_PAGES)")
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
        raise IngestError(path, f"not a gzip-compressed JSONL pages file ({type(exc).__name__}: {exc})") from None
    return [pages[k] for k in sorted(pages)]


def chunk_header(doc: FilingDoc) -> str:
    """What every chunk of the document starts with: the company, the form and the period, so a question that
    names them finds the document's chunks in a store shared by many filings."""
    period = f"Q{doc.fiscal_quarter} FY{doc.fiscal_year}" if doc.fiscal_quarter else f"FY{doc.fiscal_year}"
    dated = f" dated {doc.filed_on.isoformat()}" if doc.filed_on else ""
    return f"{doc.company_name or doc.ticker} {FORM_LABELS[doc.kind]} {period}{dated}"


def filing_from_pages(path: Path, meta: FilingMeta, ticker: str, max_pages: int) -> FilingDoc:
    pages = read_pages(path, max_pages)
    if not pages:
        raise IngestError(path, "no pages")
    if not any(p.text.strip() for p in pages):
        raise IngestError(path, "every page is empty (a scanned PDF?)")
    period = meta.period
    return FilingDoc(ticker=ticker, company_name=meta.company, kind=meta.kind, name=meta.doc_name,
                     fiscal_year=period.fiscal_year, fiscal_quarter=period.fiscal_quarter, filed_on=meta.filed_on,
                     pages=pages)


CHUNKING_VERSION = "5"  # part of a document's content hash: a change to page_chunks re-ingests every filing


def tidy(text: str) -> str:
    """PDF text extraction's spacing: runs of blank and space-only lines become one line break."""
    text = re.sub(r"[ \t\xa0]+", " ", text)
    return re.sub(r" ?\n[\s]*", "\n", text).strip()


PAGE_LEAD_CHARS = 100


def _lead(text: str) -> str:
    """The start of a page (its running header and title: 'Consolidated Balance Sheets'), on one line."""
    lead = " ".join(text[:PAGE_LEAD_CHARS].split())
    return lead.rsplit(" ", 1)[0] if len(text) > PAGE_LEAD_CHARS and " " in lead else lead


class PageChunk(NamedTuple):
    page: int
    statement: Statement | None  # the primary financial statement the page holds (agent/tenk/statements.py)
    text: str


def page_chunks(doc: FilingDoc, size: int, overlap: int) -> list[PageChunk]:
    """The chunks of every page: each page is split on its own, so no chunk spans two pages. Every chunk starts
    with the document's header; a chunk after a page's first also repeats the page's lead, so the rows of a
    statement's second half still say which statement they belong to."""
    header = chunk_header(doc)
    texts = [tidy(page.text) for page in doc.pages]
    out = []
    for page, text, statement in zip(doc.pages, texts, classify_pages(texts)):
        lead = _lead(text) if PAGE_LEAD_CHARS else ""
        body = max(size - len(header) - len(lead) - 3, size // 2)
        for i, part in enumerate(split_text(text, body, overlap)):
            out.append(PageChunk(page.page, statement, f"{header}\n{part}" if i == 0 or not lead else f"{header}\n{lead} …\n{part}"))
    return out


def statement_lines_of(doc: FilingDoc):
    """The line items of the filing's primary statement pages (agent/statements)."""
    return statement_lines_of_pages(doc.pages)


def refresh_statement_lines(pool, paths: list[Path], max_pages: int) -> int:
    """Read the statements again of every stored filing from these pages files whose lines an older reader wrote
    (or none did): no chunk is embedded again. The number of documents read."""
    from agent.statements.line_store import write_lines
    from agent.statements.reader import reader_version

    version = reader_version()
    with pool.connection() as conn:
        rows = conn.execute("SELECT id, ticker, source_path FROM documents WHERE source_path = ANY(%s)"
                            " AND kind <> 'transcript' AND statements_version IS DISTINCT FROM %s",
                            ([str(p) for p in paths], version)).fetchall()
    for r in rows:
        pages = read_pages(Path(r["source_path"]), max_pages)
        lines = statement_lines_of_pages(pages)
        with pool.connection() as conn, conn.transaction():
            write_lines(conn, r["id"], r["ticker"], lines, version)
    return len(rows)


def statement_lines_of_pages(pages: list[FilingPage]):
    from agent.statements.reader import statement_lines

    return statement_lines([(page.page, tidy(page.text)) for page in pages])
