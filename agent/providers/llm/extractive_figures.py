"""The offline judge's grade of an answer by what the question asks: a figure from the annual statements, or a yes/no.

A figure the code computed from the statements, with every input found on its statement page and cited, is strong
evidence. A figure lifted from a sentence is not: the sentence may be about another line item, segment or year, and
checking that the figure is printed in its cited passage cannot tell. So when the 10-K is in the plan and the question
asks for a measure, the grade follows what the calculator could do: all inputs found, some missing, or nothing
computed, whatever the other rules made of the answer's sentences."""
from __future__ import annotations

import re

from agent.models.financials import Computation
from agent.models.research import Evaluation
from agent.providers.llm.roles import EvaluateRequest

# (completeness, specificity cap, accuracy cap) per outcome; the four dimensions and their weights stay the design's
COMPUTED = (90, 100, 100)
PARTLY = (40, 50, 50)  # completeness scales with the share of inputs found
NOT_COMPUTED = (10, 40, 30)
# An answer read from sentences (a call's remarks, a filing's prose): the rules check that each figure is printed in
# its cited passage and that the sentence names the metric and the period, but not that it means what the question
# means (a segment's figure, an adjusted one, another basis). So it is never graded as certain: completeness and
# accuracy are capped below a computed figure's.
FROM_PROSE = (90, 80)  # completeness and accuracy caps


def asks_for_figure(req: EvaluateRequest) -> bool:
    if req.computations:
        return True
    if not req.plan.uses_10k or req.scope == "news":
        return False
    from agent.statements.questions import measure_query

    return measure_query(req.question) is not None


def grade_figure(req: EvaluateRequest, ev: Evaluation) -> Evaluation:
    """`ev` with the figure's grade when the question asks for one from the statements; otherwise the grade of an
    answer read from sentences (FROM_PROSE)."""
    if not asks_for_figure(req):
        return ev.model_copy(update={"completeness_score": min(ev.completeness_score, FROM_PROSE[0]),
                                     "accuracy_score": min(ev.accuracy_score, FROM_PROSE[1])})
    done: list[Computation] = [c for c in req.computations if c.complete]
    if req.computations and len(done) == len(req.computations):
        completeness, spec_cap, acc_cap = COMPUTED
        missing: list[str] = []
        sufficient = ev.accuracy_score >= 90
    elif req.computations:
        found = sum(1 for c in req.computations for i in c.inputs if i.fact is not None)
        total = sum(len(c.inputs) for c in req.computations) or 1
        completeness, spec_cap, acc_cap = round(PARTLY[0] * found / total), PARTLY[1], PARTLY[2]
        missing = [f"{c.label}: {m} not found in the statements" for c in req.computations for m in c.missing]
        sufficient = False
    else:
        completeness, spec_cap, acc_cap = NOT_COMPUTED
        missing = ["the figure asked for could not be computed from the statements"]
        sufficient = False
    return ev.model_copy(update={
        "completeness_score": completeness,
        "specificity_score": min(ev.specificity_score, spec_cap),
        "accuracy_score": min(ev.accuracy_score, acc_cap),
        "missing_info": (missing + ev.missing_info)[:8],
        "is_sufficient": sufficient,
    })


_YES_NO_QUESTION = re.compile(r"^\W*(?:is|are|was|were|has|have|had|does|do|did|will|would|can|could|should)\b", re.I)
_ANSWERS_YES_NO = re.compile(r"^\W*(?:\*\*)?\s*(?:yes|no)\b|^\W*-?\s*(?:[\w\s-]*:\s*)?(?:yes|no)[:,.]", re.I | re.M)
UNANSWERED_YES_NO = (20, 40, 40)  # completeness, specificity and accuracy caps


def grade_yes_no(req: EvaluateRequest, ev: Evaluation) -> Evaluation:
    """A question that asks yes or no, answered with neither: whatever its sentences hold, it has not answered."""
    if not _YES_NO_QUESTION.search(req.question) or _ANSWERS_YES_NO.search(req.answer.text):
        return ev
    return ev.model_copy(update={
        "completeness_score": min(ev.completeness_score, UNANSWERED_YES_NO[0]),
        "specificity_score": min(ev.specificity_score, UNANSWERED_YES_NO[1]),
        "accuracy_score": min(ev.accuracy_score, UNANSWERED_YES_NO[2]),
        "missing_info": (["the question asks yes or no; the answer says neither"] + ev.missing_info)[:8],
        "is_sufficient": False,
    })
