"""The `extractive` provider: every LLM role done deterministically, with no model.

- plan: company registry + time-expression parser + keyword rules
- extract: picks the sentences of a scope's evidence that best match the question (numbers preferred)
- compose: arranges those verbatim sentences by company and period, each with its citation marker
- evaluate: heuristics; accuracy checks that every figure in a sentence appears in its cited chunk
"""
from __future__ import annotations

import functools
import hashlib
import math
import re
from pathlib import Path

from agent.models.research import Answer, Evaluation, Finding, ResearchPlan, ScopeFindings, Usage
from agent.providers.llm.extractive_figures import grade_figure, grade_yes_no
from agent.providers.llm.extractive_judge import (
    addresses,
    asks_change,
    label_period,
    metric_alternatives,
    metric_stems,
    names_metric,
    problems,
    question_parts,
    scope_period,
    stems,
    whole_answer_gaps,
)
from agent.providers.llm.extractive_rules import (
    FINANCE_TERMS,
    concept_groups,
    expand_queries,
    pick_mode,
    route_sources,
)
from agent.providers.llm.extractive_tenk import ExtractiveTenKRoles
from agent.providers.llm.injection import is_instruction
from agent.providers.llm.roles import ComposeRequest, EvaluateRequest, ExtractRequest, PlanRequest
from agent.retrieval.companies import find_tickers, no_company_named, unknown_tickers
from agent.retrieval.periods import find_time_refs
from agent.settings import AnswerMode
from agent.text import content_words, normalise_number, numbers, sentences, stem

_MARKER = re.compile(r"\[(?:10K|N)?\d+\]")
# an answer line's lead, as compose writes it (_scope_label): "- Q1 2025: ", "- 10-K FY2024: ", "- Q2 FY2024 filing: "
ANSWER_LINE_LABEL = re.compile(r"^-\s*(Q[1-4] \d{4}|Q[1-4] FY\d{4} filing|10-K FY\d{4}|10-K):\s*")
_VERDICT = re.compile(r"^(?:Yes|No): ")
_BOILERPLATE = re.compile(r"forward-looking|safe harbor|webcast|replay|operator instructions|please go ahead|next question", re.I)


def _words(text: str) -> set[str]:
    return stems(text)


@functools.cache
def _rules_version() -> str:
    """A digest of the rule modules' source: the provider's outputs are a function of its inputs and these rules."""
    here = Path(__file__).parent
    rules = sorted([*here.glob("extractive*.py"), *(here.parent.parent / "tenk").glob("*.py")])
    return hashlib.sha256(b"".join(p.read_bytes() for p in rules)).hexdigest()[:12]


class ExtractiveProvider(ExtractiveTenKRoles):
    name = "extractive"
    @property
    def revises_answers(self) -> bool:
        """No: compose arranges the sentences extraction picked, so without new evidence feedback cannot change it."""
        return False

    @property
    def cache_namespace(self) -> str:
        return f"extractive:{_rules_version()}"  # answers cached under other rules are not reused

    # ---------- plan ----------
    def plan(self, req: PlanRequest) -> tuple[ResearchPlan, Usage]:
        q = req.question if not req.feedback else f"{req.question} {req.feedback}"
        tickers = [t.upper() for t in req.tickers_hint] or find_tickers(q, req.companies)
        # feedback on a previous answer wins where it names periods ("use the last 3 quarters instead")
        refs = (find_time_refs(req.feedback) if req.feedback else []) or find_time_refs(req.question)
        words = content_words(q)
        finance = any(stem(w) in FINANCE_TERMS or w in FINANCE_TERMS for w in words)
        unknown = [] if tickers else unknown_tickers(q, req.companies)
        if unknown:
            known = ", ".join(sorted(c.ticker for c in req.companies))
            return self._invalid(req, f"{', '.join(unknown)} is not a company finagent knows (known: {known}); "
                                      "ingest its transcripts or 10-K first."), Usage()
        if not tickers and not finance:
            return self._invalid(req, "This does not look like a question about a public company's results, filings or news."), Usage()
        if not tickers:
            return self._invalid(req, no_company_named(req.companies)), Usage()
        sources = route_sources(q)
        lowered = q.lower()
        if len(tickers) > 1:
            qtype = "comparison" if re.search(r"\bcompar|\bvs\.?\b|\bversus\b|\brelative to\b|\bagainst\b", lowered) else "multiple_companies"
        else:
            qtype = "single_company"
        topic_words = [w for w in content_words(req.question) if w.upper() not in tickers and not any(w in n.lower() for n in _names(req, tickers))]
        topic = " ".join(dict.fromkeys(topic_words))[:80] or "financial results"
        plan = ResearchPlan(
            reasoning=(
                f"The user asks about {topic} for {', '.join(tickers)}"
                f"{' over ' + ', '.join(refs) if refs else ''}. I will search "
                f"{' and '.join(s.replace('_', ' ') for s in sources)} for specific figures, the periods involved "
                "and management's explanations, then check every figure against its source."
                + (f" Feedback on the previous answer: {req.feedback!r}; the plan follows it." if req.feedback else "")
            ),
            tickers=tickers,
            time_refs=refs,
            intent=_intent(lowered),
            topic=topic,
            question_type=qtype,
            answer_mode=pick_mode(lowered, len(tickers), refs),
            data_sources=sources,
            needs_latest_news="news" in sources,
            needs_10k="10k" in sources,
            search_queries=expand_queries(topic_words, lowered)
            + ([" ".join(content_words(req.feedback))[:80]] if req.feedback and content_words(req.feedback) else []),
            is_valid=True,
            confidence=0.9 if refs else 0.8,
        )
        return plan, Usage()

    @staticmethod
    def _invalid(req: PlanRequest, reason: str) -> ResearchPlan:
        return ResearchPlan(reasoning=reason, is_valid=False, invalid_reason=reason, confidence=0.95,
                            answer_mode=AnswerMode.direct)

    # ---------- extract findings from one scope ----------
    def extract(self, req: ExtractRequest) -> tuple[ScopeFindings, Usage]:
        wanted = _words(req.question) | _words(req.reasoning.split(". I will")[0])
        groups = concept_groups(req.question)
        period = scope_period(req.scope)
        metric = metric_stems(_topic(req.reasoning, req.question)) - {req.scope.split(':')[0].lower()}
        need = math.ceil(2 * len(metric) / 3)
        change_ok = asks_change(req.question)
        scored: list[tuple[float, int, str, str]] = []
        for order, ev in enumerate(req.evidence):
            previous = ""
            for sent in sentences(ev.text):
                segment, previous = _segment_lead(previous), sent
                if sent.endswith("?") or _BOILERPLATE.search(sent) or is_instruction(sent):
                    continue  # questions, boilerplate, and text that speaks to the system instead of about the company
                sw = _words(sent)
                overlap = len(wanted & sw)
                concept_hits = sum(1 for g in groups if g & sw)
                figures = numbers(sent)
                score = overlap + 1.5 * concept_hits + (1.5 if figures else 0) + (0.5 if any("$" in f or "%" in f for f in figures) else 0)
                headline = _headline_bonus(sent, wanted, metric)
                if segment and headline:
                    # "Starting with <segment>. Revenue of $X billion ...": a segment's figure, not the total
                    sent, headline = f"{segment}: {sent}", 0.0
                score += 0.3 * ev.score + headline
                # a forecast when the question asks what something was, another period, a segment's figure: demoted
                score -= 3.0 * len(problems(sent, req.question, period))
                if metric and addresses(sent, metric, need=need, near=True, change_ok=change_ok):
                    score += 1.5  # states a figure for the asked metric itself
                if overlap or concept_hits:
                    scored.append((score, -order, sent, ev.citation_key))
        scored.sort(reverse=True)
        picked: list[Finding] = []
        seen: set[str] = set()
        for _, _, sent, key in scored:
            sig = " ".join(sorted(_words(sent)))[:200]
            if sig in seen:
                continue
            seen.add(sig)
            picked.append(Finding(citation_key=key, text=sent))
            if len(picked) >= req.max_findings:
                break
        return ScopeFindings(scope=req.scope, findings=picked), Usage()

    # ---------- compose the cited answer ----------
    def compose(self, req: ComposeRequest) -> tuple[Answer, Usage]:
        by_key = {e.citation_key: e for e in req.evidence}
        lines: list[str] = []
        budget_chars = req.max_tokens * 4
        for ticker in req.plan.tickers or sorted({e.ticker for e in req.evidence if e.ticker}):
            scopes = sorted((s for s in req.findings if s.scope.startswith(f"{ticker}:")), key=_scope_order)
            body = []
            for scope in scopes:
                if not scope.findings:
                    continue
                label = _scope_label(scope.scope, by_key, scope.findings)
                if scope.scope.endswith(":10k"):  # 10-K answers (tables, calculations) read best one per line
                    body += [f"- {label}: {_clean(f.text)} {_marks(f, req.markers)}" for f in scope.findings if f.citation_key in req.markers]
                    continue
                text = " ".join(f"{_clean(f.text)} {_marks(f, req.markers)}" for f in scope.findings if f.citation_key in req.markers)
                body.append(f"- {label}: {text}")
            if body:
                lines.append(f"**{ticker}**")
                lines += body
        news = [s for s in req.findings if s.scope == "news" and s.findings]
        for scope in news:
            lines.append("**Recent news**")
            lines += [f"- {_clean(f.text)} {_marks(f, req.markers)}" for f in scope.findings if f.citation_key in req.markers]
        if not lines:
            return Answer(text="I could not find evidence in the ingested sources that answers this question."), Usage()
        # a yes/no the 10-K agent computed from the statements answers the question: it opens the answer
        verdicts = [f"{_clean(f.text)} {_marks(f, req.markers)}" for s in req.findings if s.scope.endswith(":10k")
                    for f in s.findings if _VERDICT.match(f.text) and f.citation_key in req.markers]
        text = "\n".join(verdicts[:1] + lines)
        if len(text) > budget_chars:
            text = text[:budget_chars].rsplit("\n", 1)[0]
        return Answer(text=text), Usage()

    # ---------- evaluate ----------
    def evaluate(self, req: EvaluateRequest) -> tuple[Evaluation, Usage]:
        """Each targeted period's part of the answer; for the whole answer, all of them, and then what only the
        whole shows (`_judge_whole`)."""
        ev = self._judge(req)
        ev = self._judge_whole(req, ev) if req.whole else ev
        return grade_yes_no(req, grade_figure(req, ev)), Usage()

    @staticmethod
    def _judge_whole(req: EvaluateRequest, ev: Evaluation) -> Evaluation:
        """Every company and period the question sets side by side must state the asked figure, like against like:
        the share answered caps completeness, and the whole is sufficient only with nothing missing."""
        gaps = whole_answer_gaps(req.question, req.plan.topic, req.plan.tickers, req.periods, _blocks(req.answer.text))
        if not gaps.sides:
            return ev
        keywords = [k for k in dict.fromkeys(gaps.keywords + ev.followup_keywords) if k not in req.previous_keywords][:4]
        return ev.model_copy(update={
            "completeness_score": min(ev.completeness_score, round(100 * gaps.share)),
            "issues": (gaps.issues + ev.issues)[:8],
            "missing_info": (gaps.missing + ev.missing_info)[:8],
            "suggestions": [f"Search for {k}" for k in keywords],
            "is_sufficient": ev.is_sufficient and not gaps.missing and not gaps.issues,
            "followup_keywords": keywords,
            "needs_transcript_search": bool(keywords),
        })

    def _judge(self, req: EvaluateRequest) -> Evaluation:
        answer_sents = [s for s in req.answer.text.split("\n") if s.strip().startswith("-")]
        evidence = {e.citation_key: e for e in req.evidence}
        marker_to_key = {m: k for k, m in req.markers.items()}
        issues: list[str] = []
        missing: list[str] = []
        keywords: list[str] = []

        # completeness: every part of the question answered for every targeted (ticker, period), each by the first
        # statement that speaks of it, which must be about that period and in the asked tense
        aspects, covered, misleading = 0, 0, 0
        parts = question_parts(req.question, req.plan.topic)
        if req.whole and asks_change(req.question) and any(len(labels) > 1 for labels in req.periods.values()):
            parts = [p for p in parts if p.name != "growth"]  # a change across periods: the whole's sides judge it
        for ticker, labels in req.periods.items():
            for label in labels:
                line = next((s for s in answer_sents if s.strip().startswith(f"- {label}:") and ticker in _ticker_block(req.answer.text, s)), None)
                if line is None:
                    aspects += max(1, len(parts))
                    missing.append(f"{ticker} {label}: no cited figures")
                    keywords.append(f"{req.plan.topic} {label} results")
                    continue
                said = _sentences_with_markers(line)
                if not parts:
                    aspects, covered = aspects + 1, covered + 1
                period_covered = 0
                for part in parts:
                    aspects += 1
                    # the asked metric must be what the period's answer leads with; the other parts may come later
                    candidates = said[:1] if part.metric else said
                    first = next(((t, m) for t, m in candidates if addresses(t, part.words, part.numeric, part.need, part.metric,
                                                                             part.change_ok)), None)
                    wrong = problems(first[0], req.question, label_period(label)) if first else []
                    if first and _unsourced(first[0], [evidence[marker_to_key[m]].text for m in first[1] if marker_to_key.get(m) in evidence]):
                        wrong.append("a figure its cited source does not hold")
                    if first is None:
                        missing.append(f"{ticker} {label}: nothing on '{part.name}'")
                        keywords.append(f"{part.name} {label}")
                    elif wrong:
                        misleading += 1
                        issues.append(f"{ticker} {label}: the answer on '{part.name}' is {'; '.join(wrong)}")
                        keywords.append(f"{part.name} {label}")
                    else:
                        period_covered += 1
                    if part.metric and (first is None or wrong):
                        period_covered = -len(parts)  # the asked metric unanswered: the rest does not answer the question
                covered += max(0, period_covered)
        if not req.periods:  # news, or no period targeted: every concept addressed somewhere
            answer_words = _words(req.answer.text)
            for group in concept_groups(req.question):
                aspects += 1
                if group & answer_words:
                    covered += 1
                else:
                    name = sorted(group)[0]
                    missing.append(f"nothing on '{name}' yet")
                    keywords += expand_queries([name], name)[:1]
        completeness = round(100 * covered / aspects) if aspects else (80 if answer_sents else 0)

        # specificity: sentences with figures and citations
        with_numbers = sum(1 for s in answer_sents if numbers(_MARKER.sub("", s)))
        cited = sum(1 for s in answer_sents if _MARKER.search(s))
        specificity = 0 if not answer_sents else min(100, round(40 + 60 * with_numbers / len(answer_sents) * (cited / len(answer_sents))) + 5)
        if answer_sents and with_numbers < len(answer_sents):
            issues.append("some statements carry no specific figures")

        # accuracy: every figure must appear in the chunk its marker cites
        checked, verified = 0, 0
        for line in answer_sents:
            for sent_text, markers in _sentences_with_markers(line):
                if not any(marker_to_key.get(m) in evidence for m in markers):
                    continue  # cited evidence outside this scope: another scope's evaluation checks it
                if " = " in sent_text:  # a calculation: its inputs must be in the sources, its results are derived
                    sent_text = sent_text.split(" = ")[0] + " " + " ".join(sent_text.split(" = ")[1:2])
                sources = " ".join(evidence[marker_to_key[m]].text for m in markers if marker_to_key.get(m) in evidence)
                for fig in numbers(sent_text):
                    checked += 1
                    if normalise_number(fig) in {normalise_number(x) for x in numbers(sources)}:
                        verified += 1
                    else:
                        issues.append(f"figure {fig} not found in its cited source")
        accuracy = 100 if checked == 0 else round(100 * verified / checked)
        accuracy = max(0, accuracy - 40 * misleading)  # a forecast or another period's figure given as the answer misleads

        clarity = 90 if len(answer_sents) >= 1 else 30
        if len(req.answer.text) > 12000:
            clarity -= 15
        keywords = [k for k in dict.fromkeys(keywords) if k not in req.previous_keywords][:4]
        ev = Evaluation(
            completeness_score=completeness,
            specificity_score=specificity,
            accuracy_score=accuracy,
            clarity_score=clarity,
            issues=issues[:8],
            missing_info=missing[:8],
            suggestions=[f"Search for {k}" for k in keywords],
            is_sufficient=completeness >= 95 and accuracy == 100 and specificity >= 80,
            followup_keywords=keywords,
            needs_transcript_search=bool(keywords),
            scope=req.scope,
        )
        return ev


def _unsourced(statement: str, sources: list[str]) -> bool:
    """A figure of the statement is missing from its cited sources (sources outside this scope are not judged here)."""
    if not sources:
        return False
    held = {normalise_number(x) for src in sources for x in numbers(src)}
    return any(normalise_number(f) not in held for f in numbers(statement))


def _marks(finding, markers: dict[str, str]) -> str:
    return "".join(markers[k] for k in [finding.citation_key, *finding.extra_keys] if k in markers)


_SEGMENT_LEAD = re.compile(
    r"(?i:starting with|beginning with|moving to|turning to|turn to|now to|on to|achieved in|record in)\s+"
    r"(?:(?i:our|the)\s+)?([A-Z][\w&\-]*(?:\s+[A-Z][\w&\-]*)*)")


def _segment_lead(sentence: str) -> str | None:
    """The business segment a short lead-in sentence announces ("Starting with <segment>.")."""
    if not sentence or len(sentence.split()) > 12:
        return None
    m = _SEGMENT_LEAD.search(sentence)
    return m.group(1) if m else None


def _headline_bonus(sentence: str, wanted: set[str], metric: set[str] | None = None) -> float:
    """A sentence whose subject is the asked metric itself ("Revenue of $X billion ...", "Total net sales were ...")
    beats one about a part of it ("<Segment> revenue of ..."). With a metric of several words, its subject must be
    that metric ("net interest margin"), not one of its words ("net charge-offs")."""
    head = [stem(w.lower()) for w in re.findall(r"[A-Za-z][A-Za-z-]+", sentence)[:3]]
    lead = head[1:] if len(head) > 1 and head[0] in {"total", "overall", "consolidated", "quarterly", "record", "our", "the"} else head
    if metric and len(metric) > 1:
        opening = " ".join(sentence.split()[:len(metric) + 3])
        return 2.0 if any(names_metric(opening, alt, max(1, math.ceil(2 * len(alt) / 3))) for alt in [metric, *metric_alternatives(metric)]) \
            else 0.0
    if lead and lead[0] in wanted:
        return 2.0
    return 0.0


def _topic(reasoning: str, question: str) -> str:
    """The topic the extractive plan's reasoning names ("The user asks about <topic> for ..."), else the question."""
    m = re.match(r"The user asks about (.+?) for ", reasoning)
    return m.group(1) if m else question


def _names(req: PlanRequest, tickers: list[str]) -> list[str]:
    return [n for c in req.companies if c.ticker in tickers for n in [c.name, *c.aliases]]


def _intent(q: str) -> str:
    if re.search(r"\bcompar|\bvs\b|versus", q):
        return "compare companies"
    if re.search(r"\btrend|over the|grown|growth|change", q):
        return "understand a trend"
    if re.search(r"\bwhy\b|drove|driv|reason|cause", q):
        return "explain a result"
    return "look up a figure"


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _scope_order(scope) -> tuple:
    part = scope.scope.split(":", 1)[1]
    return (part.startswith("10k"), part)


def _scope_label(scope: str, by_key, findings) -> str:
    part = scope.split(":", 1)[1]
    if part.startswith("10k"):
        ev = by_key.get(findings[0].citation_key)
        if ev and ev.fiscal_year and ev.fiscal_quarter:  # a quarter's filing (10-Q, earnings release, 8-K), not the 10-K
            return f"Q{ev.fiscal_quarter} FY{ev.fiscal_year} filing"
        return f"10-K FY{ev.fiscal_year}" if ev and ev.fiscal_year else "10-K"
    year, q = part.split("_q")
    return f"Q{q} {year}"


def _ticker_block(answer: str, line: str) -> str:
    """The '**TICKER**' heading that a bullet line sits under."""
    head = ""
    for row in answer.split("\n"):
        if row.startswith("**"):
            head = row
        if row == line:
            return head
    return head


def _blocks(answer: str) -> dict[str, dict[str, list[str]]]:
    """The answer's statements (markers removed) by company and period label, as compose arranges them: a
    '**TICKER**' heading, then '- Q1 2025: ...' lines."""
    out: dict[str, dict[str, list[str]]] = {}
    head = ""
    for row in answer.split("\n"):
        if m := re.match(r"^\*\*([A-Z][A-Z0-9.\-]*)\*\*$", row.strip()):
            head = m.group(1)
        elif head and (m := ANSWER_LINE_LABEL.match(row.strip())):
            out.setdefault(head, {}).setdefault(m.group(1), []).extend(t for t, _ in _sentences_with_markers(row))
    return out


def _sentences_with_markers(line: str) -> list[tuple[str, list[str]]]:
    """Split a bullet into (sentence, the markers that follow it)."""
    out = []
    for part in re.split(r"(?<=\])\s+", line):
        markers = _MARKER.findall(part)
        text = _MARKER.sub("", part)
        text = ANSWER_LINE_LABEL.sub("", text.strip())
        if markers:
            out.append((text, markers))
    return out
