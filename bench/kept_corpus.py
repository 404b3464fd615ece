"""What the benches that measure on a corpus kept by bench/search.py share: their command line, the stack on the
kept data dir, and the bench's queries embedded by the model.

    .venv/bin/python bench/search.py --scale 1m --data-dir DIR      # builds and keeps the corpus (a long run)
    .venv/bin/python bench/search_ef.py | search_warmup.py | search_ab.py --data-dir DIR ...
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench import common, search


def parser(doc: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", required=True, help="a data dir kept by bench/search.py --data-dir")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--transcripts", type=Path, default=search.TRANSCRIPTS)
    p.add_argument("--json", action="store_true")
    return p


def parse(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    args = p.parse_args(argv)
    if not (Path(args.data_dir) / search.REUSED).is_file():
        p.error(f"{args.data_dir} was not kept by bench/search.py --data-dir")
    return args


def queries(ctx, args: argparse.Namespace, say) -> tuple[int, list[str], list]:
    """The kept corpus's size and the bench's queries with their vectors, the BM25 index brought up to the table."""
    from agent.providers.embeddings import LocalEmbedder

    with ctx.pool.connection() as conn:
        chunks = conn.execute("SELECT count(*) AS n FROM transcript_chunks").fetchone()["n"]
    if not chunks:
        raise SystemExit(f"{args.data_dir} holds no chunks: build them with bench/search.py --data-dir {args.data_dir}")
    texts = search.build_queries(common.real_chunks(args.transcripts), args.queries)
    model = LocalEmbedder()  # the queries are embedded by the model, one by one, as bench/search.py embeds them
    vecs = [model.embed([q])[0] for q in texts]
    say(f"BM25 index: {search.bm25_index(ctx, 'run', {})}")
    return chunks, texts, vecs


def main(args: argparse.Namespace, name: str, run: Callable, render: Callable[[dict], str]) -> int:
    """`run(ctx, args, say)` on the kept data dir's stack, then its result printed as JSON or by `render`.
    `args.started` is when the bench started, before the stack."""
    say = lambda msg: print(f"[bench:{name}] {msg}", file=sys.stderr, flush=True)
    args.started = time.perf_counter()
    with common.private_stack(args.data_dir, embedding_provider="hash", llm_provider="extractive") as ctx:
        result = run(ctx, args, say)
    result["seconds"] = round(time.perf_counter() - args.started, 1)
    print(json.dumps(result) if args.json else render(result))
    return 0
