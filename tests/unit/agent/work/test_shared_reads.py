"""A fan-out's generation calls for one job that ask for its evidence at once share one read (agent/work/calls.py)."""
from __future__ import annotations

import threading
import time

import pytest

from agent.work.calls import SharedReads


def test_callers_that_ask_during_a_read_share_it_and_a_later_caller_reads_again():
    reads = SharedReads()
    started, release = threading.Event(), threading.Event()
    calls = []

    def slow_read():
        calls.append(1)
        started.set()
        release.wait(5)
        return ["evidence"]

    results = []
    leader = threading.Thread(target=lambda: results.append(reads.read("job", slow_read)))
    leader.start()
    assert started.wait(5)
    followers = [threading.Thread(target=lambda: results.append(reads.read("job", slow_read))) for _ in range(4)]
    for t in followers:
        t.start()
    time.sleep(0.3)  # the followers are waiting on the leader's read
    release.set()
    for t in [leader, *followers]:
        t.join(5)
    assert len(calls) == 1 and results == [["evidence"]] * 5
    assert reads.read("job", lambda: ["fresh"]) == ["fresh"]  # nothing is kept once a read is done


def test_other_keys_do_not_wait_and_a_failed_read_leaves_its_followers_to_read_for_themselves():
    reads = SharedReads()
    started, release = threading.Event(), threading.Event()

    def failing():
        started.set()
        release.wait(5)
        raise RuntimeError("database gone")

    errors, results = [], []

    def lead():
        try:
            reads.read("job", failing)
        except RuntimeError as exc:
            errors.append(str(exc))

    leader = threading.Thread(target=lead)
    leader.start()
    assert started.wait(5)
    assert reads.read("other job", lambda: "other") == "other"  # another key reads at once
    follower = threading.Thread(target=lambda: results.append(reads.read("job", lambda: "own read")))
    follower.start()
    time.sleep(0.3)
    release.set()
    leader.join(5)
    follower.join(5)
    assert errors == ["database gone"] and results == ["own read"]
    with pytest.raises(ValueError):
        reads.read("job", lambda: (_ for _ in ()).throw(ValueError("raised to its caller")))


def test_kept_reads_answer_only_at_their_version_and_keep_the_latest_jobs():
    from agent.work.calls import KeptReads

    kept = KeptReads(size=2)
    kept.put("a", "v1", "read of a")
    assert kept.get("a", "v1") == "read of a" and kept.get("a", "v2") is None
    kept.put("b", "v1", "read of b")
    kept.get("a", "v1")  # a used last: b goes first
    kept.put("c", "v1", "read of c")
    assert kept.get("b", "v1") is None and kept.get("a", "v1") == "read of a" and kept.get("c", "v1") == "read of c"
    kept.put("a", "v2", "newer read of a")
    assert kept.get("a", "v1") is None and kept.get("a", "v2") == "newer read of a"
