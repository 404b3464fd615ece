"""API keys: `Authorization: Bearer <key>` or `X-API-Key: <key>`, checked in constant time; and the rule that
the API binds off loopback only with keys configured."""
from __future__ import annotations

import hmac
import ipaddress

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr

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


def require_key(request: Request, rt: Runtime = Depends(runtime),
                credentials: HTTPAuthorizationCredentials | None = Security(bearer),
                header_key: str | None = Security(api_key_header)) -> None:
    keys = rt.settings.api_keys
    if not keys:
        return
    key = presented_key(credentials, header_key)
    if key is None:
        raise ApiError(401, "an API key is required: send Authorization: Bearer <key> or X-API-Key: <key>", headers=CHALLENGE)
    if not key_matches(key, keys):
        raise ApiError(401, "the API key is not valid", headers={"WWW-Authenticate": 'Bearer realm="finagent", error="invalid_token"'})


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
    if not is_loopback(host) and not settings.api_keys:
        raise BindRefused(f"refusing to bind the API to {host} without an API key: set {env_var('api_keys')} "
                          f"(e.g. '[\"<key>\"]') or bind to 127.0.0.1")
