"""Recent-news search: Tavily behind the shared circuit breaker.

Everything Tavily returns is untrusted web text. It only ever becomes evidence text (sanitised and capped);
nothing in it picks a route, a tool, a ticker or a period. Without an API key the provider says news is
unavailable: it never invents results.
"""
from __future__ import annotations

import hashlib
import logging
import re
import time
import unicodedata
from collections.abc import Mapping
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit

import requests
from pydantic import BaseModel, Field

from agent.infra.breaker import CircuitBreaker, CircuitOpenError
from agent.infra.client_retries import mark_retried
from agent.infra.error_classes import classify_error
from agent.models.research import Evidence
from agent.redact import MASK, redact
from agent.settings import Settings

log = logging.getLogger(__name__)

NewsStatus = Literal["ok", "unavailable", "error", "circuit_open"]
UNAVAILABLE_REASON = "news search is unavailable: FINAGENT_TAVILY_API_KEY is not set"
BREAKER_NAME = "tavily"

SNIPPET_CHARS = 1500
TITLE_CHARS = 300
SUMMARY_CHARS = 2000
URL_CHARS = 2048
QUERY_CHARS = 400  # Tavily rejects longer queries
MAX_RESULTS = 20  # Tavily's upper bound
RETRYABLE = frozenset({"network", "rate_limit", "system"})


class NewsResult(BaseModel):
    status: NewsStatus
    reason: str = ""
    query: str = ""
    summary: str | None = None  # Tavily's AI-generated answer: untrusted, not citable
    items: list[Evidence] = Field(default_factory=list)
    error_class: str | None = None  # error class when status is 'error'
    retry_after_s: float | None = None  # when status is 'circuit_open'


@runtime_checkable
class NewsProvider(Protocol):
    name: str

    def search(self, query: str, max_results: int = 5) -> NewsResult: ...


class NewsSearchError(Exception):
    """A failed Tavily call. status_code lets agent.persistence.ledger.classify_error give its error class."""

    def __init__(self, message: str, status_code: int | None = None, detail: str = ""):
        super().__init__(message)
        self.status_code = status_code
        self.detail = detail  # Tavily's own words, kept out of str() so they cannot sway classify_error


class NewsNetworkError(NewsSearchError, ConnectionError):
    """Tavily could not be reached or did not answer in time (classified as 'network')."""


# ---------- untrusted text ----------
_DROP_CATEGORIES = {"Cc", "Cf", "Co", "Cs", "Cn"}  # controls, invisible formatting (bidi, zero-width), private use
_DELIMITER = re.compile(r"<<<|>>>")  # the prompt layer's evidence delimiters
_MARKER = re.compile(r"\[((?:N|10K)?\d{1,4})\]", re.I)  # a page must not forge our citation markers


def clean_text(value: Any, limit: int) -> str:
    """Plain single-line text: NFKC-normalised, without control/format characters, forged delimiters or markers."""
    if not isinstance(value, str):
        return ""
    value = unicodedata.normalize("NFKC", value)
    value = "".join(" " if ch in "\t\n\r\x0b\x0c" else ch for ch in value
                    if ch in "\t\n\r\x0b\x0c" or unicodedata.category(ch) not in _DROP_CATEGORIES)
    value = _MARKER.sub(r"(\1)", _DELIMITER.sub(" ", value))
    value = " ".join(value.split())
    if len(value) <= limit:
        return value
    cut = value[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit * 0.8 else cut).rstrip() + "…"


def clean_url(value: Any) -> str | None:
    """An http(s) URL safe to show as a link, or None (javascript:, data:, relative, oversized URLs are dropped)."""
    if not isinstance(value, str):
        return None
    url = value.strip()
    if not url or len(url) > URL_CHARS or any(ch.isspace() or unicodedata.category(ch) in _DROP_CATEGORIES for ch in url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return url


def news_chunk_id(url: str) -> str:
    """Stable across processes and runs (unlike hash()), so the same article keeps one citation key."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]


def to_evidence(raw: Mapping[str, Any], query: str, snippet_chars: int = SNIPPET_CHARS) -> tuple[str | None, list[Evidence]]:
    """Tavily's JSON -> (summary, evidence). Malformed entries are skipped, duplicate URLs kept once."""
    summary = clean_text(raw.get("answer"), SUMMARY_CHARS) or None
    results = raw.get("results")
    items: list[Evidence] = []
    seen: set[str] = set()
    for entry in results if isinstance(results, list) else []:
        if not isinstance(entry, dict):
            continue
        url = clean_url(entry.get("url"))
        if url is None:
            continue
        chunk_id = news_chunk_id(url)
        if chunk_id in seen:
            continue
        title = clean_text(entry.get("title"), TITLE_CHARS)
        snippet = clean_text(entry.get("content"), snippet_chars)
        if not title and not snippet:
            continue
        published = clean_text(entry.get("published_date"), 40)
        head = f"{title} ({published})" if title and published else title
        score = entry.get("score")
        seen.add(chunk_id)
        items.append(Evidence(
            source_type="news", chunk_id=chunk_id, ticker=None, title=title or None, url=url,
            text=f"{head}. {snippet}" if head and snippet else head or snippet,
            # Tavily's own relevance, not page content; clamped so it cannot outrank everything else by fiat
            score=min(max(float(score), 0.0), 1.0) if isinstance(score, (int, float)) else 0.0,
            query=query,
        ))
    return summary, items


def format_news_context(items: list[Evidence], markers: Mapping[str, str] | None = None,
                        summary: str | None = None) -> str:
    """The [N1], [N2] context block. With `markers` (citation_key -> marker, as agent.pipeline.answering.assign_markers
    builds them) items without a marker are left out; without it items are numbered [N1].. in order."""
    lines: list[str] = []
    if summary:
        lines.append(f"News summary (generated by the search service; not a citable source): {summary}")
    for i, ev in enumerate(items, 1):
        marker = markers.get(ev.citation_key) if markers is not None else f"[N{i}]"
        if not marker:
            continue
        lines.append(f"{marker} {ev.text}" + (f"\nSource: {ev.url}" if ev.url else ""))
    return "\n\n".join(lines)


# ---------- providers ----------
class UnavailableNews:
    name = "unavailable"

    def search(self, query: str, max_results: int = 5) -> NewsResult:
        return NewsResult(status="unavailable", reason=UNAVAILABLE_REASON, query=query)


class TavilyNews:
    name = "tavily"

    def __init__(self, api_key: str, breaker: CircuitBreaker, *, base_url: str | None = None, timeout_s: float = 30.0,
                 max_retries: int = 0, backoff_s: float = 0.5, snippet_chars: int = SNIPPET_CHARS):
        from tavily import TavilyClient

        if not api_key:
            # TavilyClient would fall back to TAVILY_API_KEY or keyless mode; we want neither
            raise ValueError("TavilyNews needs an API key; use UnavailableNews without one")
        self._api_key = api_key
        self.breaker = breaker
        self.timeout_s = timeout_s
        self.max_retries = max(0, max_retries)
        self.backoff_s = backoff_s
        self.snippet_chars = snippet_chars
        self.client = TavilyClient(api_key=api_key, api_base_url=base_url)

    def search(self, query: str, max_results: int = 5) -> NewsResult:
        """Never raises for a failed search: the outcome is in `status` (news is an optional source)."""
        query = " ".join(query.split())[:QUERY_CHARS] if isinstance(query, str) else ""
        try:
            summary, items = self.fetch(query, max_results)
        except CircuitOpenError as exc:
            return NewsResult(status="circuit_open", reason=str(exc), query=query, retry_after_s=exc.retry_after_s)
        except Exception as exc:
            error_class = classify_error(exc)
            log.warning("news search failed (%s): %s %s", error_class, self._redact(str(exc)), getattr(exc, "detail", ""))
            return NewsResult(status="error", reason=f"news search failed ({error_class}): {self._redact(str(exc))}",
                              query=query, error_class=error_class)
        return NewsResult(status="ok", reason=f"{len(items)} news results", query=query, summary=summary, items=items)

    def fetch(self, query: str, max_results: int = 5) -> tuple[str | None, list[Evidence]]:
        """One search with retries of transient failures; every attempt goes through the breaker.
        Raises CircuitOpenError, NewsSearchError (or its NewsNetworkError) after the last attempt."""
        query = " ".join(query.split())[:QUERY_CHARS] if isinstance(query, str) else ""
        if not query:
            raise NewsSearchError("news search needs a non-empty query", status_code=400)
        max_results = min(max(int(max_results), 1), MAX_RESULTS)
        for attempt in range(self.max_retries + 1):
            try:
                raw = self.breaker.call(self._request, query, max_results)
                return to_evidence(raw, query, self.snippet_chars)
            except CircuitOpenError:
                raise
            except Exception as exc:
                if attempt >= self.max_retries or classify_error(exc) not in RETRYABLE:
                    mark_retried(exc, "news", attempt + 1)  # this loop owns the retries: a task must not add its own
                    raise
                log.info("news search attempt %d failed (%s); retrying", attempt + 1, classify_error(exc))
                time.sleep(self.backoff_s * 2 ** attempt)
        raise AssertionError("unreachable")

    def _request(self, query: str, max_results: int) -> dict:
        """One HTTP call; Tavily's exceptions become NewsSearchError with the HTTP status for classification."""
        from tavily import errors as terr

        try:
            raw = self.client.search(query=query, topic="news", max_results=max_results, include_answer=True,
                                     timeout=self.timeout_s)
        except terr.InvalidAPIKeyError as exc:
            raise NewsSearchError("Tavily rejected the API key (HTTP 401)", 401, self._detail(exc)) from exc
        except terr.ForbiddenError as exc:
            raise NewsSearchError("Tavily refused the request (HTTP 403)", 403, self._detail(exc)) from exc
        except terr.UsageLimitExceededError as exc:
            raise NewsSearchError("Tavily usage limit exceeded (HTTP 429)", 429, self._detail(exc)) from exc
        except terr.BadRequestError as exc:
            raise NewsSearchError("Tavily rejected the request as invalid (HTTP 400)", 400, self._detail(exc)) from exc
        except terr.TimeoutError as exc:
            raise NewsNetworkError(f"Tavily did not answer within {self.timeout_s:g} s") from exc
        except requests.HTTPError as exc:
            status = exc.response.status_code if exc.response is not None else 502
            raise NewsSearchError(f"Tavily returned HTTP {status}", status) from exc
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise NewsNetworkError(f"could not reach Tavily: {type(exc).__name__}") from exc
        except (ValueError, AttributeError, TypeError) as exc:  # body not JSON / not an object; odd status codes
            raise NewsSearchError("Tavily returned a malformed response", 502) from exc
        if not isinstance(raw, dict):
            raise NewsSearchError("Tavily returned a malformed response", 502)
        return raw

    def _detail(self, exc: BaseException) -> str:
        return clean_text(self._redact(str(exc)), 200)

    def _redact(self, text: str) -> str:
        return redact(text.replace(self._api_key, MASK))


def make_news(settings: Settings, redis) -> NewsProvider:
    key = settings.tavily_api_key.get_secret_value().strip() if settings.tavily_api_key else ""
    if not key:
        return UnavailableNews()
    breaker = CircuitBreaker(redis, BREAKER_NAME, threshold=settings.circuit_breaker_threshold,
                             reset_s=settings.circuit_breaker_reset_s)
    return TavilyNews(key, breaker, base_url=settings.tavily_base_url, max_retries=settings.max_tool_retries)
