"""A fault-injecting OpenAI-compatible chat server on 127.0.0.1, for tests at the network edge.

A real HTTP server (stdlib ThreadingHTTPServer, HTTP/1.1 keep-alive) in a background thread of the test process,
speaking enough of the OpenAI API for finagent's `openai` provider and the real `openai` SDK:
`POST /v1/chat/completions` (non-streaming) and `GET /v1/models`. Worker subprocesses reach it through
`FINAGENT_LLM_PROVIDER=openai FINAGENT_LLM_BASE_URL=<srv.url>`.

    from tests.support.fault_llm import ALL_FAULTS, FaultLLMServer

    with FaultLLMServer(seed=7) as srv:           # or srv = FaultLLMServer().start(); ...; srv.stop()
        srv.url                                   # "http://127.0.0.1:PORT/v1"
        srv.set_faults(rate=0.3)                  # 30% of calls fail, kinds dealt from a shuffled deck of ALL_FAULTS (seeded)
        srv.set_faults(rate=0.3, kinds=("rate_limit", "reset"))
        srv.set_faults(script=["server_503", "ok", "truncated_json"])   # the next calls' faults, in order, then `rate`
        srv.calls                                 # list[CallRecord]: every request, what was injected, what was sent
        srv.counts()                              # {"ok": 12, "rate_limit": 3, ...} per fault kind over all calls
        srv.responder = lambda body: '{"findings": []}'  # request JSON -> assistant content of a successful call
        srv.reject_forms = {"json_schema"}        # answer that structured-output form with an error, like a server
                                                  # that does not support it (srv.reject_status, default 500)
        srv.owned_by = "me"                       # what GET /v1/models reports as owned_by (llama-cpp-python: "me")
        srv.require_key = "sk-right"              # any other bearer key gets 401 (OpenAI's "Incorrect API key provided")
        srv.max_output_tokens = 16384             # a request asking for more (max_tokens / max_completion_tokens) gets
                                                  # 400, as a hosted model answers it; CallRecord.output_tokens: what it asked

Faults (ALL_FAULTS):
- timeout: hold the request for `hold_s` (default 5 s; set a shorter FINAGENT_LLM_TIMEOUT_S in the client), then answer
- rate_limit: 429 with `Retry-After: <retry_after_s>` (default 1) and an OpenAI-shaped error body
- server_500 / server_503: an OpenAI-shaped error body
- reset: the TCP connection is closed abruptly (SO_LINGER 0: an RST) without any response
- malformed_json: 200 whose content is prose, not JSON
- truncated_json: 200 whose content is the good JSON cut in the middle
- off_schema: 200 with valid JSON that breaks the role's schema (a required field dropped, or a field of the wrong type)
On a free-text role (compose, answer_10k) the three content faults send an empty message. Random draws (`rate`) only
pick faults that apply to the request: content faults are drawn for JSON roles only.

Structured-output forms, recorded per call as `CallRecord.form`:
- "json_schema": response_format {"type": "json_schema", "json_schema": {...}} (OpenAI, vLLM)
- "json_object_schema": response_format {"type": "json_object", "schema": {...}} (llama.cpp / llama-cpp-python)
- "ollama": a top-level `format` holding the schema (Ollama; sent through the SDK's extra_body)
- "json_object": response_format {"type": "json_object"} alone; "text": no response_format.

The default responder is tests/support/lexical_model.py: a deterministic "model" that derives every answer from the
prompt (role from the schema, tickers from the prompt's company list, findings quoted from the fenced passages).
"""
from __future__ import annotations

import json
import random
import socket
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support import lexical_model

ALL_FAULTS = ("timeout", "rate_limit", "server_500", "server_503", "reset", "malformed_json", "truncated_json", "off_schema")
TRANSPORT_FAULTS = ("timeout", "rate_limit", "server_500", "server_503", "reset")
CONTENT_FAULTS = ("malformed_json", "truncated_json", "off_schema")
FORMS = ("json_schema", "json_object_schema", "ollama", "json_object", "text")

# what a server that does not support a form answers (the json_schema one is llama-cpp-python's own validation error)
REJECTION_MESSAGES = {
    "json_schema": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                   "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}]",
    "json_object_schema": "Invalid parameter: 'response_format.schema' is not supported with this model.",
    "ollama": "Unrecognized request argument supplied: format",
    "json_object": "Invalid parameter: 'response_format' of type 'json_object' is not supported with this model.",
    "text": "This server requires a response_format.",
}


@dataclass
class CallRecord:
    index: int
    path: str
    role: str  # plan, extract, compose, evaluate, plan_10k, select_tables, answer_10k, evaluate_10k, unknown, models
    repair: bool  # the request carries a previous assistant reply and a request to correct it
    model: str
    messages: list[dict[str, Any]]
    response_format: dict[str, Any] | None
    extra: dict[str, Any]  # every other body field (max_tokens, format, ...)
    form: str  # one of FORMS
    fault: str  # "ok", one of ALL_FAULTS, "rejected" (the form was in reject_forms), "unauthorized" (require_key)
    # or "too_many_tokens" (above max_output_tokens)
    status: int  # HTTP status sent; 0 when the connection was reset
    retry_count: int  # the SDK's x-stainless-retry-count header: 0 on a first attempt
    content: str = ""  # the assistant content sent (200 only)
    at: float = field(default_factory=time.monotonic)

    @property
    def output_tokens(self) -> int | None:
        """The most output tokens the request asked for (None: it set no cap)."""
        return requested_output_tokens(self.extra)


def requested_output_tokens(body: dict[str, Any]) -> int | None:
    asked = body.get("max_completion_tokens", body.get("max_tokens"))
    return int(asked) if isinstance(asked, (int, float)) else None


def request_form(body: dict[str, Any]) -> str:
    fmt = body.get("response_format") or {}
    if isinstance(body.get("format"), dict):
        return "ollama"
    if fmt.get("type") == "json_schema":
        return "json_schema"
    if fmt.get("type") == "json_object":
        return "json_object_schema" if isinstance(fmt.get("schema"), dict) else "json_object"
    return "text"


def off_schema(good: str, schema: dict[str, Any] | None) -> str:
    """Valid JSON that breaks `schema`: the first required field dropped, else the first property of the wrong type."""
    try:
        data = json.loads(good)
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        return json.dumps({"unexpected": data})
    schema = schema or {}
    required = schema.get("required") or []
    if required:
        data.pop(required[0], None)
        return json.dumps(data)
    props = schema.get("properties") or {}
    name = next(iter(props), None)
    if name is None:
        return json.dumps([data])  # an array where an object is required
    kind = props[name].get("type")
    data[name] = {"array": "not a list", "object": "not an object", "string": {"not": "a string"},
                  "integer": "many", "number": "many", "boolean": "maybe"}.get(str(kind), {"not": "valid"})
    return json.dumps(data)


class FaultLLMServer:
    def __init__(self, seed: int = 0, *, hold_s: float = 5.0, retry_after_s: float = 1.0, owned_by: str = "fault-llm"):
        self.hold_s = hold_s
        self.retry_after_s = retry_after_s
        self.owned_by = owned_by
        self.responder: Callable[[dict], str] = lexical_model.respond
        self.reject_forms: set[str] = set()
        self.reject_status = 500
        self.require_key: str | None = None
        self.max_output_tokens: int | None = None
        self.calls: list[CallRecord] = []
        self.url = ""
        self._rng = random.Random(seed)
        self._rate = 0.0
        self._kinds: tuple[str, ...] = ALL_FAULTS
        self._deck: list[str] = []
        self._script: deque[str] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    # ---------- control ----------
    def set_faults(self, rate: float = 0.0, kinds: Sequence[str] = ALL_FAULTS, *, script: Sequence[str] = ()) -> None:
        unknown = [k for k in [*kinds, *script] if k not in ALL_FAULTS and k != "ok"]
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; known: {ALL_FAULTS} and 'ok'")
        if not 0 <= rate <= 1:
            raise ValueError(f"rate must be within 0..1, got {rate}")
        with self._lock:
            self._rate, self._kinds, self._script, self._deck = rate, tuple(kinds), deque(script), []

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(Counter(c.fault for c in self.calls if c.role != "models"))

    def chat_calls(self) -> list[CallRecord]:
        with self._lock:
            return [c for c in self.calls if c.role != "models"]

    def reset_calls(self) -> None:
        with self._lock:
            self.calls.clear()

    def _draw(self, role: str) -> str:
        with self._lock:
            if self._script:
                return self._script.popleft()
            if self._rate and self._rng.random() < self._rate:
                return self._deal(role)
            return "ok"

    def _deal(self, role: str) -> str:
        """The next kind from a shuffled deck of every kind: random order, but each kind comes round once per deck,
        so a run of a few dozen faults holds every kind (independent draws can miss one)."""
        usable = [k for k in self._kinds if k in TRANSPORT_FAULTS or role not in ("compose", "answer_10k")]
        if not usable:
            return "ok"
        if not any(k in usable for k in self._deck):
            self._deck = list(self._kinds)
            self._rng.shuffle(self._deck)
        kind = next(k for k in self._deck if k in usable)
        self._deck.remove(kind)
        return kind

    def _record(self, **fields: Any) -> CallRecord:
        with self._lock:
            record = CallRecord(index=len(self.calls), **fields)
            self.calls.append(record)
            return record

    # ---------- lifecycle ----------
    def start(self) -> FaultLLMServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        server.block_on_close = False  # held (timeout) requests must not delay stop()
        self._server = server
        self._stopping.clear()
        threading.Thread(target=server.serve_forever, name="fault-llm", daemon=True).start()
        self.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FaultLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------- one chat completion ----------
    def _complete(self, handler: _Handler, body: dict[str, Any]) -> None:
        role = lexical_model.guess_role(body)
        form = request_form(body)
        extra = {k: v for k, v in body.items() if k not in ("model", "messages", "response_format")}
        base = dict(path=handler.path, role=role, repair=lexical_model.is_repair(body), model=str(body.get("model", "")),
                    messages=body.get("messages") or [], response_format=body.get("response_format"), extra=extra, form=form,
                    retry_count=int(handler.headers.get("x-stainless-retry-count") or 0))
        if self.require_key is not None and handler.headers.get("Authorization") != f"Bearer {self.require_key}":
            self._record(**base, fault="unauthorized", status=401)
            return handler.send_json(401, _error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"))
        if form in self.reject_forms:
            self._record(**base, fault="rejected", status=self.reject_status)
            return handler.send_json(self.reject_status, _error(REJECTION_MESSAGES[form], "invalid_request_error"))
        asked = requested_output_tokens(body)
        if self.max_output_tokens is not None and asked is not None and asked > self.max_output_tokens:
            self._record(**base, fault="too_many_tokens", status=400)
            return handler.send_json(400, _error(
                f"max_tokens is too large: {asked}. This model supports at most {self.max_output_tokens} completion "
                f"tokens, whereas you provided {asked}.", "invalid_request_error", "invalid_value"))
        fault = self._draw(role)
        if fault == "reset":
            self._record(**base, fault=fault, status=0)
            return handler.reset()
        if fault == "rate_limit":
            self._record(**base, fault=fault, status=429)
            return handler.send_json(429, _error("Rate limit reached for requests. Please try again later.", "requests",
                                                 "rate_limit_exceeded"), {"Retry-After": f"{self.retry_after_s:g}"})
        if fault in ("server_500", "server_503"):
            status = int(fault[-3:])
            self._record(**base, fault=fault, status=status)
            message = "The server had an error while processing your request." if status == 500 else "The server is overloaded."
            return handler.send_json(status, _error(message, "server_error"))
        content = self._content(body, role, fault)
        self._record(**base, fault=fault, status=200, content=content)
        if fault == "timeout" and self._stopping.wait(self.hold_s):
            return handler.reset()
        handler.send_json(200, _completion(body, content))

    def _content(self, body: dict[str, Any], role: str, fault: str) -> str:
        good = self.responder(body)
        if fault not in CONTENT_FAULTS:
            return good
        if role in ("compose", "answer_10k"):
            return ""
        if fault == "malformed_json":
            return "Sure! Here is what I found in the passages you gave me, as requested."
        if fault == "truncated_json":
            return good[: max(1, len(good) // 2)]
        return off_schema(good, lexical_model.request_schema(body))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: FaultLLMServer

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self.owner._record(path=self.path, role="models", repair=False, model="", messages=[], response_format=None, extra={},
                               form="text", fault="ok", status=200, retry_count=0)
            return self.send_json(200, {"object": "list", "data": [
                {"id": "fault-llm", "object": "model", "created": 0, "owned_by": self.owner.owned_by}]})
        self.send_json(404, _error(f"Unknown path {self.path}", "invalid_request_error"))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self.send_json(404, _error(f"Unknown path {self.path}", "invalid_request_error"))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self.send_json(400, _error("The request body is not valid JSON.", "invalid_request_error"))
        if body.get("stream"):
            return self.send_json(400, _error("stream is not supported by this test server.", "invalid_request_error"))
        self.owner._complete(self, body)

    def send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (a held request after its timeout)
            self.close_connection = True

    def reset(self) -> None:
        """Close the connection with an RST and no response."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


def _handler_for(owner: FaultLLMServer) -> type[_Handler]:
    return type("FaultLLMHandler", (_Handler,), {"owner": owner})


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _completion(body: dict[str, Any], content: str) -> dict[str, Any]:
    prompt = sum(len(lexical_model._text(m)) for m in body.get("messages") or []) // 4 + 1
    completion = len(content) // 4 + 1
    return {"id": f"chatcmpl-{time.monotonic_ns()}", "object": "chat.completion", "created": int(time.time()),
            "model": str(body.get("model", "")),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}
