"""The benches' harness: their shared options (`parser`, `parse_stack_bench_args`), timing, the one result printed
as JSON (`--json`) or as tables, the docs/benchmarks.md section each bench rewrites (`write_section`, `finish`), the
embedded stacks they run on, a fast HashEmbedder twin and bulk loading of synthetic transcript chunks. Side-by-side
runs of two commits are bench/compare.py, on any bench's `--json`."""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# the real data sits beside the repository (../shared/data), wherever it is cloned
SHARED_DATA = ROOT.parent / "shared" / "data"
DOCS = ROOT / "docs" / "benchmarks.md"
INTRO = (
    "# Benchmarks\n\n"
    "Measured figures for finagent, each section written by its script under `bench/`.\n"
    "Re-run a script to refresh its section; other sections are left untouched.\n"
)


def fresh_env(data_dir: str | None, **env: str) -> Path:
    """Point FINAGENT_* at a private data dir (before agent.settings is first read)."""
    path = Path(data_dir or tempfile.mkdtemp(prefix="finagent-bench-"))
    for key in ("FINAGENT_DATABASE_URL", "FINAGENT_REDIS_URL"):
        os.environ.pop(key, None)
    os.environ["FINAGENT_DATA_DIR"] = str(path)
    os.environ.update({f"FINAGENT_{k.upper()}": v for k, v in env.items()})
    return path


def parser(doc: str | None, *, strict: bool = False) -> argparse.ArgumentParser:
    """A bench's argument parser with the options every bench has: --json (one JSON object on stdout), --no-write
    (leave docs/benchmarks.md alone), --data-dir (the embedded services' data dir), and --strict where it sets
    targets (exit 1 when one fails)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--no-write", action="store_true", help="leave docs/benchmarks.md alone")
    p.add_argument("--data-dir", help="data dir for the embedded services (default: a fresh temporary dir)")
    if strict:
        p.add_argument("--strict", action="store_true", help="exit 1 when a target fails")
    else:
        p.set_defaults(strict=False)
    return p


def parse_stack_bench_args(p: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments of a bench on the sample stack, parsed; then the environment those benches run in: the hash
    embedder and the extractive provider under a fresh data dir."""
    args = p.parse_args(argv)
    fresh_env(args.data_dir, embedding_provider="hash", llm_provider="extractive")
    return args


class Clock:
    """Seconds since the bench started, rounded as the docs give them."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def seconds(self) -> float:
        return round(time.perf_counter() - self.started, 1)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else float("nan")


def machine() -> dict:
    return {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}


def today() -> str:
    return dt.date.today().isoformat()


def write_section(name: str, body: str, path: Path = DOCS) -> None:
    """Replace the text between <!-- bench:NAME:start --> and <!-- bench:NAME:end --> (appending it if absent)."""
    start, end = f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"
    block = f"{start}\n{body.strip()}\n{end}"
    text = path.read_text() if path.exists() else INTRO
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# --- embeddings ------------------------------------------------------------------------------

_TOKEN = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")  # the same tokens as agent.providers.embeddings


class _OneByOne:
    """embed() over embed_one(), for the bench's embedders."""

    dim = 384

    def embed_one(self, text: str) -> np.ndarray:
        raise NotImplementedError

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.embed_one(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


class FastHashEmbedder(_OneByOne):
    """Bit-for-bit the vectors of agent.providers.embeddings.HashEmbedder, with a memo per n-gram."""

    def __init__(self, dim: int = 384):
        self.dim = dim
        self._grams: dict[str, tuple[int, float]] = {}

    def _gram(self, gram: str) -> tuple[int, float]:
        hit = self._grams.get(gram)
        if hit is None:
            digest = hashlib.blake2b(gram.encode(), digest_size=8).digest()
            hit = self._grams[gram] = (int.from_bytes(digest[:4], "little") % self.dim, 1.0 if digest[4] & 1 else -1.0)
        return hit

    def embed_one(self, text: str) -> np.ndarray:
        tokens = _TOKEN.findall(text.lower())
        grams = tokens + [f"{a} {b}" for a, b in zip(tokens, tokens[1:])]
        row = np.zeros(self.dim, dtype=np.float32)
        if grams:
            idx, sign = zip(*(self._gram(g) for g in grams))
            row[:] = np.bincount(idx, weights=sign, minlength=self.dim)  # integer sums: exact in float32
        norm = np.linalg.norm(row)
        if norm:
            row /= norm
        else:
            row[0] = 1.0
        return row


class SentenceMeanEmbedder(_OneByOne):
    """MiniLM geometry for synthetic chunks at bulk-load speed.

    A synthetic chunk is made of the real corpus's sentences (`_vary` swaps sentences and nudges numbers), so its
    vector here is the length-weighted mean of those sentences' all-MiniLM-L6-v2 vectors, normalised: the model's
    own mean pooling, taken over sentences rather than over the tokens of the whole chunk. Each distinct sentence
    (numbers masked) is embedded once by the real model and cached under ~/.cache/finagent/bench.
    Queries are embedded by the real model itself (`embed_query`)."""

    def __init__(self, base: list[list[tuple[str, str, str]]], say=lambda msg: None, cache_dir: Path | None = None,
                 model=None):
        from agent.providers.embeddings import LocalEmbedder

        self._model = model or LocalEmbedder()
        pieces: dict[str, str] = {}
        for doc in base:
            for _, _, text in doc:
                for piece in _SENT.split(text):
                    pieces.setdefault(_mask(piece), piece)
        keys = sorted(pieces)
        digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]
        cache = (cache_dir or Path.home() / ".cache" / "finagent" / "bench") / f"minilm-sentences-{digest}.npy"
        if cache.exists():
            vecs = np.load(cache)
        else:
            say(f"embedding {len(keys)} distinct sentences with all-MiniLM-L6-v2 (once; cached in {cache})")
            vecs = self._model.embed([pieces[k] for k in keys])
            cache.parent.mkdir(parents=True, exist_ok=True)
            np.save(cache, vecs)
        self._row = {k: i for i, k in enumerate(keys)}
        self._vecs = vecs

    def embed_query(self, text: str) -> np.ndarray:
        return self._model.embed([text])[0]

    def embed_one(self, text: str) -> np.ndarray:
        pieces = _SENT.split(text)
        rows = [self._row[_mask(p)] for p in pieces]  # KeyError: text that is not made of the corpus's sentences
        weights = np.asarray([len(p) for p in pieces], dtype=np.float32)
        vec = weights @ self._vecs[rows]
        return vec / np.linalg.norm(vec)

    def agreement(self, texts: list[str], n: int = 100) -> dict:
        """Cosine between this approximation and the model's own vectors, over n chunks picked at random."""
        picks = [texts[i] for i in np.random.default_rng(1).choice(len(texts), min(n, len(texts)), replace=False)]
        cos = (self._model.embed(picks) * self.embed(picks)).sum(axis=1)
        return {"minilm_agreement_cosine_mean": round(float(cos.mean()), 3),
                "minilm_agreement_cosine_p5": round(float(np.percentile(cos, 5)), 3)}


def _mask(sentence: str) -> str:
    return re.sub(r"\d+", "#", sentence)

# --- synthetic transcript corpus -------------------------------------------------------------

_SENT = re.compile(r"(?<=[.!?])\s+")
_NUM = re.compile(r"(?<![\d.])(?!(?:19|20)\d\d\b)\d+(?:\.\d+)?")  # numbers, but not years
_VOCAB = ("revenue margin guidance growth deposits loans capex outlook demand pricing costs expense credit "
          "quarter year customers segment volume inventory supply cash flow buyback dividend rates fee income "
          "net interest reserves capital operating leverage backlog orders retail commercial digital cloud").split()


def real_chunks(folder: Path, size: int = 1000, overlap: int = 150) -> list[list[tuple[str, str, str]]]:
    """Real transcripts chunked by the project's chunker: per document, (speaker, section, text) chunks."""
    from agent.ingest.chunking import chunk_turns
    from agent.ingest.failures import IngestError
    from agent.ingest.transcripts import parse_transcript

    docs = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            turns = parse_transcript(path).turns
        except IngestError:
            continue
        docs.append([(c.speaker, c.section, c.text) for c in chunk_turns(turns, size, overlap)])
    return docs or _vocabulary_chunks()


def _vocabulary_chunks(n_docs: int = 40, per_doc: int = 60) -> list[list[tuple[str, str, str]]]:
    rng = np.random.default_rng(7)
    def sentence() -> str:
        return " ".join(rng.choice(_VOCAB, int(rng.integers(8, 20)))).capitalize() + f" {rng.integers(1, 99)}%."
    return [[("Speaker", "qa" if i > per_doc // 2 else "prepared_remarks", " ".join(sentence() for _ in range(8)))
             for i in range(per_doc)] for _ in range(n_docs)]


def _vary(text: str, pool: list[str], rng: np.random.Generator) -> str:
    """Swap about a quarter of the sentences for others from the corpus and nudge every number."""
    sentences = [pool[int(rng.integers(len(pool)))] if rng.random() < 0.25 else s for s in _SENT.split(text)]
    def nudge(m: re.Match) -> str:
        value = float(m.group()) * rng.uniform(0.8, 1.25)
        return f"{value:.{len(m.group().partition('.')[2])}f}"
    return _NUM.sub(nudge, " ".join(sentences))


def synthetic_docs(base: list[list[tuple[str, str, str]]], tickers: Iterable[str],
                   quarters: list[tuple[int, int]], seed: int = 11) -> Iterator[tuple[str, int, int, list]]:
    """(ticker, year, quarter, chunks): each synthetic call is a varied copy of a real one."""
    # whole sentences only: a chunk's cut-off tail swapped into mid-text would run into the next sentence
    pool = [s for doc in base for _, _, t in doc for s in _SENT.split(t) if len(s) > 40 and s[-1] in ".!?"]
    for ti, ticker in enumerate(tickers):
        for qi, (year, quarter) in enumerate(quarters):
            rng = np.random.default_rng([seed, ti, qi])
            doc = base[(ti * len(quarters) + qi) % len(base)]
            yield ticker, year, quarter, [(sp, sec, _vary(t, pool, rng)) for sp, sec, t in doc]


_CHUNK_COLS = ("document_id", "ticker", "fiscal_year", "fiscal_quarter", "speaker", "section", "chunk_index", "text",
               "embedding")
_CHUNK_TYPES = ["int8", "text", "int4", "int4", "text", "text", "int4", "text", "vector"]


def bulk_load(conn, docs: list[tuple[str, int, int, list]], embedder: FastHashEmbedder) -> int:
    """COPY (binary) documents and their embedded chunks; the caller commits. Returns chunks written."""
    from agent.retrieval.companies import ensure_company

    for ticker in dict.fromkeys(d[0] for d in docs):
        ensure_company(conn, ticker, f"Synthetic {ticker}")
    with conn.cursor() as cur:
        with cur.copy("COPY documents (kind, ticker, fiscal_year, fiscal_quarter, source_path, content_hash)"
                      " FROM STDIN") as copy:
            for ticker, year, quarter, _ in docs:
                copy.write_row(("transcript", ticker, year, quarter, f"synthetic://{ticker}/{year}_q{quarter}", "-"))
        keys = [(d[0], d[1], d[2]) for d in docs]
        rows = cur.execute("SELECT id, ticker, fiscal_year, fiscal_quarter FROM documents WHERE kind = 'transcript'"
                           " AND (ticker, fiscal_year, fiscal_quarter) IN (SELECT * FROM unnest(%s::text[], %s::int[],"
                           " %s::int[]))", ([k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys])).fetchall()
        ids = {(r["ticker"], r["fiscal_year"], r["fiscal_quarter"]): r["id"] for r in rows}
        n = 0
        with cur.copy(f"COPY transcript_chunks ({', '.join(_CHUNK_COLS)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(_CHUNK_TYPES)
            for ticker, year, quarter, chunks in docs:
                vecs = embedder.embed([c[2] for c in chunks])
                for i, ((speaker, section, text), vec) in enumerate(zip(chunks, vecs)):
                    copy.write_row((ids[(ticker, year, quarter)], ticker, year, quarter, speaker, section, i, text, vec))
                n += len(chunks)
    return n


# --- growing the corpus (the HNSW index dropped during bulk loads, rebuilt after) -------------

def admin(ctx, statement: str) -> float:
    """Run a maintenance statement in autocommit; returns its seconds."""
    import psycopg

    with psycopg.connect(ctx.database_url, autocommit=True) as conn:
        started = time.perf_counter()
        conn.execute(statement)
        return time.perf_counter() - started


def hnsw_definition(ctx) -> str:
    with ctx.pool.connection() as conn:
        row = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'transcript_chunks_hnsw'").fetchone()
    return row["indexdef"]


def take(gen, n: int) -> list:
    docs, have = [], 0
    while have < n:
        docs.append(next(gen))
        have += len(docs[-1][3])
    return docs


def load(ctx, docs: list, embedder) -> tuple[int, float]:
    started = time.perf_counter()
    with ctx.pool.connection() as conn:
        n = bulk_load(conn, docs, embedder)
    return n, time.perf_counter() - started


def grow(ctx, gen, embedder, have: int, target: int, index_sql: str) -> dict:
    """Bulk load up to `target` chunks with the HNSW index dropped, then rebuild it from the migration's definition."""
    admin(ctx, "DROP INDEX IF EXISTS transcript_chunks_hnsw")
    loaded, load_s = load(ctx, take(gen, target - have), embedder)
    build_s = admin(ctx, index_sql)  # in the server's maintenance_work_mem (ops/local/pg_memory.py) the graph fits: fast build
    admin(ctx, "VACUUM ANALYZE transcript_chunks")
    return {"chunks": have + loaded, "loaded": loaded, "load_s": load_s, "hnsw_build_s": build_s}


def indexed_insert(ctx, gen, embedder, n: int = 500) -> tuple[int, float]:
    """The same COPY with the HNSW index in place (kept: call it after measuring a size)."""
    loaded, seconds = load(ctx, take(gen, n), embedder)
    return loaded, loaded / seconds


# --- reporting -------------------------------------------------------------------------------

def check_targets(result: dict, targets: list[tuple[str, str, float]]) -> list[dict]:
    """Each target as {metric, op, target, value, status}; status SKIP when the metric was not measured."""
    out = []
    for metric, op, target in targets:
        value = result.get(metric)
        ok = None if value is None else (value >= target if op == ">=" else value < target)
        out.append({"metric": metric, "op": op, "target": target, "value": value,
                    "status": "SKIP" if ok is None else ("PASS" if ok else "FAIL")})
    return out


def targets_line(checks: list[dict]) -> str:
    """The targets of `check_targets` on one line, for a docs section."""
    return "; ".join(f"**{c['status']}** `{c['metric']}` = {c['value']} ({c['op']} {c['target']})" for c in checks)


def process_tree(roots: Iterable[int]) -> list[int]:
    """The pids of each root and all its children (a root that has ended is skipped)."""
    import psutil

    pids: dict[int, None] = {}
    for pid in roots:
        try:
            root = psutil.Process(pid)
            pids.update(dict.fromkeys(p.pid for p in [root, *root.children(recursive=True)]))
        except psutil.NoSuchProcess:
            pass
    return list(pids)


def cpu_seconds(pids: Iterable[int], reaped_children: bool = False) -> float:
    """User and system CPU seconds of the processes so far (a process that has ended is skipped); with
    `reaped_children`, also those of their children that have ended and been reaped (Postgres backends that exited)."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system + (t.children_user + t.children_system if reaped_children else 0.0)
    return total


def _pid_file(path: Path) -> list[int]:
    return [int(path.read_text().split()[0])] if path.exists() else []


def postmaster_pids(data_dir: Path) -> list[int]:
    """The pid of the stack's postmaster on `data_dir` while it runs (by its pid file), or none: a list of 0 or 1."""
    return _pid_file(data_dir / "pg" / "postmaster.pid")


def stack_pids(data_dir: Path) -> list[int]:
    """The postmaster and Redis of the stack on `data_dir`, those running."""
    return postmaster_pids(data_dir) + _pid_file(data_dir / "redis" / "redis.pid")


def markdown_table(rows: list[tuple], header: tuple) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if c is None else str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def print_rich(tables: list[tuple[str, tuple, list[tuple]]], checks: list[dict]) -> None:
    """Each (title, header, rows) as a rich table, then the targets PASS/FAIL/SKIP."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for title, header, rows in tables:
        table = Table(*header, title=title)
        for row in rows:
            table.add_row(*("" if c is None else str(c) for c in row))
        console.print(table)
    for c in checks:
        style = {"PASS": "green", "FAIL": "red"}.get(c["status"], "yellow")
        console.print(f"[{style}]{c['status']}[/] {c['metric']} = {c['value']} (target {c['op']} {c['target']})")


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Keep stdout for the one result: anything the stack prints (even child processes) goes to stderr."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


@contextlib.contextmanager
def private_stack(data_dir: str | None, **env: str):
    """A bootstrapped Context on private embedded servers (stdout sent to stderr), stopped and removed after."""
    path = fresh_env(data_dir, **env)
    with stdout_to_stderr():
        from agent.db import close_pools
        from agent.settings import get_settings
        from ops.local.bootstrap import bootstrap
        from ops.local.stack import stop_embedded

        settings = get_settings()
        try:
            yield bootstrap(settings)
        finally:
            close_pools()
            stop_embedded(settings)
            remove_dir(path, keep=bool(data_dir))


def remove_dir(path: Path, keep: bool) -> None:
    if not keep:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def sample_stack(name: str = "bench"):
    """The embedded stack under the FINAGENT_* environment `fresh_env` set, the sample transcripts ingested, and a
    WorkerManager for real Celery workers; everything is stopped on exit. Yields (ctx, manager)."""
    from agent.ingest.runner import ingest
    from agent.settings import get_settings
    from ops.cli.main import sample_corpus_dir
    from ops.local.bootstrap import bootstrap
    from ops.local.stack import stop_embedded
    from ops.local.worker_pool import WorkerManager

    settings = get_settings()
    ctx = bootstrap(settings)
    ingest(ctx, "transcript", [sample_corpus_dir() / "transcripts"], fanout=None, quiet=True)
    manager = WorkerManager(ctx.database_url, ctx.redis_url, settings.data_dir, name=name)
    try:
        yield ctx, manager
    finally:
        manager.stop()
        stop_embedded(settings)


def portable_args(argv: list[str]) -> list[str]:
    """The arguments as the docs show them: a data dir is this machine's path, written as DIR, and a server's address
    is written as URL."""
    hidden = {"--data-dir": "DIR", "--database-url": "URL"}
    out, hide = [], None
    for arg in argv:
        name = arg.split("=", 1)[0]
        out.append(hide if hide else f"{name}={hidden[name]}" if "=" in arg and name in hidden else arg)
        hide = hidden.get(arg)
    return out


def command_line(script: str, argv: list[str] | None) -> str:
    """The command that reproduces a run, as the docs show it."""
    return (f".venv/bin/python bench/{script} " + " ".join(portable_args(sys.argv[1:] if argv is None else argv))).strip()


def failed_targets(targets: list[dict] | dict[str, bool]) -> list[str]:
    """The targets that failed: checks of `check_targets` with status FAIL, or names whose value is False."""
    if isinstance(targets, dict):
        return [name for name, ok in targets.items() if ok is False]
    return [c["metric"] for c in targets if c["status"] == "FAIL"]


def finish(script: str, argv: list[str] | None, args, section: str, result: dict, markdown, tables=None) -> int:
    """A bench's last steps: its docs/benchmarks.md section (unless --no-write), then one JSON object (--json), else
    rich tables (or the JSON indented, for a bench without tables), and the exit code: 1 when --strict and a target
    failed. `markdown(result, command)` writes the section."""
    if not args.no_write:
        write_section(section, markdown(result, command_line(script, argv)))
    targets = result.get("targets", [])
    if args.json:
        print(json.dumps(result, default=str))
    elif tables is not None:
        print_rich(tables(result), targets if isinstance(targets, list) else [])
    else:
        print(json.dumps(result, indent=2, default=str))
    return 1 if getattr(args, "strict", False) and failed_targets(targets) else 0
