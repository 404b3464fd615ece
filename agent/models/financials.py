"""Financial statements as data: the line items of a statement page, the concepts they stand for, and a computed
measure with its inputs. Boundary models of agent/statements (the page reader, the concept vocabulary, the formula
library, the question reader, the calculator and the store) and of the 10-K agent that uses them."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Statement = Literal["income", "balance", "cash_flow"]
Unit = Literal["currency", "shares", "per_share", "percent", "other"]

# The normalised concepts a line item may stand for (US GAAP names in general vocabulary). A label that is none of
# them keeps concept None and is stored all the same (a question's own definition may name it).
CONCEPTS: dict[str, str] = {
    # income statement
    "revenue": "total revenue",
    "cost_of_revenue": "cost of revenue",
    "gross_profit": "gross profit",
    "sga": "selling, general and administrative expenses",
    "research_development": "research and development expenses",
    "operating_expenses": "total operating expenses",
    "operating_income": "operating income",
    "interest_expense": "interest expense",
    "pretax_income": "income before income taxes",
    "income_tax_expense": "income tax expense",
    "net_income": "net income",
    "net_income_attributable": "net income attributable to the company's shareholders",
    "eps_basic": "basic earnings per share",
    "eps_diluted": "diluted earnings per share",
    "shares_basic": "basic weighted-average shares",
    "shares_diluted": "diluted weighted-average shares",
    # balance sheet
    "cash": "cash and cash equivalents",
    "short_term_investments": "short-term investments",
    "receivables": "accounts receivable, net",
    "inventory": "inventories",
    "prepaid_other_current": "prepaid expenses and other current assets",
    "current_assets": "total current assets",
    "ppe_net": "property, plant and equipment, net",
    "goodwill": "goodwill",
    "intangibles": "intangible assets, net",
    "total_assets": "total assets",
    "payables": "accounts payable",
    "short_term_debt": "short-term debt and current portion of long-term debt",
    "current_liabilities": "total current liabilities",
    "long_term_debt": "long-term debt",
    "total_liabilities": "total liabilities",
    "total_equity": "total equity",
    "shareholders_equity": "shareholders' equity attributable to the company",
    "liabilities_and_equity": "total liabilities and equity",
    # cash flow statement
    "depreciation_amortization": "depreciation and amortization",
    "stock_compensation": "share-based compensation",
    "operating_cash_flow": "net cash provided by operating activities",
    "capex": "capital expenditures (purchases of property, plant and equipment)",
    "investing_cash_flow": "net cash used in investing activities",
    "dividends_paid": "dividends paid",
    "share_repurchases": "repurchases of common stock",
    "financing_cash_flow": "net cash used in financing activities",
}


class ColumnValue(BaseModel):
    """One figure of a line item, in one column of the statement."""

    column: int  # 0-based, left to right among the page's value columns
    period_label: str  # the column's header as printed ("2022", "December 31, 2022", "Three Months Ended June 30, 2023")
    fiscal_year: int | None  # the year the column is for (the header's year), None when the header names none
    months: int | None = None  # a flow column's duration (3, 6, 9, 12) when the header says; None for a balance
    value: float  # as printed, signed (parentheses are negative), before the scale
    scale: float = 1.0  # 1e3 / 1e6 / 1e9 from "(in millions)"; 1 for per-share figures and percentages
    unit: Unit = "currency"


class StatementLine(BaseModel):
    """One line item of a primary statement page as printed, with its figures per column."""

    statement: Statement
    page: int | None = None  # 0-based page of the document; None for a line read from a table
    row: int  # order on the page (or table), from 0
    label: str  # as printed, a label wrapped onto several lines joined with one space
    section: str = ""  # the heading above it ("Current assets", "Cash flows from investing activities")
    concept: str | None = None  # a key of CONCEPTS, or None
    is_total: bool = False  # a subtotal or total ("Total current assets", "Gross profit")
    values: list[ColumnValue] = Field(default_factory=list)
    table_index: int | None = None  # a line read from a filing's table: the table's index in the document


class Fact(BaseModel):
    """A stored figure as the calculator reads it: one line item's value for one fiscal year, scaled to units."""

    concept: str
    label: str  # the line item as printed
    statement: Statement
    fiscal_year: int  # the year of the column
    value: float  # scaled: 11,512 "in millions" is 11_512_000_000
    scale: float  # the scale it was printed at
    unit: Unit = "currency"
    document_id: int | None = None
    document: str = ""  # the document's name, for a reader ("ACME_2022_10K")
    page: int | None = None
    table_id: int | None = None  # a line read from a filing's table (tenk_tables): the table it is cited from
    doc_year: int | None = None  # the fiscal year of the report it was printed in (a comparative is an earlier year)
    is_total: bool = False
    row: int | None = None  # its order on the page
    citation_key: str = ""  # the evidence the figure is cited from ('10k:123'); filled when it becomes evidence


class MeasureQuery(BaseModel):
    """What a question asks to compute. Offline the rules read it from the question (questions.py); a language model
    returns it as structured output. The code computes; nobody does arithmetic in prose."""

    measure: str | None = None  # a formula library name (formulas.py), or None with `expression`
    expression: str | None = None  # the question's own definition over concepts, e.g. "current_assets / current_liabilities"
    label: str = ""  # how the answer names it ("Working capital ratio")
    fiscal_years: list[int] = Field(default_factory=list)  # the years asked, ascending
    aggregate: Literal["each", "average", "cagr", "change"] = "each"  # over fiscal_years
    scale: float | None = None  # the scale the answer is wanted in (1e6 for "in USD millions")
    decimals: int | None = None  # the rounding asked
    percent: bool | None = None  # the answer wanted as a percentage; None: the measure's own kind decides
    # a yes/no question about the figure: did it rise ("Has ... increased", "an improving margin"), fall, or is it at
    # a healthy level ("a healthy liquidity profile based on its quick ratio"); "value" asks the figure alone
    asks: Literal["value", "rise", "fall", "healthy"] = "value"


class Input(BaseModel):
    """One input of a computation, as the answer shows it."""

    name: str  # the concept (or a term of the question's definition)
    fiscal_year: int
    fact: Fact | None = None  # None when it could not be found


class Computation(BaseModel):
    """A computed figure with its formula, every input, and what could not be found."""

    label: str
    formula: str  # in words: "operating income / revenue"
    expression: str = ""  # with the inputs' values: "11,512 / 86,392"
    value: float | None = None  # None when an input is missing
    result: str = ""  # as the answer states it, rounded as asked: "13.3%", "$9,068 million", "0.54"
    fiscal_years: list[int] = Field(default_factory=list)
    inputs: list[Input] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)  # "inventory FY2020", one per input not found
    verdict: str = ""  # the answer to a yes/no question about the figure: "Yes: ...", "No: ..."

    @property
    def complete(self) -> bool:
        return self.value is not None and not self.missing
