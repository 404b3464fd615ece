"""The cited answer (extract findings per scope, then compose them) and the per-scope evaluation."""
from __future__ import annotations

import re
from collections import defaultdict

from pydantic import BaseModel

from agent.models.corpus import Period
from agent.models.financials import Computation
from agent.models.job import JobState
from agent.models.research import Answer, Citation, Evaluation, Evidence, Finding, ScopeFindings, Usage
from agent.models.steps import WHOLE_ANSWER
from agent.pipeline.scopes import group_by_scope, target_periods
from agent.providers.llm.roles import ComposeRequest, EvaluateRequest, ExtractRequest, LLMProvider

_PREFIX = {"transcript": "", "10k": "10K", "10k_table": "10K", "news": "N"}


def assign_markers(evidence: list[Evidence]) -> dict[str, str]:
    """[1].. for transcripts, [10K1].. for 10-K text and tables, [N1].. for news; stable for a given evidence list."""
    counters: dict[str, int] = defaultdict(int)
    markers = {}
    for ev in evidence:
        prefix = _PREFIX[ev.source_type]
        counters[prefix] += 1
        markers[ev.citation_key] = f"[{prefix}{counters[prefix]}]"
    return markers


class Compressed(BaseModel):
    """One scope's evidence under the token budget: what goes in verbatim, and what only through the summary."""

    kept: list[Evidence]
    summarised: list[str] = []  # citation keys
    summary: str | None = None


def compress(evidence: list[Evidence], max_tokens: int, cited: set[str] | frozenset[str] = frozenset()) -> Compressed:
    kept, summary = fit_budget(evidence, max_tokens, cited)
    keys = {e.citation_key for e in kept}
    return Compressed(kept=kept, summarised=[e.citation_key for e in evidence if e.citation_key not in keys], summary=summary)


def fit_budget(evidence: list[Evidence], max_tokens: int,
               cited: set[str] | frozenset[str] = frozenset()) -> tuple[list[Evidence], str | None]:
    """Context compression: keep the passages the current answer cites (`cited`, its working set), then the newest
    and best evidence that fits the mode's token budget (about four characters a token), and fold the older rest
    into a short working-memory summary, naming each passage's period. The cited passages go first because a round's
    new evidence is often weaker: newest-first alone let it push out the passages the answer stood on, and the next
    answer lost the figures it had."""
    budget_chars = max_tokens * 4
    kept: list[Evidence] = []
    used = 0
    for ev in sorted(evidence, key=lambda e: (e.citation_key not in cited, -e.iteration, -e.score)):
        if used + len(ev.text) > budget_chars and kept:
            continue
        kept.append(ev)
        used += len(ev.text)
    dropped = [ev for ev in evidence if ev not in kept]
    if not dropped:
        return evidence, None
    summary = "; ".join(f"{ev.ticker} {ev.period}: {ev.text.split('. ')[0][:140]}" for ev in dropped[:12])
    kept_keys = {k.citation_key for k in kept}
    return [ev for ev in evidence if ev.citation_key in kept_keys], f"{len(dropped)} lower-ranked passages summarised: {summary}"


def run_extract(llm: LLMProvider, state: JobState, scope: str, evidence: list[Evidence], markers: dict[str, str],
                budget_note: str) -> tuple[ScopeFindings, Usage, Compressed]:
    """Findings from all of one scope's evidence: what fits the budget verbatim, the rest as a summary."""
    assert state.plan is not None and state.limits is not None
    per_scope = {"direct": 3, "standard": 4, "detailed": 5, "deep_search": 6}[state.plan.answer_mode.value]
    cited = {c.citation_key for c in state.answer.citations} if state.answer else set()
    packed = compress(group_by_scope(evidence).get(scope, []), state.limits.max_tokens, cited)
    findings, usage = llm.extract(ExtractRequest(
        question=state.request.question, reasoning=state.plan.reasoning, scope=scope, evidence=packed.kept,
        markers=markers, max_findings=per_scope, budget_note=budget_note))
    return findings, usage, packed


def run_compose(llm: LLMProvider, state: JobState, findings: list[ScopeFindings], evidence: list[Evidence],
                markers: dict[str, str], budget_note: str, computations: list[Computation] | None = None) -> tuple[Answer, Usage]:
    assert state.plan is not None and state.limits is not None
    cited_keys = {f.citation_key for s in findings for f in s.findings}
    cited = [ev for ev in evidence if ev.citation_key in cited_keys]
    answer, usage = llm.compose(ComposeRequest(
        question=state.request.question, plan=state.plan, findings=findings, evidence=cited, markers=markers,
        max_tokens=state.limits.max_tokens, working_memory=state.working_memory, feedback=_feedback(state),
        news_summary=state.news_summary,
        budget_note=budget_note,
    ))
    return attach_citations(with_working(answer, computations or [], markers), evidence, markers), usage


def with_working(answer: Answer, computations: list[Computation], markers: dict[str, str]) -> Answer:
    """The answer with every figure the 10-K agent computed shown with its working: a composer that restated a
    result without its formula and inputs (or left it out) gets them appended, cited."""
    from agent.work.computing import answer_lines

    shown = []
    for c in computations:
        number = re.sub(r"[^\d.,-]", "", c.result.split(" ")[0]) if c.result else "not computed"
        if c.label in answer.text and number in answer.text:
            continue  # stated with its label and figure: the composer kept the working
        shown += answer_lines(c, markers)
    if not shown:
        return answer
    return answer.model_copy(update={"text": f"{answer.text.rstrip()}\n\nComputed from the statements:\n" + "\n".join(shown)})


def _feedback(state: JobState) -> str | None:
    """The user's feedback, and in a refinement round what the last evaluation found wanting."""
    parts = [state.request.feedback] if state.request.feedback else []
    if state.revision_notes:
        parts.append("Revise the previous answer; the evaluation found: " + "; ".join(state.revision_notes))
    return "\n".join(parts) or None


def partial_answer(findings: list[ScopeFindings], evidence: list[Evidence], markers: dict[str, str]) -> Answer | None:
    """The findings extraction produced, each with its citation: kept when the answer itself could not be composed."""
    lines = [f"- {f.text} {markers[f.citation_key]}" for scope in findings for f in scope.findings if f.citation_key in markers]
    if not lines:
        return None
    text = "Partial answer: the final answer could not be written; these are the cited findings gathered so far.\n" + "\n".join(lines)
    return attach_citations(Answer(text=text), evidence, markers)


def attach_citations(answer: Answer, evidence: list[Evidence], markers: dict[str, str]) -> Answer:
    by_marker = {markers[e.citation_key]: e for e in evidence if e.citation_key in markers}
    citations = []
    for marker, ev in by_marker.items():
        if marker in answer.text:
            citations.append(Citation(marker=marker, source_type=ev.source_type, ticker=ev.ticker, period=ev.period,
                                      text=ev.text, citation_key=ev.citation_key, speaker=ev.speaker, item=ev.item, url=ev.url,
                                      page=ev.page))
    return answer.model_copy(update={"citations": citations})


def run_evaluate(llm: LLMProvider, state: JobState, scope: str, evidence: list[Evidence], markers: dict[str, str],
                 budget_note: str, computations: dict[str, list[Computation]] | None = None) -> tuple[Evaluation, Usage]:
    """Evaluate the answer for one scope: 'all', a company ('AAPL') or a company-period ('AAPL:2024_q4'); or the
    answer as a whole (`WHOLE_ANSWER`), against the passages it cites and every targeted period."""
    groups = group_by_scope(evidence)
    targets = target_periods(state)
    if scope == "all":
        in_scope, periods = evidence, targets
    elif scope == WHOLE_ANSWER:
        assert state.answer is not None
        cited = {c.citation_key for c in state.answer.citations}
        in_scope, periods = [e for e in evidence if e.citation_key in cited], targets
    elif scope == "news":
        in_scope, periods = groups.get("news", []), {}
    elif ":" in scope:
        ticker, part = scope.split(":", 1)
        in_scope = groups.get(scope, [])
        label = Period.parse_key(part).label if "_q" in part else None
        periods = {ticker: [label]} if label and label in targets.get(ticker, []) else {}
    else:
        in_scope = [e for k, v in groups.items() if k.startswith(f"{scope}:") for e in v]
        periods = {scope: targets.get(scope, [])}
    previous = [k for rec in state.iterations for k in rec.keywords]
    companies = [scope.split(":", 1)[0]] if scope not in ("all", "news", WHOLE_ANSWER) else list(computations or {})
    computed = [c for t in companies for c in (computations or {}).get(t, [])] if scope != "news" else []
    return llm.evaluate(EvaluateRequest(question=state.request.question, plan=state.plan, answer=state.answer, scope=scope,
                                        evidence=in_scope, markers=markers, periods=periods, previous_keywords=previous,
                                        budget_note=budget_note, iteration=state.iteration, computations=computed))




_MARKER = re.compile(r"\[(?:10K|N)?\d+\]")


def findings_from_answer(scope: str, text: str, markers: dict[str, str]) -> ScopeFindings:
    """Turn a sub-agent's cited answer ('- claim [10K1][10K2]' lines) into findings keyed by citation."""
    by_marker = {m: k for k, m in markers.items()}
    findings = []
    for line in text.splitlines():
        line = line.strip().removeprefix("- ").strip()
        keys = [by_marker[m] for m in _MARKER.findall(line) if m in by_marker]
        if line and keys:
            findings.append(Finding(citation_key=keys[0], extra_keys=list(dict.fromkeys(keys[1:])),
                                    text=_MARKER.sub("", line).strip()))
    return ScopeFindings(scope=scope, findings=findings)
