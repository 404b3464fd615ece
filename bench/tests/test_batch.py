"""The batch bench's pure helpers: questions, bounds, the p95 ratio and the RSS slope."""
from __future__ import annotations

import pytest

from agent.batches import parse_lines
from bench.batch import cpu_bound, llm_bound, make_questions, p95_ratio, rss_slope

PERIODS = [("AAA", 2024, 1), ("AAA", 2024, 2), ("BBB", 2025, 3)]


def test_questions_are_distinct_batch_lines_about_the_corpus_periods():
    qs = make_questions(PERIODS, 500)
    lines = parse_lines(qs, mode="standard")
    assert len({line.key for line in lines}) == 500  # no two lines share a content key
    assert all(line.request is not None for line in lines)  # no impossible period, none too short
    assert all("AAA" in q or "BBB" in q for q in qs)
    assert make_questions(PERIODS, 50) == qs[:50]  # deterministic


def test_more_questions_than_distinct_combinations_is_refused():
    with pytest.raises(ValueError, match="distinct"):
        make_questions(PERIODS[:1], 10_000)


def test_the_llm_bound_is_the_tightest_of_threads_slots_and_rate_limit():
    # 16 threads, 6 calls of 1 s per job: 160 jobs/min; 16 slots, 4 steps per job: 240 jobs/min
    assert llm_bound(1.0, 6, 4, threads=16, slots=16) == (160.0, "threads")
    # 4 slots held 4 s each: 60 jobs/min, tighter than 8 threads over 6 calls (80 jobs/min)
    assert llm_bound(1.0, 6, 4, threads=8, slots=4) == (60.0, "slots")
    # 300 requests/min, 80% for batches, 6 calls per job: 40 jobs/min
    assert llm_bound(1.0, 6, 4, threads=16, slots=16, requests_per_minute=300, batch_share=0.8) == (40.0, "rate limit")


def test_cpu_bound_is_cores_over_cpu_time_per_job():
    assert cpu_bound(0.5, cores=2) == 240.0


def test_p95_ratio():
    idle = [2.0] * 19 + [4.0]
    assert p95_ratio([x * 1.5 for x in idle], idle) == pytest.approx(1.5)


def test_rss_slope_ignores_warm_up_and_measures_mb_per_1000_jobs():
    warm_up = [(0, 100.0), (100, 150.0), (200, 180.0)]
    flat = [(j, 180.0) for j in range(300, 1001, 100)]
    assert rss_slope(warm_up + flat) == pytest.approx(0.0, abs=1e-9)
    leak = [(j, 180.0 + 0.02 * j) for j in range(0, 1001, 100)]  # 20 MB per 1,000 jobs
    assert rss_slope(leak) == pytest.approx(20.0)
    assert rss_slope([(5, 100.0)]) == 0.0


def test_steady_rate_leaves_out_the_ramp_and_the_tail():
    from bench.batch import steady_per_min

    # one job a second from t=10 to t=109, then a straggler 60 s later: the whole-batch rate would count its wait
    ends = [10.0 + i for i in range(100)] + [169.0]
    assert steady_per_min(ends) == pytest.approx(60.0, rel=0.02)
    assert steady_per_min([5.0]) == 0.0
    assert steady_per_min([5.0] * 20) == 0.0


def test_llm_slots_per_process_follow_the_threads_unless_given():
    from argparse import Namespace

    from bench.batch import llm_slots_per_process

    assert llm_slots_per_process(Namespace(llm_slots=0, threads_per_llm_slot=2), 16) == 8
    assert llm_slots_per_process(Namespace(llm_slots=0, threads_per_llm_slot=1), 16) is None  # one per thread
    assert llm_slots_per_process(Namespace(llm_slots=5, threads_per_llm_slot=2), 16) == 5
    assert llm_slots_per_process(Namespace(llm_slots=0, threads_per_llm_slot=4), 2) == 1
