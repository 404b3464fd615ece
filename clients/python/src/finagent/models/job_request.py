"""What a caller submits: the request, its answer modes and the text rules its fields follow; and a job's statuses."""
from __future__ import annotations

import re
import uuid
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

JobStatus = Literal["queued", "running", "completed", "failed", "rejected", "cancelled"]
FINAL_STATUSES: tuple[str, ...] = ("completed", "failed", "rejected", "cancelled")


# How the job's first search is routed: `auto` lets the router choose from the plan's sources; a named strategy is
# used as given (transcripts_first: the earnings calls, the 10-K only on a re-route; 10k_first: the 10-K, the calls
# only on a re-route; hybrid: both at once; broad_window: a doubled window of quarters; transcripts_first_fallback:
# the calls beside any 10-K the plan asks for)
Strategy = Literal["auto", "transcripts_first", "10k_first", "hybrid", "broad_window", "transcripts_first_fallback"]


class AnswerMode(str, Enum):
    direct = "direct"
    standard = "standard"
    detailed = "detailed"
    deep_search = "deep_search"


# C0 and C1 control characters (and DEL) other than tab, newline and carriage return; and lone surrogates, which is
# how Python carries bytes that were not valid UTF-8 (a command-line argument, a file read with surrogateescape)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# an exchange symbol (ABC, BRK.B), or the server's registry key of a company known only by name (its name's letters
# and digits, e.g. 3M or a long name); every registry key must pass, since plans, suggestions and re-runs carry the
# registry's tickers into new requests
_TICKER = re.compile(r"[A-Z0-9][A-Z0-9]{0,19}(?:[.\-][A-Z0-9]{1,3})?")
MAX_TICKERS = 20


def plain_text(value: Any) -> Any:
    """Refuse text no person types (binary, control characters), then fold whitespace runs (a pasted question's tabs
    and line breaks) into single spaces."""
    if not isinstance(value, str):
        return value
    bad = _SURROGATE.search(value)
    if bad:
        raise PydanticCustomError("invalid_text", "contains bytes that are not UTF-8 text (at character {at})", {"at": bad.start() + 1})
    bad = _CONTROL.search(value)
    if bad:
        raise PydanticCustomError("control_character", "contains the control character {code} at character {at} "
                                  "(send plain text; tabs and line breaks are fine)", {"code": f"U+{ord(bad.group()):04X}", "at": bad.start() + 1})
    return " ".join(value.split())


# The class docstring is the OpenAPI description of the request body: keep it as the server has published it.
class JobRequest(BaseModel):
    """What a caller submits (Celery `submit_research`, HTTP, CLI). Validation refuses what could never be a research
    request (binary or control characters, empty questions, malformed tickers, unknown fields), so nothing is written
    for it; `agent.submission.check_request` adds the checks that need the periods parser or the database."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=3, max_length=2000)
    mode: AnswerMode | None = None
    tickers: list[str] | None = Field(default=None, max_length=MAX_TICKERS)
    max_iterations: int | None = Field(default=None, ge=1, le=20, strict=True)
    max_duration_seconds: int | None = Field(default=None, ge=5, le=3600, strict=True)
    min_confidence: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)
    batch: bool = False
    feedback: str | None = Field(default=None, min_length=1, max_length=2000)
    parent_job_id: str | None = None
    strategy: Strategy = "auto"

    @field_validator("question", "feedback", "idempotency_key", mode="before")
    @classmethod
    def _text(cls, value: Any, info: ValidationInfo) -> Any:
        text = plain_text(value)
        if info.field_name == "question" and isinstance(text, str) and not text:
            raise PydanticCustomError("empty", "the question is empty")
        return text

    @field_validator("tickers", mode="before")
    @classmethod
    def _tickers(cls, value: Any) -> Any:
        """'$aapl' and ' AAPL ' are AAPL; an empty list is no list. Whether the company is known needs the database."""
        if not isinstance(value, list):
            return value
        out: list[Any] = []
        for raw in value:
            if not isinstance(raw, str):
                return value  # pydantic names the element that is not a string
            ticker = raw.strip().lstrip("$").upper()
            if not _TICKER.fullmatch(ticker):
                raise PydanticCustomError("ticker_format", "{ticker} is not a ticker symbol (letters and digits, e.g. ABC or BRK.B)",
                                          {"ticker": repr(raw[:20])})
            if ticker not in out:
                out.append(ticker)
        return out or None

    @field_validator("parent_job_id")
    @classmethod
    def _job_id(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return str(uuid.UUID(value))
        except ValueError:
            raise PydanticCustomError("job_id", "not a job id (a UUID)") from None
