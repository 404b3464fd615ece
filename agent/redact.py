"""One place that knows finagent's secrets and masks them in text before it is stored, published or logged.

What is masked:
- every secret the settings hold (any SecretStr: the API keys, the LLM, OpenAI and Tavily keys, Flower's basic auth and
  each of its passwords), the password of every configured URL, and the provider keys the SDKs read from the
  environment themselves (OPENAI_API_KEY, TAVILY_API_KEY);
- anything shaped like a credential, configured here or not: `sk-...` and `tvly-...` keys (also the partly starred
  echo a provider puts in its 401 body), `Bearer`/`Basic` credentials, `password=...`-style pairs, and the password
  of a `scheme://user:password@host` URL.

Where it is applied: step-output errors (FailedOutput), ledger rows, exceptions before Celery stores or publishes them
(`scrub_exception`), every log record of a worker or the API (`install_log_redaction`), API error bodies and
`finagent config show` (`masked_config`). This module imports nothing from finagent but the settings, so every layer
may use it.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from pydantic import BaseModel, SecretStr

MASK = "********"
MIN_SECRET_CHARS = 4  # shorter values would mask ordinary words everywhere
# provider keys the SDKs read from the environment without the FINAGENT_ prefix
SDK_KEY_VARS = ("OPENAI_API_KEY", "TAVILY_API_KEY")

# a setting (or a JSON key) whose value is a secret, by its name
SECRET_NAME = re.compile(r"(?i)(?:^|_)(?:key|keys|auth)$|(?:secrets?|password|passwd|token|credentials?)$|api_?key")

_KEY_SHAPES = [
    # OpenAI-style and Tavily keys; the starred run covers the partly masked echo in a 401 body ("sk-abc****wxyz")
    re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9][A-Za-z0-9_\-*]{7,}"),
    re.compile(r"\btvly-[A-Za-z0-9][A-Za-z0-9_\-*]{7,}"),
]
_BEARER = re.compile(r"\b(Bearer\s+)([A-Za-z0-9._~+/\-]{6,}=*)")
# a Basic credential is base64: it has a digit or padding, which tells it from "Basic earnings per share"
_BASIC = re.compile(r"\b(Basic\s+)((?=[A-Za-z0-9+/]*[0-9=])[A-Za-z0-9+/]{8,}=*)")
_PAIR = re.compile(
    r"(?i)\b((?:x-)?api[_-]?key|apikey|access[_-]?token|auth[_-]?token|client[_-]?secret|secret|password|passwd|pwd)"
    r"(['\"]?\s*[:=]\s*['\"]?)([^\s'\"&,;}\])]{3,})")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:/@]*:)([^\s/@]+(?:@[^\s/@]+)*)(@[^\s/@]+)")


def _url_passwords(url: str) -> list[str]:
    """The password of scheme://user:password@host and of secret-looking query parameters."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [parts.password] if parts.password else []
    found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if SECRET_NAME.search(k) and v]
    return found


def _secret_values(obj: Any, name: str = "") -> Iterable[str]:
    """Every secret inside a settings object: SecretStr values, credentials in URLs, and user:password pairs."""
    if isinstance(obj, SecretStr):
        value = obj.get_secret_value()
        yield value
        if name.endswith("auth"):  # "user:password[,user2:password2]": each password on its own as well
            for pair in value.split(","):
                user, sep, password = pair.partition(":")
                if sep:
                    yield pair.strip()
                    yield password.strip()
    elif isinstance(obj, BaseModel):
        for field in type(obj).model_fields:
            yield from _secret_values(getattr(obj, field), field)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield from _secret_values(value, str(key))
    elif isinstance(obj, (list, tuple, set)):
        for value in obj:
            yield from _secret_values(value, name)
    elif isinstance(obj, str):
        if "://" in obj:
            yield from _url_passwords(obj)
        elif SECRET_NAME.search(name):
            yield obj


class Redactor:
    """Masks a fixed set of secret values, then anything credential-shaped."""

    def __init__(self, secrets: Iterable[str] = ()):
        values = {s.strip() for s in secrets if s and len(s.strip()) >= MIN_SECRET_CHARS}
        # longest first, so a secret that contains another is masked whole
        self.secrets = sorted(values, key=len, reverse=True)
        self._exact = re.compile("|".join(re.escape(s) for s in self.secrets)) if self.secrets else None

    @classmethod
    def from_settings(cls, settings: Any, environ: dict[str, str] | None = None) -> Redactor:
        env = os.environ if environ is None else environ
        return cls([*_secret_values(settings), *(env.get(var, "") for var in SDK_KEY_VARS)])

    def __call__(self, text: str) -> str:
        if not text:
            return text
        if self._exact is not None:
            text = self._exact.sub(MASK, text)
        for shape in _KEY_SHAPES:
            text = shape.sub(MASK, text)
        text = _BEARER.sub(lambda m: f"{m[1]}{MASK}", text)
        text = _BASIC.sub(lambda m: f"{m[1]}{MASK}", text)
        text = _PAIR.sub(lambda m: f"{m[1]}{m[2]}{MASK}", text)
        return _URL_PASSWORD.sub(lambda m: f"{m[1]}{MASK}{m[3]}", text)

    def data(self, value: Any) -> Any:
        """JSON-like data with every string redacted and every secret-named key's value masked."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {k: (MASK if SECRET_NAME.search(str(k)) and v not in (None, "", [], {}) else self.data(v))
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value


_lock = threading.Lock()
_active: Redactor | None = None


def configure(settings: Any) -> Redactor:
    """Use these settings' secrets from now on in this process (tests; a process with settings of its own)."""
    global _active
    with _lock:
        _active = Redactor.from_settings(settings)
        return _active


def active() -> Redactor:
    """The process's redactor, built on first use from the process's settings."""
    global _active
    with _lock:
        if _active is None:
            try:
                from agent.settings import get_settings

                _active = Redactor.from_settings(get_settings())
            except Exception:  # invalid settings must not break error reporting: the credential shapes still apply
                _active = Redactor.from_settings(None)
        return _active


def redact(text: str) -> str:
    return active()(text)


def scrub_exception(exc: BaseException) -> BaseException:
    """Redact an exception in place (its args, message/detail/body attributes, and its causes), so that whatever
    renders it later (str, repr, a traceback, Celery's result backend and task events) shows no secret."""
    r = active()
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        try:
            current.args = tuple(r.data(a) if isinstance(a, (str, dict, list)) else a for a in current.args)
        except (AttributeError, TypeError):
            pass
        for attr in ("message", "detail", "body", "reason"):
            value = getattr(current, attr, None)
            if isinstance(value, (str, dict, list)):
                try:
                    setattr(current, attr, r.data(value))
                except (AttributeError, TypeError):
                    pass
        current = current.__cause__ or current.__context__
    return exc


def masked_config(settings: BaseModel) -> dict[str, Any]:
    """Settings as plain data for display, with every secret masked: secret-named values at any depth, URL
    passwords and secret query parameters anywhere, and any configured secret quoted inside another value."""
    r = Redactor.from_settings(settings)
    return r.data(_mask_urls(settings.model_dump(mode="json")))


def _mask_urls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _mask_urls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_urls(v) for v in value]
    if isinstance(value, str) and "://" in value:
        return mask_url(value)
    return value


def mask_url(url: str) -> str:
    """scheme://user:********@host/...?token=******** (the user name and everything else kept)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return Redactor()(url)
    netloc = parts.netloc
    if "@" in netloc:
        creds, host = netloc.rsplit("@", 1)
        if ":" in creds:
            netloc = f"{creds.split(':', 1)[0]}:{MASK}@{host}"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if netloc == parts.netloc and not any(SECRET_NAME.search(k) for k, _ in pairs):
        return url  # nothing to hide: the URL exactly as configured
    query = "&".join(f"{k}={MASK}" if SECRET_NAME.search(k) else f"{k}={v}" for k, v in pairs) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


# ---------- logs ----------
_installed = False


def install_log_redaction() -> None:
    """Every log record this process creates from now on has its message, arguments and traceback redacted.
    A LogRecord factory rather than a handler filter: it covers every logger and handler, including Celery's and
    uvicorn's, whenever they are set up."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        redact_record(record)
        return record

    logging.setLogRecordFactory(factory)


def redact_record(record: logging.LogRecord) -> None:
    r = active()
    try:
        message = record.getMessage()
    except Exception:  # a malformed format call: leave it for logging to report
        return
    clean = r(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and record.exc_info[1] is not None:
        scrub_exception(record.exc_info[1])
        record.exc_text = r(logging.Formatter().formatException(record.exc_info))
    if record.stack_info:
        record.stack_info = r(record.stack_info)
