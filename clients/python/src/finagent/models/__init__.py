"""The API's request and response models. The server validates and answers with these same classes, so a model
here is the contract: change one and the server's OpenAPI schema changes with it."""
from finagent.models.api_bodies import (
    ErrorBody,
    ErrorDetail,
    ErrorInfo,
    Feedback,
    Health,
    JobEvent,
    JobLedger,
    JobPage,
    JobSummary,
    JobView,
    Readiness,
    Submitted,
    Suggestion,
    ToolCall,
)
from finagent.models.batch_bodies import (
    BatchCancelled,
    BatchItem,
    BatchPage,
    BatchProgress,
    BatchSubmitted,
    BatchSummary,
    ItemStatus,
    LineError,
)
from finagent.models.job_request import FINAL_STATUSES, AnswerMode, JobRequest, JobStatus, plain_text
from finagent.models.job_result import (
    Citation,
    ContextUse,
    Evaluation,
    EvaluationScores,
    IterationRecord,
    JobResult,
    RoutingDecision,
    ThoroughSearch,
)

__all__ = [
    "FINAL_STATUSES", "AnswerMode", "BatchCancelled", "BatchItem", "BatchPage", "BatchProgress", "BatchSubmitted",
    "BatchSummary", "Citation", "ContextUse", "ErrorBody", "ErrorDetail", "ErrorInfo", "Evaluation", "EvaluationScores",
    "Feedback", "Health", "ItemStatus", "IterationRecord", "JobEvent", "JobLedger", "JobPage", "JobRequest",
    "JobResult", "JobStatus", "JobSummary", "JobView", "LineError", "Readiness", "RoutingDecision", "Submitted",
    "Suggestion", "ThoroughSearch", "ToolCall", "plain_text",
]
