"""Stage 3: the parallel quarter search, one spec per ticker x quarter x keyword phrase."""
from __future__ import annotations

from pydantic import BaseModel

from agent.context import Context
from agent.models import Period, SearchFilters
from agent.pipeline.jobstore import add_evidence
from agent.pipeline.models import Evidence, SearchPlan
from agent.retrieval.hybrid import hybrid_search


class SearchSpec(BaseModel):
    ticker: str
    period: str  # '2024_q4'
    query: str


def search_specs(plan: SearchPlan, queries: list[str]) -> list[SearchSpec]:
    return [SearchSpec(ticker=tp.ticker, period=p, query=q) for q in queries for tp in plan.transcripts for p in tp.periods]


def run_search_spec(ctx: Context, job_id: str, iteration: int, spec: SearchSpec, top_k: int) -> int:
    """Search one quarter of one company; the hits join the job's evidence (deduplicated by citation)."""
    s = ctx.settings
    filters = SearchFilters(tickers=[spec.ticker], periods=[Period.parse_key(spec.period)])
    hits = hybrid_search(ctx.pool, spec.query, ctx.embed_query(spec.query), filters, "transcript", top_k,
                         s.semantic_weight, s.keyword_weight)
    evidence = [Evidence(**h.model_dump(), iteration=iteration, query=spec.query) for h in hits]
    return add_evidence(ctx.pool, job_id, evidence)
