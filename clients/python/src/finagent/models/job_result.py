"""A finished job's result: the answer, its citations, and how the server reached it (evaluations, routing)."""
from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field, computed_field

from finagent.models.job_request import JobRequest, JobStatus

# confidence = the weighted sum of the four evaluation scores, computed in code (never taken from an LLM)
WEIGHTS = {"completeness": 0.35, "specificity": 0.30, "accuracy": 0.25, "clarity": 0.10}


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
    page: int | None = None  # a filing read page by page: the 0-based page of the document


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


class Grades(BaseModel):
    """The grades an iteration's confidence was merged from: each scope's (a company-period, a company's 10-K, the
    news) and, when the answer spans several periods or companies, the composed answer's as a whole. The confidence
    weighs the whole-answer grade as much as the mean of the per-scope ones."""

    per_scope: dict[str, float] = Field(default_factory=dict)
    whole_answer: float | None = None


class IterationRecord(BaseModel):
    iteration: int
    confidence: float
    evaluation: Evaluation  # the merged evaluation the confidence is computed from
    chunks_total: int
    chunks_added: int
    keywords: list[str] = Field(default_factory=list)
    will_iterate: bool
    reason: str
    grades: Grades | None = None  # absent from results saved before the whole-answer evaluation


class RoutingDecision(BaseModel):
    agent_name: str  # strategy name, e.g. 'transcripts_first', '10k_first', 'broad_window'
    confidence: float
    reasoning: str
    timestamp: dt.datetime = Field(default_factory=lambda: dt.datetime.now(dt.UTC))


class ContextUse(BaseModel):
    """How the latest answer used the evidence: passages read verbatim, and those over the token budget that
    reached it only through the working-memory summary (with the scopes they came from)."""

    verbatim: int = 0
    summarised: int = 0
    summarised_scopes: list[str] = Field(default_factory=list)
    merged: int = 0  # adjacent chunks of one document merged into one passage
    tokens_saved: int = 0  # by the merging: text neighbouring chunks share, sent once


class ThoroughSearch(BaseModel):
    """Offered when a job in a quicker mode stopped below its confidence threshold: the request that would
    search thoroughly (deep_search), ready to submit."""

    message: str = "Want me to search thoroughly?"
    request: JobRequest


class JobResult(BaseModel):
    """The final result object."""

    job_id: str
    question: str
    status: JobStatus
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    confidence: float = 0.0
    chunks_used: int = 0
    iterations: int = 0
    timing: dict[str, float] = Field(default_factory=dict)
    sources: dict[str, int] = Field(default_factory=dict)
    evaluations: list[IterationRecord] = Field(default_factory=list)
    tokens: dict[str, int] = Field(default_factory=dict)
    cost_usd: float = 0.0
    cache_hits: int = 0
    context: ContextUse = Field(default_factory=ContextUse)
    provider: str
    mode: str | None = None
    termination_reason: str | None = None
    routing_history: list[RoutingDecision] = Field(default_factory=list)
    reasoning_trace: list[str] = Field(default_factory=list)
    news: str = "not_requested"
    problems: list[str] = Field(default_factory=list)
    parent_job_id: str | None = None
    error: str | None = None
    # a failed job: what failed ('network', 'rate_limit', 'schema', 'internal', ...) and whether `answer` holds the
    # partial answer it reached (cited findings, or an answer from before the failure)
    error_class: str | None = None
    partial: bool = False
    suggestion: ThoroughSearch | None = None
