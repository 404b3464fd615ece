"""More evidence than a direct answer's token budget: the answer is built from all of it, and every quarter
found is either cited or reported as summarised."""
from __future__ import annotations

import pytest

from tests.integration.jobs import run_job

pytestmark = pytest.mark.integration


def test_a_direct_multi_quarter_answer_accounts_for_every_quarter(ctx, sample_corpus, worker):
    job, _ = run_job(ctx, question="How did AAPL's revenue change over the last 3 quarters?", mode="direct")
    result = job.result
    quarters = {f"AAPL:{p}" for tp in job.state.search_plan.transcripts for p in tp.periods}
    assert len(quarters) == 3
    ctx_use = result.context
    assert ctx_use.summarised > 0  # over the budget (2,000 tokens a scope in direct mode)
    # every chunk went in: verbatim, merged into a neighbouring chunk, or through the summary
    assert ctx_use.verbatim + ctx_use.merged + ctx_use.summarised == result.chunks_used
    cited = {c.period for c in result.citations}
    summarised = set(result.context.summarised_scopes)
    for key in quarters:
        label = "Q{} {}".format(key.split("_q")[1], key.split(":")[1].split("_")[0])
        assert label in cited or key in summarised, (key, cited, summarised)
