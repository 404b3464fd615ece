"""Time limits on the real threads-pool workers: an LLM call that runs past its soft limit is interrupted inside its
thread, fails with a reason naming the limit, and its job ends instead of waiting out the call."""
from __future__ import annotations

import json
import time

import pytest

from agent.models.job import JobRequest
from agent.persistence import jobstore
from agent.persistence.ledger import load_ledger
from agent.settings import Settings
from agent.time_limits import LimitKind, time_limits
from ops.cli.ask import follow_job

pytestmark = pytest.mark.integration

# a provider that answers within its 1 s timeout but is held 600 s by the injected latency: a stuck call
STUCK = dict(FINAGENT_LLM_TIMEOUT_S="1", FINAGENT_MAX_TOOL_RETRIES="0", FINAGENT_LLM_LATENCY_S="600")


def test_an_llm_call_past_its_soft_limit_is_interrupted_and_its_job_ends_with_the_reason(ctx, sample_corpus, workers_with,
                                                                                        script_path):
    script_path.write_text(json.dumps({}))
    workers_with(FINAGENT_LLM_PROVIDER="scripted", FINAGENT_LLM_SCRIPT_PATH=str(script_path), **STUCK)
    limit = time_limits(Settings(llm_timeout_s=1, max_tool_retries=0, llm_latency_s=600))[LimitKind.llm]
    assert limit.hard_s < 120  # what the workers derive: far below the 600 s the call would take
    reason = f"soft time limit of {limit.soft_s:g} s exceeded"
    from agent.submission import create
    from tasks.dispatch import CeleryDispatcher

    job_id, _ = create(ctx, CeleryDispatcher(), JobRequest(question="What was NVDA's revenue last quarter?", max_iterations=1))
    started = time.monotonic()
    job, events = follow_job(ctx, job_id, timeout_s=240)  # without the limit the plan call alone takes 600 s
    print(f"job {job.status} {time.monotonic() - started:.1f} s after submission (soft limit {limit.soft_s:g} s): {job.error}")
    assert job.status in ("failed", "completed"), (job.status, job.step, [e.type for e in events])

    plan = [r for r in load_ledger(ctx.pool, job_id) if r["tool"] == "llm.plan"]
    assert plan and plan[0]["error_class"] == "network" and reason in plan[0]["error"], plan
    output = jobstore.get_outputs(ctx.pool, job_id, "0:plan")["0:plan"]
    assert reason in output["error"] and output["error_class"] == "network", output
    said = json.dumps([e.model_dump(mode="json") for e in events]) + (job.error or "")
    assert reason in said or "soft time limit" in said, said[-2000:]  # the caller is told why
