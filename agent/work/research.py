"""The work of each research fan-out call: load what it needs, call the provider or the search, store
its typed output under the call's key. Every function has the signature (ctx, job_id, iteration, call)."""
from __future__ import annotations

from agent.context import Context
from agent.models.research import Answer, ScopeFindings
from agent.models.steps import (
    ComposeCall,
    ComposeOutput,
    EvaluateCall,
    EvaluateOutput,
    ExtractCall,
    ExtractOutput,
    NewsCall,
    NewsOutput,
    PlanCall,
    PlanOutput,
    SearchCall,
    Stage,
    StepOutputs,
)
from agent.persistence import jobstore
from agent.persistence.ledger import record_call
from agent.pipeline.budget import budget_note
from agent.pipeline.scopes import group_by_scope
from agent.work.answering import assign_markers, findings_from_answer, partial_answer, run_compose, run_evaluate, run_extract
from agent.work.merging import Merged, merge_adjacent
from agent.work.planning import run_planner
from agent.work.search import run_search_spec
from agent.work.tenk import latest_tenk_answer


def do_plan(ctx: Context, job_id: str, iteration: int, call: PlanCall) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    key = call.output_key(iteration)
    with record_call(ctx.pool, job_id, str(key), "llm.plan", {"provider": ctx.llm.name}) as rec:
        plan, usage, corrected = run_planner(ctx, ctx.llm, state)
        rec.result_size = len(plan.search_queries)
        rec.use(usage, ctx.settings)
    jobstore.put_output(ctx.pool, job_id, key, PlanOutput(plan=plan, usage=usage, corrected=corrected))


def do_search(ctx: Context, job_id: str, iteration: int, call: SearchCall) -> int:
    with record_call(ctx.pool, job_id, str(call.output_key(iteration)), "transcript_search", call.spec.model_dump()) as rec:
        added = run_search_spec(ctx, job_id, iteration, call.spec, ctx.settings.top_k_per_quarter)
        rec.result_size = added
    return added


def generation_evidence(ctx: Context, job_id: str) -> Merged:
    """All the job's evidence as generation sees it: adjacent chunks of one turn merged into one passage."""
    return merge_adjacent(jobstore.load_evidence(ctx.pool, job_id))


def do_extract(ctx: Context, job_id: str, iteration: int, call: ExtractCall) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    merged = generation_evidence(ctx, job_id)
    evidence = merged.evidence
    key, scope = call.output_key(iteration), call.scope
    if scope.endswith(":10k"):
        tenk = latest_tenk_answer(ctx.pool, job_id, scope.split(":")[0])
        if tenk:  # the 10-K agent already answered (with its calculations): its lines are this scope's findings
            findings = findings_from_answer(scope, tenk.answer.text, tenk.markers)
            verbatim = len(group_by_scope(evidence).get(scope, []))
            jobstore.put_output(ctx.pool, job_id, key, ExtractOutput(findings=findings, verbatim=verbatim))
            return
    with record_call(ctx.pool, job_id, str(key), "llm.extract", {"scope": scope, "provider": ctx.llm.name}) as rec:
        findings, usage, packed = run_extract(ctx.llm, state, scope, evidence, assign_markers(evidence), budget_note(state))
        rec.result_size = len(findings.findings)
        rec.use(usage, ctx.settings)
    jobstore.put_output(ctx.pool, job_id, key, ExtractOutput(
        findings=findings, usage=usage, verbatim=len(packed.kept), summarised=packed.summarised, summary=packed.summary,
        merged=merged.merged.get(scope, 0), tokens_saved=merged.tokens_saved(scope)))


def _extracted(ctx: Context, job_id: str, iteration: int) -> list[ScopeFindings]:
    extracted = StepOutputs.from_rows(jobstore.get_outputs(ctx.pool, job_id, f"{iteration}:{Stage.extract.value}:"))
    return [o.findings for o in extracted.of(iteration, Stage.extract).values() if isinstance(o, ExtractOutput)]


def load_partial_answer(ctx: Context, job_id: str, iteration: int) -> Answer | None:
    """What the job can still say when composing failed for good: the iteration's cited findings."""
    evidence = generation_evidence(ctx, job_id).evidence
    return partial_answer(_extracted(ctx, job_id, iteration), evidence, assign_markers(evidence))


def do_compose(ctx: Context, job_id: str, iteration: int, call: ComposeCall) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    evidence = generation_evidence(ctx, job_id).evidence
    findings = _extracted(ctx, job_id, iteration)
    key = call.output_key(iteration)
    with record_call(ctx.pool, job_id, str(key), "llm.compose", {"scopes": len(findings), "provider": ctx.llm.name}) as rec:
        answer, usage = run_compose(ctx.llm, state, findings, evidence, assign_markers(evidence), budget_note(state))
        rec.result_size = len(answer.text)
        rec.use(usage, ctx.settings)
    jobstore.put_output(ctx.pool, job_id, key, ComposeOutput(answer=answer, usage=usage))


def do_evaluate(ctx: Context, job_id: str, iteration: int, call: EvaluateCall) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    evidence = generation_evidence(ctx, job_id).evidence
    key = call.output_key(iteration)
    with record_call(ctx.pool, job_id, str(key), "llm.evaluate", {"scope": call.scope, "provider": ctx.llm.name}) as rec:
        evaluation, usage = run_evaluate(ctx.llm, state, call.scope, evidence, assign_markers(evidence), budget_note(state))
        rec.use(usage, ctx.settings)
    jobstore.put_output(ctx.pool, job_id, key, EvaluateOutput(evaluation=evaluation, usage=usage))


def do_news(ctx: Context, job_id: str, iteration: int, call: NewsCall) -> None:
    """News search (Tavily when a key is set); untrusted text that only ever becomes evidence."""
    from agent.providers.news import make_news

    provider = make_news(ctx.settings, ctx.redis)
    key = call.output_key(iteration)
    with record_call(ctx.pool, job_id, str(key), "news_search", {"query": call.query}) as rec:
        result = provider.search(call.query, ctx.settings.news_max_results)
        items = [i.model_copy(update={"iteration": iteration, "query": call.query}) for i in result.items]
        rec.result_size = len(items)
        if result.status not in ("ok", "unavailable"):
            rec.error_class, rec.error = getattr(result, "error_class", None) or "unknown", result.reason
    jobstore.add_evidence(ctx.pool, job_id, items)
    jobstore.put_output(ctx.pool, job_id, key, NewsOutput(status=result.status, reason=result.reason, query=call.query,
                                                          count=len(items), summary=result.summary))
