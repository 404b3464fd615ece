"""The `openai` provider: every LLM role (pipeline and 10-K agent) on any OpenAI-compatible chat endpoint.

One model per role (settings.llm_models): planner -> plan, plan_10k and select_tables; generator -> extract, compose
and answer_10k; evaluator -> evaluate and evaluate_10k.
plan, extract, evaluate and the structured 10-K roles ask for JSON in the endpoint's structured-output form
(settings.llm_json_mode, json_modes.py) and validate it against a pydantic model, with one repair retry (structured.py);
compose and answer_10k return plain markdown. Every request asks for at most its role's output cap
(settings.output_tokens: llm_output_tokens within llm_max_output_tokens); compose also no more than its request's.

Transient HTTP errors (timeouts, resets, 408/409/429/5xx) are retried by the SDK, max_retries = settings.max_tool_retries,
with exponential backoff and jitter that honours a Retry-After up to 60 s, and by nothing else: the error the SDK gives
up with is marked (attempts.py), and the task around the call does not retry it (agent/infra/client_retries.py), so a
request makes at most 1 + max_tool_retries HTTP attempts. A caller's error (400, 401, 403, 404, 422) is never retried.
"""
from __future__ import annotations

import logging
import re
from urllib.parse import urlparse

from openai import Omit, OpenAI, omit
from pydantic import ValidationError

from agent.models.financials import MeasureQuery
from agent.models.research import Answer, Evaluation, EvaluationScores, Finding, ResearchPlan, ScopeFindings, Usage
from agent.models.tenk import (
    SelectTablesRequest,
    SubQuestion,
    TenKAnswerRequest,
    TenKEvaluateRequest,
    TenKEvaluation,
    TenKPlan,
    TenKPlanRequest,
)
from agent.providers.llm import prompts
from agent.providers.llm.attempts import http_client, sdk_call
from agent.providers.llm.json_modes import JsonForms, JsonMode
from agent.providers.llm.roles import ROLES, ComposeRequest, EvaluateRequest, ExtractRequest, PlanRequest
from agent.providers.llm.structured import StructuredOutputError, T, add_usage, complete_json, reply_text
from agent.settings import AnswerMode, Settings

log = logging.getLogger(__name__)

_QUESTION_WORDS = re.compile(r"^(what|how|did|does|do|is|are|was|were|why|when|which|who|can|could)\b\s*", re.I)


def api_key_for(settings: Settings) -> str | None:
    """The key to send. Never send the OpenAI key to another host; local servers (Ollama, vLLM) accept any key."""
    if settings.llm_api_key and settings.llm_api_key.get_secret_value():
        return settings.llm_api_key.get_secret_value()
    host = (urlparse(settings.llm_base_url).hostname or "") if settings.llm_base_url else "api.openai.com"
    if host == "openai.com" or host.endswith(".openai.com"):
        # None lets the SDK read OPENAI_API_KEY (and fail clearly if it is unset)
        return settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return "unused"


class OpenAIProvider:
    name = "openai"

    def __init__(self, settings: Settings, *, json_mode: JsonMode | None = None, client: OpenAI | None = None):
        self.models = settings.llm_models.model_copy()
        self.output_tokens = {role: settings.output_tokens(role) for role in ROLES}
        self.json_forms = JsonForms(json_mode or settings.llm_json_mode, settings.llm_base_url)
        self.temperature: float | Omit = omit if settings.llm_temperature is None else settings.llm_temperature
        # the response cache keys on the endpoint, the models and the sampling: another model must not answer from it
        self.cache_namespace = f"openai:{settings.llm_base_url or 'api.openai.com'}:{self.models.model_dump_json()}"
        if settings.llm_temperature is not None:
            self.cache_namespace += f":t={settings.llm_temperature:g}"
        self.client = client or OpenAI(
            base_url=settings.llm_base_url,
            api_key=api_key_for(settings),
            timeout=settings.llm_timeout_s,
            max_retries=settings.max_tool_retries,
            http_client=http_client(settings.llm_timeout_s),
        )

    def _json(self, role: str, model: str, messages: prompts.Messages, schema: type[T]) -> tuple[T, Usage]:
        return complete_json(self.client, role=role, model=model, messages=messages, schema=schema, forms=self.json_forms,
                             temperature=self.temperature, max_tokens=self.output_tokens[role])

    # ---------- plan ----------
    def plan(self, req: PlanRequest) -> tuple[ResearchPlan, Usage]:
        out, usage = self._json("plan", self.models.planner, prompts.plan_messages(req), prompts.PlanOutput)
        data = out.model_dump()
        data["answer_mode"] = AnswerMode(out.answer_mode)
        hint = [t.upper() for t in req.tickers_hint]
        data["tickers"] = hint or list(dict.fromkeys(t.strip().upper().lstrip("$") for t in out.tickers if t.strip()))
        data["search_queries"] = [q.strip().rstrip("?") for q in out.search_queries if q.strip()][:4]
        if not out.is_valid:
            data["invalid_reason"] = out.invalid_reason or out.reasoning
        return ResearchPlan.model_validate(data), usage

    # ---------- extract ----------
    def extract(self, req: ExtractRequest) -> tuple[ScopeFindings, Usage]:
        if not req.evidence:
            return ScopeFindings(scope=req.scope), Usage()
        out, usage = self._json("extract", self.models.generator, prompts.extract_messages(req), prompts.ExtractOutput)
        keys = {e.citation_key for e in req.evidence}
        by_marker = {req.markers[k]: k for k in keys if k in req.markers}
        picked: list[Finding] = []
        seen: set[str] = set()
        for f in out.findings:
            key = f.citation_key.strip()
            key = key if key in keys else by_marker.get(key, "")  # a model may answer with the marker instead
            text = " ".join(f.text.split())
            if key and text and text.lower() not in seen:
                seen.add(text.lower())
                picked.append(Finding(citation_key=key, text=text))
        return ScopeFindings(scope=req.scope, findings=picked[: req.max_findings]), usage

    # ---------- compose ----------
    def compose(self, req: ComposeRequest) -> tuple[Answer, Usage]:
        if req.max_tokens > self.output_tokens["compose"]:  # the prompt states the length the request asks for
            req = req.model_copy(update={"max_tokens": self.output_tokens["compose"]})
        messages = prompts.compose_messages(req)
        resp = sdk_call(self.client.chat.completions.create, model=self.models.generator, messages=messages,
                        max_tokens=req.max_tokens, temperature=self.temperature)
        usage = add_usage(Usage(model=self.models.generator), resp, messages)
        text = reply_text(resp).strip()
        if not text:
            raise StructuredOutputError("compose", "the model returned an empty answer")
        return Answer(text=text), usage

    # ---------- evaluate ----------
    def evaluate(self, req: EvaluateRequest) -> tuple[Evaluation, Usage]:
        out, usage = self._json("evaluate", self.models.evaluator, prompts.evaluate_messages(req),
                                EvaluationScores)
        previous = {k.strip().lower() for k in req.previous_keywords}
        keywords: list[str] = []
        for k in out.followup_keywords:
            k = _QUESTION_WORDS.sub("", k.strip().rstrip("?")).strip()
            if k and k.lower() not in previous and k not in keywords:
                keywords.append(k)
        data = out.model_dump() | {"followup_keywords": keywords[:4], "scope": req.scope}
        if not data["needs_news_search"]:
            data["news_query"] = None
        return Evaluation.model_validate(data), usage

    # ---------- the SEC 10-K agent ----------
    def plan_10k(self, req: TenKPlanRequest) -> tuple[TenKPlan, Usage]:
        out, usage = self._json("plan_10k", self.models.planner, prompts.tenk_plan_messages(req), prompts.TenKPlanOutput)
        sub_questions: list[SubQuestion] = []
        seen: set[int] = set()
        for sq in out.sub_questions:
            sq_id = sq.id if sq.id not in seen and sq.id > 0 else max(seen, default=0) + 1
            seen.add(sq_id)
            items = [i.strip().upper().removeprefix("ITEM").strip() for i in sq.items if i.strip()] or ["7"]
            sub_questions.append(sq.model_copy(update={"id": sq_id, "items": items, "keywords": sq.keywords.strip().rstrip("?")}))
        plan = TenKPlan(ticker=req.ticker, fiscal_year=req.fiscal_year, sub_questions=sub_questions,
                        search_plan=out.search_plan, calculation=out.calculation or None, measure=usable_measure(out.measure))
        return plan, usage

    def select_tables(self, req: SelectTablesRequest) -> tuple[list[int], Usage]:
        if not req.candidates:
            return [], Usage()
        out, usage = self._json("select_tables", self.models.planner, prompts.select_tables_messages(req),
                                prompts.SelectTablesOutput)
        known = {c.table_id for c in req.candidates}
        return [i for i in dict.fromkeys(out.table_ids) if i in known][: req.max_tables], usage

    def answer_10k(self, req: TenKAnswerRequest) -> tuple[Answer, Usage]:
        messages = prompts.tenk_answer_messages(req)
        resp = sdk_call(self.client.chat.completions.create, model=self.models.generator, messages=messages,
                        temperature=self.temperature, max_tokens=self.output_tokens["answer_10k"])
        usage = add_usage(Usage(model=self.models.generator), resp, messages)
        text = reply_text(resp).strip()
        if not text:
            raise StructuredOutputError("answer_10k", "the model returned an empty answer")
        return Answer(text=text), usage

    def evaluate_10k(self, req: TenKEvaluateRequest) -> tuple[TenKEvaluation, Usage]:
        out, usage = self._json("evaluate_10k", self.models.evaluator, prompts.tenk_evaluate_messages(req), TenKEvaluation)
        ids = {q.id for q in req.plan.sub_questions}
        return out.model_copy(update={"answered": [i for i in dict.fromkeys(out.answered) if i in ids]}), usage


def usable_measure(raw: dict | None) -> MeasureQuery | None:
    """A model's measure as the calculator reads it; one that does not validate is dropped (the rules' reading of
    the question stands in), never a failed plan."""
    if not raw:
        return None
    try:
        query = MeasureQuery.model_validate(raw)
    except ValidationError:
        log.warning("the 10-K planner's measure did not validate and was dropped: %.200s", raw)
        return None
    return query if query.measure or query.expression else None
