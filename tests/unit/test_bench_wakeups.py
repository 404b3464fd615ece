import os

from bench.wakeups import BURST, idle_driver, round_trips


def test_a_burst_is_timed_round_trip_by_round_trip_and_the_callers_cpus_are_given_back():
    before = os.sched_getaffinity(0)
    cpu = min(before)
    burst = round_trips(cpu, cpu, 0.0, bursts=3)
    assert len(burst) == BURST
    assert all(0 < us < 1_000_000 for us in burst)
    assert os.sched_getaffinity(0) == before


def test_the_idle_driver_is_read_where_the_kernel_has_one():
    driver = idle_driver()
    assert set(driver) == {"cpuidle_driver", "guest_halt_poll_ns"}
    assert all(v is None or (isinstance(v, str) and v) for v in driver.values())
