"""The work of the 10-K agent's fan-out calls: plan, retrieve (at most `tenk_parallelism` calls), answer, evaluate."""
from __future__ import annotations

import logging
import re

from agent.context import Context
from agent.db import reading
from agent.infra.error_classes import classify_error
from agent.models.financials import Computation
from agent.models.research import Answer, Evidence, Usage
from agent.models.steps import (
    Stage,
    StepKey,
    StepOutputs,
    TenKAnswerCall,
    TenKAnswerOutput,
    TenKEvaluateCall,
    TenKEvaluateOutput,
    TenKPlanCall,
    TenKPlanOutput,
    TenKRetrieveCall,
    TenKRetrieveOutput,
)
from agent.models.tenk import SubQuestion, TenKAnswerRequest, TenKEvaluateRequest, TenKPlan, TenKPlanRequest
from agent.persistence import jobstore
from agent.persistence.ledger import record_call
from agent.pipeline.budget import budget_note
from agent.redact import redact
from agent.tenk.retrieval import retrieve
from agent.work.answering import assign_markers
from agent.work.computing import answer_lines, compute, input_evidence, is_computing_round, measure_for, years_of

_MARKER = re.compile(r"\[10K\d+\]")
log = logging.getLogger(__name__)


def _output(ctx: Context, job_id: str, key: StepKey):
    rows = jobstore.get_outputs(ctx.pool, job_id, str(key))
    return StepOutputs.from_rows(rows).items.get(key)


def _plan(ctx: Context, job_id: str, iteration: int, rnd: int, part: str) -> TenKPlan:
    """The round's 10-K plan of one filing ('ACME:FY2024'; a ticker alone for a job saved per company)."""
    out = _output(ctx, job_id, StepKey(iteration=iteration, stage=Stage.tenk_plan, round=rnd, part=part))
    if not isinstance(out, TenKPlanOutput):
        raise LookupError(f"no 10-K plan for {part} in round {rnd}")
    return out.plan


def _tenk_evidence(ctx: Context, job_id: str, ticker: str, fiscal_year: int | None) -> tuple[list[Evidence], dict[str, str]]:
    """One filing's 10-K passages and tables (every year's of the company when `fiscal_year` is None), and the
    job's markers."""
    evidence = jobstore.load_evidence(ctx.pool, job_id)
    markers = assign_markers(evidence)
    return [e for e in evidence if e.source_type in ("10k", "10k_table") and e.ticker == ticker
            and (fiscal_year is None or e.fiscal_year == fiscal_year)], markers


def do_plan(ctx: Context, job_id: str, iteration: int, call: TenKPlanCall) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    previous = None
    if call.round > 1:
        previous = _plan(ctx, job_id, iteration, call.round - 1, call.part())
    elif call.previous:  # a follow-up iteration revises the last plan of an earlier one
        earlier = _output(ctx, job_id, StepKey.parse(call.previous))
        previous = earlier.plan if isinstance(earlier, TenKPlanOutput) else None
    key = call.output_key(iteration)
    with record_call(ctx.pool, job_id, str(key), "llm.plan_10k",
                     {"ticker": call.ticker, "fiscal_year": call.fiscal_year, "round": call.round}) as rec:
        plan, usage = ctx.llm.plan_10k(TenKPlanRequest(
            question=state.request.question, ticker=call.ticker, fiscal_year=call.fiscal_year,
            missing_info=call.missing_info, previous=previous, budget_note=budget_note(state)))
        rec.result_size = len(plan.sub_questions)
        rec.use(usage, ctx.settings)
        rec.store_with(jobstore.output_writer(job_id, key, TenKPlanOutput(plan=plan, usage=usage)))


def do_retrieve(ctx: Context, job_id: str, iteration: int, call: TenKRetrieveCall) -> None:
    """One of the parallel retrieval calls; it handles its share of the sub-questions in turn."""
    state = jobstore.load_state(ctx.pool, job_id)
    added, total = 0, Usage()
    plans: dict[str, TenKPlan] = {}
    for a in call.assignments:
        plan = plans.get(a.part()) or plans.setdefault(a.part(), _plan(ctx, job_id, iteration, call.round, a.part()))
        sq = next(q for q in plan.sub_questions if q.id == a.sub_question)
        # a ledger row per sub-question (not a step output): the slot's output key carries the total
        ledger_key = f"{iteration}:tenk{call.round}:retrieve:{a.part()}:{a.sub_question}"
        present = filing_items(ctx.pool, a.ticker, plan.fiscal_year)
        if sq.items and present and not set(sq.items) & present:
            with record_call(ctx.pool, job_id, ledger_key + ":fix", "llm.plan_10k.fix",
                             {"ticker": a.ticker, "items": sq.items, "filing_items": sorted(present)}) as rec:
                sq, fixed = fix_routing(ctx.llm, state.request.question, plan, sq, present, budget_note(state))
                rec.use(fixed, ctx.settings)
            total = total.add(fixed)
        with record_call(ctx.pool, job_id, ledger_key, f"tenk_{sq.kind.lower()}_search",
                         {"ticker": a.ticker, "items": sq.items, "keywords": sq.keywords}) as rec:
            evidence, usage = retrieve(ctx, ctx.llm, state.request.question, plan, sq, iteration,
                                       budget_note=budget_note(state))
            n = jobstore.add_evidence(ctx.pool, job_id, evidence)
            rec.result_size = len(evidence)
            if usage is not None:
                rec.use(usage, ctx.settings)
        added += n
        total = total.add(usage or Usage())
    jobstore.put_output(ctx.pool, job_id, call.output_key(iteration), TenKRetrieveOutput(added=added, usage=total))


def fix_routing(llm, question: str, plan: TenKPlan, sq: SubQuestion, present: set[str],
                note: str = "") -> tuple[SubQuestion, Usage]:
    """A sub-question routed to Items the filing does not have goes back to the 10-K planner once; its revised
    sub-question is used if it routes to Items that exist, else the sub-question searches every Item there is."""
    problem = (f"Sub-question {sq.id}: Item {'/'.join(sq.items)} is not in this filing; "
               f"its Items are {', '.join(sorted(present))}")
    revised, usage = llm.plan_10k(TenKPlanRequest(question=question, ticker=plan.ticker, fiscal_year=plan.fiscal_year,
                                                  missing_info=[problem], previous=plan, budget_note=note))
    old = {q.id for q in plan.sub_questions}
    for candidate in revised.sub_questions:
        if candidate.id not in old and candidate.kind == sq.kind and set(candidate.items) & present:
            return sq.model_copy(update={"items": [i for i in candidate.items if i in present],
                                         "keywords": candidate.keywords}), usage
    return sq.model_copy(update={"items": sorted(present)}), usage


def filing_items(pool, ticker: str, fiscal_year: int) -> set[str]:
    """The Items a 10-K filing's text and tables were parsed into."""
    with reading(pool) as conn:
        rows = conn.execute("SELECT DISTINCT item FROM tenk_chunks WHERE ticker = %s AND fiscal_year = %s"
                            " UNION SELECT DISTINCT item FROM tenk_tables WHERE ticker = %s AND fiscal_year = %s",
                            (ticker, fiscal_year, ticker, fiscal_year)).fetchall()
    return {r["item"] for r in rows if r["item"]}


def do_answer(ctx: Context, job_id: str, iteration: int, call: TenKAnswerCall) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    plan = _plan(ctx, job_id, iteration, call.round, call.part())
    key = call.output_key(iteration)
    filings = {int(k.rsplit(":FY", 1)[1]) for k in state.tenk.last_plan if k.startswith(f"{call.ticker}:FY")}
    computation = _compute(ctx, job_id, iteration, str(key), state.request.question, plan, filings)
    evidence, markers = _tenk_evidence(ctx, job_id, call.ticker, call.fiscal_year)
    with record_call(ctx.pool, job_id, str(key), "llm.answer_10k",
                     {"ticker": call.ticker, "fiscal_year": call.fiscal_year, "evidence": len(evidence)}) as rec:
        try:
            answer, usage = ctx.llm.answer_10k(TenKAnswerRequest(question=state.request.question, plan=plan,
                                                                 evidence=evidence, markers=markers,
                                                                 budget_note=budget_note(state)))
        except Exception as exc:
            # a model that cannot take the request (its context is too small) or answers out of schema: the figure
            # computed from the statements still answers; a failure that may pass (a timeout, a 503) is retried
            if computation is None or classify_error(exc) not in ("parameter", "data"):
                raise
            log.warning("answer_10k for %s failed (%s): the computed figure answers alone", call.part(), str(exc)[:200])
            answer, usage = Answer(text=""), Usage()
            rec.error_class, rec.error = classify_error(exc), redact(f"{type(exc).__name__}: {exc}")[:500]
        if computation is not None:  # the computed figure leads, with its formula and every input cited
            answer = answer.model_copy(update={"text": "\n".join([*answer_lines(computation, markers), answer.text]).strip()})
        rec.result_size = len(answer.text)
        rec.use(usage, ctx.settings)
        rec.store_with(jobstore.output_writer(job_id, key, TenKAnswerOutput(answer=answer, markers=markers, usage=usage,
                                                                            computation=computation)))


def _compute(ctx: Context, job_id: str, iteration: int, key: str, question: str, plan: TenKPlan,
             filings: set[int]) -> Computation | None:
    """The round's computed figure (agent/work/computing.py); its inputs' pages join the job's evidence first."""
    query, named_by = measure_for(question, plan.measure)
    if query is None or not is_computing_round(query, plan.fiscal_year, filings):
        return None
    with record_call(ctx.pool, job_id, key + ":compute", "statements.compute",
                     {"ticker": plan.ticker, "measure": query.measure or query.expression, "named_by": named_by,
                      "fiscal_years": years_of(query, plan.fiscal_year)}) as rec:
        computation = compute(ctx.pool, plan.ticker, query, plan.fiscal_year)
        if computation is None:
            return None
        computation, evidence = input_evidence(ctx.pool, computation, iteration)
        jobstore.add_evidence(ctx.pool, job_id, evidence)
        rec.result_size = len(computation.inputs) - len(computation.missing)
    return computation


def do_evaluate(ctx: Context, job_id: str, iteration: int, call: TenKEvaluateCall) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    plan = _plan(ctx, job_id, iteration, call.round, call.part())
    evidence, markers = _tenk_evidence(ctx, job_id, call.ticker, call.fiscal_year)
    answer = _output(ctx, job_id, StepKey(iteration=iteration, stage=Stage.tenk_answer, round=call.round, part=call.part()))
    answered = answer if isinstance(answer, TenKAnswerOutput) else None
    key = call.output_key(iteration)
    with record_call(ctx.pool, job_id, str(key), "llm.evaluate_10k",
                     {"ticker": call.ticker, "fiscal_year": call.fiscal_year}) as rec:
        ev, usage = ctx.llm.evaluate_10k(TenKEvaluateRequest(
            question=state.request.question, plan=plan, round=call.round,
            answer=answered.answer.text if answered else "", evidence=evidence,
            markers=answered.markers if answered else markers, budget_note=budget_note(state)))
        rec.use(usage, ctx.settings)
        rec.store_with(jobstore.output_writer(job_id, key, TenKEvaluateOutput(evaluation=ev, usage=usage)))


def latest_answers(pool, job_id: str) -> dict[str, TenKAnswerOutput]:
    """Each filing's latest 10-K answer (any iteration, last round), by filing ('ACME:FY2024'), in filing order."""
    outputs = StepOutputs.from_rows(jobstore.get_outputs(pool, job_id, ""))
    latest: dict[str, tuple[int, int, TenKAnswerOutput]] = {}
    for k, out in outputs.items.items():
        if k.stage == Stage.tenk_answer and isinstance(out, TenKAnswerOutput):
            if k.part not in latest or (k.iteration, k.round or 0) > latest[k.part][:2]:
                latest[k.part] = (k.iteration, k.round or 0, out)
    return {part: latest[part][2] for part in sorted(latest)}


def latest_tenk_answer(pool, job_id: str, ticker: str) -> TenKAnswerOutput | None:
    """The company's 10-K findings: the latest answer of each of its filings, one fiscal year after another, as one
    answer. Each answer's markers were numbered over the evidence of its own round; they are renumbered here into one
    set, so a marker means one passage across the joined text."""
    answers = [a for part, a in latest_answers(pool, job_id).items() if part.split(":")[0] == ticker]
    if len(answers) <= 1:
        return answers[0] if answers else None
    return join_answers(answers)


def latest_computations(pool, job_id: str) -> dict[str, list[Computation]]:
    """ticker -> the figures its filings' latest 10-K answers computed from the statements."""
    found: dict[str, list[Computation]] = {}
    for part, answer in latest_answers(pool, job_id).items():
        if answer.computation is not None:
            found.setdefault(part.split(":")[0], []).append(answer.computation)
    return found


def join_answers(answers: list[TenKAnswerOutput]) -> TenKAnswerOutput:
    """Several filings' answers as one: their texts one after another, each marker renumbered to one passage."""
    markers: dict[str, str] = {}
    texts: list[str] = []
    for a in answers:
        by_marker = {m: k for k, m in a.markers.items()}

        def renumber(m: re.Match[str], by_marker: dict[str, str] = by_marker) -> str:
            key = by_marker.get(m.group(0))
            if key is None:
                return m.group(0)
            return markers.setdefault(key, f"[10K{len(markers) + 1}]")

        texts.append(_MARKER.sub(renumber, a.answer.text))
    citations = [c for a in answers for c in a.answer.citations]
    usage = Usage()
    for a in answers:
        usage = usage.add(a.usage)
    return TenKAnswerOutput(answer=Answer(text="\n".join(texts), citations=citations), markers=markers, usage=usage)
