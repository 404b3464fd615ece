"""The extractive rule set of the 10-K agent: question -> sub-questions with Item routing (lexicon.py),
replanning from missing information, and table-candidate scoring."""
from __future__ import annotations

import re

from agent.models.tenk import SubQuestion, TableCandidate, TenKPlan
from agent.tenk.lexicon import METRICS, TOPICS, Metric, Need, Topic
from agent.tenk.tables import label_level
from agent.text import content_words, stem


def metric_for(sq: SubQuestion) -> Metric | None:
    """The lexicon metric a sub-question asks for: by its exact keywords first, then by signal words."""
    for m in METRICS.values():
        if sq.keywords.strip().lower() in (m.keywords, m.alt_keywords):
            return m
    for field in (sq.keywords, sq.text):
        for m in METRICS.values():
            if m.signal.search(field):
                return m
    return None


_FILLER = {"inc", "corp", "company", "10-k", "annual", "report", "main", "key", "major", "biggest", "many", "much"}


def _question_keywords(question: str, ticker: str) -> str:
    # the company is fixed by the filters; its name ("the company's") would only dilute the search phrase
    owners = {w.lower() for w in re.findall(r"([A-Za-z][\w.&-]*)['’]s\b", question)}
    skip = _FILLER | owners | {ticker.lower()}
    words = [w for w in content_words(question) if w not in skip and not re.fullmatch(r"\d+", w)]
    return " ".join(dict.fromkeys(words))[:120]


_PLURAL = ("inventories", "total net sales", "purchases of property and equipment", "total current assets",
           "total current liabilities", "total assets")


def _sub_question(sq_id: int, need: Need, fiscal_year: int, question: str, ticker: str) -> SubQuestion:
    if need.kind == "TABLE" and not need.metric:  # the generic plan's statement search
        return SubQuestion(id=sq_id, text=f"Which FY{fiscal_year} figures answer: {question}", kind="TABLE",
                           items=list(need.items), keywords=need.keywords)
    if need.kind == "TABLE":
        m = METRICS[need.metric]
        if m.breakdown:
            text = f"How did {m.label} split in FY{fiscal_year}?"
        else:
            text = f"What {'were' if m.label in _PLURAL else 'was'} {m.label} in FY{fiscal_year}?"
        return SubQuestion(id=sq_id, text=text, kind="TABLE", items=list(need.items), keywords=m.keywords)
    keywords = need.keywords or _question_keywords(question, ticker)
    if not need.text:  # a descriptive need: the user's own words sharpen the topic's search phrase
        keywords = " ".join(dict.fromkeys(f"{need.keywords} {_question_keywords(question, ticker)}".split()))[:120]
    return SubQuestion(id=sq_id, text=need.text or question, kind="TEXT", items=list(need.items), keywords=keywords)


def matching_topics(question: str) -> list[Topic]:
    found = [t for t in TOPICS if t.signal.search(question)]
    covered = {c for t in found for c in t.covers}
    return [t for t in found if t.name not in covered]


def build_plan(question: str, ticker: str, fiscal_year: int) -> TenKPlan:
    topics = matching_topics(question)
    needs = [n for t in topics for n in t.needs]
    if not topics:  # generic: search MD&A with the question's own words, and the statements
        words = _question_keywords(question, ticker)
        needs = [Need("TEXT", ("7",), text=question, keywords=words), Need("TABLE", ("8",), keywords=words)]
    sqs: list[SubQuestion] = []
    for need in needs:
        sq = _sub_question(len(sqs) + 1, need, fiscal_year, question, ticker)
        if not any((q.kind, q.keywords) == (sq.kind, sq.keywords) for q in sqs):
            sqs.append(sq)
    calculation = "; ".join(t.calculation for t in topics if t.calculation) or None
    route = "; ".join(f"[{q.kind}] Item {'/'.join(q.items)}: {q.keywords}" for q in sqs)
    return TenKPlan(ticker=ticker, fiscal_year=fiscal_year, sub_questions=sqs[:12], calculation=calculation,
                    search_plan=f"Topics: {', '.join(t.name for t in topics) or 'general'}. {route}")


# ---------- replanning ----------
_SQ_REF = re.compile(r"sub-question (\d+)", re.I)


def replan(previous: TenKPlan, missing_info: list[str], question: str) -> TenKPlan:
    """Replace each sub-question named in missing_info by differently worded, more broadly routed ones;
    add table searches for a calculation's missing inputs, and text searches for free-form gaps."""
    by_id = {q.id: q for q in previous.sub_questions}
    replaced: set[int] = set()
    additions: list[SubQuestion] = []
    next_id = max(by_id, default=0) + 1
    for info in missing_info:
        refs = [int(i) for i in _SQ_REF.findall(info) if int(i) in by_id]
        if refs:
            replaced.update(refs)
            new = [alt for r in refs for alt in _alternatives(by_id[r])]
        elif info.lower().startswith("calculation"):
            new = [_broad_table(m) for m in METRICS.values() if m.label in info.lower() and not m.breakdown]
        else:
            words = _question_keywords(info, previous.ticker)
            new = [SubQuestion(id=0, text=info, kind="TEXT", items=["7", "8", "1"], keywords=words)] if words else []
        additions += new
    kept = [q for q in previous.sub_questions if q.id not in replaced]
    out = list(kept)
    for sq in additions:
        if any((q.kind, q.keywords.lower()) == (sq.kind, sq.keywords.lower()) for q in out):
            continue
        out.append(sq.model_copy(update={"id": next_id}))
        next_id += 1
    if not out:  # nothing left to ask: start over from the question
        return build_plan(question, previous.ticker, previous.fiscal_year)
    note = f" Replanned for: {'; '.join(missing_info)[:300]}"
    return previous.model_copy(update={"sub_questions": out[:12], "search_plan": previous.search_plan + note})


def _broad_table(m: Metric) -> SubQuestion:
    return SubQuestion(id=0, text=f"Find {m.label} in any financial table", kind="TABLE", items=["7", "8"],
                       keywords=m.alt_keywords or m.keywords)


def _alternatives(sq: SubQuestion) -> list[SubQuestion]:
    m = metric_for(sq)
    broad = list(dict.fromkeys([*sq.items, "7", "8"]))
    if sq.kind == "TABLE":
        table = SubQuestion(id=0, text=sq.text, kind="TABLE", items=broad,
                            keywords=(m.alt_keywords if m and sq.keywords != m.alt_keywords else sq.keywords + " total"))
        text = SubQuestion(id=0, text=sq.text, kind="TEXT", items=broad, keywords=m.keywords if m else sq.keywords)
        return [table, text]
    return [SubQuestion(id=0, text=sq.text, kind="TEXT", items=list(dict.fromkeys([*sq.items, "7", "8", "1"])),
                        keywords=_reworded(sq.keywords))]


def _reworded(keywords: str) -> str:
    words = content_words(keywords)
    return " ".join(words[:4] + ["discussion", "results"]) if words else "results of operations discussion"


# ---------- table selection ----------
def _stems(text: str) -> set[str]:
    return {stem(w) for w in content_words(text)}


def preview_labels(preview: str) -> list[str]:
    """Row labels (first cells) from a candidate preview's markdown rows and its 'Other rows:' list."""
    labels = []
    for line in preview.split("\n"):
        if line.startswith("|") and "---" not in line:
            first = line.strip("|").split("|")[0].strip()
            if first:
                labels.append(first)
        elif line.startswith("Other rows:"):
            labels += [x.strip() for x in line.removeprefix("Other rows:").split(";") if x.strip()]
    return labels


def score_candidate(sq: SubQuestion, cand: TableCandidate) -> float:
    m = metric_for(sq) if sq.kind == "TABLE" else None
    labels = preview_labels(cand.preview)
    score = 0.0
    if m and m.breakdown is not None:
        score += 6 if m.breakdown.search(cand.caption) else 0
    elif m:
        level = max((label_level(lb, m.aliases)[0] for lb in labels), default=0)
        score += 3 * level
        score += 4 if m.caption and m.caption.search(cand.caption) else 0
    if re.search(r"^consolidated (balance sheets|statements)", cand.caption.strip(), re.I):
        score += 1
    want = _stems(sq.keywords)
    score += len(want & _stems(cand.caption))
    score += min(3.0, 0.5 * len(want & _stems(" ".join(labels))))
    score += 0.5 if cand.item in sq.items else 0
    return score


def rank_candidates(sq: SubQuestion, candidates: list[TableCandidate], max_tables: int) -> list[int]:
    scored = sorted(((score_candidate(sq, c), -i, c.table_id) for i, c in enumerate(candidates)), reverse=True)
    return [tid for s, _, tid in scored if s > 0][:max_tables]
