"""Who may see and act on a job or a batch: the API key that created it, and admin keys.

A job or batch stores its owner as `owner_id(key)`, a digest of the key, never the key itself. Jobs made without a
key (the Celery contract, the CLI, the API with no keys configured) have no owner: with keys configured only admin
keys see them; with none configured (the local demo) every caller sees everything, as before keys existed.

An idempotency key is scoped by its owner (`scoped_idempotency_key`), so two API keys using the same idempotency key
make two jobs, and neither can learn the other's job id by reusing its key.
"""
from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

# domain separation: the owner digest of a key is not the plain SHA-256 someone may have of it elsewhere
_OWNER_DOMAIN = b"finagent-owner\x00"


@dataclass(frozen=True)
class Caller:
    """Who makes a request: `owner` is stored with the jobs and batches it creates (None: ownerless); `sees_all`
    lets it see and act on every job and batch (an admin key; any caller when no API keys are configured; the CLI
    and the Celery contract, which reach the servers directly)."""

    owner: str | None
    sees_all: bool

    def __post_init__(self) -> None:
        if not self.sees_all and self.owner is None:
            raise ValueError("a caller that does not see everything must own what it creates")


# the CLI, the Celery contract, and the API when no API keys are configured
OPEN = Caller(owner=None, sees_all=True)


def owner_id(key: str) -> str:
    """The owner stored for an API key: SHA-256 hex of the key. An API key is a long random secret, so its digest
    neither reveals it nor needs a pepper; a key that is rotated owns nothing of the old key's."""
    return hashlib.sha256(_OWNER_DOMAIN + key.encode()).hexdigest()


def api_caller(key: str, is_admin: bool) -> Caller:
    """The caller an accepted API key makes (an admin key owns what it creates and sees everything)."""
    return Caller(owner=owner_id(key), sees_all=is_admin)


def can_see(caller: Caller, owner: str | None) -> bool:
    """Whether `caller` may see (and so act on) a job or batch owned by `owner`. A job it may not see is reported
    as not found, never as forbidden: a caller must not learn that another key's job exists."""
    if caller.sees_all:
        return True
    return owner is not None and caller.owner is not None and hmac.compare_digest(owner, caller.owner)


def listing_owner(caller: Caller) -> str | None:
    """The owner a listing is limited to; None lists every job or batch."""
    return None if caller.sees_all else caller.owner


def scoped_idempotency_key(owner: str | None, key: str) -> str:
    """The idempotency key as stored: an ownerless job's as given, an owned job's prefixed with its owner, so the
    same key from two API keys names two jobs. The prefix is a 64-hex digest of a secret: no caller can write
    another's."""
    return key if owner is None else f"{owner}:{key}"
