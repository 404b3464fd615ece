"""OpenAIProvider's 10-K roles against recorded chat.completion bodies, mocked with respx: no network."""
from __future__ import annotations

import json

import httpx

from agent.models.tenk import SelectTablesRequest, SubQuestion, TableCandidate, TenKPlanRequest
from tests.unit.agent.providers.test_openai_provider import BUDGET, URL, body, prompt_text, provider, router  # noqa: F401 - fixtures

PLAN_10K = {
    "sub_questions": [
        {"id": 1, "text": "What was cost of sales in FY2024?", "kind": "TABLE", "items": ["Item 8"],
         "keywords": "cost of sales consolidated statements of operations"},
        {"id": 1, "text": "What were inventories at the end of FY2023 and FY2024?", "kind": "TABLE", "items": ["8"],
         "keywords": "inventories consolidated balance sheets"},
        {"id": 3, "text": "How are inventories valued?", "kind": "TEXT", "items": ["7"],
         "keywords": "inventory valuation lower of cost and net realizable value"},
    ],
    "search_plan": "Cost of sales from the statement of operations, both inventory balances from the balance sheet, "
                   "valuation policy from MD&A critical accounting estimates.",
    "calculation": "inventory_turnover = cost of sales / average inventory",
}


def completion(content: dict, prompt: int = 900, completion_tokens: int = 210) -> httpx.Response:
    return httpx.Response(200, json={
        "id": "chatcmpl-10k", "object": "chat.completion", "created": 1764576000, "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": json.dumps(content), "refusal": None}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
                  "total_tokens": prompt + completion_tokens},
    })


def test_plan_10k_validates_and_normalises(router, provider):  # noqa: F811
    route = router.post(URL).mock(return_value=completion(PLAN_10K))
    plan, usage = provider.plan_10k(TenKPlanRequest(question="What is Amazon's inventory turnover?", ticker="AMZN",
                                                    fiscal_year=2024, budget_note=BUDGET))
    assert (plan.ticker, plan.fiscal_year) == ("AMZN", 2024)
    assert [q.id for q in plan.sub_questions] == [1, 2, 3]  # the duplicate id is renumbered
    assert [q.items for q in plan.sub_questions] == [["8"], ["8"], ["7"]]
    assert plan.calculation.startswith("inventory_turnover")
    assert (usage.prompt, usage.completion) == (900, 210)
    sent = body(route.calls.last)
    assert sent["model"] == "planner-model" and sent["response_format"] == {"type": "json_object"}
    text = prompt_text(route.calls.last)
    assert BUDGET in text and "Item 8" in text and "fiscal year 2024" in text


def test_select_tables_keeps_known_ids_only(router, provider):  # noqa: F811
    route = router.post(URL).mock(return_value=completion({"table_ids": [99, 7, 7, 8], "reasoning": "balance sheet"}))
    sq = SubQuestion(id=2, text="What were inventories?", kind="TABLE", items=["8"], keywords="inventories balance sheets")
    cands = [TableCandidate(table_id=i, item="8", caption=c, preview=f"{c}\n| Inventories | 1 | 2 |")
             for i, c in ((7, "CONSOLIDATED BALANCE SHEETS"), (8, "CONSOLIDATED STATEMENTS OF CASH FLOWS"))]
    ids, _ = provider.select_tables(SelectTablesRequest(question="q", sub_question=sq, candidates=cands, max_tables=1,
                                                        budget_note=BUDGET))
    assert ids == [7]
    text = prompt_text(route.calls.last)
    assert 'id="7"' in text and BUDGET in text and "at most 1 tables" in text
