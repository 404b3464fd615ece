"""The pool's checkout check: a connection given back in good order moments ago, its socket quiet, goes out again
without the round trip that checks it; one idle longer, broken, never given back, or whose server closed the socket is
checked as before (and replaced if the check fails)."""
from __future__ import annotations

import socket

import pytest

import agent.db as db


class FakeConn:
    """What the check touches: the socket (one end of a local pair, the other end playing the server), autocommit and
    execute (the check's round trip)."""

    def __init__(self, fail: bool = False):
        self.autocommit, self.broken, self.fail, self.pings = False, False, fail, 0
        self.sock, self.server = socket.socketpair()

    def fileno(self) -> int:
        return self.sock.fileno()

    def execute(self, query):
        self.pings += 1
        if self.fail:
            raise ConnectionError("server closed the connection unexpectedly")


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(db.time, "monotonic", lambda: now[0])
    return now


def test_a_connection_back_moments_ago_is_not_pinged_and_one_idle_longer_is(clock):
    conn = FakeConn()
    db.check_unless_recent(conn)  # never given back (new to this process): checked
    assert conn.pings == 1
    db._note_return(conn)
    clock[0] += db.RECENTLY_RETURNED_S / 2
    db.check_unless_recent(conn)
    assert conn.pings == 1
    db._note_return(conn)
    clock[0] += db.RECENTLY_RETURNED_S * 2
    db.check_unless_recent(conn)
    assert conn.pings == 2 and conn.autocommit is False  # the check leaves the connection as it found it


def test_each_return_allows_one_unchecked_checkout():
    conn = FakeConn()
    db._note_return(conn)
    db.check_unless_recent(conn)
    db.check_unless_recent(conn)  # not given back in between: the second checkout is checked
    assert conn.pings == 1


def test_a_connection_whose_server_went_away_is_checked_even_when_just_given_back():
    conn = FakeConn(fail=True)
    db._note_return(conn)
    conn.server.close()  # the server died: the socket reads as ready (end of file)
    with pytest.raises(ConnectionError):  # the pool discards it and waits for a new one
        db.check_unless_recent(conn)
    assert conn.pings == 1
    talking = FakeConn()
    db._note_return(talking)
    talking.server.send(b"N")  # anything unread on an idle connection gets the full check
    db.check_unless_recent(talking)
    assert talking.pings == 1


def test_a_broken_connection_is_checked_and_its_failure_reaches_the_pool(clock):
    conn = FakeConn(fail=True)
    db._note_return(conn)
    conn.broken = True
    with pytest.raises(ConnectionError):  # the pool discards it and hands out another
        db.check_unless_recent(conn)
    stale = FakeConn(fail=True)
    db._note_return(stale)
    clock[0] += db.RECENTLY_RETURNED_S * 2  # given back before a database restart, checked out after it
    with pytest.raises(ConnectionError):
        db.check_unless_recent(stale)


def test_the_process_pool_checks_with_it_and_notes_every_return(monkeypatch):
    made = {}
    monkeypatch.setattr(db.ConnectionPool, "__init__", lambda self, url, **kwargs: made.update(kwargs))
    monkeypatch.setattr(db, "_pools", {})
    pool = db.get_pool("postgresql:///nowhere")
    assert isinstance(pool, db.ReturnTimedPool) and made["check"] is db.check_unless_recent
    assert "reset" not in made  # a reset callback would send every return through the pool's worker thread

    conn, given_back = FakeConn(), []
    monkeypatch.setattr(db.ConnectionPool, "putconn", lambda self, c: given_back.append(c))
    pool.putconn(conn)
    db.check_unless_recent(conn)
    assert given_back == [conn] and conn.pings == 0  # given back through the pool, and not pinged right after
