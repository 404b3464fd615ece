"""Research boundary models shared by providers, the 10-K code and the pipeline: plan, search plan,
evidence, findings, answer, evaluation and token usage."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field

from agent.models.corpus import SearchHit
from agent.settings import AnswerMode

DataSource = Literal["earnings_transcripts", "10k", "news", "hybrid"]
QuestionType = Literal["single_company", "multiple_companies", "comparison"]

# confidence = the weighted sum of the four evaluation scores, computed in code (never taken from an LLM)
WEIGHTS = {"completeness": 0.35, "specificity": 0.30, "accuracy": 0.25, "clarity": 0.10}


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


class Citation(BaseModel):
    marker: str  # '[1]', '[10K1]', '[N1]'
    source_type: str
    ticker: str | None = None
    period: str = ""
    text: str
    citation_key: str
    speaker: str | None = None
    item: str | None = None
    url: str | None = None


class Answer(BaseModel):
    text: str
    citations: list[Citation] = Field(default_factory=list)


class EvaluationScores(BaseModel):
    """What an evaluator returns: four scores (0-100) and follow-up requests. The scope and the
    confidence are not in it: both are set in code."""

    completeness_score: int = Field(ge=0, le=100)
    specificity_score: int = Field(ge=0, le=100)
    accuracy_score: int = Field(ge=0, le=100)
    clarity_score: int = Field(ge=0, le=100)
    issues: list[str] = Field(default_factory=list)
    missing_info: list[str] = Field(default_factory=list)
    suggestions: list[str] = Field(default_factory=list)
    is_sufficient: bool = False
    followup_keywords: list[str] = Field(default_factory=list)
    needs_transcript_search: bool = True
    needs_news_search: bool = False
    news_query: str | None = None


class Evaluation(EvaluationScores):
    """An evaluation of one scope. Confidence is computed here, never taken from the LLM."""

    scope: str = "all"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def overall_confidence(self) -> float:
        return round(
            (WEIGHTS["completeness"] * self.completeness_score
             + WEIGHTS["specificity"] * self.specificity_score
             + WEIGHTS["accuracy"] * self.accuracy_score
             + WEIGHTS["clarity"] * self.clarity_score) / 100,
            4,
        )
