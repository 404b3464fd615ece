"""Ingestion benchmark: chunks per second through the real ingest path, the product's default local embedder
against today's torch path (sentence-transformers) in the same run, with the quality guard.

    .venv/bin/python bench/ingest.py [--json] [--no-write] [--files N] [--part all|even|odd] [--data-dir DIR]
    .venv/bin/python bench/ingest.py --scale [--embedders hash,local] [--files N] [--pages N] [--json] [--no-write]

Speed: real transcript files from ../shared/data/transcripts go through `agent.ingest.runner.ingest` (parse, chunk into
1,000-character chunks, embed, write to a private embedded Postgres + pgvector), once per embedder, with the tables and
the embedding cache emptied in between and each model loaded before the clock starts. Real FinanceBench page chunks
are embedded too (the embedder alone: no ingest kind reads those pages).

Quality: over the FinanceBench questions' filings, a pool of page chunks (every evidence page, plus every 25th page
of the same filings) is embedded by each embedder; the figures are the cosine of each chunk's vector to the torch
vector, the overlap of each question's top 15 chunks with the torch top 15, and the share of questions whose
evidence page is in the top 15 (page recall@15) under each embedder.

`--part even|odd` takes every other transcript file and question (even: where the settings were chosen; odd: held out).

At scale (`--scale`, its own section "Ingestion at scale"): every transcript file, then every FinanceBench pages
file (`ops.eval.financebench_ingest.ingest_financebench`, what `finagent ingest pages` runs), through the real ingest path
inline, once per embedder (the hash embedder: the pipeline's own cost; the local model: the real cost), each pass in
a process of its own so that its peak RSS is its own; then the same ingest again over the unchanged corpus, with the
stored-hash lookup and, as the baseline, parsing every file before comparing hashes.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
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
TARGETS = [("speedup", ">=", 1.2), ("cosine_mean", ">=", 0.99)]  # speedup: local against torch, in the same run


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
    from agent.ingest.runner import ingest
    from agent.providers.embeddings import CachedEmbedder

    reset_corpus(ctx)
    ctx.__dict__["embedder"] = CachedEmbedder(embedder, pool=ctx.pool)  # Context.embedder is a cached_property
    report = ingest(ctx, "transcript", files, fanout=None, quiet=True)
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
    files = transcript_files(args.transcripts, args.files or 8, args.part)
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


# --- at scale: the whole corpus, each pass in its own process ------------------------------------

SCALE_TARGETS = [("reingest_s", "<", 10.0)]
CORPORA = ("transcripts", "financebench")


def pages_docs(folder: Path, n: int | None) -> list[str]:
    """The FinanceBench documents with a pages file: all, or n spread over the sorted list."""
    from agent.ingest.filing_pages import PAGES_SUFFIX, doc_name_of

    names = sorted(doc_name_of(f) for f in (folder / "pages").glob(f"*{PAGES_SUFFIX}"))
    if not names:
        raise SystemExit(f"no FinanceBench pages files in {folder / 'pages'}")
    if n is None or n >= len(names):
        return names
    step = max(1, len(names) // n)
    return names[::step][:n]


def scale_pass(spec: dict) -> dict:
    """One ingest in this process (on the stack the parent started), as `finagent ingest ... --inline` runs it: the
    report's figures and this process's peak RSS. The model is loaded before the clock starts when spec["load"]."""
    os.environ["FINAGENT_EMBEDDING_PROVIDER"] = spec["embedder"]
    with common.stdout_to_stderr():
        from agent.db import close_pools
        from agent.ingest.runner import ingest
        from agent.settings import get_settings
        from ops.eval.financebench_ingest import ingest_financebench
        from ops.local.bootstrap import bootstrap

        ctx = bootstrap(get_settings())
        load_s = None
        if spec["load"]:
            started = time.perf_counter()
            ctx.embedder.inner.embed(["warm-up"])  # the model itself, past the cache
            load_s = round(time.perf_counter() - started, 2)
        skip = not spec["parse_all"]
        started = time.perf_counter()
        if spec["corpus"] == "transcripts":
            report = ingest(ctx, "transcript", [Path(p) for p in spec["paths"]], fanout=None, quiet=True,
                            skip_by_stored_hash=skip)
        else:
            report = ingest_financebench(ctx, Path(spec["folder"]), doc_names=set(spec["docs"]), fanout=None,
                                         skip_by_stored_hash=skip)
        seconds = time.perf_counter() - started
        close_pools()
    statuses: dict[str, int] = {}
    for f in report.files:
        statuses[f.status] = statuses.get(f.status, 0) + 1
    kb = 1024  # ru_maxrss is in KiB on Linux
    return {"files": len(report.files), "chunks": report.chunks_embedded, "seconds": round(seconds, 2),
            "statuses": statuses, "errors": [f.reason for f in report.errors][:3], "load_s": load_s,
            "index_build_s": round(sum(r.seconds for r in report.index_rebuilds), 2),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / kb),
            "children_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / kb)}


def run_pass(spec: dict, say) -> dict:
    """scale_pass in a child process; adds the command's wall time (start-up, imports, connecting, model load)."""
    say(f"{spec['embedder']}: {spec['corpus']} ({spec['run']})")
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--scale-pass", json.dumps(spec)],
                          stdout=subprocess.PIPE, text=True, cwd=common.ROOT)
    if proc.returncode:
        raise RuntimeError(f"scale pass {spec['corpus']}/{spec['embedder']}/{spec['run']} exited {proc.returncode}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["command_s"] = round(time.perf_counter() - started, 2)
    if out["errors"]:
        raise RuntimeError(f"ingest failed: {out['errors']}")
    if spec["run"] != "first" and (out["chunks"] or set(out["statuses"]) != {"unchanged"}):
        raise RuntimeError(f"re-ingest of the unchanged corpus changed something: {out['statuses']}")
    if out["chunks"] and out["seconds"]:
        out["chunks_per_s"] = round(out["chunks"] / out["seconds"], 1)
    return out


def stored_pages(ctx) -> int:
    """Pages with at least one chunk, over the stored filings."""
    with ctx.pool.connection() as conn:
        return conn.execute("SELECT count(*) AS n FROM (SELECT DISTINCT document_id, page FROM tenk_chunks) p").fetchone()["n"]


def run_scale(ctx, settings, args: argparse.Namespace, say) -> dict:
    files = [str(f) for f in transcript_files(args.transcripts, args.files or 10**6, "all")]
    docs = pages_docs(args.financebench, args.pages)
    base = {"paths": files, "folder": str(args.financebench), "docs": docs}
    out: dict = {"transcript_files": len(files), "financebench_docs": len(docs),
                 "financebench_docs_available": len(pages_docs(args.financebench, None)), "embedders": args.embedders,
                 "backend": settings.embedding_backend, "quantize": settings.embedding_quantize,
                 "threads": settings.embedding_threads or os.cpu_count(), **common.machine(),
                 "load_avg_1m_start": round(os.getloadavg()[0], 2), "passes": []}
    for i, embedder in enumerate(args.embedders):
        reset_corpus(ctx)
        for corpus in CORPORA:
            first = run_pass(base | {"corpus": corpus, "embedder": embedder, "run": "first", "parse_all": False,
                                     "load": embedder != "hash"}, say)
            if corpus == "financebench":
                first["pages"] = stored_pages(ctx)
            out["passes"].append({"corpus": corpus, "embedder": embedder, "run": "first"} | first)
            out |= {f"{embedder}_{corpus}_{k}": first.get(k)
                    for k in ("chunks", "seconds", "chunks_per_s", "index_build_s", "peak_rss_mb")}
            if i == 0:  # the re-ingest reads no model, whichever embedder: measured once, on the first one's corpus
                for run, parse_all in (("again", False), ("again_parse_all", True)):
                    again = run_pass(base | {"corpus": corpus, "embedder": embedder, "run": run, "parse_all": parse_all,
                                             "load": False}, say)
                    out["passes"].append({"corpus": corpus, "embedder": embedder, "run": run} | again)
                    key = "reingest" if run == "again" else "reingest_parse_all"
                    out |= {f"{key}_{corpus}_s": again["seconds"], f"{key}_{corpus}_command_s": again["command_s"],
                            f"{key}_{corpus}_peak_rss_mb": again["peak_rss_mb"]}
    out["financebench_pages"] = next((p["pages"] for p in out["passes"] if "pages" in p), None)
    for key in ("reingest", "reingest_parse_all"):
        out[f"{key}_s"] = round(sum(out[f"{key}_{c}_s"] for c in CORPORA), 2)
        out[f"{key}_command_s"] = round(sum(out[f"{key}_{c}_command_s"] for c in CORPORA), 2)
    out["peak_rss_mb"] = max(p["peak_rss_mb"] for p in out["passes"])
    out["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    return out


PASS_COLUMNS = ("corpus", "embedder", "run", "files", "pages", "chunks", "seconds", "chunks_per_s", "index_build_s", "load_s",
                "peak_rss_mb", "children_peak_rss_mb", "command_s")
SCALE_RUN = ["transcript_files", "financebench_docs", "financebench_docs_available", "financebench_pages", "embedders",
             "backend", "quantize", "threads", "cpu_count", "load_avg_1m_start", "load_avg_1m_end", "seconds"]


def scale_tables(result: dict) -> list[tuple[str, tuple, list[tuple]]]:
    rows = [tuple(p.get(c) for c in PASS_COLUMNS) for p in result["passes"]]
    run = [(k, ", ".join(v) if isinstance(v, list) else v) for k, v in ((k, result.get(k)) for k in SCALE_RUN)]
    return [("each pass (first: an empty corpus; again: the unchanged corpus, stored-hash lookup; again_parse_all: the"
             " unchanged corpus, every file parsed and chunked before its hash is compared, the check before the lookup)",
             PASS_COLUMNS, rows), ("run", ("figure", "value"), run)]


SCALE_NOTES = """Method: each pass is one process running the real ingest path inline, as `finagent ingest ...
--inline` does: parse, chunk, embed through the product's `CachedEmbedder`, write each document in one transaction. A
first pass fills an empty table, so it drops the HNSW index and builds it after its last write (`index_build_s`,
included in `seconds`). `command_s` adds the process's start-up and the model's loading (`load_s`); `peak_rss_mb` is
the pass's process peak RSS, the servers not counted. The re-ingest reads no model: a file is unchanged when a stored
document has its source path, content hash and the current recipe; `again_parse_all` parses every file first."""


def scale_markdown(result: dict, command: str) -> str:
    title, header, rows = scale_tables(result)[0]
    body = f"{title}:\n\n{common.markdown_table(rows, header)}"
    have = result["financebench_docs_available"]
    fb = (f"all {have} FinanceBench documents with pages" if result["financebench_docs"] >= have
          else f"{result['financebench_docs']} of the {have} FinanceBench documents with pages (`--pages`)")
    line = (f"re-ingest of unchanged corpus: {result['reingest_s']} s (transcripts {result['reingest_transcripts_s']} s,"
            f" FinanceBench {result['reingest_financebench_s']} s; {result['reingest_command_s']} s as two commands);"
            f" parsing every file first, as before: {result['reingest_parse_all_s']} s")
    if "local" not in result["embedders"]:
        line += "\n\nThe local model's passes were not run here (`--embedders hash,local`, the default, runs both)."
    # the start only: by the end the load average counts the bench's own embedding threads
    if (result.get("load_avg_1m_start") or 0) > 1:
        line += (f"\n\nThe machine was shared (load average {result.get('load_avg_1m_start')} at the start,"
                 f" {result.get('load_avg_1m_end')} at the end, on {result['cpu_count']} CPUs): read the speeds and"
                 " seconds as those of a busy machine.")
    return (f"## Ingestion at scale\n\nMeasured {common.today()} on {result['cpu_count']} CPUs ({result['platform']}), in "
            f"{result['seconds']} s, over {result['transcript_files']} transcript files and {fb} "
            f"({result['financebench_pages']} pages with text), with the {' and the '.join(result['embedders'])} "
            f"embedder{'s' if len(result['embedders']) > 1 else ''}:\n\n```\n{command}\n```\n\n{line}. Targets: "
            f"{common.targets_line(result['targets'])}.\n\n{body}\n\n{SCALE_NOTES}")


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


NOTES = """Method: `chunks_per_s` is the real ingest path (`agent.ingest.runner.ingest` inline) over the same files
for each embedder, caches emptied between them, the model loaded (`load_s`) before the clock starts.
`pages_embed_chunks_per_s` and the quality figures are on FinanceBench page chunks: `cosine_*` to the torch vector,
`overlap_at_15` = the share of the torch top 15 kept, `page_recall_at_15` = questions with an evidence page in the
top 15. Backend and precision: `FINAGENT_EMBEDDING_BACKEND`, `FINAGENT_EMBEDDING_QUANTIZE` (the other one also runs)."""


def markdown(result: dict, command: str) -> str:
    title, header, rows = tables(result)[0]
    part = {"all": "", "even": ", development half (even files and questions)", "odd": ", held-out half (odd files and questions)"}
    return (f"## Ingestion speed (all-MiniLM-L6-v2{part[result['part']]})\n\nMeasured {common.today()} on "
            f"{result['cpu_count']} CPUs ({result['platform']}, load average {result.get('load_avg_1m_start')}), "
            f"{result['transcript_files']} transcript files, {result['page_chunks']} page chunks, {result['questions']} "
            f"questions, {result['backend']} {result['quantize']}, in {result['seconds']} s:\n\n```\n{command}\n```\n\n"
            f"Targets: {common.targets_line(result['targets'])}.\n\n{title}:\n\n{common.markdown_table(rows, header)}"
            f"\n\n{NOTES}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = common.parser(__doc__, strict=True)
    p.add_argument("--files", type=int, help="transcript files to ingest per embedder (default: 8; at scale, all)")
    p.add_argument("--scale", action="store_true", help="the whole corpus through the real ingest path, and its re-ingest")
    p.add_argument("--pages", type=int, help="at scale, this many FinanceBench documents (pages files; default: all)")
    p.add_argument("--embedders", type=lambda v: v.split(","),
                   help="at scale, the embedders in order, comma-separated (default: hash,local)")
    p.add_argument("--questions", type=int, default=20, help="FinanceBench questions of the quality check")
    p.add_argument("--part", choices=("all", "even", "odd"), default="all",
                   help="every file and question, or every other one (even: development half; odd: held-out half)")
    p.add_argument("--transcripts", type=Path, default=TRANSCRIPTS)
    p.add_argument("--financebench", type=Path, default=FINANCEBENCH)
    args = p.parse_args(argv)
    if args.scale and args.part != "all":
        p.error("--scale takes the whole corpus: no --part")
    if not args.scale and (args.pages is not None or args.embedders is not None):
        p.error("--pages and --embedders go with --scale")
    args.embedders = args.embedders or ["hash", "local"]
    if not args.embedders or set(args.embedders) - {"hash", "local"}:
        p.error("--embedders: hash and/or local")
    for folder in (args.transcripts, args.financebench):
        if not folder.is_dir():
            p.error(f"no data directory at {folder} (the real data sits beside the repository: ../shared/data)")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--scale-pass"]:  # one pass of the scale part, in a process of its own (run_pass)
        print(json.dumps(scale_pass(json.loads(argv[1]))))
        return 0
    args = parse_args(argv)
    say = lambda msg: print(f"[bench:ingest] {msg}", file=sys.stderr, flush=True)
    clock = common.Clock()
    with common.private_stack(args.data_dir, embedding_provider="local", llm_provider="extractive") as ctx:
        result = (run_scale if args.scale else run)(ctx, ctx.settings, args, say)
    result["seconds"] = clock.seconds()
    if args.scale:
        result["targets"] = common.check_targets(result, SCALE_TARGETS)
        return common.finish("ingest.py", argv, args, "ingest-scale", result, scale_markdown, scale_tables)
    result["targets"] = common.check_targets(result, TARGETS)
    return common.finish("ingest.py", argv, args, "ingest" if args.part == "all" else f"ingest-{args.part}", result, markdown, tables)


if __name__ == "__main__":
    sys.exit(main())
