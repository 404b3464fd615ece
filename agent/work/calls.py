"""The work of each research fan-out call: load what it needs, call the provider or the search, store
its typed output under the call's key. Every function has the signature (ctx, job_id, iteration, call)."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from agent.context import Context
from agent.models.job import JobState
from agent.models.research import Answer
from agent.models.steps import (
    NO_ANSWER,
    OUT_OF_TIME,
    ComposeCall,
    ComposeOutput,
    EvaluateCall,
    EvaluateOutput,
    ExtractCall,
    ExtractOutput,
    FailedOutput,
    NewsCall,
    NewsOutput,
    PlanCall,
    PlanOutput,
    SearchCall,
    SearchOutput,
    Stage,
    StepOutputs,
)
from agent.persistence import jobstore
from agent.persistence.ledger import record_call
from agent.pipeline.budget import budget_note, out_of_time
from agent.pipeline.scopes import group_by_scope
from agent.pipeline.working_memory import working_memory
from agent.work.answering import assign_markers, findings_from_answer, partial_answer, run_compose, run_evaluate, run_extract
from agent.work.merging import Merged, merge_adjacent
from agent.work.planning import run_planner
from agent.work.search import run_search_spec
from agent.work.tenk_calls import latest_computations, latest_tenk_answer


def do_plan(ctx: Context, job_id: str, iteration: int, call: PlanCall) -> None:
    state = jobstore.load_state(ctx.pool, job_id)
    key = call.output_key(iteration)
    with record_call(ctx.pool, job_id, str(key), "llm.plan", {"provider": ctx.llm.name}) as rec:
        plan, usage, corrected = run_planner(ctx, ctx.llm, state)
        rec.result_size = len(plan.search_queries)
        rec.use(usage, ctx.settings)
        rec.store_with(jobstore.output_writer(job_id, key, PlanOutput(plan=plan, usage=usage, corrected=corrected)))


def do_search(ctx: Context, job_id: str, iteration: int, call: SearchCall) -> int:
    key = call.output_key(iteration)
    with record_call(ctx.pool, job_id, str(key), "transcript_search", call.spec.model_dump()) as rec:
        added = run_search_spec(ctx, job_id, iteration, call.spec, ctx.settings.top_k_per_quarter)
        rec.result_size = added
        rec.store_with(jobstore.output_writer(job_id, key, SearchOutput(added=added)))
    return added


def generation_inputs(ctx: Context, job_id: str) -> tuple[JobState, Merged]:
    state, merged, _ = generation_inputs_with(ctx, job_id)
    return state, merged


def generation_inputs_with(ctx: Context, job_id: str, outputs_prefix: str | None = None
                           ) -> tuple[JobState, Merged, StepOutputs]:
    """The job's state and its evidence as generation sees it (adjacent chunks of one turn merged into one passage),
    read together, with the step outputs under `outputs_prefix` (what the wave before the call stored) in the same
    round trip.

    A fan-out's generation calls (one extract or evaluate per scope) reach a worker's threads at once and each reads the
    same state and evidence: calls of one job that ask while another's read is under way share that read instead of
    parsing it again beside it under the GIL. The state and the evidence objects are shared: generation only reads
    them (only the coordinator changes a job's state); each caller gets its own containers of the merged evidence. A
    read that started a moment before a caller asked is one that caller could have made itself: no stage reads
    evidence its own fan-out is still adding, and a job's state changes only between its fan-outs.

    What was parsed is kept by the version it was read at (`jobstore.generation_rows`): the answer round's compose and
    evaluations read what its extractions read, in the same process, and neither receive nor parse any of it again on
    the way from one wave of the round to the next."""

    def read() -> tuple[JobState, Merged, StepOutputs]:
        rows = jobstore.generation_rows(ctx.pool, job_id, outputs_prefix, held_version=_generation_kept.version(job_id))
        kept = _generation_kept.get(job_id, rows.version)
        if kept is None:
            if rows.state is None:  # what this process held at that version was let go in between: read it all
                rows = jobstore.generation_rows(ctx.pool, job_id, outputs_prefix)
            kept = JobState.model_validate_json(rows.state or ""), merge_adjacent(jobstore.parse_evidence(rows.evidence))
            _generation_kept.put(job_id, rows.version, kept)
        return kept[0], kept[1], StepOutputs.from_rows(rows.outputs)

    state, shared, outputs = _generation_reads.read(f"{job_id}|{outputs_prefix or ''}", read)
    merged = shared.model_copy(update={"evidence": list(shared.evidence), "merged": dict(shared.merged),
                                       "chars_saved": dict(shared.chars_saved)})
    return state, merged, outputs


class KeptReads:
    """The latest read of each of the last `size` jobs, by version: a read is reused only at the version it was made."""

    def __init__(self, size: int = 32) -> None:
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[str, Any]] = OrderedDict()
        self.size = size

    def version(self, key: str) -> str | None:
        with self._lock:
            kept = self._kept.get(key)
            return kept[0] if kept is not None else None

    def get(self, key: str, version: str) -> Any:
        with self._lock:
            kept = self._kept.get(key)
            if kept is None or kept[0] != version:
                return None
            self._kept.move_to_end(key)
            return kept[1]

    def put(self, key: str, version: str, value: Any) -> None:
        with self._lock:
            self._kept[key] = (version, value)
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)


class _Flight:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.failed = False


class SharedReads:
    """Concurrent reads under one key share the first caller's: the others wait for its result (and read for
    themselves if it failed). Nothing is kept once the read is done: a later caller reads again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}

    def read(self, key: str, read: Callable[[], Any]) -> Any:
        with self._lock:
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
        if not leader:
            while not flight.done.wait(0.25):  # in slices: a soft time limit raised in this thread still lands
                pass
            return read() if flight.failed else flight.value
        try:
            flight.value = read()
            return flight.value
        except BaseException:
            flight.failed = True
            raise
        finally:
            with self._lock:
                del self._flights[key]
            flight.done.set()


_generation_reads = SharedReads()
_generation_kept = KeptReads()


def do_extract(ctx: Context, job_id: str, iteration: int, call: ExtractCall) -> None:
    state, merged = generation_inputs(ctx, job_id)
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
        rec.store_with(jobstore.output_writer(job_id, key, ExtractOutput(
            findings=findings, usage=usage, verbatim=len(packed.kept), summarised=packed.summarised, summary=packed.summary,
            merged=merged.merged.get(scope, 0), tokens_saved=merged.tokens_saved(scope))))


def _extractions_prefix(iteration: int) -> str:
    return f"{iteration}:{Stage.extract.value}:"


def _extractions(outputs: StepOutputs, iteration: int) -> list[ExtractOutput]:
    return [o for o in outputs.of(iteration, Stage.extract).values() if isinstance(o, ExtractOutput)]


def load_partial_answer(ctx: Context, job_id: str, iteration: int) -> Answer | None:
    """What the job can still say when composing failed for good: the iteration's cited findings."""
    _, merged, outputs = generation_inputs_with(ctx, job_id, _extractions_prefix(iteration))
    findings = [o.findings for o in _extractions(outputs, iteration)]
    return partial_answer(findings, merged.evidence, assign_markers(merged.evidence))


def do_compose(ctx: Context, job_id: str, iteration: int, call: ComposeCall) -> None:
    state, merged, outputs = generation_inputs_with(ctx, job_id, _extractions_prefix(iteration))
    evidence = merged.evidence
    extracted = _extractions(outputs, iteration)
    findings = [o.findings for o in extracted]
    # the working memory the coordinator records from the same outputs after the round: it has not run in between
    state = state.model_copy(update={"working_memory": working_memory(extracted)})
    key = call.output_key(iteration)
    with record_call(ctx.pool, job_id, str(key), "llm.compose", {"scopes": len(findings), "provider": ctx.llm.name}) as rec:
        computed = [c for cs in latest_computations(ctx.pool, job_id).values() for c in cs]
        answer, usage = run_compose(ctx.llm, state, findings, evidence, assign_markers(evidence), budget_note(state), computed)
        rec.result_size = len(answer.text)
        rec.use(usage, ctx.settings)
        rec.store_with(jobstore.output_writer(job_id, key, ComposeOutput(answer=answer, usage=usage, finished_at=time.time())))


def do_evaluate(ctx: Context, job_id: str, iteration: int, call: EvaluateCall) -> None:
    """Evaluate the answer the round composed (the job's state holds the previous round's until the coordinator's
    next step). No answer, or no time left when it came: store why, and make no call."""
    state, merged, outputs = generation_inputs_with(ctx, job_id, str(ComposeCall().output_key(iteration)))
    composed = outputs.one(iteration, Stage.compose)
    evidence = merged.evidence
    key = call.output_key(iteration)
    if not isinstance(composed, ComposeOutput) or out_of_time(state, time.time()):
        why = (OUT_OF_TIME, "the job's time ran out before the evaluation") if isinstance(composed, ComposeOutput) \
            else (NO_ANSWER, "no answer was composed to evaluate")
        jobstore.put_output(ctx.pool, job_id, key, FailedOutput(error_class=why[0], error=why[1]))
        return
    state = state.model_copy(update={"answer": composed.answer})
    with record_call(ctx.pool, job_id, str(key), "llm.evaluate", {"scope": call.scope, "provider": ctx.llm.name}) as rec:
        evaluation, usage = run_evaluate(ctx.llm, state, call.scope, evidence, assign_markers(evidence), budget_note(state),
                                         latest_computations(ctx.pool, job_id))
        rec.use(usage, ctx.settings)
        rec.store_with(jobstore.output_writer(job_id, key, EvaluateOutput(evaluation=evaluation, usage=usage)))


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
