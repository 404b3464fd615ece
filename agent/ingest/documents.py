"""Turn a file into a ready-to-write document: parsed, chunked, hashed. No database, no embeddings yet."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from agent.ingest.chunking import chunk_turns, split_text
from agent.ingest.errors import IngestError
from agent.models.corpus import TenKDoc, TranscriptDoc

Kind = Literal["transcript", "10k"]


class PreparedChunk(BaseModel):
    index: int
    text: str
    speaker: str | None = None
    section: str | None = None  # transcripts: prepared_remarks | qa
    item: str | None = None  # 10-K item
    item_title: str | None = None


class PreparedDocument(BaseModel):
    kind: Kind
    path: str
    content_hash: str
    doc: TranscriptDoc | TenKDoc
    chunks: list[PreparedChunk]

    @property
    def fiscal_quarter(self) -> int:
        return getattr(self.doc, "fiscal_quarter", 0)


def _hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def prepare_transcript(path: Path, size: int, overlap: int, ticker: str | None = None) -> PreparedDocument:
    from agent.ingest.transcripts import parse_transcript

    doc = parse_transcript(path, ticker)
    chunks = [
        PreparedChunk(index=i, text=c.text, speaker=c.speaker, section=c.section)
        for i, c in enumerate(chunk_turns(doc.turns, size, overlap))
    ]
    return PreparedDocument(kind="transcript", path=str(path), content_hash=_hash(path), doc=doc, chunks=chunks)


def prepare_10k(path: Path, size: int, overlap: int, ticker: str | None = None) -> PreparedDocument:
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        from agent.ingest.tenk_pdf import parse_10k_pdf as parse
    elif suffix in {".htm", ".html", ".xhtml", ".xml"}:
        from agent.ingest.tenk_html import parse_10k_html as parse
    else:
        raise IngestError(path, f"unsupported 10-K format {suffix or '(none)'}: expected .htm/.html (EDGAR or iXBRL) or .pdf")
    try:
        doc: TenKDoc = parse(path, ticker)
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
    return PreparedDocument(kind="10k", path=str(path), content_hash=_hash(path), doc=doc, chunks=chunks)


def prepare(kind: Kind, path: Path, size: int, overlap: int, ticker: str | None = None) -> PreparedDocument:
    if not path.is_file():
        raise IngestError(path, "no such file")
    return (prepare_transcript if kind == "transcript" else prepare_10k)(path, size, overlap, ticker)


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
