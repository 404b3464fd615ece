"""Soft and hard time limits of every kind of task, derived from the settings that bound what the task waits on.

The soft limit is the longest a live task of its kind can legitimately take: past it the task is stuck, and it gets
`SoftTimeLimitExceeded` raised inside it (a retryable timeout; the final failure is stored like any other).
The hard limit is the soft limit plus the longest single blocking wait the exception may have to sit behind
(an exception raised in a thread lands when it next runs Python: a socket read returns within its own timeout)
plus `GRACE_S` to store the failure. Past it the task is given up for dead: prefork kills the process, our
threads-pool enforcer (workers/deadlines.py) expires its claim so the watchdog re-sends its job's step.
The broker's visibility timeout must be longer than the longest hard limit, or a slow but alive task would be
delivered a second time (settings.py refuses such a configuration).

Why each number:
- LLM role calls (plan, extract, compose, evaluate and the 10-K roles) wait on one role call: the shared rate
  limit's longest wait (`RATE_LIMIT_MAX_WAIT_S`, only when a limit is on), the injected benchmark latency (up to
  `llm_timeout_s`: a modelled provider slower than the client would wait for is a stuck one, which the soft limit
  is there to catch), then `REQUESTS_PER_ROLE_CALL` requests (the call and one structured-output repair), each up
  to `llm_attempts` = 1 + `max_tool_retries` SDK attempts of `llm_timeout_s` with the SDK's backoff
  (`SDK_RETRY_WAIT_S`, its longest exponential step) between them; plus `LOCAL_WORK_S` for prompts, rows and the
  offline providers' own work. The SDK owns those retries: the task does not retry an error the SDK gave up with,
  nor a soft limit that broke off its attempts (tasks/fanout.py, agent/infra/client_retries.py), so one execution's
  budget is all the attempts a request ever gets. A server whose Retry-After asks for longer than the SDK backoff
  can push a call over: it is cut, and fails with the attempts it made.
- news waits on Tavily: 1 + `max_tool_retries` requests of `NEWS_TIMEOUT_S` (TavilyNews's timeout) with its backoff.
  TavilyNews owns those retries: a news search that fails is stored with its reason, never raised to the task.
- search waits on one hybrid query and the query's embedding: `SEARCH_S` covers a cold worker loading the local
  model; the OpenAI embedder adds its own attempts (`REMOTE_EMBED_ATTEMPTS`) of `llm_timeout_s`.
- 10-K retrieval is a search plus the slot's LLM calls (table selection, a rare routing fix). Its budget is the worst
  case of its slowest dependency (a role call, or the remote embedder) on top of a normal search: one failing
  dependency at a time, not every one at once, or no sane visibility timeout would cover it. A slot that needs more
  is cut and retried like any other call.
- embed_batch embeds `embedding_batch_size` texts: `EMBED_STARTUP_S` for a cold model, `EMBED_PER_TEXT_S` per text
  (the local model encodes under one lock per process, so a batch may wait behind its neighbours), and the remote
  attempts when the embeddings are OpenAI's.
- coordinator steps (`advance`), the public `finagent.v1.*` tasks and the beat tasks only read and write Postgres and
  Redis: fixed bounds, generous next to their usual milliseconds, short enough that a stuck one is noticed.
"""
from __future__ import annotations

from enum import Enum
from typing import Protocol

from pydantic import BaseModel, Field, model_validator

# The settings validate themselves against these limits, so this module sits beside agent/settings.py and imports
# nothing of agent: the few numbers it shares with other modules are restated here, and a unit test keeps them equal.
RATE_LIMIT_MAX_WAIT_S = 30.0  # agent/infra/ratelimit.py MAX_WAIT_S: the longest a call waits for a rate-limit slot
REQUESTS_PER_ROLE_CALL = 2  # the request and one structured-output repair (agent/providers/llm/structured.py)
SDK_RETRY_WAIT_S = 8.0  # the OpenAI SDK's longest backoff between two attempts
LOCAL_WORK_S = 30.0  # prompts, evidence rows, the extractive provider's own work, on a busy 2-core machine
NEWS_TIMEOUT_S = 30.0  # TavilyNews's per-request timeout (agent/providers/news.py)
SEARCH_S = 60.0  # one hybrid query, and loading the local embedding model on a cold worker
REMOTE_EMBED_ATTEMPTS = 4  # OpenAIEmbedder: max_retries=3 (agent/providers/embeddings.py)
EMBED_STARTUP_S = 60.0
EMBED_PER_TEXT_S = 1.0
GRACE_S = 15.0  # from the soft exception to the stored failure and the released claim
COORDINATOR_STEP_S = 60.0
# past the 30 s a checkout waits for a Postgres connection (agent.db.DEFAULT_WAIT_S): a public call that meets the
# database down ends with its PoolTimeout, which submit_research retries, not with the soft limit
PUBLIC_CALL_S = 45.0
BEAT_TASK_S = 120.0  # resume_stalled walks every stalled job


class LimitInputs(Protocol):
    """The settings a task's time limits grow with (agent.settings.Settings has them all)."""

    @property
    def llm_timeout_s(self) -> float: ...
    @property
    def max_tool_retries(self) -> int: ...
    @property
    def llm_latency_s(self) -> float: ...
    @property
    def llm_requests_per_minute(self) -> int: ...
    @property
    def llm_tokens_per_minute(self) -> int: ...
    @property
    def embedding_provider(self) -> str: ...
    @property
    def embedding_batch_size(self) -> int: ...


class LimitKind(str, Enum):
    """What a task waits on, which decides its time limits."""

    llm = "llm"
    news = "news"
    search = "search"
    retrieve = "retrieve"  # 10-K retrieval: searches and LLM calls
    embed = "embed"
    coordinator = "coordinator"
    public = "public"
    beat = "beat"


class TimeLimit(BaseModel, frozen=True):
    soft_s: float = Field(gt=0)
    hard_s: float = Field(gt=0)

    @model_validator(mode="after")
    def _soft_before_hard(self) -> TimeLimit:
        if self.soft_s >= self.hard_s:
            raise ValueError(f"the soft time limit ({self.soft_s:g} s) must be shorter than the hard one ({self.hard_s:g} s)")
        return self


# the settings each kind's limits grow with, for the error that names them
DRIVERS: dict[LimitKind, tuple[str, ...]] = {
    LimitKind.llm: ("llm_timeout_s", "max_tool_retries", "llm_latency_s", "llm_requests_per_minute", "llm_tokens_per_minute"),
    LimitKind.news: ("max_tool_retries",),
    LimitKind.search: ("embedding_provider", "llm_timeout_s"),
    LimitKind.retrieve: ("llm_timeout_s", "max_tool_retries", "llm_latency_s", "embedding_provider"),
    LimitKind.embed: ("embedding_batch_size", "embedding_provider", "llm_timeout_s"),
    LimitKind.coordinator: (),
    LimitKind.public: (),
    LimitKind.beat: (),
}


def llm_attempts(settings: LimitInputs) -> int:
    """The HTTP attempts of one LLM request, the SDK's retries included: all it gets, whichever task runs it."""
    return 1 + settings.max_tool_retries


def role_call_s(settings: LimitInputs) -> float:
    """The longest one LLM role call can take while its provider still answers within its timeouts."""
    rate_wait = RATE_LIMIT_MAX_WAIT_S if settings.llm_requests_per_minute or settings.llm_tokens_per_minute else 0.0
    latency = min(settings.llm_latency_s, settings.llm_timeout_s)
    attempts = llm_attempts(settings)
    request = attempts * settings.llm_timeout_s + (attempts - 1) * SDK_RETRY_WAIT_S
    return rate_wait + latency + REQUESTS_PER_ROLE_CALL * request


def remote_embedding_s(settings: LimitInputs) -> float:
    if settings.embedding_provider != "openai":
        return 0.0
    return REMOTE_EMBED_ATTEMPTS * settings.llm_timeout_s + (REMOTE_EMBED_ATTEMPTS - 1) * SDK_RETRY_WAIT_S


def _limit(soft_s: float, blocking_s: float) -> TimeLimit:
    return TimeLimit(soft_s=soft_s, hard_s=soft_s + blocking_s + GRACE_S)


def time_limits(settings: LimitInputs) -> dict[LimitKind, TimeLimit]:
    """Every kind's soft and hard limits under these settings."""
    news_retries = settings.max_tool_retries
    news_s = (1 + news_retries) * NEWS_TIMEOUT_S + 0.5 * (2 ** news_retries - 1)  # TavilyNews: backoff 0.5 s, doubling
    search_s = SEARCH_S + remote_embedding_s(settings)
    embed_wait = settings.llm_timeout_s if settings.embedding_provider == "openai" else 0.0
    return {
        LimitKind.llm: _limit(role_call_s(settings) + LOCAL_WORK_S, settings.llm_timeout_s),
        LimitKind.news: _limit(news_s + LOCAL_WORK_S, NEWS_TIMEOUT_S),
        LimitKind.search: _limit(search_s, embed_wait),
        LimitKind.retrieve: _limit(max(role_call_s(settings), remote_embedding_s(settings)) + SEARCH_S + LOCAL_WORK_S,
                                   settings.llm_timeout_s),
        LimitKind.embed: _limit(EMBED_STARTUP_S + settings.embedding_batch_size * EMBED_PER_TEXT_S + remote_embedding_s(settings),
                                embed_wait),
        LimitKind.coordinator: TimeLimit(soft_s=COORDINATOR_STEP_S, hard_s=COORDINATOR_STEP_S + 2 * GRACE_S),
        LimitKind.public: TimeLimit(soft_s=PUBLIC_CALL_S, hard_s=PUBLIC_CALL_S + 2 * GRACE_S),
        LimitKind.beat: TimeLimit(soft_s=BEAT_TASK_S, hard_s=BEAT_TASK_S + 2 * GRACE_S),
    }


def slowest_kind(settings: LimitInputs) -> LimitKind:
    """The kind of task with the longest hard limit."""
    return max(time_limits(settings).items(), key=lambda item: item[1].hard_s)[0]


def longest_hard_limit(settings: LimitInputs) -> float:
    return time_limits(settings)[slowest_kind(settings)].hard_s
