"""Token totals add up from the ledger, and an identical second question is answered from the response cache."""
from __future__ import annotations

import json

import pytest

from agent.persistence.ledger import load_ledger
from agent.retrieval import keyword_index
from tests.integration.jobs import run_job

pytestmark = pytest.mark.integration

QUESTION = "How did MSFT's revenue change over the last 2 quarters?"
EVALUATION = {"completeness_score": 90, "specificity_score": 90, "accuracy_score": 90, "clarity_score": 90,
              "is_sufficient": True, "followup_keywords": []}


def test_tokens_equal_the_ledger_and_a_repeat_hits_the_cache(ctx, sample_corpus, scripted_worker, script_path):
    script_path.write_text(json.dumps({"evaluate": {"1": EVALUATION}, "cache-test": QUESTION}))
    settle_search_statistics(ctx)
    first, _ = run_job(ctx, question=QUESTION)
    ledger = load_ledger(ctx.pool, first.id)
    assert first.result.tokens["prompt"] > 0
    assert first.result.tokens == {"prompt": sum(r["prompt_tokens"] for r in ledger),
                                   "completion": sum(r["completion_tokens"] for r in ledger)}
    assert first.result.cache_hits == 0

    second, _ = run_job(ctx, question=QUESTION)
    assert second.result.answer == first.result.answer
    assert second.result.cache_hits >= len([r for r in ledger if r["tool"].startswith("llm.")])
    assert second.result.tokens == {"prompt": 0, "completion": 0}
    assert all(r["cached"] for r in load_ledger(ctx.pool, second.id) if r["tool"].startswith("llm."))


def settle_search_statistics(ctx) -> None:
    """The keyword score reads the planner's term statistics and the BM25 index: an autovacuum ANALYZE or a beat
    sync between the two jobs (the sample corpus was just ingested) could change which passages the second one
    finds, and so its prompts. Settle both first, as a corpus at rest is."""
    with ctx.pool.connection() as conn:
        conn.execute("ANALYZE transcript_chunks")
        conn.execute("ANALYZE tenk_chunks")
    keyword_index.sync_all(ctx.pool, ctx.settings.data_dir)
