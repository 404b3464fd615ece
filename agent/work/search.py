"""The parallel quarter search: one call searches one quarter of one company for one keyword phrase."""
from __future__ import annotations

from agent.context import Context
from agent.models.corpus import Period, SearchFilters
from agent.models.research import Evidence, SearchSpec
from agent.persistence.jobstore import add_evidence, evidence_keys
from agent.retrieval.hybrid import hybrid_search


def run_search_spec(ctx: Context, job_id: str, iteration: int, spec: SearchSpec, top_k: int) -> int:
    """Search one quarter of one company for `top_k` passages the job did not retrieve in an earlier iteration (what
    it already retrieved is never retrieved again); they join the job's evidence. The same iteration's searches of
    one quarter do not exclude each other's passages, so what each finds does not depend on which finished first
    (a passage two of them find is kept once, at its higher score)."""
    s = ctx.settings
    period = Period.parse_key(spec.period)
    # the first iteration has no earlier one to exclude: no query (one round trip of each of its searches)
    have = evidence_keys(ctx.pool, job_id, spec.ticker, period, before_iteration=iteration) if iteration > 1 else set()
    filters = SearchFilters(tickers=[spec.ticker], periods=[period])
    hits = hybrid_search(ctx.pool, spec.query, ctx.embed_query(spec.query), filters, "transcript", top_k + len(have),
                         s.semantic_weight, s.keyword_weight)
    fresh = [h for h in hits if h.citation_key not in have][:top_k]
    evidence = [Evidence(**h.model_dump(), iteration=iteration, query=spec.query) for h in fresh]
    return add_evidence(ctx.pool, job_id, evidence)
