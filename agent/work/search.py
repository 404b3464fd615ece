"""The parallel quarter search: one call searches one quarter of one company for one keyword phrase."""
from __future__ import annotations

from agent.context import Context
from agent.models.corpus import Period, SearchFilters
from agent.models.research import Evidence, SearchSpec
from agent.persistence.jobstore import add_evidence
from agent.retrieval.hybrid import hybrid_search


def run_search_spec(ctx: Context, job_id: str, iteration: int, spec: SearchSpec, top_k: int) -> int:
    """Search one quarter of one company; the hits join the job's evidence (deduplicated by citation)."""
    s = ctx.settings
    filters = SearchFilters(tickers=[spec.ticker], periods=[Period.parse_key(spec.period)])
    hits = hybrid_search(ctx.pool, spec.query, ctx.embed_query(spec.query), filters, "transcript", top_k,
                         s.semantic_weight, s.keyword_weight)
    evidence = [Evidence(**h.model_dump(), iteration=iteration, query=spec.query) for h in hits]
    return add_evidence(ctx.pool, job_id, evidence)
