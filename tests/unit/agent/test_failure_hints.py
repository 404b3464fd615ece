"""The suggestion that comes with a failed or rejected job's reason (agent/failure_hints.py): invented tickers."""
from __future__ import annotations

from agent.failure_hints import near_tickers, suggest, unknown_tickers

KNOWN = {"ACME", "ACMW", "BOLT", "CRNX", "ZYXA"}


def test_an_unknown_ticker_suggests_the_known_ones_near_it():
    s = suggest("Unknown ticker ACMX: no such company is known to finagent. Known companies include ACME, BOLT.", KNOWN)
    assert s is not None
    assert s.tickers == ["ACME", "ACMW"]
    assert s.message == "did you mean ACME or ACMW? (ACMX is not a known ticker)"
    assert s.available == {}


def test_the_submission_check_wording_and_several_tickers():
    reason = "tickers: unknown tickers BLOT, CRNZ, QQQQ: no company with that symbol has been ingested"
    assert unknown_tickers(reason) == ["BLOT", "CRNZ", "QQQQ"]
    s = suggest(reason, KNOWN)
    assert s is not None and s.tickers == ["BOLT", "CRNX"]
    assert "QQQQ" not in s.message  # nothing is near it: it is not mentioned


def test_no_close_ticker_is_no_suggestion():
    assert suggest("Unknown ticker QQQQ: no such company is known to finagent.", KNOWN) is None
    assert near_tickers("qqqq", KNOWN) == []
    assert near_tickers("acmx", KNOWN) == ["ACME", "ACMW"]  # case does not matter


def test_a_period_out_of_range_suggests_the_company_range():
    reason = ("Q4 2031 is not available for ACME (available: Q1 2023 to Q4 2024); "
              "FY2031 is not available for BOLT (available: Q2 2022 to Q1 2025)")
    s = suggest(reason)
    assert s is not None
    assert s.available == {"ACME": "Q1 2023 to Q4 2024", "BOLT": "Q2 2022 to Q1 2025"}
    assert s.message.startswith("ask about ACME for a period from Q1 2023 to Q4 2024 (Q4 2031 is outside it); ")
    assert "(FY2031 is outside it)" in s.message


def test_other_failures_have_no_suggestion():
    for reason in (None, "", "The planner failed (network error): timed out",
                   "no earnings-call transcripts are ingested for ACME", "unknown tickers are fine here"):
        assert suggest(reason, KNOWN) is None


def test_the_offline_planner_and_plan_problem_wordings():
    offline = "ACMX is not a company finagent knows (known: ACME, BOLT); ingest its transcripts or 10-K first."
    assert unknown_tickers(offline) == ["ACMX"]
    problems = "BLOT is not a known ticker (known: ACME, BOLT); CRNZ is not a known ticker (known: ACME, BOLT)"
    assert unknown_tickers(problems) == ["BLOT", "CRNZ"]
    s = suggest(offline, KNOWN)
    assert s is not None and s.tickers == ["ACME", "ACMW"]
