"""The extractive 10-K rules: planning and Item routing, replanning, table selection, answers with
calculations, and the evaluation, on hand-built tables shaped like the ingested ones."""
from __future__ import annotations

import pytest

from agent.ingest.tenk_common import to_markdown
from agent.models.corpus import SearchHit
from agent.models.research import Evidence
from agent.models.tenk import (
    SelectTablesRequest,
    SubQuestion,
    TableCandidate,
    TenKAnswerRequest,
    TenKEvaluateRequest,
    TenKPlanRequest,
)
from agent.providers.llm.extractive import ExtractiveProvider
from agent.tenk.calculations import calc_names, compute, parse_amount
from agent.tenk.retrieval import preview, rerank
from agent.tenk.tables import parse_table

LLM = ExtractiveProvider()
TURNOVER_Q = "What is Amazon's inventory turnover?"
SPLIT_Q = "What was Apple's total net sales in fiscal 2024 and how did it split by product?"

OPERATIONS = [["", "Year Ended December 31,", "", ""], ["", "2022", "2023", "2024"],
              ["Total net sales", "513,983", "574,785", "637,959"], ["Operating expenses:", "", "", ""],
              ["Cost of sales", "288,831", "304,739", "326,288"], ["Operating income", "12,248", "36,852", "68,593"],
              ["Net income (loss)", "(2,722)", "30,425", "59,248"]]
BALANCE = [["", "December 31,", ""], ["", "2023", "2024"], ["ASSETS", "", ""], ["Current assets:", "", ""],
           ["Cash and cash equivalents", "73,387", "78,779"], ["Marketable securities", "13,393", "22,423"],
           ["Inventories", "33,318", "34,214"], ["Accounts receivable, net and other", "52,253", "55,451"],
           ["Total current assets", "172,351", "190,867"], ["Total assets", "527,854", "624,894"]]
CASH_FLOWS = [["", "Year Ended December 31,", "", ""], ["", "2022", "2023", "2024"],
              ["Net income (loss)", "(2,722)", "30,425", "59,248"], ["Changes in operating assets and liabilities:", "", "", ""],
              ["Inventories", "(2,592)", "1,449", "(1,884)"]]
STOCK_COMP = [["", "Year Ended December 31,", "", ""], ["", "2022", "2023", "2024"], ["Cost of sales", "757", "836", "838"],
              ["Fulfillment", "2,745", "3,090", "2,973"]]
CATEGORY = [["", "2024", "Change", "2023", "Change", "2022"], ["iPhone", "201,183", "—%", "200,583", "(2)%", "205,489"],
            ["Mac", "29,984", "2%", "29,357", "(27)%", "40,177"], ["Services (1)", "96,169", "13%", "85,200", "9%", "78,129"],
            ["Total net sales", "391,035", "2%", "383,285", "(3)%", "394,328"]]
VALUATION = ("Inventories, consisting of products available for sale, are primarily accounted for using the first-in "
             "first-out method, and are valued at the lower of cost and net realizable value. As a measure of sensitivity, "
             "for every 1% of additional inventory valuation allowance as of December 31, 2024, we would have recorded "
             "an additional cost of sales of approximately $365 million.")


def table(tid: int, caption: str, rows: list[list[str]], item: str = "8", ticker: str = "AMZN") -> Evidence:
    return Evidence(source_type="10k_table", chunk_id=tid, ticker=ticker, fiscal_year=2024, item=item, title=caption,
                    text=f"{caption}\n{to_markdown(rows)}")


def passage(cid: int, text: str, item: str = "7") -> Evidence:
    return Evidence(source_type="10k", chunk_id=cid, ticker="AMZN", fiscal_year=2024, item=item, text=text, score=0.8)


def candidate(tid: int, caption: str, rows: list[list[str]], item: str = "8") -> TableCandidate:
    return TableCandidate(table_id=tid, item=item, caption=caption, preview=preview(caption, to_markdown(rows), rows))


def markers(evidence: list[Evidence]) -> dict[str, str]:
    return {e.citation_key: f"[10K{i}]" for i, e in enumerate(evidence, 1)}


def plan_for(question: str, ticker: str = "AMZN"):
    return LLM.plan_10k(TenKPlanRequest(question=question, ticker=ticker, fiscal_year=2024))[0]


def amazon_evidence() -> list[Evidence]:
    return [table(11, "CONSOLIDATED STATEMENTS OF OPERATIONS", OPERATIONS), table(12, "CONSOLIDATED BALANCE SHEETS", BALANCE),
            passage(501, VALUATION)]


# ---------- planning ----------
def test_inventory_turnover_plan_routes_tables_to_item_8_with_calculation():
    plan = plan_for(TURNOVER_Q)
    tables = [q for q in plan.sub_questions if q.kind == "TABLE"]
    texts = [q for q in plan.sub_questions if q.kind == "TEXT"]
    assert [q.keywords.split(" consolidated")[0] for q in tables] == ["cost of sales", "inventories"]
    assert all(q.items == ["8"] for q in tables)
    assert texts and texts[0].items == ["7"] and "inventory valuation" in texts[0].keywords
    assert calc_names(plan.calculation) == ["inventory_turnover"]
    assert len({q.id for q in plan.sub_questions}) == len(plan.sub_questions)
    assert (plan.ticker, plan.fiscal_year) == ("AMZN", 2024)


def test_net_sales_split_plan():
    plan = plan_for(SPLIT_Q, "AAPL")
    kinds = [(q.kind, q.items) for q in plan.sub_questions]
    assert kinds == [("TABLE", ["7", "8"]), ("TABLE", ["8"]), ("TEXT", ["7"])]
    assert "by category" in plan.sub_questions[0].keywords and "total net sales" in plan.sub_questions[1].keywords
    assert plan.calculation is None


@pytest.mark.parametrize("question, expected", [
    ("What are Apple's main risk factors?", {("TEXT", ("1A",))}),
    ("How exposed is Apple to interest rate and foreign exchange changes?", {("TEXT", ("7A",))}),
    ("How many employees does Amazon have?", {("TEXT", ("1",))}),
    ("What were Amazon's operating cash flow and capex?", {("TABLE", ("8",)), ("TEXT", ("7",))}),
    ("How much debt does Apple have and what is its liquidity?", {("TABLE", ("8",)), ("TEXT", ("7",))}),
    ("What was Amazon's revenue?", {("TABLE", ("8",)), ("TEXT", ("7",))}),
    ("Tell me about Amazon's accounting for vendor allowances", {("TABLE", ("8",)), ("TEXT", ("7",))}),
])
def test_item_routing(question, expected):
    plan = plan_for(question)
    assert {(q.kind, tuple(q.items)) for q in plan.sub_questions} == expected


def test_gross_margin_plan_has_calculation_and_inputs():
    plan = plan_for("What was Amazon's gross margin?")
    assert calc_names(plan.calculation) == ["gross_margin"]
    assert {"total net sales", "cost of sales"} <= {q.keywords.split(" consolidated")[0] for q in plan.sub_questions}


def test_replan_replaces_missing_sub_question_with_broader_reworded_ones():
    plan = plan_for(TURNOVER_Q)
    missing = ["Sub-question 2 [TABLE, Item 8] 'What were inventories in FY2024?': no matching figures or passage"]
    new, _ = LLM.plan_10k(TenKPlanRequest(question=TURNOVER_Q, ticker="AMZN", fiscal_year=2024,
                                          missing_info=missing, previous=plan))
    ids = [q.id for q in new.sub_questions]
    assert len(set(ids)) == len(ids) and 2 not in ids and {1, 3} <= set(ids)
    added = [q for q in new.sub_questions if q.id > 3]
    assert {q.kind for q in added} == {"TABLE", "TEXT"}
    assert all(set(q.items) >= {"7", "8"} for q in added)
    assert all(q.keywords != plan.sub_questions[1].keywords for q in added if q.kind == "TABLE")
    assert new.calculation == plan.calculation


def test_replan_for_calculation_inputs_and_free_text():
    plan = plan_for(TURNOVER_Q)
    missing = ["Calculation inventory_turnover not computed: inventories (FY2024)", "inventory write-downs and valuation allowance"]
    new = LLM.plan_10k(TenKPlanRequest(question=TURNOVER_Q, ticker="AMZN", fiscal_year=2024, missing_info=missing,
                                       previous=plan))[0]
    added = new.sub_questions[len(plan.sub_questions):]
    assert any(q.kind == "TABLE" and "inventor" in q.keywords for q in added)
    assert any(q.kind == "TEXT" and "write-downs" in q.keywords for q in added)
    assert len({q.id for q in new.sub_questions}) == len(new.sub_questions)


# ---------- table selection ----------
def test_select_tables_prefers_balance_sheet_for_inventories():
    sq = SubQuestion(id=2, text="What were inventories in FY2024?", kind="TABLE", items=["8"],
                     keywords="inventories consolidated balance sheets")
    cands = [candidate(1, "CONSOLIDATED STATEMENTS OF CASH FLOWS", CASH_FLOWS),
             candidate(2, "Stock-based compensation expense is as follows (in millions):", STOCK_COMP),
             candidate(3, "CONSOLIDATED BALANCE SHEETS", BALANCE)]
    ids, usage = LLM.select_tables(SelectTablesRequest(question=TURNOVER_Q, sub_question=sq, candidates=cands, max_tables=1))
    assert ids == [3] and usage.prompt == 0


def test_select_tables_prefers_statement_of_operations_for_cost_of_sales():
    sq = plan_for(TURNOVER_Q).sub_questions[0]
    cands = [candidate(7, "Stock-based compensation expense is as follows (in millions):", STOCK_COMP),
             candidate(8, "CONSOLIDATED STATEMENTS OF OPERATIONS", OPERATIONS)]
    ids, _ = LLM.select_tables(SelectTablesRequest(question=TURNOVER_Q, sub_question=sq, candidates=cands))
    assert ids[0] == 8 and len(ids) <= 2


def test_preview_lists_labels_beyond_the_first_rows():
    rows = BALANCE + [["Total liabilities", "1", "2"]]
    text = preview("CONSOLIDATED BALANCE SHEETS", to_markdown(rows), rows)
    assert text.splitlines()[0] == "CONSOLIDATED BALANCE SHEETS" and "Other rows: " in text and "Total liabilities" in text


# ---------- answer and evaluation ----------
def test_answer_computes_inventory_turnover_and_shows_inputs():
    plan, evidence = plan_for(TURNOVER_Q), amazon_evidence()
    answer, _ = LLM.answer_10k(TenKAnswerRequest(question=TURNOVER_Q, plan=plan, evidence=evidence, markers=markers(evidence)))
    lines = answer.text.splitlines()
    assert all(line.startswith("- ") for line in lines)
    assert "- Inventory turnover (FY2024) = cost of sales / average inventory = 326,288 / ((33,318 + 34,214) / 2)" \
           " = 326,288 / 33,766 = 9.66x [10K1][10K2]" in lines
    assert any("Cost of sales" in ln and "2024: 326,288" in ln and ln.endswith("[10K1]") for ln in lines)
    assert any("Inventories" in ln and "2023: 33,318; 2024: 34,214" in ln and ln.endswith("[10K2]") for ln in lines)
    assert any("first-in first-out" in ln and ln.endswith("[10K3]") for ln in lines)
    ev, _ = LLM.evaluate_10k(TenKEvaluateRequest(question=TURNOVER_Q, plan=plan, answer=answer.text, evidence=evidence))
    assert ev.quality == 1.0 and ev.missing_info == [] and ev.answered == [1, 2, 3]


def test_answer_reads_cost_of_sales_from_the_statement_not_a_note():
    plan = plan_for(TURNOVER_Q)
    evidence = [table(30, "Stock-based compensation expense is as follows (in millions):", STOCK_COMP), *amazon_evidence()]
    text = LLM.answer_10k(TenKAnswerRequest(question=TURNOVER_Q, plan=plan, evidence=evidence, markers=markers(evidence)))[0].text
    assert "9.66x" in text and "838" not in text


def test_missing_table_is_stated_and_evaluated():
    plan = plan_for(TURNOVER_Q)
    evidence = [table(11, "CONSOLIDATED STATEMENTS OF OPERATIONS", OPERATIONS)]
    text = LLM.answer_10k(TenKAnswerRequest(question=TURNOVER_Q, plan=plan, evidence=evidence, markers=markers(evidence)))[0].text
    assert "- Not found in the retrieved 10-K tables: What were inventories in FY2024?" in text
    assert "Inventory turnover could not be computed: missing inventories (FY2024)" in text
    ev, _ = LLM.evaluate_10k(TenKEvaluateRequest(question=TURNOVER_Q, plan=plan, answer=text, evidence=evidence))
    assert ev.quality == 0.25 and ev.answered == [1]
    assert ev.missing_info[0].startswith("Sub-question 2 [TABLE, Item 8]")
    assert any(m.startswith("Calculation inventory_turnover not computed: inventories (FY2024)") for m in ev.missing_info)
    assert len(ev.missing_info) == 3


def test_evaluation_checks_the_answer_text():
    plan, evidence = plan_for(TURNOVER_Q), amazon_evidence()
    answer = "- Cost of sales: 2024: 326,288 [10K1]"
    ev, _ = LLM.evaluate_10k(TenKEvaluateRequest(question=TURNOVER_Q, plan=plan, answer=answer, evidence=evidence))
    assert ev.answered == [1] and ev.quality == 0.25
    assert any("found but not stated" in m for m in ev.missing_info)


def test_split_by_product_reports_every_category_for_the_fiscal_year():
    plan = plan_for(SPLIT_Q, "AAPL")
    evidence = [table(40, "The following table shows net sales by category for 2024, 2023 and 2022 (dollars in millions):",
                      CATEGORY, item="7", ticker="AAPL"),
                table(41, "CONSOLIDATED STATEMENTS OF OPERATIONS",
                      [["", "Years ended", "", ""], ["", "September 28, 2024", "September 30, 2023", "September 24, 2022"],
                       ["Total net sales", "391,035", "383,285", "394,328"]], ticker="AAPL")]
    text = LLM.answer_10k(TenKAnswerRequest(question=SPLIT_Q, plan=plan, evidence=evidence, markers=markers(evidence)))[0].text
    split = next(ln for ln in text.splitlines() if "iPhone" in ln)
    assert "iPhone 201,183; Mac 29,984; Services 96,169; Total net sales 391,035 [10K1]" in split
    assert "200,583" not in split and "13%" not in split
    assert "September 28, 2024: 391,035" in text


# ---------- building blocks ----------
def test_parse_table_round_trip_and_year_columns():
    t = parse_table(table(12, "CONSOLIDATED BALANCE SHEETS", BALANCE))
    assert t.caption == "CONSOLIDATED BALANCE SHEETS" and t.rows[6] == ["Inventories", "33,318", "34,214"]
    assert [(c.label, c.year) for c in t.columns] == [("2023", 2023), ("2024", 2024)]
    piped = parse_table(table(13, "x", [["", "2024"], ["A | B", "1"]]))
    assert piped.rows[1][0] == "A | B"


@pytest.mark.parametrize("cell, value", [("33,318", 33318.0), ("(2,722)", -2722.0), ("$ 1.5", 1.5), ("—", None),
                                         ("", None), ("Inventories", None), ("46.2%", 46.2)])
def test_parse_amount(cell, value):
    assert parse_amount(cell) == value


def test_calculations():
    assert compute("inventory_turnover", {"cost_of_sales": 326288, "inventories@prior": None, "inventories": 34214}).result == "9.54x"
    gm = compute("gross_margin", {"revenue": 637959, "cost_of_sales": 326288})
    assert gm.result == "48.9%" and "311,671 / 637,959" in gm.expression
    assert compute("operating_margin", {"operating_income": 68593, "revenue": 637959}).result == "10.8%"
    assert compute("free_cash_flow", {"operating_cash_flow": 115877, "capex": -77658}).result == "38,219"
    assert compute("current_ratio", {"current_assets": 190867, "current_liabilities": None}) is None
    assert compute("net_margin", {"net_income": 1, "revenue": 0}) is None


def test_rerank_rewards_query_coverage_and_figures():
    hits = [SearchHit(source_type="10k", chunk_id=1, text="General discussion of our business.", score=0.9),
            SearchHit(source_type="10k", chunk_id=2, text="Inventory valuation allowance was $3.0 billion.", score=0.8)]
    assert [h.chunk_id for h in rerank("inventory valuation allowance", hits)] == [2, 1]


def test_two_calculations_and_a_market_platform_split():
    q = "What is NVIDIA's gross margin and how did revenue split by market platform?"
    plan = plan_for(q, "NVDA").model_copy(update={"fiscal_year": 2025})
    assert calc_names(plan.calculation) == ["gross_margin"]
    assert plan.sub_questions[0].keywords.startswith("revenue by end market") and plan.sub_questions[0].kind == "TABLE"
    statement = [["Line item", "Fiscal 2025", "Fiscal 2024"], ["Revenue", "130,497", "60,922"],
                 ["Cost of revenue", "32,639", "16,621"]]
    platforms = [["Market platform", "Fiscal 2025", "Fiscal 2024", "Change"], ["Data Center", "115,186", "47,525", "142%"],
                 ["Gaming", "11,350", "10,447", "9%"], ["Total revenue", "130,497", "60,922", "114%"]]
    evidence = [table(1, "Consolidated Statements of Income (in millions)", statement, ticker="NVDA"),
                table(2, "Revenue by Market Platform (in millions)", platforms, item="7", ticker="NVDA")]
    text = LLM.answer_10k(TenKAnswerRequest(question=q, plan=plan, evidence=evidence, markers=markers(evidence)))[0].text
    assert "Fiscal 2025: Data Center 115,186; Gaming 11,350; Total revenue 130,497 [10K2]" in text
    assert "(130,497 - 32,639) / 130,497 = 97,858 / 130,497 = 75.0% [10K1]" in text
    both = plan.model_copy(update={"calculation": "inventory_turnover = x; gross_margin = y"})
    ev, _ = LLM.evaluate_10k(TenKEvaluateRequest(question=q, plan=both, answer=text, evidence=evidence))
    assert any(m.startswith("Calculation inventory_turnover not computed") for m in ev.missing_info)


@pytest.mark.parametrize("question, found", [
    ("What was net sales growth excluding foreign currency effects in fiscal 2021?", True),
    ("How did organic revenue grow last year?", True),
    ("What were comparable sales in the holiday quarter?", True),
    ("What was the impact of foreign exchange on net sales?", False),  # the currency effect itself, not growth without it
])
def test_growth_without_currency_and_one_offs_is_its_own_topic(question, found):
    from agent.tenk.rules import matching_topics

    assert ("organic_growth" in [t.name for t in matching_topics(question)]) is found
