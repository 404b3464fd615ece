"""LLM_MAX_IN_FLIGHT: at most that many role calls of one process at once, whatever its thread count."""
from __future__ import annotations

import threading
import time

from agent.providers.llm.factory import DelayedProvider, InFlightLimitedProvider, OutputCappedProvider, make_llm
from agent.settings import Settings


class Probe:
    name = "probe"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.peak = self.calls = 0

    def extract(self, request):
        with self.lock:
            self.now += 1
            self.calls += 1
            self.peak = max(self.peak, self.now)
        time.sleep(0.05)
        with self.lock:
            self.now -= 1
        return request, None


def test_no_more_calls_in_flight_than_slots():
    probe = Probe()
    limited = InFlightLimitedProvider(probe, 2)
    threads = [threading.Thread(target=limited.extract, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert probe.calls == 8 and probe.peak == 2


def test_a_call_that_raises_gives_its_slot_back():
    class Failing(Probe):
        def extract(self, request):
            raise RuntimeError("endpoint down")

    limited = InFlightLimitedProvider(Failing(), 1)
    for _ in range(3):  # with a leaked slot the second call would wait forever
        try:
            limited.extract(None)
        except RuntimeError:
            pass
    assert limited.slots.acquire(timeout=0.1)


def test_the_limit_is_outermost_but_for_the_output_caps_and_off_by_default():
    assert not isinstance(make_llm(Settings(llm_provider="extractive")).inner, InFlightLimitedProvider)
    llm = make_llm(Settings(llm_provider="extractive", llm_max_in_flight=3, llm_latency_s=0.5))
    assert isinstance(llm, OutputCappedProvider)
    assert isinstance(llm.inner, InFlightLimitedProvider) and isinstance(llm.inner.inner, DelayedProvider)
