"""Research boundary models shared by providers, the 10-K code and the pipeline: plan, search plan,
evidence, findings, answer, evaluation and token usage."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agent.models.corpus import SearchHit
from finagent.models import AnswerMode, Citation, Evaluation, EvaluationScores

# Citation, Evaluation and EvaluationScores are part of a job's result (the API's contract, `finagent.models`)
__all__ = ["Answer", "Citation", "DataSource", "Evaluation", "EvaluationScores", "Evidence", "Finding", "QuestionType",
           "ResearchPlan", "ScopeFindings", "SearchPlan", "SearchSpec", "TickerPeriods", "Usage"]

DataSource = Literal["earnings_transcripts", "10k", "news", "hybrid"]
QuestionType = Literal["single_company", "multiple_companies", "comparison"]


def _transcripts_only() -> list[DataSource]:
    return ["earnings_transcripts"]


class Usage(BaseModel):
    """Tokens one provider call used, the model that used them, and whether the response cache answered."""

    prompt: int = 0
    completion: int = 0
    model: str | None = None
    cached: bool = False

    def add(self, other: Usage) -> Usage:
        return Usage(prompt=self.prompt + other.prompt, completion=self.completion + other.completion,
                     model=self.model or other.model, cached=self.cached and other.cached)


class ResearchPlan(BaseModel):
    """The reasoning planner's output: one structured LLM call."""

    reasoning: str
    tickers: list[str] = Field(default_factory=list)
    time_refs: list[str] = Field(default_factory=list)  # preserved exactly as the user wrote them
    intent: str = ""
    topic: str = ""
    question_type: QuestionType = "single_company"
    answer_mode: AnswerMode = AnswerMode.standard
    data_sources: list[DataSource] = Field(default_factory=_transcripts_only)
    needs_latest_news: bool = False
    needs_10k: bool = False
    search_queries: list[str] = Field(default_factory=list)  # initial keyword phrases
    is_valid: bool = True
    invalid_reason: str | None = None
    confidence: float = Field(default=0.9, ge=0, le=1)

    @property
    def uses_transcripts(self) -> bool:
        """The earnings calls: named, or within `hybrid`; a plan that names no source searches them too (the
        `needs_` flags add the 10-K or the news to them)."""
        named = set(self.data_sources)
        return bool(named & {"earnings_transcripts", "hybrid"}) or not named

    @property
    def uses_10k(self) -> bool:
        """The 10-K: asked for, named, or within `hybrid` (transcripts and the 10-K)."""
        return self.needs_10k or bool(set(self.data_sources) & {"10k", "hybrid"})

    @property
    def uses_news(self) -> bool:
        """A news search: asked for, or `news` named among the sources."""
        return self.needs_latest_news or "news" in self.data_sources


class TickerPeriods(BaseModel):
    ticker: str
    periods: list[str]  # period keys: '2024_q4' or 'FY2024'


class SearchPlan(BaseModel):
    """The search planner's output: each company's own periods for each data source."""

    transcripts: list[TickerPeriods] = Field(default_factory=list)
    tenk: list[TickerPeriods] = Field(default_factory=list)
    queries: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    reasoning: str = ""


class SearchSpec(BaseModel):
    """One transcript search: one quarter of one company for one keyword phrase."""

    ticker: str
    period: str  # '2024_q4'
    query: str


class Evidence(SearchHit):
    iteration: int = 1
    query: str = ""


class Finding(BaseModel):
    citation_key: str
    extra_keys: list[str] = Field(default_factory=list)  # a calculation can cite several sources
    text: str  # a sentence or a short paraphrase supported by the cited evidence


class ScopeFindings(BaseModel):
    scope: str  # 'AAPL:2024_q4', 'AAPL:10k', 'news'
    findings: list[Finding] = Field(default_factory=list)


class Answer(BaseModel):
    text: str
    citations: list[Citation] = Field(default_factory=list)
