"""API keys: `Authorization: Bearer <key>` or `X-API-Key: <key>`, checked in constant time, each making a caller
that owns what it creates (admin keys see everything: agent/ownership.py); and the rule that the API binds off
loopback only with keys configured."""
from __future__ import annotations

import hmac
import ipaddress

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr

from agent.ownership import OPEN, Caller, api_caller
from agent.settings import Settings, env_var
from api_stub.error_responses import ApiError
from api_stub.runtime import Runtime, runtime

# auto_error=False: a missing key is our own 401 in the API's error shape, not FastAPI's 403
bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer <key>")
api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="X-API-Key: <key>")

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="finagent"'}


def key_matches(presented: str, keys: list[SecretStr]) -> bool:
    """Compare against every configured key, with no early exit, so timing tells nothing about which key
    (or how much of one) matched."""
    given = presented.encode()
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(given, key.get_secret_value().encode())
    return matched


def presented_key(credentials: HTTPAuthorizationCredentials | None, header_key: str | None) -> str | None:
    if credentials is not None and credentials.scheme.lower() == "bearer" and credentials.credentials:
        return credentials.credentials
    return header_key or None


def keys_configured(settings: Settings) -> bool:
    return bool(settings.api_keys or settings.admin_api_keys)


def caller_for(key: str, api_keys: list[SecretStr], admin_keys: list[SecretStr]) -> Caller | None:
    """The caller a presented key makes, or None for a key that is not configured. Both lists are compared whole,
    whichever matches."""
    is_admin = key_matches(key, admin_keys)
    is_key = key_matches(key, api_keys)
    return api_caller(key, is_admin) if is_admin or is_key else None


def require_key(request: Request, rt: Runtime = Depends(runtime),
                credentials: HTTPAuthorizationCredentials | None = Security(bearer),
                header_key: str | None = Security(api_key_header)) -> Caller:
    """The request's caller (a route's dependency as well as the routers': FastAPI resolves it once a request).
    With no keys configured every request is the open caller, which sees everything and owns nothing."""
    settings = rt.settings
    if not keys_configured(settings):
        return OPEN
    key = presented_key(credentials, header_key)
    if key is None:
        raise ApiError(401, "an API key is required: send Authorization: Bearer <key> or X-API-Key: <key>", headers=CHALLENGE)
    caller = caller_for(key, settings.api_keys, settings.admin_api_keys)
    if caller is None:
        raise ApiError(401, "the API key is not valid", headers={"WWW-Authenticate": 'Bearer realm="finagent", error="invalid_token"'})
    return caller


class BindRefused(ValueError):
    pass


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a hostname other than localhost may resolve to anything


def check_bind(host: str, settings: Settings) -> None:
    """Refuse to serve off loopback without API keys: anyone who can reach the port could run jobs."""
    if not is_loopback(host) and not keys_configured(settings):
        raise BindRefused(f"refusing to bind the API to {host} without an API key: set {env_var('api_keys')} "
                          f"(e.g. '[\"<key>\"]') or bind to 127.0.0.1")
