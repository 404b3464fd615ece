"""Who sees a job or a batch (agent/ownership.py): the key that created it, admin keys, and everyone when no keys are
configured; an owned job's idempotency key is scoped by its owner."""
from __future__ import annotations

import hashlib

import pytest

from agent.ownership import OPEN, Caller, api_caller, can_see, listing_owner, owner_id, scoped_idempotency_key

ALPHA, BRAVO = "alpha-key-0f3c", "bravo-key-9a1d"


def test_the_owner_is_a_digest_of_the_key_never_the_key():
    owner = owner_id(ALPHA)
    assert len(owner) == 64 and int(owner, 16) >= 0
    assert ALPHA not in owner and owner == owner_id(ALPHA) and owner != owner_id(BRAVO)
    assert owner != hashlib.sha256(ALPHA.encode()).hexdigest()  # domain-separated from a plain SHA-256 of the key


def test_a_key_sees_its_own_jobs_only():
    alpha, bravo = api_caller(ALPHA, is_admin=False), api_caller(BRAVO, is_admin=False)
    assert can_see(alpha, owner_id(ALPHA)) and can_see(bravo, owner_id(BRAVO))
    assert not can_see(alpha, owner_id(BRAVO)) and not can_see(bravo, owner_id(ALPHA))
    # jobs made without a key (the Celery contract, the CLI, before the migration) are not any key's
    assert not can_see(alpha, None)
    assert listing_owner(alpha) == owner_id(ALPHA)


def test_an_admin_key_sees_everything_and_owns_what_it_creates():
    admin = api_caller("admin-key-77", is_admin=True)
    assert admin.owner == owner_id("admin-key-77")
    assert all(can_see(admin, owner) for owner in (owner_id(ALPHA), owner_id(BRAVO), None))
    assert listing_owner(admin) is None


def test_no_keys_configured_sees_everything_and_owns_nothing():
    assert OPEN.owner is None and OPEN.sees_all
    assert all(can_see(OPEN, owner) for owner in (owner_id(ALPHA), None))
    assert listing_owner(OPEN) is None


def test_a_caller_limited_to_its_own_must_have_an_owner():
    with pytest.raises(ValueError):
        Caller(owner=None, sees_all=False)


def test_idempotency_keys_are_scoped_by_owner():
    alpha, bravo = owner_id(ALPHA), owner_id(BRAVO)
    assert scoped_idempotency_key(alpha, "req-42") != scoped_idempotency_key(bravo, "req-42")
    assert scoped_idempotency_key(None, "req-42") == "req-42"  # ownerless keys are stored as they always were
    # an ownerless caller sending a key that looks scoped cannot reach a key's job without knowing its owner digest
    assert scoped_idempotency_key(alpha, "req-42") != scoped_idempotency_key(None, f"{owner_id('guess')}:req-42")
