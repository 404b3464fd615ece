"""Ingest filings given as page texts (FinanceBench's layout: documents.jsonl + pages/{doc_name}.jsonl.gz) through
the product's ingest path: registry companies from the manifest, page-numbered chunks, fan-out embedding, atomic
writes. Unchanged files are skipped by content hash before their pages are read, so an interrupted run resumes
where it stopped and a re-run over an unchanged corpus takes well under a second."""
from __future__ import annotations

from pathlib import Path

from agent.context import Context
from agent.ingest.documents import IngestLimits, pages_hash, prepare_pages
from agent.ingest.failures import IngestError
from agent.ingest.filing_pages import PAGES_SUFFIX, FilingMeta, ManifestError, doc_name_of, read_manifest, refresh_statement_lines
from agent.ingest.runner import FanOut, FileOutcome, IngestReport, ingest
from agent.retrieval.companies import register_company


class PagesDirError(ValueError):
    """A data dir that is not a pages corpus; str() is one readable line."""


def pages_layout(data_dir: Path) -> tuple[dict[str, FilingMeta], list[Path]]:
    """The manifest and the pages files of a data dir, or PagesDirError naming what is missing."""
    if not data_dir.is_dir():
        raise PagesDirError(f"{data_dir}: no such directory (expected documents.jsonl and pages/*{PAGES_SUFFIX})")
    try:
        manifest = read_manifest(data_dir / "documents.jsonl")
    except ManifestError as exc:
        raise PagesDirError(str(exc)) from None
    pages_dir = data_dir / "pages"
    files = sorted(pages_dir.glob(f"*{PAGES_SUFFIX}")) if pages_dir.is_dir() else []
    if not files:
        raise PagesDirError(f"{pages_dir}: no *{PAGES_SUFFIX} pages files")
    return manifest, files


def ingest_financebench(ctx: Context, data_dir: Path, doc_names: set[str] | None = None, fanout: FanOut | None = None,
                        quiet: bool = True, skip_by_stored_hash: bool = True) -> IngestReport:
    """Ingest the pages files of `data_dir` (only `doc_names` when given). A pages file with no manifest row, or
    a requested document with no pages file, is reported as an error; the others are still ingested."""
    manifest, files = pages_layout(Path(data_dir))
    if doc_names is not None:
        files = [f for f in files if doc_name_of(f) in doc_names]
    missing = sorted((doc_names or set()) - {doc_name_of(f) for f in files})
    companies = {manifest[doc_name_of(f)].company for f in files if doc_name_of(f) in manifest}
    with ctx.pool.connection() as conn:  # the registry entries first: questions name companies, not files
        tickers = {company: register_company(conn, company) for company in sorted(companies)}
    s = ctx.settings
    limits = IngestLimits.from_settings(s)

    def prepare_file(path: Path):
        meta = manifest.get(doc_name_of(path))
        if meta is None:
            raise IngestError(path, f"no row for {doc_name_of(path)!r} in documents.jsonl")
        return prepare_pages(path, meta, tickers[meta.company], s.chunk_size, s.chunk_overlap, limits)

    def hash_file(path: Path) -> str | None:  # what prepare_file would store, without reading the pages
        meta = manifest.get(doc_name_of(path))
        return None if meta is None else pages_hash(path, meta, tickers[meta.company], s.chunk_size, s.chunk_overlap)

    report = ingest(ctx, "10k", files, fanout=fanout, quiet=quiet, prepare_file=prepare_file, label="filing pages",
                    hash_file=hash_file, skip_by_stored_hash=skip_by_stored_hash)
    report.files += [FileOutcome(path=name, status="error", reason="no pages file for this document") for name in missing]
    refresh_statement_lines(ctx.pool, files, limits.max_pdf_pages)  # filings stored before the statement reader changed
    return report
