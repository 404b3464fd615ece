"""Arithmetic of the 10-K agent: parse reported figures, compute ratios, and show the working.

Every result carries the formula and the expression with the reported inputs, so an answer can
show exactly how a figure was derived from the cited tables.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_AMOUNT = re.compile(r"^\(?-?\$?\s*\d[\d,]*(?:\.\d+)?\s*%?\)?$")


def parse_amount(cell: str) -> float | None:
    """'2,468' -> 2468.0, '(5,678)' -> -5678.0, '$ 1.5' -> 1.5; dashes, text and blanks -> None."""
    text = cell.strip().replace("\u2212", "-").replace(" ", "")
    if not text or not _AMOUNT.match(text):
        return None
    negative = text.startswith("(") or text.startswith("-")
    value = float(re.sub(r"[^\d.]", "", text))
    return -value if negative else value


def fmt_amount(value: float, decimals: int | None = None) -> str:
    """Thousands separators; whole numbers without decimals unless asked ('4,321', '4,321.5')."""
    if decimals is None:
        decimals = 0 if abs(value - round(value)) < 1e-9 else 1
    return f"{value:,.{decimals}f}"


@dataclass(frozen=True)
class Calculation:
    name: str  # 'inventory_turnover'
    label: str  # 'Inventory turnover'
    formula: str  # 'cost of sales / average inventory'
    expression: str  # e.g. '100 / ((40 + 60) / 2) = 100 / 50'
    value: float
    result: str  # e.g. '2x' for the expression above

    @property
    def text(self) -> str:
        return f"{self.label} = {self.formula} = {self.expression} = {self.result}"


@dataclass(frozen=True)
class CalcSpec:
    name: str
    label: str
    formula: str
    inputs: tuple[str, ...]  # metric names; a metric ending in '@prior' is read from the prior-year column


CALCULATIONS: dict[str, CalcSpec] = {
    "inventory_turnover": CalcSpec("inventory_turnover", "Inventory turnover", "cost of sales / average inventory",
                                   ("cost_of_sales", "inventories@prior", "inventories")),
    "gross_margin": CalcSpec("gross_margin", "Gross margin", "(total net sales - cost of sales) / total net sales",
                             ("revenue", "cost_of_sales")),
    "operating_margin": CalcSpec("operating_margin", "Operating margin", "operating income / total net sales",
                                 ("operating_income", "revenue")),
    "net_margin": CalcSpec("net_margin", "Net margin", "net income / total net sales", ("net_income", "revenue")),
    "current_ratio": CalcSpec("current_ratio", "Current ratio", "total current assets / total current liabilities",
                              ("current_assets", "current_liabilities")),
    "free_cash_flow": CalcSpec("free_cash_flow", "Free cash flow",
                               "operating cash flow - purchases of property and equipment",
                               ("operating_cash_flow", "capex")),
}


def calc_names(calculation: str | None) -> list[str]:
    """The registry names in a plan's calculation: 'inventory_turnover = ...; gross_margin = ...' ->
    ['inventory_turnover', 'gross_margin']; unknown names are left out."""
    names = []
    for part in (calculation or "").split(";"):
        head = re.split(r"[=:(]", part, maxsplit=1)[0].strip().lower().replace(" ", "_").replace("-", "_")
        if head in CALCULATIONS and head not in names:
            names.append(head)
    return names


def inventory_turnover(cost_of_sales: float, inv_begin: float | None, inv_end: float) -> Calculation:
    spec = CALCULATIONS["inventory_turnover"]
    if inv_begin is None:  # no prior-year balance: ending inventory stands in for the average
        value = cost_of_sales / inv_end
        expr = f"{fmt_amount(cost_of_sales)} / {fmt_amount(inv_end)} (ending inventory; prior year not found)"
    else:
        avg = (inv_begin + inv_end) / 2
        value = cost_of_sales / avg
        expr = (f"{fmt_amount(cost_of_sales)} / (({fmt_amount(inv_begin)} + {fmt_amount(inv_end)}) / 2)"
                f" = {fmt_amount(cost_of_sales)} / {fmt_amount(avg)}")
    return Calculation(spec.name, spec.label, spec.formula, expr, value, f"{value:.2f}x")


def gross_margin(revenue: float, cost_of_sales: float) -> Calculation:
    spec = CALCULATIONS["gross_margin"]
    gross = revenue - cost_of_sales
    value = gross / revenue
    expr = (f"({fmt_amount(revenue)} - {fmt_amount(cost_of_sales)}) / {fmt_amount(revenue)}"
            f" = {fmt_amount(gross)} / {fmt_amount(revenue)}")
    return Calculation(spec.name, spec.label, spec.formula, expr, value, f"{100 * value:.1f}%")


def ratio(name: str, numerator: float, denominator: float, percent: bool) -> Calculation:
    spec = CALCULATIONS[name]
    value = numerator / denominator
    result = f"{100 * value:.1f}%" if percent else f"{value:.2f}x"
    return Calculation(spec.name, spec.label, spec.formula, f"{fmt_amount(numerator)} / {fmt_amount(denominator)}",
                       value, result)


def free_cash_flow(operating_cash_flow: float, capex: float) -> Calculation:
    spec = CALCULATIONS["free_cash_flow"]
    spend = abs(capex)  # cash flow statements report purchases as negative amounts
    value = operating_cash_flow - spend
    return Calculation(spec.name, spec.label, spec.formula, f"{fmt_amount(operating_cash_flow)} - {fmt_amount(spend)}",
                       value, fmt_amount(value))


def compute(name: str, inputs: dict[str, float | None]) -> Calculation | None:
    """Run a registered calculation on its inputs (metric name -> value); None when a required input is missing
    or a denominator is zero."""
    spec = CALCULATIONS[name]
    required = [m for m in spec.inputs if m != "inventories@prior"]
    if any(inputs.get(m) is None for m in required):
        return None
    v = {m: x for m, x in inputs.items() if x is not None}  # the required inputs, all present
    try:
        if name == "inventory_turnover":
            return inventory_turnover(v["cost_of_sales"], v.get("inventories@prior"), v["inventories"])
        if name == "gross_margin":
            return gross_margin(v["revenue"], v["cost_of_sales"])
        if name == "free_cash_flow":
            return free_cash_flow(v["operating_cash_flow"], v["capex"])
        first, second = spec.inputs
        return ratio(name, v[first], v[second], percent=name.endswith("margin"))
    except ZeroDivisionError:
        return None
