"""The 10-K agent as coordinator stages: plan sub-questions per filing (a company's 10-K for one fiscal year: two
years of one company are two filings), retrieve them in one chord of at most `tenk_parallelism` tasks, answer and
evaluate per filing, and replan from the missing information until quality reaches `tenk_quality_threshold` or
`tenk_max_iterations` rounds have run. Every filing's round runs in the same fan-out."""
from __future__ import annotations

from agent.models.job import TenKProgress
from agent.models.steps import (
    Assignment,
    ExtractCall,
    Stage,
    TaskCall,
    TenKAnswerCall,
    TenKEvaluateCall,
    TenKEvaluateOutput,
    TenKPlanCall,
    TenKPlanOutput,
    TenKRetrieveCall,
    TenKRetrieveOutput,
)
from agent.models.tenk import TenKPlan, filing_key
from agent.pipeline.budget import out_of_time
from agent.pipeline.inputs import StepOutcome
from agent.pipeline.stage_context import StageContext


def has_targets(step: StageContext) -> bool:
    sp = step.state.search_plan
    return sp is not None and bool(sp.tenk)


def targets(step: StageContext) -> list[tuple[str, str, int]]:
    """Every filing the search plan reads: (filing key, ticker, fiscal year), one per company and fiscal year."""
    assert step.state.search_plan is not None
    found = [(tp.ticker, int(p.removeprefix("FY"))) for tp in step.state.search_plan.tenk for p in tp.periods]
    return [(filing_key(t, fy), t, fy) for t, fy in dict.fromkeys(found)]


def _open(tk: TenKProgress, key: str) -> bool:
    """Still below the quality bar (a state saved when the rounds were per company lists the ticker)."""
    return key in tk.open or key.split(":")[0] in tk.open


def _of(table: dict, key: str, default=None):
    """A filing's entry, or its company's in a state saved when the rounds were per company."""
    return table.get(key, table.get(key.split(":")[0], default))


def start_tenk(step: StageContext, missing_info: list[str]) -> StepOutcome:
    """The 10-K agent's first round of this iteration. Its retrievals are dispatched in one chord with the
    iteration's transcript and news searches, so they run concurrently. In a follow-up iteration it replans
    from what the evaluation found missing, and sub-questions already searched are not searched again."""
    old = step.state.tenk
    keys = [k for k, _, _ in targets(step)]
    step.state.tenk = TenKProgress(round=1, open=keys, missing={k: missing_info for k in keys if missing_info},
                                   retrieved=old.retrieved, last_plan=old.last_plan)
    return _tenk_plan_calls(step)


def _tenk_plan_calls(step: StageContext) -> StepOutcome:
    tk = step.state.tenk
    filings = [(k, t, fy) for k, t, fy in targets(step) if _open(tk, k)]
    tk.open = [k for k, _, _ in filings]  # (a state saved per company is keyed per filing from here on)
    calls: list[TaskCall] = [TenKPlanCall(round=tk.round, ticker=t, fiscal_year=fy, missing_info=_of(tk.missing, k, []),
                                          previous=_of(tk.last_plan, k) if tk.round == 1 else None)
                             for k, t, fy in filings]
    return step.dispatch(Stage.tenk_plan, calls)


def _with_searches(step: StageContext, calls: list[TaskCall]) -> list[TaskCall]:
    """The iteration's transcript and news searches join the first chord of 10-K retrievals."""
    tk = step.state.tenk
    if tk.searched:
        return calls
    tk.searched = True
    return calls + step.search_calls()


def _done(step: StageContext) -> StepOutcome:
    """The 10-K rounds are over: on to the answer, with the iteration's searches (run beside the 10-K
    retrievals, or now if there were none)."""
    tk = step.state.tenk
    tk.done = True
    if not tk.searched:
        tk.searched = True
        searches = step.search_calls()
        if searches:
            return step.dispatch(Stage.search, searches)
    return step.after_search()


def after_tenk_plan(step: StageContext) -> StepOutcome:
    step.stage_time("tenk")
    tk = step.state.tenk
    plans: dict[str, TenKPlan] = {}  # filing key (the plan's step-key part) -> its plan
    for key, out in step.read(Stage.tenk_plan, tk.round).items():
        if isinstance(out, TenKPlanOutput):
            plans[key.part] = out.plan
            tk.last_plan[key.part] = str(key)
        else:
            step.emit("error", f"10-K planning failed for {key.part}: {getattr(out, 'error', None)}", step="tenk_plan",
                      filing=key.part, error_class=getattr(out, "error_class", None))
    if not plans:
        return _done(step)
    limit = step.settings.tenk_parallelism
    assignments: list[list[Assignment]] = [[] for _ in range(limit)]
    n = 0
    for part, plan in plans.items():
        year = None if part == plan.ticker else plan.fiscal_year  # a plan saved per company is keyed by its ticker
        for sq in plan.sub_questions:
            signature = f"{sq.kind}|{'/'.join(sq.items)}|{sq.keywords}"
            if signature in tk.retrieved.get(part, []):
                continue  # a replan repeats the sub-questions it keeps: their evidence is already in
            tk.retrieved.setdefault(part, []).append(signature)
            assignments[n % limit].append(Assignment(ticker=plan.ticker, fiscal_year=year, sub_question=sq.id))
            n += 1
    step.emit("tenk_search", f"10-K round {tk.round}: {n} sub-questions over {len(plans)} filing(s)",
              phase="plan", round=tk.round, filings=list(plans),
              sub_questions={k: [f"[{q.kind}] Item {'/'.join(q.items)}: {q.text}" for q in p.sub_questions]
                             for k, p in plans.items()})
    calls: list[TaskCall] = [TenKRetrieveCall(round=tk.round, slot=i, assignments=a)
                             for i, a in enumerate(assignments) if a]
    if not calls:
        return after_tenk_retrieve(step)
    return step.dispatch(Stage.tenk_retrieve, _with_searches(step, calls))


def after_tenk_retrieve(step: StageContext) -> StepOutcome:
    step.stage_time("tenk")
    tk = step.state.tenk
    added = sum(o.added for o in step.read(Stage.tenk_retrieve, tk.round).values()
                if isinstance(o, TenKRetrieveOutput))
    step.emit("tenk_search", f"10-K round {tk.round}: {added} new passages and tables", phase="retrieval",
              round=tk.round, chunks_added=added)
    # each filing's evaluation is chained to its own answer (models.steps.call_chains): it reads only that answer
    calls: list[TaskCall] = [c for t, fy in _open_filings(step) for c in (TenKAnswerCall(round=tk.round, ticker=t, fiscal_year=fy),
                                                                         TenKEvaluateCall(round=tk.round, ticker=t, fiscal_year=fy))]
    return step.dispatch(Stage.tenk_answer, calls + _early_extracts(step))


def _open_filings(step: StageContext) -> list[tuple[str, int | None]]:
    """(ticker, fiscal year) of each filing still open; a ticker alone (no year) in a state saved per company."""
    out: list[tuple[str, int | None]] = []
    for entry in step.state.tenk.open:
        ticker, _, year = entry.partition(":FY")
        out.append((ticker, int(year) if year else None))
    return out


def _early_extracts(step: StageContext) -> list[TaskCall]:
    """The transcript and news scopes' extraction, run beside the 10-K answers instead of after the 10-K rounds.

    Once this iteration's searches are in, those scopes' evidence is complete: later 10-K rounds add only 10-K
    passages, and a transcript or news passage's marker is counted among its own kind, so an extraction now reads
    what it would read after the 10-K rounds. Only when what the searches found so far already leads to extraction
    (`search_round_ends`); the 10-K scopes wait for the agent's last answer."""
    st = step.state
    if not st.tenk.searched or st.extracted_early or step.search_round_ends() is not None:
        return []
    scopes = [s for s in step.inp.evidence.scopes if not s.endswith(":10k")]
    st.extracted_early = scopes
    return [ExtractCall(scope=s) for s in scopes]


def after_tenk_answer(step: StageContext) -> StepOutcome:
    """The round's answers and, chained each to its company's answer, their evaluations are in (a job that was waiting
    on its answers alone when it was saved, before the chains, evaluates them now)."""
    step.stage_time("tenk")
    tk = step.state.tenk
    step.read(Stage.tenk_answer, tk.round)
    st = step.state
    if any(isinstance(c, ExtractCall) for c in st.inflight):
        # the extractions that rode in this chord are paid for now, whether or not the answer step comes to read
        # them (the time may run out, or the job be cancelled, during the 10-K rounds)
        step.read(Stage.extract)
    evaluated = {key.part for key in step.inp.outputs.of(st.iteration, Stage.tenk_evaluate, tk.round)}
    waiting: list[TaskCall] = [TenKEvaluateCall(round=tk.round, ticker=t, fiscal_year=fy) for t, fy in _open_filings(step)]
    waiting = [c for c in waiting if c.part() not in evaluated]
    if waiting:
        return step.dispatch(Stage.tenk_evaluate, waiting)
    return after_tenk_evaluate(step)


def after_tenk_evaluate(step: StageContext) -> StepOutcome:
    step.stage_time("tenk")
    tk, s = step.state.tenk, step.settings
    for key, out in step.read(Stage.tenk_evaluate, tk.round).items():
        if isinstance(out, TenKEvaluateOutput):
            tk.quality[key.part], tk.missing[key.part] = out.evaluation.quality, out.evaluation.missing_info
    tk.open = [k for k in tk.open if tk.quality.get(k, 0) < s.tenk_quality_threshold]
    replan = bool(tk.open) and tk.round < s.tenk_max_iterations and not out_of_time(step.state, step.now)
    step.emit("tenk_search", f"10-K round {tk.round}: quality " + ", ".join(f"{k} {q:.0%}" for k, q in tk.quality.items()),
              phase="evaluation", round=tk.round, quality=tk.quality, missing_info=tk.missing, will_replan=replan)
    step.state.trace(f"10-K round {tk.round}: quality {tk.quality}; {'replanning' if replan else 'done'}")
    if replan:
        tk.round += 1
        return _tenk_plan_calls(step)
    return _done(step)
