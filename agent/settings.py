"""Effective configuration: a secret's FINAGENT_<NAME>_FILE, then the environment (prefix FINAGENT_), then `.env`,
then defaults."""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from pydantic import BaseModel, Field, ModelWrapValidatorHandler, SecretStr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import InitErrorDetails, PydanticCustomError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from finagent.models import AnswerMode  # a request's modes are the API's contract; the table below configures them

ENV_PREFIX = "FINAGENT_"
ENV_NESTED_DELIMITER = "__"


def env_var(*path: str) -> str:
    """The environment variable of a (nested) setting: env_var("phases", "planning") == "FINAGENT_PHASES__PLANNING"."""
    return ENV_PREFIX + ENV_NESTED_DELIMITER.join(p.upper() for p in path)


def setting_name(*path: str) -> str:
    """How an error names a setting: `phases.planning` (env FINAGENT_PHASES__PLANNING)."""
    return f"`{'.'.join(path)}` (env {env_var(*path)})"


# the Celery queues (workers/topology.py's Queue values; tests/unit/test_settings_deploy.py keeps them in step)
QueueName = Literal["coordinator", "celery", "search", "llm", "batch"]
INTERACTIVE_QUEUES: tuple[QueueName, ...] = ("coordinator", "celery", "search", "llm")


class ModeConfig(BaseModel):
    """One row of the answer-mode table (env FINAGENT_MODES__<MODE>__<FIELD>, e.g. FINAGENT_MODES__DIRECT__MAX_TOKENS)."""

    max_iterations: int = Field(ge=1)
    max_tokens: int = Field(ge=1)
    confidence_threshold: float = Field(gt=0, le=1)


# The answer-mode table; deep_search is configured but never chosen by the planner.
DEFAULT_MODES: dict[AnswerMode, ModeConfig] = {
    AnswerMode.direct: ModeConfig(max_iterations=2, max_tokens=2000, confidence_threshold=0.70),
    AnswerMode.standard: ModeConfig(max_iterations=3, max_tokens=6000, confidence_threshold=0.80),
    AnswerMode.detailed: ModeConfig(max_iterations=4, max_tokens=16000, confidence_threshold=0.90),
    AnswerMode.deep_search: ModeConfig(max_iterations=10, max_tokens=20000, confidence_threshold=0.95),
}


class ModelPrice(BaseModel):
    """US dollars per million tokens."""

    prompt: float = Field(ge=0)
    completion: float = Field(ge=0)


# list prices of the default models; set FINAGENT_LLM_PRICES for the models you use
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gpt-4o-mini": ModelPrice(prompt=0.15, completion=0.60),
    "gpt-4o": ModelPrice(prompt=2.50, completion=10.00),
}


class LLMOutputTokens(BaseModel):
    """The longest reply each LLM role asks for (env FINAGENT_LLM_OUTPUT_TOKENS__<ROLE>), never above
    llm_max_output_tokens. A model that never stops (a small local one writing a list forever) is cut off there, fails
    to parse, and is repaired or fails readably. Compose asks for no more than its answer mode's budget either."""

    plan: int = Field(1000, ge=64)
    extract: int = Field(1500, ge=64)
    compose: int = Field(4000, ge=64)
    evaluate: int = Field(1000, ge=64)
    plan_10k: int = Field(1500, ge=64)
    select_tables: int = Field(500, ge=64)
    answer_10k: int = Field(3000, ge=64)
    evaluate_10k: int = Field(1000, ge=64)


# the roles whose reply is JSON, which the deprecated llm_json_max_tokens sets at once
JSON_ROLES = ("plan", "extract", "evaluate", "plan_10k", "select_tables", "evaluate_10k")


class LLMRoles(BaseModel):
    planner: str = "gpt-4o-mini"
    generator: str = "gpt-4o-mini"
    evaluator: str = "gpt-4o-mini"


class PhaseLimits(BaseModel):
    """Per-phase iteration limits. In this product:
    - planning: the plan and every re-plan (a router re-route is a re-plan);
    - execution: search-and-answer rounds (the first round, follow-up searches, re-routed rounds);
    - refinement: rounds that rework the answer from the evidence already gathered, with no new search.
    An explicit max_iterations (the answer mode's or the request's) overrides their sum; when it is larger
    than execution + refinement, the execution phase grows to fill it."""

    planning: int = Field(3, ge=1)  # the plan, plus up to two router re-routes
    execution: int = Field(3, ge=1)
    refinement: int = Field(3, ge=1)

    def effective_max_iterations(self, explicit: int | None = None) -> int:
        if explicit:
            return explicit
        total = self.planning + self.execution + self.refinement
        return total + max(1, int(total * 0.10))


# the settings that hold a secret (a URL may carry a password): each may instead be read from the file that
# FINAGENT_<NAME>_FILE names (Docker/Kubernetes secrets), which wins over FINAGENT_<NAME>
SECRET_FILE_SETTINGS = ("database_url", "redis_url", "llm_api_key", "openai_api_key", "tavily_api_key", "api_keys",
                        "admin_api_keys", "flower_basic_auth")
KEY_LIST_SETTINGS = ("api_keys", "admin_api_keys")  # their file: a JSON list, or one key per line
FILE_SUFFIX = "_FILE"


class SecretFileError(ValueError):
    """A FINAGENT_*_FILE names a file that cannot be read; the message is one line naming the variable and the file."""


def read_secret_file(variable: str, path: str) -> str:
    """A secret file's text without its surrounding whitespace (the trailing newline editors add)."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise SecretFileError(f"{variable} names {path}, which does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise SecretFileError(f"{variable} names {path}, which cannot be read: {reason}") from None
    if not text:
        raise SecretFileError(f"{variable} names {path}, which is empty")
    return text


def secret_file_values(environ: Mapping[str, str]) -> dict[str, Any]:
    """The secret settings given as files: {"api_keys": [...], "database_url": "..."} for each FINAGENT_<NAME>_FILE set.
    API keys: a JSON list as in FINAGENT_API_KEYS, or one key per line."""
    values: dict[str, Any] = {}
    for name in SECRET_FILE_SETTINGS:
        variable = env_var(name) + FILE_SUFFIX
        path = environ.get(variable)
        if not path:
            continue
        text = read_secret_file(variable, path)
        if name in KEY_LIST_SETTINGS and text.startswith("["):
            try:
                values[name] = json.loads(text)
            except json.JSONDecodeError as exc:
                raise SecretFileError(f"{variable} names {path}, which is not a JSON list of keys: {exc.msg}") from None
        elif name in KEY_LIST_SETTINGS:
            values[name] = [k.strip() for k in text.splitlines() if k.strip()]
        else:
            values[name] = text
    return values


class SecretFilesSource(PydanticBaseSettingsSource):
    """pydantic-settings source of `secret_file_values` from the process environment."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads every file at once

    def __call__(self) -> dict[str, Any]:
        return secret_file_values(os.environ)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=".env",
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        extra="ignore",
    )

    # services: empty means "start the embedded server under data_dir"
    database_url: str | None = None
    redis_url: str | None = None
    data_dir: Path = Path.home() / ".finagent"
    # the embedded Postgres's buffer cache and index-build memory: "auto" sizes them from the RAM (ops/local/pg_memory.py),
    # or a Postgres size such as "2GB"
    embedded_pg_shared_buffers: str = "auto"
    embedded_pg_maintenance_work_mem: str = "auto"
    # the buffer cache on 2 MB pages: "try" (Postgres's default) takes them when the host has reserved enough
    # (vm.nr_hugepages; `finagent services status` prints how many). No "on": a server that refused to start for want
    # of them would keep refusing, since the setting is applied to a running server
    embedded_pg_huge_pages: Literal["try", "off"] = "try"

    # providers
    llm_provider: Literal["extractive", "openai", "scripted"] = "extractive"
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_models: LLMRoles = LLMRoles()
    llm_timeout_s: float = 60.0
    # a model's extraction that finds nothing in its passages, or an answer that cites none of its findings, is
    # replaced by the extractive provider's (agent/providers/llm/grounded.py); off keeps the model's as it is
    llm_grounding_fallback: bool = True
    # how to ask for schema-valid JSON (agent/providers/llm/json_modes.py): auto detects the endpoint's form
    llm_json_mode: Literal["auto", "json_schema", "json_object_schema", "ollama", "json_object"] = "auto"
    llm_json_schema: bool | None = None  # deprecated: true is llm_json_mode=json_schema
    # sampling temperature of every LLM call; unset leaves the server's default (0 makes a small local model repeatable)
    llm_temperature: float | None = Field(None, ge=0, le=2)
    # the longest reply each role asks for (the answer modes' max_tokens budget the evidence that goes in, not this),
    # and the most output tokens the endpoint's models allow: no request asks for more (hosted models refuse it)
    llm_output_tokens: LLMOutputTokens = LLMOutputTokens()
    llm_max_output_tokens: int = Field(16384, ge=64)
    # deprecated: set every JSON role's / answer_10k's llm_output_tokens that is not set itself
    llm_json_max_tokens: int | None = Field(None, ge=64)
    llm_answer_max_tokens: int | None = Field(None, ge=64)
    llm_script_path: Path | None = None  # scripted provider (tests): JSON of canned role outputs
    llm_latency_s: float = 0.0  # injected per-call latency, for benchmarks only
    # LLM calls in flight at once in one worker process (0: as many as its threads). Below the thread count, the
    # extra threads do a call's other work (reading evidence, storing output) and the coordinator's steps while
    # the slots are busy, so no slot idles while another call could be in it
    llm_max_in_flight: int = Field(0, ge=0)
    llm_prices: dict[str, ModelPrice] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    # identical LLM requests are answered from a Redis response cache for this long (0 turns it off)
    llm_cache_ttl_s: int = Field(24 * 3600, ge=0)
    embedding_provider: Literal["local", "openai", "hash"] = "local"
    embedding_model: str = "all-MiniLM-L6-v2"
    embedding_dim: int = 384
    embedding_batch_size: int = 64
    # the local model's runtime: onnx (ONNX Runtime, agent/providers/onnx_embedder.py) or torch (sentence-transformers)
    embedding_backend: Literal["onnx", "torch"] = "onnx"
    # onnx only. Float weights by default: int8 ingests ~1.5x faster but keeps ~91% of their top 15, and on filings
    # finds fewer evidence pages (docs/operators.md, "Embedding precision")
    embedding_quantize: Literal["int8", "none"] = "none"
    embedding_threads: int = Field(0, ge=0)  # onnx batches run at once in a process; 0: one per CPU core
    # an ingest writing at least this many chunks to a table, and at least as many as it holds, drops the table's
    # vector index and builds it after its last write (agent/ingest/vector_index.py); a huge value turns that off
    bulk_load_min_chunks: int = Field(1000, ge=1)
    model_cache_dir: Path | None = None  # the exported ONNX models; default ~/.cache/finagent/models
    openai_api_key: SecretStr | None = None
    tavily_api_key: SecretStr | None = None
    tavily_base_url: str | None = None  # default: Tavily's own API
    news_max_results: int = 5

    # retrieval
    semantic_weight: float = Field(0.7, ge=0, le=1)  # + keyword_weight must be 1
    keyword_weight: float = Field(0.3, ge=0, le=1)
    chunk_size: int = Field(1000, ge=1)
    chunk_overlap: int = Field(150, ge=0)  # < chunk_size
    top_k_per_quarter: int = 15
    tenk_parallelism: int = 6
    tenk_max_iterations: int = 5
    tenk_quality_threshold: float = 0.90
    quarter_cache_ttl_s: int = 1800
    # how often each worker node that searches (search, batch) brings its host's BM25 index up to the chunk tables
    keyword_index_sync_s: float = Field(60.0, gt=0)

    # agent loop
    modes: dict[AnswerMode, ModeConfig] = Field(default_factory=lambda: {m: c.model_copy() for m, c in DEFAULT_MODES.items()})
    default_mode: AnswerMode = AnswerMode.standard
    phases: PhaseLimits = PhaseLimits()
    max_duration_seconds: int = 180
    max_tool_retries: int = 2
    # the first retry of a failed tool call waits about this long, the second twice as long; a call refused by an
    # open circuit breaker waits until the breaker tries the service again
    tool_retry_backoff_s: float = Field(10.0, gt=0)
    enable_dynamic_termination: bool = True
    # the evaluator's "sufficient" ends the loop (unless the request sets min_confidence), but never below this confidence
    sufficient_floor: float = Field(0.5, ge=0, le=1)
    router_retry_below: float = 0.70
    router_max_retries: int = 2
    circuit_breaker_threshold: int = 3
    circuit_breaker_reset_s: int = 300
    fanout: bool = True  # False runs every fan-out inline, one after another (benchmark baseline)
    max_question_chars: int = 2000

    # broker: an unacknowledged task (its worker died) is handed out again after this long
    broker_visibility_timeout_s: int = 600
    stalled_job_after_s: int = 900

    # whether `finagent ask` and `finagent batch run` start this machine's worker processes: "auto" with the embedded
    # broker only (against a configured Redis the deployment's workers answer, and a client machine runs none)
    local_workers: Literal["auto", "always", "never"] = "auto"
    # local workers (ops/local/worker_pool.py): the coordinator process keeps its threads on one CPU and the search and llm
    # processes theirs on another (workers/affinity.py); false leaves every process to the scheduler. Containers are
    # never pinned.
    worker_cpu_pinning: bool = True
    # set by the local launcher for each process it pins; not an operator's setting
    worker_cpu: int | None = Field(None, ge=0)

    # events
    event_stream_maxlen: int = 1000

    # logs (agent/infra/logs.py): `text` for a terminal, `json` one object per line with the job, task and request ids;
    # the level of the API, the workers and beat (the CLI logs warnings unless it is set)
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    # OpenTelemetry traces from the API through Celery to each LLM and database call (agent/infra/tracing.py, extra
    # `tracing`), sent where the standard OTEL_* environment says (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, ...)
    tracing: bool = False

    @field_validator("log_level", mode="before")
    @classmethod
    def _log_level_any_case(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    # HTTP API: keys clients send as `Authorization: Bearer <key>` or `X-API-Key`; required to bind off loopback
    api_keys: list[SecretStr] = Field(default_factory=list)
    # keys that see and may act on every job and batch, whoever created it (agent/ownership.py); accepted as API keys
    admin_api_keys: list[SecretStr] = Field(default_factory=list)
    api_max_body_bytes: int = Field(64 * 1024, ge=1024)  # a job submission
    api_max_batch_bytes: int = Field(4 * 1024 * 1024, ge=1024)  # a batch upload
    api_max_batch_lines: int = Field(5000, ge=1)
    # how long a request waits for a Postgres connection before it is answered 503 (a worker waits 30 s, riding out
    # a restart; a client would rather hear at once, and retry)
    api_db_wait_s: float = Field(5.0, gt=0, le=60)
    # the queues /readyz needs a live consumer on (workers/topology.py's queues; JSON list). The default is the
    # interactive ones: a batch pool that is down does not take the API out of its load balancer
    ready_queues: list[QueueName] = Field(default_factory=lambda: list(INTERACTIVE_QUEUES))

    # ingestion caps: a file over one fails with the reason and the run goes on with the others
    ingest_max_file_bytes: int = Field(32 * 1024 * 1024, ge=1024)  # real 10-K HTML is 1-20 MB, a transcript ~100 KB
    ingest_max_chunks: int = Field(20_000, ge=1)  # per document; a 10-K makes about 500-1500
    ingest_max_html_depth: int = Field(200, ge=16, le=255)  # element nesting; filings nest about 15 deep, libxml2 stops at 256
    ingest_max_pdf_pages: int = Field(2000, ge=1)

    # operators: Flower (`finagent flower`) and Prometheus
    flower_port: int = 5555
    flower_basic_auth: SecretStr | None = None  # "user:password[,user2:password2]"
    # where every process (API, workers) writes its prometheus-client multiprocess files; default data_dir/metrics
    metrics_dir: Path | None = None
    # 0: metrics go to the files in metrics_dir (one machine). Else this process keeps its metrics in memory, writes no
    # file, and serves them at :PORT/metrics (each worker; the API adds the scrape-time gauges): hosts share no disk
    metrics_port: int = Field(0, ge=0, le=65535)

    # overnight batches
    # batch jobs running at once; the rest wait their turn. Twice the batch pool's 4 LLM slots: a job spends part of
    # its time between LLM calls (steps, searches, hops), and with one job per slot that slot would idle then
    batch_concurrency: int = Field(8, ge=1)
    # a shared LLM rate limit (every worker, through Redis); 0 turns a limit off
    llm_requests_per_minute: int = Field(0, ge=0)
    llm_tokens_per_minute: int = Field(0, ge=0)
    # the share of those limits batch jobs may use, so interactive jobs always find headroom
    llm_batch_share: float = Field(0.8, gt=0, le=1)

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, SecretFilesSource(settings_cls), env_settings, dotenv_settings, file_secret_settings

    # ---------- validation: bad configuration fails at load time, naming the setting and its env var ----------
    @field_validator("modes")
    @classmethod
    def _check_modes(cls, modes: dict[AnswerMode, ModeConfig]) -> dict[AnswerMode, ModeConfig]:
        missing = [m.value for m in AnswerMode if m not in modes]
        if missing:
            raise ValueError(f"{setting_name('modes')} must configure every answer mode; missing: {', '.join(missing)} "
                             f"(an override replaces the whole table: give every mode, e.g. "
                             f"{env_var('modes', missing[0], 'max_iterations')})")
        order = list(AnswerMode)  # direct -> standard -> detailed -> deep_search
        for prev, mode in zip(order, order[1:]):
            for fld in ("max_iterations", "max_tokens", "confidence_threshold"):
                low, high = getattr(modes[prev], fld), getattr(modes[mode], fld)
                if high < low:
                    raise ValueError(
                        f"{setting_name('modes', mode.value, fld)} is {high}, below {prev.value}'s {low}: "
                        f"answer modes {' -> '.join(m.value for m in order)} must not decrease {fld}; "
                        f"mode {mode.value} breaks the order")
        return modes

    @model_validator(mode="after")
    def _check_retrieval(self) -> Settings:
        total = self.semantic_weight + self.keyword_weight
        if abs(total - 1.0) > 1e-6:
            raise ValueError(
                f"{setting_name('semantic_weight')} + {setting_name('keyword_weight')} must sum to 1, "
                f"got {self.semantic_weight} + {self.keyword_weight} = {total:g}")
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"{setting_name('chunk_overlap')} must be smaller than {setting_name('chunk_size')}, "
                f"got {self.chunk_overlap} >= {self.chunk_size}")
        return self

    @model_validator(mode="after")
    def _output_tokens_aliases(self) -> Settings:
        own = self.llm_output_tokens.model_fields_set
        aliases = {role: self.llm_json_max_tokens for role in JSON_ROLES} | {"answer_10k": self.llm_answer_max_tokens}
        update = {role: tokens for role, tokens in aliases.items() if tokens is not None and role not in own}
        if update:
            self.llm_output_tokens = self.llm_output_tokens.model_copy(update=update)
        return self

    @model_validator(mode="after")
    def _json_schema_alias(self) -> Settings:
        if self.llm_json_schema and "llm_json_mode" not in self.model_fields_set:
            self.llm_json_mode = "json_schema"
        return self

    @model_validator(mode="after")
    def _check_visibility_timeout(self) -> Settings:
        """A task still running when the broker's visibility timeout ends is delivered a second time."""
        from agent.time_limits import DRIVERS, slowest_kind, time_limits

        kind = slowest_kind(self)
        hard = time_limits(self)[kind].hard_s
        if self.broker_visibility_timeout_s <= hard:
            drivers = ", ".join(f"{setting_name(d)} = {getattr(self, d)}" for d in DRIVERS[kind])
            raise ValueError(
                f"{setting_name('broker_visibility_timeout_s')} must be longer than the longest task's hard time limit, "
                f"got {self.broker_visibility_timeout_s} s <= {hard:g} s ({kind.value} tasks, derived from {drivers}): "
                f"raise it above {hard:g} or lower those (agent/time_limits.py)")
        return self

    @model_validator(mode="wrap")
    @classmethod
    def _name_env_vars(cls, data: Any, handler: ModelWrapValidatorHandler[Settings]) -> Settings:
        """Append the setting and its env var to every field error (Field(ge=...) and nested-model errors too).
        Defined after the other validators so it wraps them all (model validators nest in definition order)."""
        try:
            return handler(data)
        except ValidationError as exc:
            errors: list[InitErrorDetails] = []
            for err in exc.errors():
                path = tuple(str(p.value if isinstance(p, Enum) else p) for p in err["loc"])
                msg = err["msg"]
                if path and ENV_PREFIX not in msg:  # our own validators already name it
                    msg = f"{msg} [setting {setting_name(*path)}]"
                # a model-level error's input is the whole configuration: never echo its secrets
                value = _mask_secrets(err["input"]) if not path else err["input"]
                errors.append({"type": PydanticCustomError(err["type"], msg), "loc": err["loc"], "input": value})
            raise ValidationError.from_exception_data(exc.title, errors) from None

    def cost_usd(self, model: str | None, prompt_tokens: int, completion_tokens: int) -> float:
        """What tokens of `model` cost at the price table (0 for the offline providers or an unpriced model)."""
        price = self.llm_prices.get(model or "")
        if price is None:
            return 0.0
        return (prompt_tokens * price.prompt + completion_tokens * price.completion) / 1_000_000

    def metrics_path(self) -> Path:
        return self.metrics_dir or self.data_dir / "metrics"

    def output_tokens(self, role: str) -> int:
        """The most output tokens an LLM role's request may ask for: its own cap, within the model's limit."""
        return min(getattr(self.llm_output_tokens, role), self.llm_max_output_tokens)

    def mode(self, mode: AnswerMode | str) -> ModeConfig:
        return self.modes[AnswerMode(mode)]

    def masked(self) -> dict:
        """Settings as plain data with every secret (and URL password) masked."""
        data = self.model_dump(mode="json")
        for key, value in data.items():
            if _is_secret(key) and value:
                data[key] = "********"
        for key in ("database_url", "redis_url"):
            if data.get(key):
                data[key] = _mask_url(data[key])
        return data


def _is_secret(name: str) -> bool:
    return name.lower().endswith(("_key", "_keys", "_auth"))


def _mask_secrets(data: Any) -> Any:
    """Raw settings input with API keys and URL passwords masked (for error reports)."""
    if not isinstance(data, dict):
        return data
    return {k: ("********" if _is_secret(str(k)) and v else _mask_url(v) if str(k).endswith("_url") and isinstance(v, str) else v)
            for k, v in data.items()}


def _mask_url(url: str) -> str:
    """Hide the password of scheme://user:password@host and of a ?password= query parameter."""
    parts = urlsplit(url)
    if "@" not in parts.netloc and "password=" not in parts.query.lower():
        return url
    netloc = parts.netloc
    if "@" in netloc:
        creds, host = netloc.rsplit("@", 1)
        if ":" in creds:
            netloc = f"{creds.split(':', 1)[0]}:********@{host}"
    query = "&".join(f"{k}=********" if k.lower() == "password" else f"{k}={v}" for k, v in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


@lru_cache
def get_settings() -> Settings:
    return Settings()
