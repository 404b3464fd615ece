"""How to ask an OpenAI-compatible server for schema-valid JSON: each server constrains output its own way.

Forms (setting `llm_json_mode`, env FINAGENT_LLM_JSON_MODE):
- json_schema         response_format {"type": "json_schema", "json_schema": {name, schema, strict}}: OpenAI, vLLM, LM Studio
- json_object_schema  response_format {"type": "json_object", "schema": {...}}: llama.cpp's server, llama-cpp-python's server
- ollama              a top-level `format` holding the schema (Ollama's own API; sent through the SDK's extra_body), plus
                      the json_schema response_format that Ollama's /v1 layer maps onto the same constraint
- json_object         response_format {"type": "json_object"}: any JSON at all; the schema is only in the prompt, and a
                      reply that does not fit it goes through the one repair request (structured.py)
- auto (default)      chosen per endpoint, once per process:
    1. host api.openai.com (or *.openai.com, *.openai.azure.com): json_schema, without a probe;
    2. otherwise one `GET {base_url}/models` (5 s, no retries) and its `owned_by`: "me" (llama-cpp-python) or
       "llamacpp" (llama.cpp) -> json_object_schema; "library" or "ollama", or port 11434 -> ollama; anything else
       (vLLM's "vllm", ...) -> json_schema, the OpenAI form most servers accept;
    3. the probe failed (server down, no /models route): json_schema for this call, and the probe runs again next time.

Whatever the mode, a server that rejects the form (a 400/422/500 whose body names response_format, json_schema, schema
or format, e.g. llama-cpp-python's 500 "Input should be 'text' or 'json_object'") gets the same request again one step
down, json_schema -> json_object_schema -> json_object (ollama -> json_object), and that endpoint stays there for the
rest of the process (each step logged once as a warning). json_object_schema comes second because a server that knows
only json_object either honours its `schema` (llama.cpp) or ignores it; plain json_object, with the schema only in the
prompt and the repair behind it, is the last resort. A rejection is seen after the SDK's own retries of a 500, so it
costs a few seconds once per worker process.
"""
from __future__ import annotations

import logging
import re
import threading
from typing import Any, Literal, get_args
from urllib.parse import urlparse

from pydantic import BaseModel

log = logging.getLogger(__name__)

JsonForm = Literal["json_schema", "json_object_schema", "ollama", "json_object"]
JsonMode = Literal["auto", "json_schema", "json_object_schema", "ollama", "json_object"]
JSON_FORMS: tuple[JsonForm, ...] = get_args(JsonForm)

_OPENAI_HOSTS = re.compile(r"(^|\.)openai\.com$|\.openai\.azure\.com$")
_LLAMA_CPP_OWNERS = {"me", "llamacpp", "llama.cpp", "llama-cpp"}
_OLLAMA_OWNERS = {"library", "ollama"}
_OLLAMA_PORT = 11434
_REJECTED_STATUSES = {400, 422, 500}
STEP_DOWN: dict[JsonForm, JsonForm] = {"json_schema": "json_object_schema", "json_object_schema": "json_object", "ollama": "json_object"}
_NAMES_THE_FORM = re.compile(r"response_format|json_schema|json_object|\bschema\b|\bformat\b", re.I)


def request_kwargs(form: JsonForm, schema: type[BaseModel]) -> dict[str, Any]:
    """The chat.completions.create keyword arguments that ask for `schema` in `form`."""
    if form == "json_object":
        return {"response_format": {"type": "json_object"}}
    json_schema = schema.model_json_schema()
    if form == "json_object_schema":
        return {"response_format": {"type": "json_object", "schema": json_schema}}
    openai_form = {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": json_schema, "strict": False}}
    if form == "ollama":
        return {"response_format": openai_form, "extra_body": {"format": json_schema}}
    return {"response_format": openai_form}


def form_for_server(host: str, port: int | None, owned_by: str | None) -> JsonForm:
    """The form `auto` picks from the endpoint's address and what its /models says owns the model."""
    owner = (owned_by or "").strip().lower()
    if _OPENAI_HOSTS.search(host):
        return "json_schema"
    if owner in _LLAMA_CPP_OWNERS:
        return "json_object_schema"
    if owner in _OLLAMA_OWNERS or port == _OLLAMA_PORT:
        return "ollama"
    return "json_schema"


def rejects_form(exc: BaseException) -> bool:
    """Did the server refuse the request because of its structured-output form (not because it is failing)?"""
    status = getattr(exc, "status_code", None)
    if status not in _REJECTED_STATUSES:
        return False
    text = f"{getattr(exc, 'message', '')} {getattr(exc, 'body', '') or ''} {exc}"
    return "'text' or 'json_object'" in text or _NAMES_THE_FORM.search(text) is not None


class JsonForms:
    """The structured-output form for one endpoint: chosen by `mode`, detected once per process under `auto`, and
    switched to json_object for good when the server rejects it. Shared by every provider of the process."""

    _chosen: dict[str, JsonForm] = {}
    _fallen_back: dict[str, JsonForm] = {}  # endpoint -> the form it was stepped down to
    _lock = threading.Lock()

    def __init__(self, mode: JsonMode, base_url: str | None):
        self.mode = mode
        self.endpoint = (base_url or "https://api.openai.com/v1").rstrip("/")

    def current(self, client: Any) -> JsonForm:
        with self._lock:
            if self.endpoint in self._fallen_back:
                return self._fallen_back[self.endpoint]
            if self.mode != "auto":
                return self.mode
            chosen = self._chosen.get(self.endpoint)
        if chosen is not None:
            return chosen
        form, detected = self._detect(client)
        if detected:
            with self._lock:
                self._chosen.setdefault(self.endpoint, form)
            log.info("LLM endpoint %s: structured output as %s", self.endpoint, form)
        return form

    def fall_back(self, form: JsonForm, exc: BaseException) -> JsonForm | None:
        """The form to re-send the call in if `exc` is the server rejecting `form` (the endpoint keeps it), else None."""
        lower = STEP_DOWN.get(form)
        if lower is None or not rejects_form(exc):
            return None
        with self._lock:
            current = self._fallen_back.get(self.endpoint)
            if current is None or JSON_FORMS.index(current) < JSON_FORMS.index(lower):
                self._fallen_back[self.endpoint] = lower
            else:  # another thread already stepped further down
                lower = current
        if current != lower:
            log.warning("LLM endpoint %s rejected structured output as %s (%s); asking for %s from now on",
                        self.endpoint, form, " ".join(str(exc).split())[:200], lower)
        return lower

    def _detect(self, client: Any) -> tuple[JsonForm, bool]:
        url = urlparse(self.endpoint)
        host = url.hostname or ""
        if _OPENAI_HOSTS.search(host):
            return "json_schema", True
        try:
            models = client.with_options(timeout=5.0, max_retries=0).models.list()
            owner = next((getattr(m, "owned_by", None) for m in getattr(models, "data", None) or []), None)
        except Exception as exc:  # no /models, or the server is down: decide again on the next call
            log.info("LLM endpoint %s: GET /models failed (%s); asking for json_schema", self.endpoint, type(exc).__name__)
            return form_for_server(host, url.port, None), False
        return form_for_server(host, url.port, owner), True

    @classmethod
    def forget(cls) -> None:
        """Drop every detection and fallback (tests)."""
        with cls._lock:
            cls._chosen.clear()
            cls._fallen_back.clear()
