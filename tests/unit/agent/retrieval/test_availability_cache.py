"""The periods of several companies and corpora, and their names, in one Redis round trip: every coordinator step
reads its plan's companies' names, transcript quarters and 10-K years, so the cached ones come back from one MGET, the
missing ones from Postgres (one connection), and are cached for the next step; ingestion's invalidation drops them."""
from __future__ import annotations

import contextlib

import fakeredis

from agent.models.corpus import Period
from agent.retrieval.availability import available_periods, available_periods_many, invalidate, names_and_periods


class FakeConn:
    """`documents` as rows of (ticker, kind, year, quarter), `companies` as ticker -> name; counts the queries."""

    def __init__(self, rows, names=None):
        self.rows, self.names, self.queries = rows, names or {}, 0

    def execute(self, sql, params):
        self.queries += 1
        if "FROM companies" in sql:
            found = [{"ticker": t, "name": self.names[t]} for t in params[0] if t in self.names]
            return type("Cursor", (), {"fetchall": lambda _: found})()
        ticker, kinds = params
        found = sorted({(y, q) for t, k, y, q in self.rows if t == ticker and k in kinds})
        return type("Cursor", (), {"fetchall": lambda _: [{"fiscal_year": y, "fiscal_quarter": q} for y, q in found]})()


class FakePool:
    def __init__(self, conn):
        self.conn, self.checkouts = conn, 0

    def connection(self):
        self.checkouts += 1
        return contextlib.nullcontext(self.conn)


class CountingRedis(fakeredis.FakeRedis):
    """fakeredis that counts the commands sent on their own (a pipeline counts as its EXECUTE)."""

    calls: list[str]

    def execute_command(self, *args, **options):
        self.__dict__.setdefault("calls", []).append(str(args[0]))
        return super().execute_command(*args, **options)


ROWS = [("ACME", "transcript", 2031, 1), ("ACME", "transcript", 2031, 2), ("ACME", "10k", 2030, 0),
        ("BETA", "transcript", 2031, 3)]


def test_cold_then_warm_lookups_take_one_query_each_and_then_one_round_trip():
    redis, conn = CountingRedis(server=fakeredis.FakeServer()), FakeConn(ROWS)
    pool = FakePool(conn)
    wanted = [(t, c) for t in ("ACME", "BETA") for c in ("transcript", "10k")]

    cold = available_periods_many(pool, wanted, redis, 60)
    assert cold[("ACME", "transcript")] == [Period(fiscal_year=2031, fiscal_quarter=1), Period(fiscal_year=2031, fiscal_quarter=2)]
    assert cold[("ACME", "10k")] == [Period(fiscal_year=2030, fiscal_quarter=0)]
    assert cold[("BETA", "10k")] == [] and len(cold[("BETA", "transcript")]) == 1
    assert conn.queries == 4 and pool.checkouts == 1  # the misses on one connection

    redis.calls = []
    warm = available_periods_many(pool, wanted, redis, 60)
    assert warm == cold and conn.queries == 4
    assert redis.calls == ["MGET"]  # one round trip for all four, empty lists included

    invalidate(redis, "ACME")  # ingestion wrote ACME's documents
    conn.rows = [*ROWS, ("ACME", "transcript", 2031, 3)]
    after = available_periods_many(pool, wanted, redis, 60)
    assert len(after[("ACME", "transcript")]) == 3 and conn.queries == 6  # only ACME's two were read again
    assert available_periods(pool, "BETA", "transcript", redis, 60) == cold[("BETA", "transcript")]


def test_a_given_connection_is_used_and_no_redis_reads_postgres_every_time():
    conn = FakeConn(ROWS)
    pool = FakePool(conn)
    for _ in range(2):
        found = available_periods_many(pool, [("ACME", "10k")], None, 60, conn=conn)
        assert found == {("ACME", "10k"): [Period(fiscal_year=2030, fiscal_quarter=0)]}
    assert conn.queries == 2 and pool.checkouts == 0


def test_names_come_with_the_periods_in_the_same_round_trip():
    redis = CountingRedis(server=fakeredis.FakeServer())
    conn = FakeConn(ROWS, names={"ACME": "Acme Corp", "BETA": "Beta Industries"})
    pool = FakePool(conn)
    names, periods = names_and_periods(pool, ["ACME", "BETA", "NOPE"], ["transcript", "10k"], redis, 60)
    assert names == {"ACME": "Acme Corp", "BETA": "Beta Industries"}  # an unregistered ticker has no name
    assert len(periods[("ACME", "transcript")]) == 2 and periods[("NOPE", "10k")] == []
    assert conn.queries == 7 and pool.checkouts == 1  # six period lists and one names query, on one connection

    redis.calls = []
    assert names_and_periods(pool, ["ACME", "BETA"], ["transcript", "10k"], redis, 60) == (names, {
        k: v for k, v in periods.items() if k[0] != "NOPE"})
    assert redis.calls == ["MGET"] and conn.queries == 7  # warm: one round trip, no query

    invalidate(redis, "ACME")  # ingestion wrote ACME's documents (and may have registered it)
    names_and_periods(pool, ["ACME", "BETA"], ["transcript", "10k"], redis, 60)
    assert conn.queries == 10  # ACME's name and two period lists read again, BETA's kept
