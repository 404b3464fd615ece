"""FinanceBench retrieval: for every question, are its evidence pages among the top 5 / 15 pages retrieved?

Six conditions: hybrid, vector-only and keyword-only search (agent/retrieval/hybrid.py), each (a) filtered to the
companies and fiscal periods the product's planner reads from the question text, and (b) over one store shared by
every filing, with no filter (the FinanceBench paper's hard setting). Recall is averaged over questions: page
recall@k is the share of a question's evidence pages among the top k distinct pages (each page ranked by its best
chunk), document recall@k the share of its evidence documents among those pages' documents. The gold fields are
read only to score, after retrieval."""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from agent.context import Context
from agent.models.corpus import Period
from agent.retrieval.availability import FILING_KINDS
from agent.retrieval.hybrid import KeywordCandidates, Mode
from agent.retrieval.page_search import PageKey, search_pages
from agent.statements.fact_needs import fact_needs
from agent.tenk.rules import build_plan
from agent.tenk.statements import question_statements
from ops.eval.financebench_filters import PlannerFilter, planner_filter
from ops.eval.financebench_questions import FinanceBenchQuestion

CONDITIONS: dict[str, tuple[Mode, bool]] = {  # name -> (search mode, filtered)
    "hybrid_filtered": ("hybrid", True), "hybrid_shared": ("hybrid", False),
    "vector_filtered": ("semantic", True), "vector_shared": ("semantic", False),
    "keyword_filtered": ("keyword", True), "keyword_shared": ("keyword", False),
}
TOP_K = 15  # pages
Half = Literal["a", "b"]

PageRef = tuple[str, int]  # (doc_name, 0-based page)


class StoredFiling(BaseModel):
    document_id: int
    doc_name: str
    ticker: str
    period: Period


def stored_filings(ctx: Context) -> dict[int, StoredFiling]:
    """Every filing read page by page, by document id; its name is its pages file's ({doc_name}.jsonl.gz)."""
    with ctx.pool.connection() as conn:
        rows = conn.execute(
            "SELECT d.id, d.ticker, d.fiscal_year, d.fiscal_quarter, d.source_path FROM documents d"
            " WHERE d.kind = ANY(%s) AND EXISTS (SELECT 1 FROM tenk_chunks c WHERE c.document_id = d.id AND c.page IS NOT NULL)",
            (FILING_KINDS,)).fetchall()
    return {r["id"]: StoredFiling(document_id=r["id"], doc_name=Path(r["source_path"]).name.removesuffix(".jsonl.gz"),
                                  ticker=r["ticker"], period=Period(fiscal_year=r["fiscal_year"], fiscal_quarter=r["fiscal_quarter"]))
            for r in rows}


def half_of(financebench_id: str) -> Half:
    """A fixed split of any question set into two halves (develop on a, check on b), by a hash of the id."""
    return "a" if hashlib.sha256(financebench_id.encode()).digest()[0] % 2 == 0 else "b"


class Recall(BaseModel):
    questions: int = 0
    page_recall_at_5: float = 0.0
    page_recall_at_15: float = 0.0
    doc_recall_at_5: float = 0.0
    doc_recall_at_15: float = 0.0


class ConditionResult(BaseModel):
    pages: list[PageRef]  # the top TOP_K distinct pages, each ranked by its best chunk
    first_evidence_rank: int | None = None  # 1-based rank of the first evidence page


class QuestionResult(BaseModel):
    financebench_id: str
    half: Half
    evidence_pages: list[PageRef]
    filter: PlannerFilter
    filter_covers_evidence: bool
    conditions: dict[str, ConditionResult] = Field(default_factory=dict)


class Skipped(BaseModel):
    financebench_id: str
    reason: str


class PlannerAccuracy(BaseModel):
    company: float = 0.0  # share of evaluated questions whose filter names the evidence document's company
    covers_evidence: float = 0.0  # share whose filter scope holds every evidence document
    scopes: dict[str, int] = Field(default_factory=dict)  # company_period / company / none -> questions


class RetrievalReport(BaseModel):
    questions: int
    evaluated: int
    skipped: list[Skipped] = Field(default_factory=list)
    embedder: str = ""
    query: str = "the question text"
    conditions: dict[str, Recall] = Field(default_factory=dict)
    halves: dict[str, dict[str, Recall]] = Field(default_factory=dict)
    planner: PlannerAccuracy = Field(default_factory=PlannerAccuracy)
    results: list[QuestionResult] = Field(default_factory=list)


def page_recall(retrieved: list[PageRef], evidence: set[PageRef], k: int) -> float:
    return len(evidence & set(retrieved[:k])) / len(evidence) if evidence else 0.0


def doc_recall(retrieved: list[PageRef], evidence: set[PageRef], k: int) -> float:
    docs = {d for d, _ in evidence}
    return len(docs & {d for d, _ in retrieved[:k]}) / len(docs) if docs else 0.0


def mean_recall(results: list[QuestionResult], condition: str) -> Recall:
    if not results:
        return Recall()
    n = len(results)

    def avg(fn: Callable[[list[PageRef], set[PageRef], int], float], k: int) -> float:
        return round(sum(fn(r.conditions[condition].pages, set(r.evidence_pages), k) for r in results) / n, 4)

    return Recall(questions=n, page_recall_at_5=avg(page_recall, 5), page_recall_at_15=avg(page_recall, 15),
                  doc_recall_at_5=avg(doc_recall, 5), doc_recall_at_15=avg(doc_recall, 15))


MAX_PHRASES = 4


def search_phrases(question: str, max_phrases: int = MAX_PHRASES) -> list[str]:
    """The question, then the distinct keyword phrases of the product's 10-K planner's sub-questions for it."""
    plan = build_plan(question, ticker="", fiscal_year=0)
    phrases = [sq.keywords for sq in plan.sub_questions if sq.keywords.strip()]
    return list(dict.fromkeys([question, *phrases]))[: max_phrases + 1]


def page_refs(pages: list[PageKey], filings: dict[int, StoredFiling], k: int = TOP_K) -> list[PageRef]:
    """The first k pages as (doc_name, page). A page of a document not read page by page (a 10-K parsed by item)
    stands for its document: it takes a rank and matches no evidence."""
    return [(filings[d].doc_name, p) if d in filings and p is not None else (f"document {d}", -1) for d, p in pages[:k]]


def _skip_reason(q: FinanceBenchQuestion, stored_names: set[str]) -> str | None:
    if not q.evidence:
        return "no evidence pages in the question"
    missing = sorted(q.evidence_docs - stored_names)
    if missing:
        return f"evidence document(s) not ingested (no pages): {', '.join(missing)}"
    return None


def evaluate_retrieval(ctx: Context, questions: list[FinanceBenchQuestion],
                       on_question: Callable[[int], None] | None = None, expand: bool = True,
                       keyword_candidates: KeywordCandidates = "ranked", conditions: list[str] | None = None,
                       statements: bool = True) -> RetrievalReport:
    """`expand`: search the 10-K lexicon's phrases for the question as well as the question; `statements`: put the
    statement pages the question needs first (agent/tenk/statements.py); `keyword_candidates`:
    where hybrid's keyword-only candidates come from (agent/retrieval/page_search.py, hybrid.py); `conditions`: a
    subset of CONDITIONS to run (all by default)."""
    names = conditions or list(CONDITIONS)
    filings = stored_filings(ctx)
    by_name = {f.doc_name: f for f in filings.values()}
    report = RetrievalReport(questions=len(questions), evaluated=0, embedder=_embedder_name(ctx),
                             query=("the question and its 10-K lexicon phrases, fused by page" if expand else "the question text")
                             + ("; the primary statement pages it needs first" if statements else ""))
    for i, q in enumerate(questions):
        reason = _skip_reason(q, set(by_name))
        if reason:
            report.skipped.append(Skipped(financebench_id=q.financebench_id, reason=reason))
        else:
            report.results.append(_evaluate_one(ctx, q, filings, by_name, expand, keyword_candidates, names,
                                                      statements))
        if on_question:
            on_question(i + 1)
    report.evaluated = len(report.results)
    report.conditions = {name: mean_recall(report.results, name) for name in names}
    report.halves = {h: {name: mean_recall([r for r in report.results if r.half == h], name) for name in names}
                     for h in ("a", "b")}
    report.planner = _planner_accuracy(report.results, by_name)
    return report


def _evaluate_one(ctx: Context, q: FinanceBenchQuestion, filings: dict[int, StoredFiling],
                  by_name: dict[str, StoredFiling], expand: bool, keyword_candidates: KeywordCandidates,
                  names: list[str], statements: bool = True) -> QuestionResult:
    flt = planner_filter(ctx, q.question)  # the question text only
    evidence = sorted(q.evidence_pages)
    covers = all(flt.covers(by_name[d].ticker, by_name[d].period) for d in q.evidence_docs)
    result = QuestionResult(financebench_id=q.financebench_id, half=half_of(q.financebench_id), evidence_pages=evidence,
                            filter=flt, filter_covers_evidence=covers)
    s = ctx.settings
    phrases = search_phrases(q.question) if expand else [q.question]
    needed = question_statements(q.question) if statements else []
    facts = fact_needs(q.question) if statements else []
    for name in names:
        mode, filtered = CONDITIONS[name]
        # a question the planner gave no filter searches the whole store in the filtered conditions too
        scopes = [scope.filters for scope in flt.scopes] if filtered and flt.scopes else None
        found = search_pages(ctx.pool, ctx.embed_query, phrases, scopes, mode, s.semantic_weight, s.keyword_weight,
                             keyword_candidates, list(needed), facts)
        pages = page_refs(found, filings)
        first = next((i + 1 for i, p in enumerate(pages) if p in set(evidence)), None)
        result.conditions[name] = ConditionResult(pages=pages, first_evidence_rank=first)
    return result


def _planner_accuracy(results: list[QuestionResult], by_name: dict[str, StoredFiling]) -> PlannerAccuracy:
    if not results:
        return PlannerAccuracy()
    n = len(results)
    company = sum(all(by_name[d].ticker in r.filter.tickers for d in {d for d, _ in r.evidence_pages}) for r in results)
    scopes: dict[str, int] = {"company_period": 0, "company": 0, "none": 0}
    for r in results:
        scopes[r.filter.kind] += 1
    return PlannerAccuracy(company=round(company / n, 4), covers_evidence=round(sum(r.filter_covers_evidence for r in results) / n, 4),
                           scopes=scopes)


def _embedder_name(ctx: Context) -> str:
    name = ctx.embedder.name
    return name if name == ctx.settings.embedding_provider else f"{ctx.settings.embedding_provider} ({name})"
