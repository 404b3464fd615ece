from bench.pipeline import by_transition, llm_steps, stage_gaps_ms, stage_of, stage_transitions


def test_a_hop_is_the_gap_between_one_stage_ending_and_the_next_starting():
    trace = [("0:plan", 0.0, 1.0), ("1:search:0", 1.02, 0.05), ("1:search:1", 1.03, 0.08),  # search ends at 1.11
             ("1:extract:A", 1.15, 1.0), ("1:extract:B", 1.16, 1.0)]
    assert stage_gaps_ms(trace) == [20.0, 40.0]


def test_each_hop_is_named_by_the_stages_it_joins_and_summed_up_by_them():
    trace = [("0:plan", 0.0, 1.0), ("1:search:0", 1.02, 0.05), ("1:extract:A", 1.15, 1.0),
             ("1:tenk2:answer:A", 2.2, 1.0), ("1:tenk2:evaluate:A", 3.21, 1.0), ("2:search:0", 4.24, 0.05),
             ("2:extract:A", 4.33, 1.0)]
    assert stage_transitions(trace) == [("plan->search", 20.0), ("search->extract", 80.0), ("extract->tenk:answer", 50.0),
                                        ("tenk:answer->tenk:evaluate", 10.0), ("tenk:evaluate->search", 30.0),
                                        ("search->extract", 40.0)]
    assert by_transition(stage_transitions(trace))["search->extract"] == {"median_ms": 60.0, "n": 2}


def test_stages_that_overlap_give_no_gap():
    trace = [("1:tenk_plan", 0.0, 1.0), ("1:search:0", 0.5, 0.2), ("1:extract:A", 1.03, 1.0)]  # 10-K and transcript branches at once
    assert stage_gaps_ms(trace) == [30.0]


def test_a_10k_stage_keeps_its_round_and_a_fix_call_its_stage():
    assert stage_of("1:tenk2:answer:ACME") == "1:tenk2:answer"
    assert stage_of("1:tenk1:plan:ACME:fix") == "1:tenk1:plan"
    assert stage_of("1:extract:ACME:2024_q2") == "1:extract"


def test_llm_stages_that_overlap_are_one_step_of_the_bound():
    side_by_side = [("0:plan:", 0.0, 1.0), ("1:tenk1:plan:A", 1.02, 1.0), ("1:tenk1:answer:A", 2.1, 1.0),
                    ("1:extract:A:2024_q1", 2.11, 1.0), ("1:tenk1:evaluate:A", 3.13, 1.0), ("1:compose:", 4.2, 1.0)]
    assert llm_steps(side_by_side) == 5
    one_after_another = side_by_side[:3] + [("1:extract:A:2024_q1", 3.2, 1.0), ("1:tenk1:evaluate:A", 4.3, 1.0)]
    assert llm_steps(one_after_another) == 5 and llm_steps(one_after_another + [("1:compose:", 5.4, 1.0)]) == 6

