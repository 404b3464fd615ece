"""The work of each fan-out task: load what it needs, call the provider or the search, store a keyed output."""
from __future__ import annotations

from agent.context import Context
from agent.pipeline import jobstore
from agent.pipeline.answering import assign_markers, findings_from_answer, run_compose, run_evaluate, run_extract
from agent.pipeline.flow_tenk import latest_tenk_answer
from agent.pipeline.budget import budget_note
from agent.pipeline.ledger import record_call
from agent.pipeline.models import ScopeFindings
from agent.pipeline.planning import run_planner
from agent.pipeline.retrieval import SearchSpec, run_search_spec
from agent.providers.llm.base import LLMProvider


def do_plan(ctx: Context, llm: LLMProvider, job_id: str) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    with record_call(ctx.pool, job_id, "0:plan", "llm.plan", {"provider": llm.name}) as rec:
        plan, usage = run_planner(ctx, llm, state)
        rec.result_size = len(plan.search_queries)
    jobstore.put_output(ctx.pool, job_id, "0:plan", {"plan": plan.model_dump(mode="json"), "usage": usage.model_dump()})


def do_search(ctx: Context, job_id: str, iteration: int, n: int, spec: SearchSpec) -> int:
    key = f"{iteration}:search:{n}"
    with record_call(ctx.pool, job_id, key, "transcript_search", spec.model_dump()) as rec:
        added = run_search_spec(ctx, job_id, iteration, spec, ctx.settings.top_k_per_quarter)
        rec.result_size = added
    return added


def do_extract(ctx: Context, llm: LLMProvider, job_id: str, iteration: int, scope: str) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    evidence = jobstore.load_evidence(ctx.pool, job_id)
    key = f"{iteration}:extract:{scope}"
    if scope.endswith(":10k"):
        tenk = latest_tenk_answer(ctx.pool, job_id, scope.split(":")[0])
        if tenk:  # the 10-K agent already answered (with its calculations): its lines are this scope's findings
            findings = findings_from_answer(scope, tenk["answer"]["text"], tenk["markers"])
            jobstore.put_output(ctx.pool, job_id, key, {"findings": findings.model_dump(mode="json")})
            return
    with record_call(ctx.pool, job_id, key, "llm.extract", {"scope": scope, "provider": llm.name}) as rec:
        findings, usage = run_extract(llm, state, scope, evidence, assign_markers(evidence), budget_note(state))
        rec.result_size = len(findings.findings)
    jobstore.put_output(ctx.pool, job_id, key, {"findings": findings.model_dump(mode="json"), "usage": usage.model_dump()})


def do_compose(ctx: Context, llm: LLMProvider, job_id: str, iteration: int) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    evidence = jobstore.load_evidence(ctx.pool, job_id)
    outputs = jobstore.get_outputs(ctx.pool, job_id, f"{iteration}:extract:")
    findings = [ScopeFindings.model_validate(o["findings"]) for o in outputs.values() if "findings" in o]
    key = f"{iteration}:compose"
    with record_call(ctx.pool, job_id, key, "llm.compose", {"scopes": len(findings), "provider": llm.name}) as rec:
        answer, usage = run_compose(llm, state, findings, evidence, assign_markers(evidence), budget_note(state))
        rec.result_size = len(answer.text)
    jobstore.put_output(ctx.pool, job_id, key, {"answer": answer.model_dump(mode="json"), "usage": usage.model_dump()})


def do_evaluate(ctx: Context, llm: LLMProvider, job_id: str, iteration: int, scope: str) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    evidence = jobstore.load_evidence(ctx.pool, job_id)
    key = f"{iteration}:evaluate:{scope}"
    with record_call(ctx.pool, job_id, key, "llm.evaluate", {"scope": scope, "provider": llm.name}):
        evaluation, usage = run_evaluate(llm, state, scope, evidence, assign_markers(evidence), budget_note(state))
    jobstore.put_output(ctx.pool, job_id, key, {"evaluation": evaluation.model_dump(mode="json"), "usage": usage.model_dump()})


def do_news(ctx: Context, job_id: str, iteration: int, query: str) -> None:
    """News search (Tavily when a key is set); untrusted text that only ever becomes evidence."""
    from agent.providers.news import make_news

    provider = make_news(ctx.settings, ctx.redis)
    key = f"{iteration}:news"
    with record_call(ctx.pool, job_id, key, "news_search", {"query": query}) as rec:
        result = provider.search(query, ctx.settings.news_max_results)
        items = [i.model_copy(update={"iteration": iteration, "query": query}) for i in result.items]
        rec.result_size = len(items)
        if result.status not in ("ok", "unavailable"):
            rec.error_class, rec.error = getattr(result, "error_class", None) or "unknown", result.reason
    jobstore.add_evidence(ctx.pool, job_id, items)
    jobstore.put_output(ctx.pool, job_id, key, {"status": result.status, "reason": result.reason, "query": query,
                                                "count": len(items), "summary": result.summary})
