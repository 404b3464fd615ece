"""The LLM response cache on fakeredis: an identical request is answered from Redis, a different one (or the
same one to another model or script) is not; the budget note does not count."""
from __future__ import annotations

import fakeredis

from agent.models.research import Answer, ScopeFindings, Usage
from agent.providers.llm.cache import CachedProvider
from agent.providers.llm.roles import ExtractRequest
from tests.support.machine_driver import plan


class Counting:
    name = "counting"

    def __init__(self, namespace: str = "m1"):
        self.calls = 0
        self.cache_namespace = namespace

    def extract(self, req):
        self.calls += 1
        return ScopeFindings(scope=req.scope), Usage(prompt=100, completion=20, model="gpt-4o-mini")

    def select_tables(self, req):
        self.calls += 1
        return [3, 1], Usage(prompt=5, completion=1, model="gpt-4o-mini")

    def compose(self, req):
        self.calls += 1
        return Answer(text="x"), Usage()


def request(scope: str = "ACME:2025_q1", note: str = "Budget: 3 s left") -> ExtractRequest:
    return ExtractRequest(question="How did revenue change?", reasoning=plan().reasoning, scope=scope, evidence=[],
                          markers={}, budget_note=note)


def test_an_identical_request_is_answered_from_the_cache():
    redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    inner = Counting()
    llm = CachedProvider(inner, redis, ttl_s=60)
    first, u1 = llm.extract(request())
    again, u2 = llm.extract(request(note="Budget: 1 s left"))  # only the budget note differs
    assert inner.calls == 1 and again == first
    assert (u1.cached, u1.prompt) == (False, 100) and (u2.cached, u2.prompt, u2.model) == (True, 0, "gpt-4o-mini")
    llm.extract(request(scope="ACME:2024_q4"))
    assert inner.calls == 2
    assert 0 < redis.ttl(next(iter(redis.keys("finagent:llmcache:*")))) <= 60


def test_another_model_or_script_does_not_share_the_cache():
    redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    a, b = Counting("model-a"), Counting("model-b")
    CachedProvider(a, redis, 60).extract(request())
    CachedProvider(b, redis, 60).extract(request())
    assert (a.calls, b.calls) == (1, 1)


def test_non_model_results_round_trip():
    redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    inner = Counting()
    llm = CachedProvider(inner, redis, 60)
    from agent.models.tenk import SelectTablesRequest, SubQuestion

    req = SelectTablesRequest(question="q", sub_question=SubQuestion(id=1, text="t", kind="TABLE", keywords="k"), candidates=[])
    assert llm.select_tables(req)[0] == [3, 1] and llm.select_tables(req)[0] == [3, 1] and inner.calls == 1
