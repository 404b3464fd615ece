"""How well statement pages read as rows (agent/statements/pages.py) over a directory of page texts: pages with at
least 5 rows of figures, the share of rows whose figure count equals the header's columns, and per concept the
number of documents whose statements it was found in. Prints JSON.

    .venv/bin/python -m bench.statement_coverage [--pages DIR]

DIR holds gzip JSONL files of {"doc_name", "page", "text"} (pypdf page text), tidied as the ingest tidies it."""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from agent.ingest.filing_pages import PAGES_SUFFIX, doc_name_of, read_pages, tidy
from agent.statements.models import CONCEPTS
from agent.statements.pages import parse_statement_page
from agent.tenk.statements import classify_pages

MAX_PAGES = 100_000
DEFAULT_PAGES = Path(__file__).resolve().parents[2] / "shared" / "data" / "financebench" / "pages"



def _documents(folder: Path) -> dict[str, list[tuple[int, str]]]:
    """doc name -> its (page, tidied text), in page order, read as the ingest reads a pages file."""
    return {doc_name_of(path): [(p.page, tidy(p.text)) for p in read_pages(path, MAX_PAGES)]
            for path in sorted(folder.glob(f"*{PAGES_SUFFIX}"))}


def coverage(folder: Path) -> dict:
    pages = parsed = rows = full = 0
    found: dict[str, set[str]] = defaultdict(set)
    documents = set()
    for name, doc in _documents(folder).items():
        for (page, text), kind in zip(doc, classify_pages([t for _, t in doc])):
            if kind is None:
                continue
            pages += 1
            documents.add(name)
            lines = parse_statement_page(text, kind, page)
            with_values = [line for line in lines if line.values]
            parsed += len(with_values) >= 5
            rows += len(lines)
            full += len(with_values)
            for line in with_values:
                if line.concept:
                    found[line.concept].add(name)
    return {
        "statement_pages": pages,
        "documents": len(documents),
        "pages_with_5_rows_of_values": parsed,
        "rows": rows,
        "share_of_rows_with_every_column": round(full / rows, 3) if rows else None,
        "documents_per_concept": {c: len(found.get(c, ())) for c in CONCEPTS},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=Path, default=DEFAULT_PAGES)
    print(json.dumps(coverage(parser.parse_args().pages), indent=2))


if __name__ == "__main__":
    main()
