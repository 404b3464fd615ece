"""Ingestion benchmark: chunks per second through the real ingest path, the product's default local embedder
against today's torch path (sentence-transformers) in the same run, with the quality guard.

    .venv/bin/python bench/ingest.py [--json] [--no-write] [--files N] [--part all|even|odd] [--data-dir DIR]

Speed: real transcript files from ../shared/data/transcripts go through `ops.ingest_runner.ingest` (parse, chunk into
1,000-character chunks, embed, write to a private embedded Postgres + pgvector), once per embedder, with the tables and
the embedding cache emptied in between and each model loaded before the clock starts. Real FinanceBench page chunks
are embedded too (the embedder alone: no ingest kind reads those pages).

Quality: over the FinanceBench questions' filings, a pool of page chunks (every evidence page, plus every 25th page
of the same filings) is embedded by each embedder; the figures are the cosine of each chunk's vector to the torch
vector, the overlap of each question's top 15 chunks with the torch top 15, and the share of questions whose
evidence page is in the top 15 (page recall@15) under each embedder.

`--part even|odd` takes every other transcript file and question (even: where the settings were chosen; odd: held out).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from pydantic import BaseModel

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.providers.embeddings import Embedder
from bench import common

TRANSCRIPTS = common.SHARED_DATA / "transcripts"
FINANCEBENCH = common.SHARED_DATA / "financebench"
TOP_K = 15
TARGETS = [("local_chunks_per_s", ">=", 50.0), ("cosine_mean", ">=", 0.99)]


class PageChunk(BaseModel):
    doc: str
    page: int
    text: str


class Question(BaseModel):
    text: str
    doc: str
    pages: list[int]


# --- the real data -----------------------------------------------------------------------------

def pick(items: list, part: str) -> list:
    return {"all": items, "even": items[0::2], "odd": items[1::2]}[part]


def transcript_files(folder: Path, n: int, part: str) -> list[Path]:
    """n files spread over the sorted list (so over every ticker), from the chosen half."""
    files = pick(sorted(folder.glob("*.json")), part)
    if not files:
        raise SystemExit(f"no transcript files (*.json) in {folder}")
    step = max(1, len(files) // n)
    return files[::step][:n]


def questions(folder: Path, n: int, part: str) -> list[Question]:
    """FinanceBench questions whose filing has page texts, from the chosen half."""
    path = folder / "questions_dev.jsonl"
    if not path.exists():
        raise SystemExit(f"no FinanceBench questions at {path}")
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if (folder / "pages" / f"{row['doc_name']}.jsonl.gz").exists():
            out.append(Question(text=row["question"], doc=row["doc_name"],
                                pages=sorted({e["evidence_page_num"] for e in row["evidence"]})))
    return pick(out, part)[:n]


def page_chunks(folder: Path, qs: list[Question], every: int = 25) -> list[PageChunk]:
    """The chunks (the project's chunker, 1,000 characters) of every evidence page and every `every`-th page of the
    questions' filings."""
    from agent.ingest.chunking import split_text

    wanted: dict[str, set[int]] = {}
    for q in qs:
        wanted.setdefault(q.doc, set()).update(q.pages)
    out = []
    for doc, evidence in sorted(wanted.items()):
        with gzip.open(folder / "pages" / f"{doc}.jsonl.gz", "rt") as f:
            for line in f:
                page = json.loads(line)
                if page["page"] in evidence or page["page"] % every == 0:
                    out += [PageChunk(doc=doc, page=page["page"], text=t) for t in split_text(page["text"], 1000, 150)]
    return out


# --- the embedders ----------------------------------------------------------------------------

def embedders(settings) -> dict[str, Callable[[], Embedder]]:
    """Name -> constructor. `local` is what make_embedder builds for embedding_provider=local with these settings."""
    from agent.providers.embeddings import LocalEmbedder
    from agent.providers.onnx_embedder import OnnxEmbedder, Quantize

    local = (lambda: LocalEmbedder()) if settings.embedding_backend == "torch" else (lambda: OnnxEmbedder.from_settings(settings))
    out: dict[str, Callable[[], Embedder]] = {"reference": LocalEmbedder, "local": local}
    if settings.embedding_backend == "onnx":  # the other precision, for the cost of quantisation
        other: Quantize = "none" if settings.embedding_quantize == "int8" else "int8"
        out[f"onnx_{other}"] = lambda: OnnxEmbedder(other, settings.embedding_threads, settings.model_cache_dir)
    return out


def load(make: Callable[[], Embedder]) -> tuple[Embedder, float]:
    """The embedder, its model loaded (and exported, the first time) before any clock starts."""
    started = time.perf_counter()
    embedder = make()
    embedder.embed(["warm-up"])
    return embedder, time.perf_counter() - started


# --- speed ------------------------------------------------------------------------------------

def reset_corpus(ctx) -> None:
    with ctx.pool.connection() as conn:
        conn.execute("DELETE FROM documents")  # chunks and tables go with them (ON DELETE CASCADE)
        conn.execute("DELETE FROM embedding_cache")


def measure_ingest(ctx, embedder: Embedder, files: list[Path]) -> dict:
    """The real ingest path (inline, as `finagent ingest --inline`) with this embedder behind the product's cache."""
    from agent.providers.embeddings import CachedEmbedder
    from ops.ingest_runner import ingest

    reset_corpus(ctx)
    ctx.__dict__["embedder"] = CachedEmbedder(embedder, pool=ctx.pool)  # Context.embedder is a cached_property
    report = ingest(ctx, "transcript", files, fanout=False, quiet=True)
    if report.errors:
        raise RuntimeError(f"ingest failed: {report.errors}")
    return {"chunks": report.chunks_embedded, "seconds": round(report.seconds, 2),
            "chunks_per_s": round(report.chunks_embedded / report.seconds, 1)}


def measure_embed(embedder: Embedder, texts: list[str], batch: int = 64) -> tuple[np.ndarray, float]:
    """Vectors of texts in batches of the ingest fan-out's size, and chunks per second."""
    started = time.perf_counter()
    vecs = np.concatenate([embedder.embed(texts[i:i + batch]) for i in range(0, len(texts), batch)])
    return vecs, len(texts) / (time.perf_counter() - started)


# --- quality ----------------------------------------------------------------------------------

def top_k(query_vecs: np.ndarray, chunk_vecs: np.ndarray, k: int = TOP_K) -> np.ndarray:
    scores = query_vecs @ chunk_vecs.T
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def overlap(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean([len(set(x) & set(y)) / len(x) for x, y in zip(a, b)]))


def page_recall(tops: np.ndarray, chunks: list[PageChunk], qs: list[Question]) -> float:
    """Share of questions with a chunk of one of their evidence pages in their top k."""
    hits = [any(chunks[i].doc == q.doc and chunks[i].page in q.pages for i in top) for top, q in zip(tops, qs)]
    return float(np.mean(hits))


def quality(vecs: np.ndarray, ref_vecs: np.ndarray, tops: np.ndarray, ref_tops: np.ndarray) -> dict:
    cos = (vecs * ref_vecs).sum(axis=1)
    return {"cosine_mean": round(float(cos.mean()), 5), "cosine_min": round(float(cos.min()), 5),
            "overlap_at_15": round(overlap(tops, ref_tops), 4)}


# --- the run ----------------------------------------------------------------------------------

def run(ctx, settings, args: argparse.Namespace, say) -> dict:
    files = transcript_files(args.transcripts, args.files, args.part)
    qs = questions(args.financebench, args.questions, args.part)
    pool = page_chunks(args.financebench, qs)
    texts = [c.text for c in pool]
    out: dict = {"part": args.part, "transcript_files": len(files), "page_chunks": len(pool), "questions": len(qs),
                 "backend": settings.embedding_backend, "quantize": settings.embedding_quantize,
                 "threads": settings.embedding_threads or os.cpu_count(), **common.machine(),
                 "load_avg_1m_start": round(os.getloadavg()[0], 2)}
    from agent.providers.embeddings import HashEmbedder

    measure_ingest(ctx, HashEmbedder(), files)  # warm-up: the first ingest into a new database pays for every first time
    ref: dict = {}
    for name, make in embedders(settings).items():
        say(f"{name}: loading the model")
        embedder, load_s = load(make)
        embedder.embed(texts[:64])  # warm-up, untimed and uncached: a runtime's first calls size its buffers
        say(f"{name}: ingesting {len(files)} transcript files")
        ingest_fig = measure_ingest(ctx, embedder, files)
        say(f"{name}: embedding {len(pool)} FinanceBench page chunks and {len(qs)} questions")
        vecs, pages_rate = measure_embed(embedder, texts)
        q_vecs = embedder.embed([q.text for q in qs])
        tops = top_k(q_vecs, vecs)
        if name == "reference":
            ref = {"vecs": vecs, "tops": tops}
        out |= {f"{name}_chunks_per_s": ingest_fig["chunks_per_s"], f"{name}_ingest_chunks": ingest_fig["chunks"],
                f"{name}_ingest_s": ingest_fig["seconds"], f"{name}_pages_embed_chunks_per_s": round(pages_rate, 1),
                f"{name}_load_s": round(load_s, 1), f"{name}_page_recall_at_15": round(page_recall(tops, pool, qs), 4)}
        out |= {f"{name}_{k}": v for k, v in quality(vecs, ref["vecs"], tops, ref["tops"]).items()}
    out |= {"cosine_mean": out["local_cosine_mean"], "cosine_min": out["local_cosine_min"],
            "overlap_at_15": out["local_overlap_at_15"],
            "speedup": round(out["local_chunks_per_s"] / out["reference_chunks_per_s"], 2),
            "load_avg_1m_end": round(os.getloadavg()[0], 2)}
    return out


# --- reporting --------------------------------------------------------------------------------

FIGURES = ["chunks_per_s", "ingest_chunks", "ingest_s", "pages_embed_chunks_per_s", "load_s", "cosine_mean",
           "cosine_min", "overlap_at_15", "page_recall_at_15"]
RUN = ["part", "transcript_files", "page_chunks", "questions", "backend", "quantize", "threads", "cpu_count",
       "load_avg_1m_start", "load_avg_1m_end", "seconds"]


def tables(result: dict) -> list[tuple[str, tuple, list[tuple]]]:
    names = [k.removesuffix("_chunks_per_s") for k in result if k.endswith("_chunks_per_s")
             and not k.endswith("pages_embed_chunks_per_s")]
    return [("per embedder (reference = torch sentence-transformers, local = the product's default)", ("figure", *names),
             [(f, *(result.get(f"{n}_{f}") for n in names)) for f in FIGURES]),
            ("run", ("figure", "value"), [(k, result.get(k)) for k in RUN])]


NOTES = """Method: `chunks_per_s` is the real ingest path, `ops.ingest_runner.ingest` inline (parse, chunk, embed
through the product's `CachedEmbedder`, write each document in one transaction on a writer thread), over the same
transcript files for each embedder, with the documents and the embedding cache emptied between embedders and the model
loaded (`load_s`, including a first-time ONNX export) and warmed up on 64 page chunks before the clock starts, after
one warm-up ingest with the hash embedder. Inline ingest embeds windows of at least 256 chunks (whole documents) per
call. `pages_embed_chunks_per_s` embeds
FinanceBench page chunks (tables and figures: more word pieces per character) in batches of 64, the embedder alone.
Quality is measured on those page chunks: `cosine_*` to the torch vector of the same chunk, `overlap_at_15` = the share
of each question's torch top 15 (cosine over the pool) that the embedder's top 15 keeps, `page_recall_at_15` = the
share of questions with a chunk of an evidence page in the top 15. The backend is `FINAGENT_EMBEDDING_BACKEND`
(onnx|torch) and the precision `FINAGENT_EMBEDDING_QUANTIZE` (int8|none); the bench also runs the other precision.
Read the ratios, measured side by side in one run, against the load average in the run table: on a busy machine
torch's two-thread matrix products lose more than ONNX Runtime's one-thread batches (speedups of 6-9x were measured at
a load average of 10, about 3.5x on a quieter machine)."""


def markdown(result: dict, command: str) -> str:
    checks = "\n".join(f"- **{c['status']}** `{c['metric']}` = {c['value']} (target {c['op']} {c['target']})"
                       for c in result["targets"])
    body = "\n\n".join(f"{title}:\n\n{common.markdown_table(rows, header)}" for title, header, rows in tables(result))
    part = {"all": "", "even": ", development half (even files and questions)", "odd": ", held-out half (odd files and questions)"}
    return (f"## Ingestion speed (all-MiniLM-L6-v2{part[result['part']]})\n\nMeasured {common.today()} on {result['cpu_count']} "
            f"CPUs ({result['platform']}), in {result['seconds']} s:\n\n```\n{command}\n```\n\nTargets:\n\n{checks}\n\n"
            f"{body}\n\n{NOTES}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target fails")
    p.add_argument("--no-write", action="store_true", help="leave docs/benchmarks.md alone")
    p.add_argument("--data-dir", help="data dir for the embedded services (default: a fresh temporary dir)")
    p.add_argument("--files", type=int, default=8, help="transcript files to ingest per embedder")
    p.add_argument("--questions", type=int, default=20, help="FinanceBench questions of the quality check")
    p.add_argument("--part", choices=("all", "even", "odd"), default="all",
                   help="every file and question, or every other one (even: development half; odd: held-out half)")
    p.add_argument("--transcripts", type=Path, default=TRANSCRIPTS)
    p.add_argument("--financebench", type=Path, default=FINANCEBENCH)
    args = p.parse_args(argv)
    for folder in (args.transcripts, args.financebench):
        if not folder.is_dir():
            p.error(f"no data directory at {folder} (the real data sits beside the repository: ../shared/data)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    say = lambda msg: print(f"[bench:ingest] {msg}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    with common.private_stack(args.data_dir, embedding_provider="local", llm_provider="extractive") as ctx:
        result = run(ctx, ctx.settings, args, say)
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["targets"] = common.check_targets(result, TARGETS)
    return common.finish("ingest.py", argv, args, "ingest" if args.part == "all" else f"ingest-{args.part}", result, markdown, tables)


if __name__ == "__main__":
    sys.exit(main())
