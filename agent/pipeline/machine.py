"""The coordinator's state machine, pure: given a job's state and everything the stage that just
finished produced (loaded by the caller), do exactly one step and return the new state, the calls to
fan out next, the events to publish and, at the end, the result. No database, no Redis, no clock:
`StepInput.now` is the time.

Transitions (`done` stage -> what happens -> next stage); `docs/architecture.md` draws them:

| after         | condition                                               | next                          |
|---------------|---------------------------------------------------------|-------------------------------|
| start         | always                                                  | plan                          |
| plan          | planner failed                                          | done (failed)                 |
| plan          | plan invalid                                            | done (rejected)               |
| plan          | nothing to search                                       | done (failed)                 |
| plan          | 10-K targets                                            | tenk_plan (iteration 1)       |
| plan          | otherwise                                               | search (iteration 1)          |
| tenk_plan     | no 10-K plan                                            | search (or at once, if none)  |
| tenk_plan     | every sub-question already searched                     | (tenk_retrieve at once)       |
| tenk_plan     | otherwise (first round: with the transcript searches)   | tenk_retrieve                 |
| tenk_retrieve | always: each company's answer, its evaluation chained   | tenk_answer                   |
|               | to it (with the searches' scopes' extraction, once)     |                               |
| tenk_answer   | every company's evaluation is in                        | (as after tenk_evaluate)      |
| tenk_answer   | answers only (a job saved before the chains)            | tenk_evaluate                 |
| tenk_evaluate | a company below the quality bar, rounds and time left   | tenk_plan (next round)        |
| tenk_evaluate | otherwise                                               | (search done at once)         |
| search        | no evidence at all                                      | done (completed, no evidence) |
| search        | an answer exists, out of time                           | done (previous answer kept)   |
| search        | an answer exists, nothing new found                     | decide (previous evaluation)  |
| search        | otherwise                                               | extract: the answer round     |
| extract       | always (over-budget evidence -> working memory)         | (as after compose)            |
| extract       | extractions only (a job saved before the answer round)  | compose                       |
| compose       | composing failed, no earlier answer                     | done (failed, findings kept)  |
| compose       | composing failed, an earlier answer                     | done (earlier answer kept)    |
| compose       | out of time (the round's evaluations did not run)       | done (completed)              |
| compose       | the round's evaluations are in                          | (as after evaluate)           |
| compose       | otherwise (a job saved before the answer round)         | evaluate (one call per scope) |
| evaluate      | every evaluation failed                                 | done (unevaluated answer)     |
| evaluate      | otherwise (per-scope and whole-answer grades merged)    | decide                        |
| decide        | search round (execution phase)                          | tenk_plan or search (it + 1)  |
| decide        | re-route (planning phase), widening the search          | tenk_plan or search (it + 1)  |
| decide        | refinement round (no search) that can change the answer | extract: answer round (it + 1)|
| decide        | stop (limit, threshold, sufficiency, nothing to try)    | done (completed)              |
| any           | a cancel was requested                                  | done (cancelled, answer kept) |

The answer round is one dispatch in three waves (models.steps.call_waves): every scope's extraction, then the compose,
then one evaluation per scope (and one of the whole answer when it spans several periods or companies), each wave
starting when the one before it has finished, with no coordinator step in between. The step after it
(`after_extract`) runs the three rows' logic in order: extract, compose, evaluate.
"""
from __future__ import annotations

from collections.abc import Callable

from agent.models.job import IterationRecord, JobResult, JobState, StepEvent, TimedStage
from agent.models.research import Evaluation, SearchPlan
from agent.models.steps import (
    NOT_EVALUATED,
    OUT_OF_TIME,
    WHOLE_ANSWER,
    ComposeCall,
    ComposeOutput,
    EvaluateCall,
    EvaluateOutput,
    ExtractCall,
    ExtractOutput,
    FailedOutput,
    JobStep,
    NewsCall,
    PlanCall,
    PlanOutput,
    SearchCall,
    Stage,
    StepKey,
    StepOutput,
    TaskCall,
)
from agent.pipeline import router, tenk_stages
from agent.pipeline.budget import limits_for, out_of_time
from agent.pipeline.decision import decide, grades_of, merge_evaluations, spans_several
from agent.pipeline.inputs import StepInput, StepOutcome
from agent.pipeline.news_stage import collect_news
from agent.pipeline.result import build_result, rejected_result
from agent.pipeline.scopes import evaluation_scopes
from agent.pipeline.search_plan import default_queries, plan_search, search_specs
from agent.pipeline.stage_context import RoundEnd
from agent.pipeline.working_memory import context_use, working_memory
from agent.settings import Settings
from finagent.models.job_result import Grades


class Step:
    """One coordinator step. Works on a copy of the state; `run()` returns it in the outcome. The stage modules
    (tenk_stages, news_stage) are handed it as their `StageContext`."""

    def __init__(self, state: JobState, inp: StepInput, settings: Settings):
        self.state = state.model_copy(deep=True)
        self.inp, self.settings, self.now = inp, settings, inp.now
        self.events: list[StepEvent] = []

    def emit(self, type: str, message: str = "", **data) -> None:
        self.events.append(StepEvent(type=type, message=message, data=data))

    def stage_time(self, stage: TimedStage, at: float | None = None) -> None:
        self.state.timing.add(stage, self.now if at is None else at)

    def dispatch(self, stage: Stage, calls: list[TaskCall]) -> StepOutcome:
        self.state.timing.stage_started = self.now
        return StepOutcome(state=self.state, step=JobStep(iteration=self.state.iteration, stage=stage), calls=calls,
                           events=self.events)

    def read(self, stage: Stage, round: int | None = None, charged: list[str] | None = None) -> dict[StepKey, StepOutput]:
        """The outputs of `stage` in this iteration; their token usage joins the job's, except the outputs of the
        `charged` parts (scopes), whose usage joined it when they were first read."""
        outputs = self.inp.outputs.of(self.state.iteration, stage, round)
        st = self.state
        for key, out in outputs.items():
            if charged and key.part in charged:
                continue
            u = out.usage
            if u.cached:
                st.cache_hits += 1
                continue
            st.tokens["prompt"] = st.tokens.get("prompt", 0) + u.prompt
            st.tokens["completion"] = st.tokens.get("completion", 0) + u.completion
            st.cost_usd += self.settings.cost_usd(u.model, u.prompt, u.completion)
        return outputs

    def _result(self, status: str, error: str | None = None, note: str | None = None, error_class: str | None = None) -> JobResult:
        return build_result(self.inp.job_id, self.state, self.inp.evidence, self.inp.provider, status, self.now,
                            error=error, note=note, error_class=error_class)

    def run(self) -> StepOutcome:
        after: dict[object, Callable[[], StepOutcome]] = {
            "start": self.after_start, Stage.plan: self.after_plan, Stage.search: self.after_search,
            Stage.extract: self.after_extract, Stage.compose: self.after_compose, Stage.evaluate: self.after_evaluate,
            Stage.tenk_plan: lambda: tenk_stages.after_tenk_plan(self),
            Stage.tenk_retrieve: lambda: tenk_stages.after_tenk_retrieve(self),
            Stage.tenk_answer: lambda: tenk_stages.after_tenk_answer(self),
            Stage.tenk_evaluate: lambda: tenk_stages.after_tenk_evaluate(self),
        }
        if self.inp.cancel_requested:
            return self.cancel()
        return after[self.inp.done.stage]()

    def cancel(self) -> StepOutcome:
        """A caller cancelled the job: it ends now, keeping whatever answer it has so far."""
        if self.inp.done.stage == Stage.extract:  # the answer round's calls that ran before the cancel are paid for
            self.read(Stage.extract, charged=self.state.extracted_early)
            self.read(Stage.evaluate)
        if self.inp.done.stage in (Stage.extract, Stage.compose):  # an answer composed just before the cancel is kept too
            out = next(iter(self.read(Stage.compose).values()), None)
            if isinstance(out, ComposeOutput):
                self.state.answer = out.answer
        self.state.termination_reason = "cancelled by request" + (
            f" during iteration {self.state.iteration}; the answer so far is kept" if self.state.answer else " before any answer")
        self.state.trace(self.state.termination_reason)
        return self._finish("cancelled", self._result("cancelled", note="Cancelled before an answer was composed."))

    # ----- the answer loop -----
    def after_start(self) -> StepOutcome:
        self.state.started_at = self.now
        self.emit("job_status", "running", status="running")
        return self.dispatch(Stage.plan, [PlanCall()])

    def after_plan(self) -> StepOutcome:
        self.stage_time("reasoning")
        out = next(iter(self.read(Stage.plan).values()), None) or FailedOutput(error="the planner produced no output")
        if not isinstance(out, PlanOutput):
            assert isinstance(out, FailedOutput)
            reason = f"The planner failed ({out.error_class or 'unknown'} error): {out.error}"
            self.emit("error", reason, step="plan", error_class=out.error_class)
            return self._finish("failed", self._result("failed", error=reason, error_class=out.error_class or "unknown"))
        plan = out.plan
        if plan.is_valid and not plan.search_queries:  # a plan without search phrases would search nothing
            plan = plan.model_copy(update={"search_queries": default_queries(plan, self.state.request.question)})
            self.state.trace("the plan has no search phrases; searching for: " + "; ".join(plan.search_queries))
        self.state.plan = plan
        if out.corrected:
            self.state.trace("planner asked to correct its parameters: " + "; ".join(out.corrected))
        self.state.trace(f"plan: {plan.reasoning}")
        if not plan.is_valid:
            self.emit("planning", plan.invalid_reason or "question rejected", is_valid=False, reason=plan.invalid_reason)
            return self._finish("rejected", rejected_result(self.inp.job_id, self.state, self.inp.provider,
                                                            plan.invalid_reason or "invalid question"))
        self.state.limits = limits_for(self.settings, self.state, plan)
        self.state.phase_iterations["planning"] += 1
        requested = self.state.request.strategy
        router.record(self.state, router.initial_strategy(plan, requested), plan.confidence,
                      plan.reasoning if requested == "auto" else f"{requested}, as the request asks")
        self.state.search_plan = plan_search(plan, self.inp.availability, self.state.strategy, requested=requested != "auto")
        sp = self.state.search_plan
        self.emit("planning", f"Plan: {plan.topic or plan.intent} for {', '.join(plan.tickers)}",
                  reasoning=plan.reasoning, tickers=plan.tickers, time_refs=plan.time_refs, question_type=plan.question_type,
                  answer_mode=plan.answer_mode.value, data_sources=plan.data_sources, queries=sp.queries,
                  periods={tp.ticker: tp.periods for tp in sp.transcripts}, tenk={tp.ticker: tp.periods for tp in sp.tenk},
                  problems=sp.problems, limits=self.state.limits.model_dump(), strategy=self.state.strategy)
        self.state.phase = "execution"
        if not sp.transcripts and not sp.tenk and not plan.uses_news:
            reason = "; ".join(sp.problems) or "nothing to search for this question"
            return self._finish("failed", self._result("failed", error=reason, error_class="no_data"))
        return self._start_iteration(sp.queries, news_query=self._first_news_query() if plan.uses_news else None)

    def _first_news_query(self) -> str:
        """The companies by name (and ticker) and the topic: 'Acme Corp (ACME) pricing'."""
        plan = self.state.plan
        assert plan is not None
        names = self.inp.availability.names
        companies = [f"{names[t]} ({t})" if t in names else t for t in plan.tickers]
        return " ".join([*companies, plan.topic or plan.intent]).strip()

    def _start_iteration(self, keywords: list[str], news_query: str | None = None,
                         missing_info: list[str] | None = None) -> StepOutcome:
        """A search-and-answer round (execution phase): transcript searches for the phrases, the news query,
        and the 10-K agent when the search plan has 10-K targets, all dispatched together."""
        st = self.state
        assert st.limits is not None
        st.iteration += 1
        st.phase = "execution"
        st.phase_iterations["execution"] += 1
        st.pending_keywords = keywords
        st.pending_news_query = news_query
        st.revision_notes = []
        st.extracted_early = []
        self.emit("iteration_start", f"Iteration {st.iteration}", iteration=st.iteration,
                  max_iterations=st.limits.max_iterations_effective, phase=st.phase, strategy=st.strategy)
        if st.iteration > 1 and (keywords or news_query):
            self.emit("iteration_followup", "Searching for: " + ", ".join(keywords + ([news_query] if news_query else [])),
                      keywords=keywords, news_query=news_query)
        if tenk_stages.has_targets(self):
            return tenk_stages.start_tenk(self, missing_info or [])
        searches = self.search_calls()
        if not searches:  # nothing left to search: answer from the evidence so far
            return self.after_search()
        return self.dispatch(Stage.search, searches)

    def search_calls(self) -> list[TaskCall]:
        st = self.state
        assert st.search_plan is not None
        calls: list[TaskCall] = [SearchCall(n=n, spec=spec)
                                 for n, spec in enumerate(search_specs(st.search_plan, st.pending_keywords))]
        if st.pending_news_query:
            calls.append(NewsCall(query=st.pending_news_query))
        return calls

    def _start_refinement(self, notes: list[str]) -> StepOutcome:
        """A refinement round: no new search; the answer is reworked from all the evidence gathered, with
        what the evaluation found wanting."""
        st = self.state
        assert st.limits is not None
        st.iteration += 1
        st.phase = "refinement"
        st.phase_iterations["refinement"] += 1
        st.pending_keywords, st.pending_news_query = [], None
        st.revision_notes = notes
        st.extracted_early = []  # this round extracts every scope itself
        self.emit("iteration_start", f"Iteration {st.iteration} (refinement)", iteration=st.iteration,
                  max_iterations=st.limits.max_iterations_effective, phase=st.phase, strategy=st.strategy)
        return self._answer_round([ExtractCall(scope=s) for s in self.inp.evidence.scopes])

    def after_search(self) -> StepOutcome:
        self.stage_time("retrieval")
        collect_news(self)
        ev = self.inp.evidence
        added, total = ev.added(self.state.iteration), ev.total
        if self.state.iteration == 1:
            self.emit("search", f"Found {added} chunks", chunks=added)
        else:
            self.emit("iteration_search", f"Found {added} new chunks", chunks_added=added, chunks_total=total)
        ends = self.search_round_ends()
        if ends == "no_evidence":
            return self._finish("completed", self._result(
                "completed", note="No evidence was found in the ingested sources for this question."))
        if ends == "out_of_time":
            return self._keep_previous_answer("max_duration_seconds ran out")
        if ends == "nothing_new":
            # an empty round keeps the previous working set: nothing new to regenerate from, so the previous
            # answer and its evaluation stand, and the loop decides again from them
            last = self.state.iterations[-1]
            return self._conclude(last.evaluation, "follow-up search found nothing new; ", grades=last.grades)
        # the scopes extracted beside the 10-K answers are not extracted again
        return self._answer_round([ExtractCall(scope=s) for s in ev.scopes if s not in self.state.extracted_early])

    def _answer_round(self, extracts: list[TaskCall]) -> StepOutcome:
        """The round's extractions, then its compose, then one evaluation per scope, sent at once as waves
        (models.steps.call_waves): the compose starts when the last extraction ends and the evaluations when the compose
        does, with no coordinator step in between. The step after the round reads all three. An evaluation runs only on
        a composed answer and with time left (agent.work.calls.do_evaluate); otherwise it stores why it did not, and
        this step ends the job as it would have between compose and evaluation."""
        return self.dispatch(Stage.extract, [*extracts, ComposeCall(), *self.evaluate_calls()])

    def evaluate_calls(self) -> list[EvaluateCall]:
        """One evaluation per scope and, when the answer spans several periods or companies, one of the whole answer
        (pipeline.decision: how they combine into the confidence)."""
        scopes = evaluation_scopes(self.state, self.inp.evidence.scopes)
        if spans_several(self.state, self.inp.evidence.scopes):
            scopes = [*scopes, WHOLE_ANSWER]
        return [EvaluateCall(scope=s) for s in scopes]

    def search_round_ends(self) -> RoundEnd | None:
        """Why the iteration's searches lead to no extraction, from what they found so far; None: they lead to it."""
        st, ev = self.state, self.inp.evidence
        if ev.total == 0:
            return "no_evidence"
        if st.answer is not None and out_of_time(st, self.now):
            return "out_of_time"
        if st.answer is not None and ev.added(st.iteration) == 0:
            return "nothing_new"
        return None

    def _keep_previous_answer(self, reason: str) -> StepOutcome:
        last = self.state.iterations[-1]
        self.emit("agent_decision", f"Keeping the previous answer: {reason}", confidence=last.confidence, issues=[],
                  will_iterate=False)
        self.emit("iteration_complete", "", iteration=self.state.iteration, confidence=last.confidence, will_continue=False)
        self.state.termination_reason = reason
        return self._finish("completed", self._result("completed"))

    def after_extract(self) -> StepOutcome:
        """What went over the budget is folded into the job's working memory (the composer, chained behind the
        extractions, folded it the same way); then the round's compose and evaluations are read. A job saved before
        they were chained to the extractions composes now."""
        st = self.state
        composed = any(isinstance(c, ComposeCall) for c in st.inflight)
        if not composed:
            self.stage_time("generation")
        # the scopes extracted beside the 10-K answers were paid for when that chord came in
        outs = [o for o in self.read(Stage.extract, charged=st.extracted_early).values() if isinstance(o, ExtractOutput)]
        st.context, st.working_memory = context_use(outs), working_memory(outs)
        if composed:
            return self.after_compose()
        return self.dispatch(Stage.compose, [ComposeCall()])

    def after_compose(self) -> StepOutcome:
        out = next(iter(self.read(Stage.compose).values()), None) or FailedOutput(error="the composer produced no output")
        evaluated = any(isinstance(c, EvaluateCall) for c in self.state.inflight)  # in the same round (_answer_round)
        composed_at = out.finished_at if evaluated and isinstance(out, ComposeOutput) else None
        self.stage_time("generation", composed_at)
        if not isinstance(out, ComposeOutput):
            assert isinstance(out, FailedOutput)
            reason = f"answer generation failed ({out.error_class} error): {out.error}"
            self.emit("error", reason, step="compose", error_class=out.error_class)
            if self.state.answer is None:
                self.state.answer = self.inp.partial_answer  # the cited findings, if extraction found any
                return self._finish("failed", self._result("failed", error=reason, error_class=out.error_class or "unknown"))
            self.state.termination_reason = reason + "; kept the previous answer"
            return self._finish("completed", self._result("completed"))
        previous, self.state.answer = self.state.answer, out.answer
        unchanged = self.state.phase == "refinement" and previous is not None and previous.text == out.answer.text
        if self._out_of_time_after_compose(evaluated):
            self.state.termination_reason = "max_duration_seconds ran out"
            return self._finish("completed", self._result("completed"))
        if evaluated:
            self.state.timing.stage_started = composed_at  # the evaluations' time starts where the compose ended
            return self.after_evaluate(unchanged)
        return self.dispatch(Stage.evaluate, list(self.evaluate_calls()))

    def _out_of_time_after_compose(self, evaluated: bool) -> bool:
        """Whether the job's time had run out when its answer was composed: with the evaluations in the same round,
        they judged it when they started, and none ran."""
        if not evaluated:
            return out_of_time(self.state, self.now)
        outs = self.inp.outputs.of(self.state.iteration, Stage.evaluate).values()
        return bool(outs) and all(isinstance(o, FailedOutput) and o.error_class == OUT_OF_TIME for o in outs)

    def after_evaluate(self, unchanged: bool = False) -> StepOutcome:
        """`unchanged`: the round was a refinement that returned the answer it was given."""
        self.stage_time("evaluation")
        st = self.state
        assert st.limits is not None
        outs = self.read(Stage.evaluate)
        for key, o in outs.items():
            if isinstance(o, FailedOutput) and o.error_class not in NOT_EVALUATED:
                self.emit("error", f"evaluation {key} failed: {o.error}", step="evaluate", error_class=o.error_class)
        parts = {key.part: o.evaluation for key, o in outs.items() if isinstance(o, EvaluateOutput)}
        whole = parts.pop(WHOLE_ANSWER, None)
        if not parts and whole is None:
            st.termination_reason = "every evaluation failed; returning the unevaluated answer"
            return self._finish("completed", self._result("completed"))
        return self._conclude(merge_evaluations(list(parts.values()), whole), grades=grades_of(parts, whole),
                              unchanged=unchanged)

    def _conclude(self, evaluation: Evaluation, note: str = "", grades: Grades | None = None,
                  unchanged: bool = False) -> StepOutcome:
        """Record the iteration and act on the decision: a search round, a refinement round, a re-route, or the end."""
        st = self.state
        alternative, widened = self._reroute_candidate()
        decision = decide(st, evaluation, self.now, self.settings, reroute=alternative,
                          refine_blocked=self._refine_blocked(unchanged))
        total, added = self.inp.evidence.total, self.inp.evidence.added(st.iteration)
        conf = evaluation.overall_confidence
        st.iterations.append(IterationRecord(
            iteration=st.iteration, confidence=conf, evaluation=evaluation, chunks_total=total, chunks_added=added,
            keywords=st.pending_keywords, will_iterate=decision.will_iterate, reason=note + decision.reason, grades=grades))
        st.trace(f"iteration {st.iteration}: confidence {conf:.2f}; {note}{decision.reason}")
        summary = "; ".join(evaluation.missing_info[:2] or evaluation.issues[:2])
        kept = "Keeping the previous answer: nothing new was found. " if note else ""
        self.emit("agent_decision", kept + f"Answer quality: {conf:.0%}." + (f" Missing: {summary}." if summary else ""),
                  confidence=conf, issues=evaluation.issues, missing_info=evaluation.missing_info,
                  will_iterate=decision.will_iterate, action=decision.action, reason=decision.reason,
                  scores={k: getattr(evaluation, f"{k}_score") for k in ("completeness", "specificity", "accuracy", "clarity")})
        self.emit("iteration_complete", "", iteration=st.iteration, confidence=conf, will_continue=decision.will_iterate)
        if decision.action == "search":
            return self._start_iteration(decision.keywords, decision.news_query, evaluation.missing_info)
        if decision.action == "refine":
            return self._start_refinement(list(dict.fromkeys(evaluation.missing_info + evaluation.issues))[:8])
        if decision.action == "reroute":
            assert alternative is not None and widened is not None
            return self._reroute(alternative, widened, conf, decision.keywords, evaluation.missing_info)
        st.termination_reason = note + decision.reason
        return self._finish("completed", self._result("completed"))

    def _refine_blocked(self, unchanged: bool) -> str | None:
        """Why a refinement round could not change the answer (None: it could). Without new evidence only a provider
        that reworks an answer from the evaluation's feedback can change it; a refinement that returned the answer it
        was given would return it again."""
        if not self.inp.provider_revises:
            return "the answer cannot change without new evidence"
        if unchanged:
            return "the last refinement round left the answer unchanged"
        return None

    def _reroute_candidate(self) -> tuple[str | None, SearchPlan | None]:
        """The strategy a re-route would take, with its search plan; a re-route must widen the search."""
        st = self.state
        assert st.plan is not None and st.search_plan is not None
        tried = {r.agent_name for r in st.routing_history}
        for candidate in router.alternatives(st.strategy):
            if candidate in tried:
                continue
            plan = plan_search(st.plan, self.inp.availability, candidate, current=st.search_plan)
            if router.widens(st.search_plan, plan):
                return candidate, plan
        return None, None

    def _reroute(self, alternative: str, search_plan: SearchPlan, confidence: float, keywords: list[str],
                 missing_info: list[str]) -> StepOutcome:
        """A re-plan (planning phase) through another strategy, searching for what the evaluation found missing."""
        st, s = self.state, self.settings
        assert st.plan is not None
        previous = st.strategy
        st.router_retries += 1
        st.phase_iterations["planning"] += 1
        router.record(st, alternative, confidence,
                      f"Re-routed: confidence {confidence:.0%} < {s.router_retry_below:.0%} with {previous}")
        st.search_plan = search_plan
        self.emit("planning", f"Low confidence ({confidence:.0%}): re-routing from {previous} to {alternative}",
                  strategy=alternative, previous_strategy=previous, queries=keywords or st.plan.search_queries,
                  periods={tp.ticker: tp.periods for tp in search_plan.transcripts},
                  tenk={tp.ticker: tp.periods for tp in search_plan.tenk})
        return self._start_iteration(keywords or st.plan.search_queries, missing_info=missing_info)

    def _finish(self, status: str, result: JobResult) -> StepOutcome:
        self.state.timing.stage_started = None
        self.emit("result", result.answer[:200], result=result.model_dump(mode="json"))
        self.emit("job_status", status, status=status)
        return StepOutcome(state=self.state, status=status, step=JobStep(stage="done"), events=self.events, result=result)


def step(state: JobState, inp: StepInput, settings: Settings) -> StepOutcome:
    """One transition of the job's state machine (see the table above)."""
    return Step(state, inp, settings).run()
