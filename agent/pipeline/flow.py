"""The coordinator's state machine: given a job whose in-flight stage just finished, do exactly one
step (read the stage's outputs, update the state, emit events) and say what to fan out next.

No Celery here: `tasks.coordinator.advance` turns the returned TaskCalls into chords.
"""
from __future__ import annotations

import time
from agent.context import Context
from agent.pipeline import jobstore
from agent.pipeline.answering import evaluation_scopes, group_by_scope
from agent.pipeline.budget import limits_for, out_of_time
from agent.pipeline import router
from agent.pipeline.decision import decide, merge_evaluations
from agent.pipeline.flow_news import NewsStage
from agent.pipeline.flow_tenk import TenKStages
from agent.pipeline.outcome import StepOutcome, TaskCall
from agent.pipeline.models import Answer, Evaluation, IterationRecord, JobResult, ResearchPlan
from agent.pipeline.planning import plan_search
from agent.pipeline.result import build_result, rejected_result
from agent.pipeline.retrieval import search_specs

class Step(TenKStages, NewsStage):
    """One coordinator step over a locked job row."""

    def __init__(self, ctx: Context, job: jobstore.JobRow, provider_name: str):
        self.ctx, self.job, self.state = ctx, job, job.state
        self.provider = provider_name
        self.events: list[tuple[str, str, dict]] = []

    def emit(self, type: str, message: str = "", **data) -> None:
        self.events.append((type, message, data))

    def _stage_time(self, stage: str) -> None:
        now = time.time()
        started = self.state.timing.pop("_stage_started", now)
        self.state.timing[stage] = round(self.state.timing.get(stage, 0.0) + now - started, 3)

    def _dispatch(self, step: str, calls: list[TaskCall]) -> StepOutcome:
        self.state.timing["_stage_started"] = time.time()
        return StepOutcome(step=f"{self.state.iteration}:{step}", calls=calls, events=self.events)

    def _outputs(self, prefix: str) -> dict[str, dict]:
        outputs = jobstore.get_outputs(self.ctx.pool, self.job.id, prefix)
        for out in outputs.values():
            for k, v in (out.get("usage") or {}).items():
                self.state.tokens[k] = self.state.tokens.get(k, 0) + v
        return outputs

    # ----- stages -----
    def run(self) -> StepOutcome:
        stage = self.job.step.split(":")[-1]
        return getattr(self, f"after_{stage}")()

    def after_start(self) -> StepOutcome:
        self.state.started_at = time.time()
        self.emit("job_status", "running", status="running")
        return self._dispatch("plan", [TaskCall(task="plan")])

    def after_plan(self) -> StepOutcome:
        self._stage_time("reasoning")
        out = self._outputs("0:plan").get("0:plan") or {"error": "the planner produced no output"}
        if "error" in out:
            reason = f"The planner failed ({out.get('error_class', 'unknown')} error): {out['error']}"
            self.emit("error", reason, step="plan", error_class=out.get("error_class"))
            return self._finish("failed", build_result(self.ctx, self.job, self.provider, "failed", error=reason))
        plan = ResearchPlan.model_validate(out["plan"])
        self.state.plan = plan
        self.state.trace(f"plan: {plan.reasoning}")
        if not plan.is_valid:
            self.emit("planning", plan.invalid_reason or "question rejected", is_valid=False, reason=plan.invalid_reason)
            return self._finish("rejected", rejected_result(self.job, self.provider, plan.invalid_reason or "invalid question"))
        self.state.limits = limits_for(self.ctx.settings, self.state, plan)
        self.state.phase_iterations["planning"] += 1
        router.record(self.state, router.initial_strategy(plan), plan.confidence, plan.reasoning)
        self.state.search_plan = plan_search(self.ctx, plan, self.state.strategy)
        sp = self.state.search_plan
        self.emit("planning", f"Plan: {plan.topic or plan.intent} for {', '.join(plan.tickers)}",
                  reasoning=plan.reasoning, tickers=plan.tickers, time_refs=plan.time_refs, question_type=plan.question_type,
                  answer_mode=plan.answer_mode.value, data_sources=plan.data_sources, queries=sp.queries,
                  periods={tp.ticker: tp.periods for tp in sp.transcripts}, tenk={tp.ticker: tp.periods for tp in sp.tenk},
                  problems=sp.problems, limits=self.state.limits.model_dump(), strategy=self.state.strategy)
        self.state.phase = "execution"
        if not sp.transcripts and not sp.tenk and not plan.needs_latest_news:
            reason = "; ".join(sp.problems) or "nothing to search for this question"
            return self._finish("failed", build_result(self.ctx, self.job, self.provider, "failed", error=reason))
        return self._start_iteration(sp.queries, news_query=plan.topic if plan.needs_latest_news else None)

    def _start_iteration(self, keywords: list[str], news_query: str | None = None) -> StepOutcome:
        st = self.state
        st.iteration += 1
        st.phase_iterations[st.phase] += 1
        st.pending_keywords = keywords
        st.pending_news_query = news_query
        self.emit("iteration_start", f"Iteration {st.iteration}", iteration=st.iteration,
                  max_iterations=st.limits.max_iterations, phase=st.phase, strategy=st.strategy)
        if st.iteration > 1 and keywords:
            self.emit("iteration_followup", "Searching for: " + ", ".join(keywords), keywords=keywords,
                      news_query=news_query)
        if self.tenk_pending():
            return self.start_tenk()
        return self._dispatch_search()

    def _dispatch_search(self) -> StepOutcome:
        st = self.state
        calls = [TaskCall(task="search", args={"n": n, "spec": spec.model_dump()})
                 for n, spec in enumerate(search_specs(st.search_plan, st.pending_keywords))]
        if st.pending_news_query:
            calls.append(TaskCall(task="news", args={"query": st.pending_news_query}))
        if not calls:  # nothing left to search (e.g. a 10-K-only question): answer from the evidence so far
            return self.after_search()
        return self._dispatch("search", calls)

    def after_search(self) -> StepOutcome:
        self._stage_time("retrieval")
        self.collect_news()
        added = jobstore.count_evidence(self.ctx.pool, self.job.id, self.state.iteration)
        total = jobstore.count_evidence(self.ctx.pool, self.job.id)
        if self.state.iteration == 1:
            self.emit("search", f"Found {added} chunks", chunks=added)
        else:
            self.emit("iteration_search", f"Found {added} new chunks", chunks_added=added, chunks_total=total)
        if total == 0:
            return self._finish("completed", build_result(self.ctx, self.job, self.provider, "completed",
                                                          note="No evidence was found in the ingested sources for this question."))
        if self.state.answer is not None and (added == 0 or out_of_time(self.state)):
            # an empty refinement keeps the previous working set (seed 003): nothing new to regenerate from
            return self._decide_after_noop(added)
        evidence = jobstore.load_evidence(self.ctx.pool, self.job.id)
        scopes = list(group_by_scope(evidence))
        return self._dispatch("extract", [TaskCall(task="extract", args={"scope": s}) for s in scopes])

    def _decide_after_noop(self, added: int) -> StepOutcome:
        reason = "max_duration_seconds ran out" if out_of_time(self.state) else "follow-up search found nothing new"
        last = self.state.iterations[-1]
        self.emit("agent_decision", f"Keeping the previous answer: {reason}", confidence=last.confidence, issues=[], will_iterate=False)
        self.emit("iteration_complete", "", iteration=self.state.iteration, confidence=last.confidence, will_continue=False)
        self.state.termination_reason = reason
        return self._finish("completed", build_result(self.ctx, self.job, self.provider, "completed"))

    def after_extract(self) -> StepOutcome:
        self._stage_time("generation")
        return self._dispatch("compose", [TaskCall(task="compose")])

    def after_compose(self) -> StepOutcome:
        self._stage_time("generation")
        out = self._outputs(f"{self.state.iteration}:compose")[f"{self.state.iteration}:compose"]
        if "error" in out:
            reason = f"answer generation failed ({out.get('error_class')} error): {out['error']}"
            self.emit("error", reason, step="compose", error_class=out.get("error_class"))
            if self.state.answer is None:
                return self._finish("failed", build_result(self.ctx, self.job, self.provider, "failed", error=reason))
            self.state.termination_reason = reason + "; kept the previous answer"
            return self._finish("completed", build_result(self.ctx, self.job, self.provider, "completed"))
        self.state.answer = Answer.model_validate(out["answer"])
        if out_of_time(self.state):
            self.state.termination_reason = "max_duration_seconds ran out"
            return self._finish("completed", build_result(self.ctx, self.job, self.provider, "completed"))
        evidence = jobstore.load_evidence(self.ctx.pool, self.job.id)
        scopes = evaluation_scopes(self.state, evidence)
        return self._dispatch("evaluate", [TaskCall(task="evaluate", args={"scope": s}) for s in scopes])

    def after_evaluate(self) -> StepOutcome:
        self._stage_time("evaluation")
        outs = self._outputs(f"{self.state.iteration}:evaluate:")
        for key, o in outs.items():
            if "error" in o:
                self.emit("error", f"evaluation {key} failed: {o['error']}", step="evaluate", error_class=o.get("error_class"))
        parts = [Evaluation.model_validate(o["evaluation"]) for o in outs.values() if "evaluation" in o]
        if not parts:
            self.state.termination_reason = "every evaluation failed; returning the unevaluated answer"
            return self._finish("completed", build_result(self.ctx, self.job, self.provider, "completed"))
        evaluation = merge_evaluations(parts)
        decision = decide(self.state, evaluation, self.ctx.settings.enable_dynamic_termination)
        total = jobstore.count_evidence(self.ctx.pool, self.job.id)
        added = jobstore.count_evidence(self.ctx.pool, self.job.id, self.state.iteration)
        conf = evaluation.overall_confidence
        self.state.iterations.append(IterationRecord(
            iteration=self.state.iteration, confidence=conf, evaluation=evaluation, chunks_total=total, chunks_added=added,
            keywords=self.state.pending_keywords, will_iterate=decision.will_iterate, reason=decision.reason))
        self.state.trace(f"iteration {self.state.iteration}: confidence {conf:.2f}; {decision.reason}")
        summary = "; ".join(evaluation.missing_info[:2] or evaluation.issues[:2])
        self.emit("agent_decision", f"Answer quality: {conf:.0%}." + (f" Missing: {summary}." if summary else ""),
                  confidence=conf, issues=evaluation.issues, missing_info=evaluation.missing_info,
                  will_iterate=decision.will_iterate, reason=decision.reason,
                  scores={k: getattr(evaluation, f"{k}_score") for k in ("completeness", "specificity", "accuracy", "clarity")})
        self.emit("iteration_complete", "", iteration=self.state.iteration, confidence=conf, will_continue=decision.will_iterate)
        if decision.will_iterate:
            self.state.phase = "refinement"
            return self._start_iteration(decision.keywords, decision.news_query)
        retry = self._router_retry(conf)
        if retry is not None:
            return retry
        self.state.termination_reason = decision.reason
        return self._finish("completed", build_result(self.ctx, self.job, self.provider, "completed"))

    def _router_retry(self, confidence: float) -> StepOutcome | None:
        """Seed 004: below 70% confidence, try a different strategy (at most 2 retries)."""
        st, s = self.state, self.ctx.settings
        if not router.should_retry(st, confidence, s.router_retry_below, s.router_max_retries) or out_of_time(st):
            return None
        if sum(st.phase_iterations.values()) >= st.limits.max_iterations_effective:
            return None
        if st.phase_iterations["planning"] >= st.limits.phase_limits.get("planning", 1) + s.router_max_retries:
            return None
        alternative = router.retry_strategy(st, self.has_10k())
        if alternative is None:
            return None
        previous = st.strategy
        st.router_retries += 1
        st.phase_iterations["planning"] += 1
        router.record(st, alternative, confidence, f"Re-routed: confidence {confidence:.0%} < {s.router_retry_below:.0%} with {previous}")
        st.search_plan = plan_search(self.ctx, st.plan, alternative)
        st.phase = "execution"
        st.tenk.pop("done", None)
        self.emit("planning", f"Low confidence ({confidence:.0%}): re-routing from {previous} to {alternative}",
                  strategy=alternative, previous_strategy=previous, periods={tp.ticker: tp.periods for tp in st.search_plan.transcripts},
                  tenk={tp.ticker: tp.periods for tp in st.search_plan.tenk})
        return self._start_iteration(st.plan.search_queries)

    def _finish(self, status: str, result: JobResult) -> StepOutcome:
        self.state.timing.pop("_stage_started", None)
        self.emit("result", result.answer[:200], result=result.model_dump(mode="json"))
        self.emit("job_status", status, status=status)
        return StepOutcome(status=status, step="done", events=self.events, result=result)


def step(ctx: Context, job: jobstore.JobRow, provider_name: str) -> StepOutcome:
    return Step(ctx, job, provider_name).run()
