"""The extractive rules on calls they were not written from. The 12 real transcript tickers are split in two:
the rules may be tuned on DEVELOPMENT, and are checked here on HELD_OUT only, with question templates in plain
financial vocabulary. A lookup passes when it cites the asked company and quarter, its passages speak of the
asked concept, and every figure in the answer stands in a cited passage.

The calls are embedded, and the questions searched, with the product's own embedder (all-MiniLM-L6-v2), not the
tests' hash embedder: what the rules are given is what retrieval finds, and hybrid search weighs a passage's cosine
similarity as it is (0.7 x similarity + 0.3 x keyword score), which on the hash embedder's feature-hashed word
counts spans a few hundredths and so ranks passages by keywords alone."""
from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from agent.models.corpus import Period
from tests.integration.jobs import run_job

pytestmark = pytest.mark.integration

DEVELOPMENT = ("AFL", "AGO", "APH", "BDN", "BKU", "BMI")
HELD_OUT = ("CFR", "CHH", "CPF", "DRI", "FNB", "SNV")
LOOKUPS = [
    ("What was {t}'s net income in Q{q} {y}?", ("net income", "earnings", "per share", "per diluted share")),
    ("What did {t} say about its outlook in Q{q} {y}?", ("outlook", "expect", "guidance", "anticipate")),
]
FIGURE = re.compile(r"\$?\d[\d,]*(?:\.\d+)?%?")


def _drop_held_out(ctx) -> None:
    """The held-out calls' documents (and, by cascade, their chunks), whatever embedder stored them; then a vacuum,
    so the HNSW index holds no dead entries (pgvector 0.6 counts them against ef_search, and an unfiltered search
    of a module after this one would come back short)."""
    with ctx.pool.connection() as conn:
        conn.execute("DELETE FROM documents WHERE kind = 'transcript' AND ticker = ANY(%s)", (list(HELD_OUT),))
    with psycopg.connect(ctx.database_url, autocommit=True) as conn:
        conn.execute("VACUUM transcript_chunks")


def _period(path: Path) -> Period:
    """The period of a transcript file named TICKER_YYYY_qN.json."""
    return Period.parse_key(path.stem.split("_", 1)[1])


@pytest.fixture(scope="module")
def held_out_calls(ctx, shared_data):
    from agent.context import Context
    from agent.ingest.runner import ingest
    from agent.retrieval.companies import ensure_company

    model_ctx = Context(ctx.settings.model_copy(update={"embedding_provider": "local"}), ctx.database_url, ctx.redis_url)
    # each company's latest call, which the questions ask about, and the call before it, which a search that
    # ignored the asked quarter would cite: the model embeds 12 calls, not all 37 of these companies' calls
    files = [p for t in HELD_OUT for p in sorted((shared_data / "transcripts").glob(f"{t}_*.json"), key=_period)[-2:]]
    with ctx.pool.connection() as conn:
        for t in HELD_OUT:
            ensure_company(conn, t)
    _drop_held_out(ctx)  # a module before this one may have stored them with the hash embedder: not unchanged here
    report = ingest(model_ctx, "transcript", files, fanout=None, quiet=True)
    assert [f.status for f in report.files] == ["added"] * len(files)  # every call embedded by the model
    yield {p.stem.split("_")[0]: _period(p) for p in files}  # each company's latest call (its files are in order)
    _drop_held_out(ctx)  # a module after this one stores them again with its own embedder


@pytest.fixture
def model_worker(workers_with):
    """Workers that embed the questions with the same model as the calls."""
    return workers_with(FINAGENT_EMBEDDING_PROVIDER="local")


NOT_FIGURES = re.compile(r"\[(?:10K|N)?\d+\]|\bQ[1-4] (?:FY)?\d{4}\b|\bFY ?\d{4}\b|\b(?:19|20)\d{2}\b")


def _figures(text: str) -> set[str]:
    """The figures a text states (citation markers, periods and years are not figures)."""
    text = NOT_FIGURES.sub(" ", text)
    return {f.strip("$%.,") for f in FIGURE.findall(text) if any(c.isdigit() for c in f) and len(f.strip("$%.,")) > 1}


def test_held_out_lookups(ctx, model_worker, held_out_calls):
    failures = []
    for ticker, period in sorted(held_out_calls.items()):
        for template, concept in LOOKUPS:
            question = template.format(t=ticker, q=period.fiscal_quarter, y=period.fiscal_year)
            job, _ = run_job(ctx, question=question, mode="direct")
            r = job.result
            label = period.label
            cited = " ".join(c.text for c in r.citations).lower()
            problems = []
            if r.status != "completed" or not r.citations:
                problems.append(f"status {r.status}, {len(r.citations)} citations")
            if any(c.ticker != ticker or c.period != label for c in r.citations):
                problems.append("cites another company or quarter")
            if not any(word in cited for word in concept):
                problems.append("cited passages do not speak of the concept")
            invented = _figures(r.answer) - _figures(" ".join(c.text for c in r.citations))
            if invented:
                problems.append(f"figures not in the sources: {sorted(invented)}")
            if problems:
                failures.append((question, problems))
    assert failures == [], failures
    assert set(DEVELOPMENT).isdisjoint(HELD_OUT)
