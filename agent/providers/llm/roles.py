"""The LLM roles every provider implements, with their request models.

Each call returns (result, Usage). Requests carry a budget note (iterations and seconds left)
that every prompt includes.
"""
from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, Field

from agent.models.corpus import Company
from agent.models.financials import Computation
from agent.models.research import Answer, Evaluation, Evidence, ResearchPlan, ScopeFindings, Usage
from agent.models.steps import WHOLE_ANSWER

# every role a provider answers (the pipeline's four and the 10-K agent's); settings.llm_output_tokens has one cap each
ROLES = ("plan", "extract", "compose", "evaluate", "plan_10k", "select_tables", "answer_10k", "evaluate_10k")


class PlanRequest(BaseModel):
    question: str
    companies: list[Company]
    tickers_hint: list[str] = Field(default_factory=list)
    feedback: str | None = None
    previous_plan: ResearchPlan | None = None
    budget_note: str = ""


class ExtractRequest(BaseModel):
    question: str
    reasoning: str
    scope: str
    evidence: list[Evidence]
    markers: dict[str, str]  # citation_key -> '[3]'
    max_findings: int = 5
    budget_note: str = ""


class ComposeRequest(BaseModel):
    question: str
    plan: ResearchPlan
    findings: list[ScopeFindings]
    evidence: list[Evidence]
    markers: dict[str, str]
    max_tokens: int  # the longest answer: the mode's budget, within the compose role's output cap (factory.py)
    working_memory: str | None = None
    feedback: str | None = None
    news_summary: str | None = None  # the news service's own summary: untrusted, not citable
    budget_note: str = ""


class EvaluateRequest(BaseModel):
    question: str
    plan: ResearchPlan
    answer: Answer
    scope: str  # 'all', 'AAPL:2024_q4', ..., or WHOLE_ANSWER: the answer as a whole, beside the per-scope evaluations
    iteration: int = 1
    evidence: list[Evidence]
    markers: dict[str, str]
    periods: dict[str, list[str]] = Field(default_factory=dict)  # ticker -> period labels targeted
    previous_keywords: list[str] = Field(default_factory=list)
    budget_note: str = ""
    # the figures the 10-K agent computed from the statements for the scope's companies (agent/statements)
    computations: list[Computation] = Field(default_factory=list)

    @property
    def whole(self) -> bool:
        """The evaluation judges what only the whole answer shows: coverage of every company and period asked
        about, comparisons and changes across them."""
        return self.scope == WHOLE_ANSWER


class LLMProvider(Protocol):
    name: str

    def plan(self, req: PlanRequest) -> tuple[ResearchPlan, Usage]: ...

    def extract(self, req: ExtractRequest) -> tuple[ScopeFindings, Usage]: ...

    def compose(self, req: ComposeRequest) -> tuple[Answer, Usage]: ...

    def evaluate(self, req: EvaluateRequest) -> tuple[Evaluation, Usage]: ...


def revises_answers(llm: object) -> bool:
    """Whether the provider's compose reworks an answer from the evaluation's feedback, so that a refinement round
    (no new evidence) can change it. A provider that cannot says so with `revises_answers = False`; a wrapper
    (cache, limits) passes the attribute through."""
    return bool(getattr(llm, "revises_answers", True))
