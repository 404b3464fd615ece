"""The 10-K agent's four roles done deterministically (mixed into ExtractiveProvider).

- plan_10k: the metric lexicon (agent/tenk/lexicon.py); replanning replaces what the evaluation found missing
- select_tables: caption and row-label overlap, consolidated statements first
- answer_10k: matching rows of the selected tables with their column headers, category splits, calculations
  with their inputs and arithmetic, and the best verbatim MD&A sentences; one '- ' line per finding
- evaluate_10k: share of the sub-questions (and calculations) whose figures appear in the answer
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from agent.models.research import Answer, Evidence, Usage
from agent.models.tenk import (
    SelectTablesRequest,
    SubQuestion,
    TenKAnswerRequest,
    TenKEvaluateRequest,
    TenKEvaluation,
    TenKPlan,
    TenKPlanRequest,
)
from agent.providers.llm.injection import is_instruction
from agent.tenk import rules
from agent.tenk.calculations import CALCULATIONS, Calculation, calc_names, compute
from agent.tenk.lexicon import METRICS, Metric
from agent.tenk.tables import (
    RowMatch,
    Table,
    display_label,
    find_rows,
    fiscal_column,
    label_level,
    parse_table,
    section_rows,
)
from agent.text import content_words, numbers, sentences, stem

_MARKER = re.compile(r"\[(?:10K|N)?\d+\]")
_BOILERPLATE = re.compile(r"forward-looking|should be read in conjunction|see item|refer to|for more information|"
                          r"\bsee [“\"]|on pages? \d", re.I)


@dataclass
class Part:
    """One answer line: the sub-question it answers (None for a calculation), and whether it found data."""

    sq_id: int | None
    line: str
    found: bool
    keys: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)  # what must appear in an answer that answers it
    calc: str = ""


class ExtractiveTenKRoles:
    def plan_10k(self, req: TenKPlanRequest) -> tuple[TenKPlan, Usage]:
        if req.missing_info and req.previous:
            return rules.replan(req.previous, req.missing_info, req.question), Usage()
        plan = rules.build_plan(req.question, req.ticker, req.fiscal_year)
        if req.missing_info:
            plan = rules.replan(plan, req.missing_info, req.question)
        return plan, Usage()

    def select_tables(self, req: SelectTablesRequest) -> tuple[list[int], Usage]:
        return rules.rank_candidates(req.sub_question, req.candidates, req.max_tables), Usage()

    def answer_10k(self, req: TenKAnswerRequest) -> tuple[Answer, Usage]:
        parts = answer_parts(req.plan, req.evidence)
        lines = [_with_markers(p, req.markers) for p in parts]
        if not lines:
            return Answer(text="- No 10-K evidence was retrieved for this question."), Usage()
        return Answer(text="\n".join(lines)), Usage()

    def evaluate_10k(self, req: TenKEvaluateRequest) -> tuple[TenKEvaluation, Usage]:
        parts = answer_parts(req.plan, req.evidence)
        answer = _flat(_MARKER.sub("", req.answer))
        answered, missing = [], []
        total = len(req.plan.sub_questions) + len(calc_names(req.plan.calculation))
        done = 0
        for p in parts:
            ok = p.found and all(_flat(c) in answer for c in p.checks)
            done += ok
            if ok and p.sq_id is not None:
                answered.append(p.sq_id)
            elif not ok:
                missing.append(_missing_text(p, req.plan.sub_questions))
        quality = round(done / total, 4) if total else 0.0
        return TenKEvaluation(quality=min(1.0, quality), missing_info=missing[:8], answered=answered), Usage()


# ---------- answer parts ----------
def answer_parts(plan: TenKPlan, evidence: list[Evidence]) -> list[Part]:
    tables = [t for t in (parse_table(e) for e in evidence) if t]
    texts = [e for e in evidence if e.source_type == "10k"]
    used: set[str] = set()
    parts = []
    for sq in plan.sub_questions:
        if sq.kind == "TABLE":
            parts.append(_table_part(sq, tables, plan.fiscal_year))
        else:
            parts.append(_text_part(sq, texts, used))
    parts += [_calc_part(name, tables, plan.fiscal_year) for name in calc_names(plan.calculation)]
    return parts


def _with_markers(p: Part, markers: dict[str, str]) -> str:
    marks = "".join(dict.fromkeys(markers[k] for k in p.keys if k in markers))
    return f"- {p.line} {marks}".rstrip()


def _not_found(sq: SubQuestion, why: str) -> Part:
    return Part(sq.id, f"Not found in the retrieved 10-K {why}: {sq.text}", False)


def _table_part(sq: SubQuestion, tables: list[Table], fy: int) -> Part:
    m = rules.metric_for(sq)
    if m and m.breakdown is not None:
        return _breakdown_part(sq, m, tables, fy)
    matches = find_rows(tables, m.aliases, m.caption) if m else _rows_by_words(sq, tables)
    if not matches:
        return _not_found(sq, "tables")
    return _row_part(sq, matches[0], fy)


def _row_part(sq: SubQuestion, match: RowMatch, fy: int) -> Part:
    values = match.table.amounts(match.row)
    shown = "; ".join(f"{col.label or 'value'}: {cell}" for col, cell in values)
    source = f" ({_short(match.table.caption)})" if _short(match.table.caption) else ""
    # answering means stating the fiscal year's figure; without a column for that year, every figure shown
    checks = [cell for col, cell in values if col.year == fy] or [cell for _, cell in values]
    return Part(sq.id, f"{match.label}{source}: {shown}", True, [match.table.key], checks)


def _short(caption: str) -> str:
    return caption if len(caption) <= 60 else ""


def _rows_by_words(sq: SubQuestion, tables: list[Table]) -> list[RowMatch]:
    want = {stem(w) for w in content_words(sq.keywords)}
    out = []
    for t in tables:
        for row in t.rows:
            overlap = len(want & {stem(w) for w in content_words(row[0] if row else "")})
            if overlap and t.amounts(row):
                out.append(RowMatch(t, row, overlap))
    return sorted(out, key=lambda r: -r.score)


def _breakdown_part(sq: SubQuestion, m: Metric, tables: list[Table], fy: int) -> Part:
    breakdown = m.breakdown
    assert breakdown is not None  # _table_part sends only breakdown metrics here
    for t in (t for t in tables if breakdown.search(t.caption)):
        col = fiscal_column(t, fy)
        if col is None:
            continue
        rows = _breakdown_rows(t, col.index)
        if rows:
            shown = "; ".join(f"{label} {value}" for label, value in rows)
            return Part(sq.id, f"{m.label[0].upper()}{m.label[1:]}, {col.label}: {shown}", True, [t.key],
                        [v for _, v in rows])
    return _not_found(sq, "tables (no table of the split)")


def _breakdown_rows(t: Table, col: int) -> list[tuple[str, str]]:
    """Every category row; in a nested segment table (a heading per segment) its net sales row, named by the segment."""
    rows = section_rows(t)
    nested = len({s for s, _ in rows if s}) > 1 and len({r[0] for _, r in rows}) < len(rows)
    out = []
    for section, row in rows:
        if col >= len(row) or not row[col]:
            continue
        if nested:
            if label_level(row[0], METRICS["revenue"].aliases)[0] and section:
                out.append((section, row[col]))
        else:
            out.append((display_label(row[0]), row[col]))
    return out


def _calc_part(name: str, tables: list[Table], fy: int) -> Part:
    """The calculation's line, or what it lacks; Part.sq_id None marks a calculation, Part.calc names it."""
    spec = CALCULATIONS[name]
    inputs: dict[str, float | None] = {}
    keys, missing = [], []
    for metric_name in spec.inputs:
        base, _, prior = metric_name.partition("@")
        year = fy - 1 if prior else fy
        value, key = _metric_value(base, tables, year)
        inputs[metric_name] = value
        if key:
            keys.append(key)
        elif metric_name != "inventories@prior":
            missing.append(f"{METRICS[base].label} (FY{year})")
    calc = compute(name, inputs)
    if calc is None:
        return Part(None, f"{spec.label} could not be computed: missing {', '.join(missing) or 'inputs'}", False,
                    calc=name)
    return Part(None, _calc_line(calc, fy), True, keys, [calc.result], calc=name)


def _calc_line(calc: Calculation, fy: int) -> str:
    return f"{calc.label} (FY{fy}) = {calc.formula} = {calc.expression} = {calc.result}"


def _metric_value(metric: str, tables: list[Table], year: int) -> tuple[float | None, str | None]:
    m = METRICS[metric]
    for match in find_rows(tables, m.aliases, m.caption):
        found = match.table.value_in(match.row, year)
        if found:
            return found[1], match.table.key
    return None, None


# ---------- text parts ----------
def _is_statement(sent: str) -> bool:
    """A quotable sentence: not a table row, heading, table lead-in ('... as follows:'), question or cross-reference."""
    return ("|" not in sent and 6 <= len(sent.split()) and len(sent) <= 450 and not sent.endswith(("?", ":"))
            and not _BOILERPLATE.search(sent) and not is_instruction(sent))


def _text_part(sq: SubQuestion, texts: list[Evidence], used: set[str]) -> Part:
    """The two best sentences of the routed passages: query-word overlap, figures, retrieved for this sub-question."""
    routed = [e for e in texts if e.item in sq.items] or texts
    want = {stem(w) for w in content_words(f"{sq.keywords} {sq.text}")}
    scored = []
    for order, ev in enumerate(routed):
        for sent in sentences(ev.text):
            if sent in used or not _is_statement(sent):
                continue
            overlap = len(want & {stem(w) for w in content_words(sent)})
            if overlap >= 2:
                score = overlap + 1.5 * bool(numbers(sent)) + 0.5 * (ev.query == sq.keywords) + 0.5 * ev.score
                scored.append((score, -order, sent, ev.citation_key))
    picked = sorted(scored, reverse=True)[:2]
    if not picked:
        return _not_found(sq, "text")
    used.update(s for _, _, s, _ in picked)
    line = " ".join(_flat(s) for _, _, s, _ in picked)
    return Part(sq.id, line, True, [k for *_, k in picked], [_flat(picked[0][2])[:60]])


# ---------- evaluation helpers ----------
def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _missing_text(p: Part, sub_questions: list[SubQuestion]) -> str:
    if p.sq_id is None:
        return f"Calculation {p.calc} not computed: {p.line.split('missing', 1)[-1].strip()}" if not p.found else \
            f"Calculation {p.calc}: result not stated in the answer"
    sq = next(q for q in sub_questions if q.id == p.sq_id)
    return f"Sub-question {sq.id} [{sq.kind}, Item {'/'.join(sq.items)}] '{sq.text}': " + \
        ("no matching figures or passage" if not p.found else "found but not stated in the answer")

