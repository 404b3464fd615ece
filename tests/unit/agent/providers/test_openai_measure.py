"""A model names the measure to compute as structured output in its 10-K plan; the code computes it. A measure that
does not validate is dropped (the rules' reading stands in), never a failed plan."""
from __future__ import annotations

from agent.models.tenk import TenKPlanRequest
from agent.providers.llm.openai_provider import usable_measure
from tests.unit.agent.providers.test_openai_provider import BUDGET, URL, prompt_text, provider, router  # noqa: F401 - fixtures
from tests.unit.agent.providers.test_openai_tenk import PLAN_10K, completion


def test_the_plan_carries_the_models_measure(router, provider):  # noqa: F811
    measure = {"measure": "operating_margin", "label": "Operating margin", "fiscal_years": [2023], "aggregate": "each",
               "decimals": 1, "percent": True}
    route = router.post(URL).mock(return_value=completion(PLAN_10K | {"measure": measure}))
    plan, _ = provider.plan_10k(TenKPlanRequest(question="What is QFI's FY2023 operating margin?", ticker="QFI",
                                                fiscal_year=2023, budget_note=BUDGET))
    assert plan.measure is not None and plan.measure.measure == "operating_margin" and plan.measure.decimals == 1
    text = prompt_text(route.calls.last)
    assert "Measure library:" in text and "operating_income" in text and "Never compute the figure yourself" in text


def test_a_measure_that_does_not_validate_is_dropped_not_fatal(router, provider):  # noqa: F811
    router.post(URL).mock(return_value=completion(PLAN_10K | {"measure": {"fiscal_years": "last year", "aggregate": "sum"}}))
    plan, _ = provider.plan_10k(TenKPlanRequest(question="q", ticker="QFI", fiscal_year=2023, budget_note=BUDGET))
    assert plan.measure is None and plan.sub_questions


def test_usable_measure():
    assert usable_measure(None) is None and usable_measure({}) is None
    assert usable_measure({"label": "nothing named"}) is None  # neither a library name nor an expression
    found = usable_measure({"expression": "current_assets / current_liabilities", "fiscal_years": [2022]})
    assert found is not None and found.expression == "current_assets / current_liabilities"
