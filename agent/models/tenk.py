"""Boundary models of the 10-K agent."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agent.models.financials import MeasureQuery
from agent.models.research import Evidence

ITEMS = ("1", "1A", "7", "7A", "8")


def filing_key(ticker: str, fiscal_year: int) -> str:
    """One 10-K filing, the 10-K agent's unit of work: 'ACME:FY2024'. Its rounds' calls, step keys and progress are
    keyed by it, so two fiscal years of one company run side by side."""
    return f"{ticker}:FY{fiscal_year}"


class SubQuestion(BaseModel):
    id: int
    text: str
    kind: Literal["TABLE", "TEXT"]
    items: list[str] = Field(default_factory=lambda: ["7"])  # section routing: Item 1, 1A, 7, 7A or 8
    keywords: str  # declarative search phrase


class TenKPlan(BaseModel):
    ticker: str
    fiscal_year: int
    sub_questions: list[SubQuestion] = Field(min_length=1, max_length=12)
    search_plan: str = ""
    calculation: str | None = None  # e.g. 'inventory_turnover = cost of sales / average inventory'
    measure: MeasureQuery | None = None  # what to compute from the statements (agent/statements); code computes it


class TableCandidate(BaseModel):
    table_id: int
    item: str
    caption: str
    preview: str  # the first rows, as markdown


class TenKEvaluation(BaseModel):
    quality: float = Field(ge=0, le=1)
    missing_info: list[str] = Field(default_factory=list)
    answered: list[int] = Field(default_factory=list)  # sub-question ids with an answer


class TenKPlanRequest(BaseModel):
    question: str
    ticker: str
    fiscal_year: int
    missing_info: list[str] = Field(default_factory=list)  # replanning from the last evaluation
    previous: TenKPlan | None = None
    budget_note: str = ""


class SelectTablesRequest(BaseModel):
    question: str
    sub_question: SubQuestion
    candidates: list[TableCandidate]
    max_tables: int = 2
    budget_note: str = ""


class TenKAnswerRequest(BaseModel):
    question: str
    plan: TenKPlan
    evidence: list[Evidence]
    markers: dict[str, str]  # citation_key -> '[10K1]'
    budget_note: str = ""


class TenKEvaluateRequest(BaseModel):
    question: str
    round: int = 1
    plan: TenKPlan
    answer: str
    evidence: list[Evidence]
    markers: dict[str, str] = Field(default_factory=dict)  # citation_key -> '[10K1]', as cited in the answer
    budget_note: str = ""
