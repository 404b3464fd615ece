from bench.pipeline import stage_gaps_ms


def test_a_hop_is_the_gap_between_one_stage_ending_and_the_next_starting():
    trace = [("0:plan", 0.0, 1.0), ("1:search:0", 1.02, 0.05), ("1:search:1", 1.03, 0.08),  # search ends at 1.11
             ("1:extract:A", 1.15, 1.0), ("1:extract:B", 1.16, 1.0)]
    assert stage_gaps_ms(trace) == [20.0, 40.0]


def test_stages_that_overlap_give_no_gap():
    trace = [("1:tenk_plan", 0.0, 1.0), ("1:search:0", 0.5, 0.2), ("1:extract:A", 1.03, 1.0)]  # 10-K and transcript branches at once
    assert stage_gaps_ms(trace) == [30.0]
