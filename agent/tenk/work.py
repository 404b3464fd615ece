"""The work of the 10-K agent's fan-out tasks: plan, retrieve (<= 6 tasks), answer, evaluate."""
from __future__ import annotations

from agent.context import Context
from agent.pipeline import jobstore
from agent.pipeline.answering import assign_markers
from agent.pipeline.budget import budget_note
from agent.pipeline.ledger import record_call
from agent.tenk.models import TenKAnswerRequest, TenKEvaluateRequest, TenKPlan, TenKPlanRequest


def _plan(ctx: Context, job_id: str, iteration: int, rnd: int, ticker: str) -> TenKPlan:
    out = jobstore.get_outputs(ctx.pool, job_id, f"{iteration}:tenk{rnd}:plan:{ticker}")
    return TenKPlan.model_validate(next(iter(out.values()))["plan"])


def _tenk_evidence(ctx: Context, job_id: str, ticker: str):
    evidence = jobstore.load_evidence(ctx.pool, job_id)
    markers = assign_markers(evidence)
    return [e for e in evidence if e.source_type in ("10k", "10k_table") and e.ticker == ticker], markers


def do_plan(ctx: Context, llm, job_id: str, iteration: int, rnd: int, ticker: str, fiscal_year: int, missing_info: list[str]) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    previous = None
    if rnd > 1:
        previous = _plan(ctx, job_id, iteration, rnd - 1, ticker)
    key = f"{iteration}:tenk{rnd}:plan:{ticker}"
    with record_call(ctx.pool, job_id, key, "llm.plan_10k", {"ticker": ticker, "fiscal_year": fiscal_year, "round": rnd}) as rec:
        plan, usage = llm.plan_10k(TenKPlanRequest(question=state.request.question, ticker=ticker, fiscal_year=fiscal_year,
                                                   missing_info=missing_info, previous=previous, budget_note=budget_note(state)))
        rec.result_size = len(plan.sub_questions)
    jobstore.put_output(ctx.pool, job_id, key, {"plan": plan.model_dump(mode="json"), "usage": usage.model_dump()})


def do_retrieve(ctx: Context, llm, job_id: str, iteration: int, rnd: int, slot: int, assignments: list[list]) -> None:
    """One of at most 6 parallel retrieval tasks; each handles its share of the sub-questions in turn."""
    from agent.tenk.retrieval import retrieve

    state = jobstore.load_state(ctx.pool, job_id)
    added, prompt, completion = 0, 0, 0
    plans: dict[str, TenKPlan] = {}
    for ticker, sq_id in assignments:
        plan = plans.setdefault(ticker, _plan(ctx, job_id, iteration, rnd, ticker))
        sq = next(q for q in plan.sub_questions if q.id == sq_id)
        key = f"{iteration}:tenk{rnd}:retrieve:{ticker}:{sq_id}"
        with record_call(ctx.pool, job_id, key, f"tenk_{sq.kind.lower()}_search",
                         {"ticker": ticker, "items": sq.items, "keywords": sq.keywords}) as rec:
            evidence, usage = retrieve(ctx, llm, state.request.question, plan, sq, iteration, budget_note=budget_note(state))
            n = jobstore.add_evidence(ctx.pool, job_id, evidence)
            rec.result_size = len(evidence)
        added += n
        prompt, completion = prompt + usage.prompt, completion + usage.completion
    jobstore.put_output(ctx.pool, job_id, f"{iteration}:tenk{rnd}:retrieve:{slot}",
                        {"added": added, "usage": {"prompt": prompt, "completion": completion}})


def do_answer(ctx: Context, llm, job_id: str, iteration: int, rnd: int, ticker: str) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    plan = _plan(ctx, job_id, iteration, rnd, ticker)
    evidence, markers = _tenk_evidence(ctx, job_id, ticker)
    key = f"{iteration}:tenk{rnd}:answer:{ticker}"
    with record_call(ctx.pool, job_id, key, "llm.answer_10k", {"ticker": ticker, "evidence": len(evidence)}) as rec:
        answer, usage = llm.answer_10k(TenKAnswerRequest(question=state.request.question, plan=plan, evidence=evidence,
                                                         markers=markers, budget_note=budget_note(state)))
        rec.result_size = len(answer.text)
    # markers are saved with the answer: later evidence can renumber them, citation keys stay
    jobstore.put_output(ctx.pool, job_id, key, {"answer": answer.model_dump(mode="json"), "markers": markers,
                                                "usage": usage.model_dump()})


def do_evaluate(ctx: Context, llm, job_id: str, iteration: int, rnd: int, ticker: str) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    plan = _plan(ctx, job_id, iteration, rnd, ticker)
    evidence, markers = _tenk_evidence(ctx, job_id, ticker)
    answer = next(iter(jobstore.get_outputs(ctx.pool, job_id, f"{iteration}:tenk{rnd}:answer:{ticker}").values()), {})
    key = f"{iteration}:tenk{rnd}:evaluate:{ticker}"
    with record_call(ctx.pool, job_id, key, "llm.evaluate_10k", {"ticker": ticker}):
        ev, usage = llm.evaluate_10k(TenKEvaluateRequest(question=state.request.question, plan=plan, round=rnd,
                                                         answer=(answer.get("answer") or {}).get("text", ""),
                                                         evidence=evidence, markers=answer.get("markers", markers),
                                                         budget_note=budget_note(state)))
    jobstore.put_output(ctx.pool, job_id, key, {"evaluation": ev.model_dump(mode="json"), "usage": usage.model_dump()})
