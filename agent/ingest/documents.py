"""Turn a file into a ready-to-write document: parsed, chunked, hashed. No database, no embeddings yet."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from agent.ingest.chunking import chunk_turns, split_text
from agent.ingest.failures import IngestError
from agent.models.corpus import FilingDoc, FilingKind, TenKDoc, TranscriptDoc

Kind = Literal["transcript", "10k"]  # what `prepare` reads; filings given as page texts: prepare_pages
DocKind = Literal["transcript", "10k"] | FilingKind  # documents.kind


class IngestLimits(BaseModel):
    """Caps that keep a hostile or broken file from costing the run its memory or its time (agent/settings.py)."""

    max_file_bytes: int = 32 * 1024 * 1024
    max_chunks: int = 20_000
    max_html_depth: int = 200
    max_pdf_pages: int = 2000

    @classmethod
    def from_settings(cls, settings) -> IngestLimits:
        return cls(max_file_bytes=settings.ingest_max_file_bytes, max_chunks=settings.ingest_max_chunks,
                   max_html_depth=settings.ingest_max_html_depth, max_pdf_pages=settings.ingest_max_pdf_pages)


class PreparedChunk(BaseModel):
    index: int
    text: str
    speaker: str | None = None
    section: str | None = None  # transcripts: prepared_remarks | qa
    item: str | None = None  # 10-K item
    item_title: str | None = None
    page: int | None = None  # filings read page by page
    statement: str | None = None  # the primary financial statement on that page: income, balance or cash_flow


class PreparedDocument(BaseModel):
    kind: DocKind
    path: str
    content_hash: str
    doc: TranscriptDoc | TenKDoc | FilingDoc
    chunks: list[PreparedChunk]
    recipe: str = ""  # how its chunks and vectors are made (agent.ingest.runner.ingest_recipe), set before it is stored

    @property
    def fiscal_quarter(self) -> int:
        return getattr(self.doc, "fiscal_quarter", 0)

    @property
    def variant(self) -> str:
        """Tells apart documents of one kind, company and period (documents.variant): an 8-K's date."""
        filed_on = getattr(self.doc, "filed_on", None)
        return filed_on.isoformat() if isinstance(self.doc, FilingDoc) and filed_on else ""


def file_hash(path: Path) -> str:
    """The content hash of a transcript or 10-K file: the SHA-256 of its bytes. What else makes the document (the file
    name, which gives a JSON transcript its ticker and period) is the stored source path, which `ingest` looks the
    hash up under before reading a file any further (agent/ingest/runner.py)."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()



# a NUL escape in the JSON form of the document (not an escaped backslash followed by 'u0000')
_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def _check_storable(path: Path, prepared: PreparedDocument) -> PreparedDocument:
    """Postgres text holds neither NUL characters nor lone surrogates (a JSON file can carry both as escapes): such a
    file fails here, with the reason, rather than in the middle of the database write."""
    try:
        dumped = prepared.model_dump_json()
    except PydanticSerializationError:
        raise IngestError(path, "the text is not valid Unicode (unpaired surrogate escapes)") from None
    if _NUL.search(dumped):
        raise IngestError(path, "the text holds NUL characters (binary data?)")
    return prepared


def prepare_transcript(path: Path, size: int, overlap: int, ticker: str | None = None) -> PreparedDocument:
    from agent.ingest.transcripts import parse_transcript

    doc = parse_transcript(path, ticker)
    chunks = [
        PreparedChunk(index=i, text=c.text, speaker=c.speaker, section=c.section)
        for i, c in enumerate(chunk_turns(doc.turns, size, overlap))
    ]
    return PreparedDocument(kind="transcript", path=str(path), content_hash=file_hash(path), doc=doc, chunks=chunks)


def prepare_10k(path: Path, size: int, overlap: int, ticker: str | None = None, limits: IngestLimits | None = None) -> PreparedDocument:
    limits = limits or IngestLimits()
    suffix = path.suffix.lower()
    try:
        if suffix == ".pdf":
            from agent.ingest.tenk_pdf import parse_10k_pdf

            doc: TenKDoc = parse_10k_pdf(path, ticker, max_pages=limits.max_pdf_pages)
        elif suffix in {".htm", ".html", ".xhtml", ".xml"}:
            from agent.ingest.tenk_html import parse_10k_html

            doc = parse_10k_html(path, ticker, max_depth=limits.max_html_depth)
        else:
            raise IngestError(path, f"unsupported 10-K format {suffix or '(none)'}: expected .htm/.html (EDGAR or iXBRL) or .pdf")
    except IngestError:
        raise
    except ValueError as exc:  # the parsers' own errors name the file already
        raise IngestError(path, str(exc).removeprefix(f"{path}: ")) from exc
    chunks: list[PreparedChunk] = []
    for section in doc.sections:
        for part in split_text(section.text, size, overlap):
            chunks.append(PreparedChunk(index=len(chunks), text=part, item=section.item, item_title=section.title))
    if not chunks:
        raise IngestError(path, "no text found in any 10-K item")
    return PreparedDocument(kind="10k", path=str(path), content_hash=file_hash(path), doc=doc, chunks=chunks)


def _check_file(path: Path, limits: IngestLimits | None) -> IngestLimits:
    """The checks made before a file is read: it exists and is within the size cap. Returns the limits in force."""
    limits = limits or IngestLimits()
    if not path.is_file():
        raise IngestError(path, "no such file")
    nbytes = path.stat().st_size
    if nbytes > limits.max_file_bytes:
        raise IngestError(path, f"{nbytes} bytes, over the ingest limit of {limits.max_file_bytes} (FINAGENT_INGEST_MAX_FILE_BYTES)")
    return limits


def prepare_pages(path: Path, meta, ticker: str, size: int, overlap: int, limits: IngestLimits | None = None) -> PreparedDocument:
    """A filing given as page texts (agent/ingest/filing_pages.py), with its manifest row and registry ticker."""
    from agent.ingest.filing_pages import filing_from_pages, page_chunks

    limits = _check_file(path, limits)
    doc = filing_from_pages(path, meta, ticker, limits.max_pdf_pages)
    chunks = [PreparedChunk(index=i, text=c.text, page=c.page, statement=c.statement)
              for i, c in enumerate(page_chunks(doc, size, overlap))]
    if len(chunks) > limits.max_chunks:
        raise IngestError(path, f"{len(chunks)} chunks, over the limit of {limits.max_chunks} per document (FINAGENT_INGEST_MAX_CHUNKS)")
    prepared = PreparedDocument(kind=doc.kind, path=str(path), content_hash=pages_hash(path, meta, ticker, size, overlap),
                                doc=doc, chunks=chunks)
    return _check_storable(path, prepared)


def pages_hash(path: Path, meta, ticker: str, size: int, overlap: int) -> str:
    """The content hash of a pages file, computed without reading its pages: it covers what the chunks are made of,
    the file's bytes, the manifest row and ticker they are filed under, and how they are chunked."""
    from agent.ingest.filing_pages import CHUNKING_VERSION

    recipe = f"\n{meta.model_dump_json()}\n{ticker}\n{CHUNKING_VERSION}:{size}:{overlap}"
    return hashlib.sha256(path.read_bytes() + recipe.encode()).hexdigest()


def prepare(kind: Kind, path: Path, size: int, overlap: int, ticker: str | None = None,
            limits: IngestLimits | None = None) -> PreparedDocument:
    """Parse and chunk one file, or raise IngestError with the reason. Size caps are checked before the file is read."""
    limits = _check_file(path, limits)
    if kind == "transcript":
        prepared = prepare_transcript(path, size, overlap, ticker)
    else:
        prepared = prepare_10k(path, size, overlap, ticker, limits)
    if len(prepared.chunks) > limits.max_chunks:
        raise IngestError(path, f"{len(prepared.chunks)} chunks, over the limit of {limits.max_chunks} per document (FINAGENT_INGEST_MAX_CHUNKS)")
    return _check_storable(path, prepared)


def expand_paths(paths: list[Path], kind: Kind) -> list[Path]:
    """Files named directly, plus the matching files found under named directories."""
    patterns = ["*.json", "*.txt"] if kind == "transcript" else ["*.htm", "*.html", "*.pdf"]
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for pat in patterns for f in p.rglob(pat))
        else:
            out.append(p)
    return out
