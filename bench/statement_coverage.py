"""How well statement pages read as rows (agent/statements/pages.py) over a directory of page texts: pages with at
least 5 rows of figures, the share of rows whose figure count equals the header's columns, and per concept the
number of documents whose statements it was found in. Prints JSON.

    .venv/bin/python -m bench.statement_coverage [--pages DIR]

DIR holds gzip JSONL files of {"doc_name", "page", "text"} (pypdf page text), tidied as the ingest tidies it."""
from __future__ import annotations

import argparse
import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

from agent.statements.models import CONCEPTS
from agent.statements.pages import parse_statement_page
from agent.tenk.statements import classify_pages

DEFAULT_PAGES = Path("/work/shared/data/financebench/pages")


def _tidy(text: str) -> str:  # as agent/ingest/filing_pages.py tidies a page
    text = re.sub(r"[ \t\xa0]+", " ", text)
    return re.sub(r" ?\n[\s]*", "\n", text).strip()


def _documents(folder: Path) -> dict[str, list[tuple[int, str]]]:
    docs: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for path in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                row = json.loads(line)
                docs[row["doc_name"]].append((int(row["page"]), _tidy(row["text"])))
    return docs


def coverage(folder: Path) -> dict:
    pages = parsed = rows = full = 0
    found: dict[str, set[str]] = defaultdict(set)
    documents = set()
    for name, doc in _documents(folder).items():
        doc.sort()
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
