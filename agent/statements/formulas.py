"""The formula library: each analyst measure defined once (name, label, the vocabulary that names it, an expression
over concept names, its kind), and a small safe evaluator of those expressions against stored facts.

Expressions are Python syntax read with `ast`: + - * / parentheses, numbers, concept names (keys of CONCEPTS),
library measure names, `a|b` (the first alternative that can be computed wins) and the period functions
avg(x) (mean of x at t and t-1), prior(x) (x at t-1), change(x) (x(t) - x(t-1)), abs(x), and opt(x) (x, or 0 when the
filing has no such line, as short-term investments often are)."""
from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Literal

from agent.statements.models import CONCEPTS, Fact, Input

Kind = Literal["percent", "ratio", "money", "days", "times", "per_share", "shares"]
Lookup = Callable[[str, int], Fact | None]

# Outflows and expenses some statements print negative (purchases in parentheses on the cash flow statement, costs
# shown as deductions): a measure uses their size, so the sign convention lives here and nowhere else.
MAGNITUDE_CONCEPTS = frozenset({
    "capex", "dividends_paid", "share_repurchases", "cost_of_revenue", "sga", "research_development",
    "operating_expenses", "interest_expense", "depreciation_amortization",
})

# Short names for the answer's words; a concept not listed uses CONCEPTS' description.
WORDS: dict[str, str] = {
    "revenue": "revenue",
    "net_income_attributable": "net income attributable to shareholders",
    "receivables": "accounts receivable",
    "inventory": "inventory",
    "ppe_net": "net PP&E",
    "capex": "capital expenditures",
    "shareholders_equity": "shareholders' equity",
    "short_term_debt": "short-term debt",
    "operating_cash_flow": "cash from operations",
    "investing_cash_flow": "cash from investing activities",
    "financing_cash_flow": "cash from financing activities",
}

# The general vocabulary that names each concept (lower case). A question's own definition maps its phrases with
# these (a full match); a question naming a line item finds it with them. More specific phrases come first.
CONCEPT_TERMS: dict[str, str] = {
    "net_income_attributable": r"net (?:income|earnings|profit) attributable to (?:[\w']+ )*?(?:share|stock)holders|"
                               r"net (?:income|earnings|profit) attributable to (?:the )?(?:parent|company)",
    "cost_of_revenue": r"(?:total )?cost of (?:goods sold|sales|revenues?|products sold)|cogs",
    "gross_profit": r"gross (?:profit|income)",
    "sga": r"(?:selling,? general,? (?:and|&) administrative|sg&a)(?: expenses?| costs?)?",
    "research_development": r"(?:research (?:and|&) development|r&d)(?: expenses?| costs?)?",
    "operating_expenses": r"(?:total )?operating (?:expenses|costs)|opex",
    "operating_income": r"operating (?:income|profit)(?: \(loss\))?|income from operations|ebit",
    "interest_expense": r"interest expenses?|interest costs?",
    "pretax_income": r"(?:income|earnings|profit) before (?:income )?tax(?:es)?|pre-?tax (?:income|profit|earnings)",
    "income_tax_expense": r"(?:provision for )?income tax(?:es| expense| provision)?|tax expense|provision for taxes",
    "net_income": r"net (?:income|earnings|profit)(?: \(loss\))?",
    "eps_basic": r"basic (?:eps|earnings per share)|(?:eps|earnings per share),? basic",
    "eps_diluted": r"diluted (?:eps|earnings per share)|(?:eps|earnings per share)(?:,? diluted)?",
    "shares_basic": r"basic (?:weighted[- ]average )?shares(?: outstanding)?",
    "shares_diluted": r"diluted (?:weighted[- ]average )?shares(?: outstanding)?",
    "short_term_investments": r"short[- ]term investments|marketable securities",
    "cash": r"cash(?: and cash equivalents| & cash equivalents| and equivalents)?",
    "receivables": r"(?:net )?(?:accounts |trade )?receivables?(?:,? net)?|accounts receivable(?:,? net)?",
    "inventory": r"(?:total )?(?:net )?inventor(?:y|ies)",
    "prepaid_other_current": r"prepaid expenses(?: and other current assets)?",
    "current_assets": r"(?:total )?current assets",
    "ppe_net": r"(?:net )?(?:pp&e|ppne|pp&ne|ppe|property,? plant,? (?:and|&) equipment|fixed assets)(?:,? net)?",
    "goodwill": r"goodwill",
    "intangibles": r"(?:net )?intangible assets(?:,? net)?|intangibles",
    "liabilities_and_equity": r"total liabilities and (?:shareholders'?|stockholders'?) equity|total liabilities and equity",
    "total_assets": r"total assets|assets",
    "payables": r"(?:accounts |trade )?payables?|accounts payable",
    "short_term_debt": r"short[- ]term (?:debt|borrowings)|current (?:portion|maturities) of long[- ]term debt",
    "current_liabilities": r"(?:total )?current liabilities",
    "long_term_debt": r"long[- ]term debt(?:,? net)?",
    "total_liabilities": r"total liabilities|liabilities",
    "shareholders_equity": r"(?:total )?(?:share|stock)holders'? equity|(?:total )?(?:shareholders'?|stockholders'?) equity",
    "total_equity": r"total equity|equity",
    "depreciation_amortization": r"d&a|depreciation(?:,? depletion)?(?: (?:and|&) amortization)?",
    "stock_compensation": r"(?:share|stock)[- ]based compensation",
    "operating_cash_flow": r"(?:net )?cash (?:flows? )?(?:provided by |generated (?:by|from) |from )operati(?:ons|ng activities)|"
                           r"operating cash flows?|cash flows? from operati(?:ons|ng activities)",
    "capex": r"capital expenditures?|capex|purchases? of (?:property,? plant,? (?:and|&) equipment|pp&e|fixed assets)|"
             r"capital spending",
    "investing_cash_flow": r"(?:net )?cash (?:used in|from|provided by) investing activities|investing cash flows?",
    "financing_cash_flow": r"(?:net )?cash (?:used in|from|provided by) financing activities|financing cash flows?",
    "dividends_paid": r"(?:cash )?dividends(?: paid)?|dividend payments?",
    "share_repurchases": r"(?:share|stock) (?:repurchases|buybacks)|repurchases? of (?:common )?(?:stock|shares)|buybacks?",
    "revenue": r"(?:total )?(?:net )?(?:revenues?|sales)(?: revenues?)?|top[- ]line",
}


@dataclass(frozen=True)
class Measure:
    name: str
    label: str
    vocabulary: str  # a regex over the lower-cased question
    expression: str
    kind: Kind
    growth_of: str | None = None  # a growth measure: its base, for a question asking growth between two years


_TOTAL_DEBT = "(opt(short_term_debt) + long_term_debt)"
_NET_INCOME = "(net_income_attributable|net_income)"
_EQUITY = "(shareholders_equity|total_equity)"

_DERIVED = [
    Measure("gross_margin", "Gross margin", r"gross (?:profit )?margin", "(gross_profit|revenue - cost_of_revenue) / revenue",
            "percent"),
    Measure("operating_margin", "Operating margin", r"operating (?:profit |income )?margin|ebit margin",
            "operating_income / revenue", "percent"),
    Measure("net_margin", "Net profit margin", r"net (?:profit |income )?margin|profit margin", f"{_NET_INCOME} / revenue",
            "percent"),
    Measure("ebitda", "EBITDA", r"\bebitda\b", "operating_income + depreciation_amortization", "money"),
    Measure("ebitda_margin", "EBITDA margin", r"ebitda margin", "(operating_income + depreciation_amortization) / revenue",
            "percent"),
    Measure("ebitda_less_capex", "EBITDA less capex", r"ebitda (?:less|minus) (?:capex|capital expenditures?)",
            "operating_income + depreciation_amortization - capex", "money"),
    Measure("free_cash_flow", "Free cash flow", r"free cash flows?|\bfcf\b", "operating_cash_flow - capex", "money"),
    Measure("fcf_conversion", "FCF conversion", r"(?:free cash flow|fcf) conversion(?: rate| ratio)?",
            f"(operating_cash_flow - capex) / {_NET_INCOME}", "percent"),
    Measure("capex_to_revenue", "Capital expenditures as % of revenue",
            r"capital intensity|(?:capex|capital expenditures?|capital spending) (?:as an? )?(?:%|percent(?:age)?) of "
            r"(?:total )?(?:net )?(?:revenues?|sales)|(?:capex|capital expenditures?)[ -]to[ -](?:revenues?|sales)",
            "capex / revenue", "percent"),
    Measure("working_capital", "Working capital", r"(?:net )?working capital(?! ratio)", "current_assets - current_liabilities",
            "money"),
    Measure("current_ratio", "Current ratio", r"current ratio|working capital ratio", "current_assets / current_liabilities",
            "ratio"),
    Measure("quick_ratio", "Quick ratio", r"quick ratio|acid[- ]test(?: ratio)?",
            "(cash + opt(short_term_investments) + receivables) / current_liabilities", "ratio"),
    Measure("cash_ratio", "Cash ratio", r"\bcash ratio", "(cash + opt(short_term_investments)) / current_liabilities", "ratio"),
    Measure("operating_cash_flow_ratio", "Operating cash flow ratio",
            r"operating cash flow ratio|cash flow from operations ratio", "operating_cash_flow / current_liabilities", "ratio"),
    Measure("inventory_turnover", "Inventory turnover", r"inventory turnover(?: ratio)?|inventory turns",
            "cost_of_revenue / avg(inventory)", "times"),
    Measure("receivables_turnover", "Receivables turnover", r"(?:accounts )?receivables? turnover(?: ratio)?",
            "revenue / avg(receivables)", "times"),
    Measure("payables_turnover", "Payables turnover", r"(?:accounts )?payables? turnover(?: ratio)?",
            "cost_of_revenue / avg(payables)", "times"),
    Measure("asset_turnover", "Asset turnover", r"(?:total )?asset turnover(?: ratio)?", "revenue / avg(total_assets)", "times"),
    Measure("fixed_asset_turnover", "Fixed asset turnover", r"fixed[- ]asset turnover(?: ratio)?|pp&e turnover",
            "revenue / avg(ppe_net)", "times"),
    Measure("dso", "Days sales outstanding", r"days sales outstanding|\bdso\b|days (?:of )?(?:sales in )?receivables?",
            "365 * avg(receivables) / revenue", "days"),
    Measure("dio", "Days inventory outstanding",
            r"days inventory outstanding|\bdio\b|\bdsi\b|days (?:of |in )?inventory|days sales (?:of|in) inventory",
            "365 * avg(inventory) / cost_of_revenue", "days"),
    Measure("dpo", "Days payables outstanding", r"days payables? outstanding|\bdpo\b|days (?:of |in )?payables?",
            "365 * avg(payables) / cost_of_revenue", "days"),
    Measure("cash_conversion_cycle", "Cash conversion cycle", r"cash conversion cycle|\bccc\b", "dso + dio - dpo", "days"),
    Measure("effective_tax_rate", "Effective tax rate", r"effective (?:income )?tax rate", "income_tax_expense / pretax_income",
            "percent"),
    Measure("interest_coverage", "Interest coverage", r"interest coverage(?: ratio)?|times interest earned",
            "operating_income / interest_expense", "times"),
    Measure("dividend_payout_ratio", "Dividend payout ratio", r"(?:dividend )?payout ratio", f"dividends_paid / {_NET_INCOME}",
            "percent"),
    Measure("total_payout_ratio", "Total payout ratio", r"total (?:shareholder )?payout(?: ratio)?",
            f"(dividends_paid + share_repurchases) / {_NET_INCOME}", "percent"),
    Measure("total_debt", "Total debt", r"total debt", _TOTAL_DEBT, "money"),
    Measure("debt_to_equity", "Debt to equity", r"debt[- ]to[- ](?:total )?equity(?: ratio)?|\bd/e\b",
            f"{_TOTAL_DEBT} / {_EQUITY}", "ratio"),
    Measure("debt_to_assets", "Debt to assets", r"debt[- ]to[- ](?:total )?assets(?: ratio)?", f"{_TOTAL_DEBT} / total_assets",
            "ratio"),
    Measure("net_debt", "Net debt", r"net debt", f"{_TOTAL_DEBT} - cash", "money"),
    Measure("roa", "Return on assets", r"return on (?:average )?(?:total )?assets|\broa\b",
            f"{_NET_INCOME} / avg(total_assets)", "percent"),
    Measure("roe", "Return on equity", r"return on (?:average )?(?:total )?(?:shareholders'?|stockholders'?|common )?equity|\broe\b",
            f"{_NET_INCOME} / avg({_EQUITY})", "percent"),
    Measure("revenue_growth", "Revenue growth", r"(?:revenue|sales|top[- ]line) growth(?: rate)?",
            "change(revenue) / prior(revenue)", "percent", growth_of="revenue"),
]


# the usual floor of a healthy figure (a liquidity ratio of 1 covers the current liabilities once)
HEALTHY_AT_LEAST: dict[str, float] = {"current_ratio": 1.0, "quick_ratio": 1.0, "cash_ratio": 1.0,
                                      "operating_cash_flow_ratio": 1.0}


def concept_words(concept: str) -> str:
    """How an answer names a concept: 'capital expenditures', not the description's parenthesis."""
    return WORDS.get(concept) or re.sub(r"\s*\(.*?\)", "", CONCEPTS.get(concept, concept.replace("_", " ")))


def _line_kind(concept: str) -> Kind:
    return "per_share" if concept.startswith("eps_") else "shares" if concept.startswith("shares_") else "money"


# a line item a filing may not print on its own: a company with no noncontrolling interests prints "Net income" alone,
# which is then also the figure attributable to its shareholders
_LINE_FALLBACK = {"net_income_attributable": "net_income_attributable|net_income",
                  "shareholders_equity": "shareholders_equity|total_equity", "total_equity": "total_equity|shareholders_equity"}


def _line_item(concept: str) -> Measure:
    words = concept_words(concept)
    return Measure(concept, words[:1].upper() + words[1:], CONCEPT_TERMS[concept], _LINE_FALLBACK.get(concept, concept),
                   _line_kind(concept))


DERIVED: dict[str, Measure] = {m.name: m for m in _DERIVED}
LINE_ITEMS: dict[str, Measure] = {c: _line_item(c) for c in CONCEPTS if c in CONCEPT_TERMS}
MEASURES: dict[str, Measure] = {**LINE_ITEMS, **DERIVED}

FUNCTIONS = frozenset({"avg", "prior", "change", "abs", "opt"})


def parse_expression(expression: str) -> ast.expr:
    """The expression's tree; ValueError for anything beyond the library's small language or an unknown name."""
    try:
        tree = ast.parse(expression.strip(), mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"not an expression: {expression!r}") from e
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or len(node.args) != 1 or node.keywords:
                raise ValueError(f"unsupported call in {expression!r}")
        elif isinstance(node, ast.Name):
            if node.id not in CONCEPTS and node.id not in DERIVED and node.id not in FUNCTIONS:
                raise ValueError(f"unknown name {node.id!r} in {expression!r}")
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, int | float) or isinstance(node.value, bool):
                raise ValueError(f"unsupported constant in {expression!r}")
        elif isinstance(node, ast.BinOp):
            if not isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.Div | ast.BitOr):
                raise ValueError(f"unsupported operator in {expression!r}")
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, ast.USub | ast.UAdd):
                raise ValueError(f"unsupported operator in {expression!r}")
        elif not isinstance(node, ast.Load | ast.operator | ast.unaryop):
            raise ValueError(f"unsupported syntax {type(node).__name__} in {expression!r}")
    return tree


def fmt_number(value: float, decimals: int | None = None) -> str:
    """Thousands separators; without `decimals`, whole numbers plain and others to at most two places."""
    if decimals is not None:  # half away from zero, as a reader rounds (a half rounds up), not binary float's half-even
        exact = Decimal(repr(round(value, 9))).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
        return f"{exact:,.{decimals}f}"
    if abs(value - round(value)) < 1e-9:
        return f"{round(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


@dataclass
class Term:
    value: float | None
    words: str  # the formula in words
    shown: str  # the formula with the inputs' values
    prec: int  # 3 an atom, 2 a product or quotient, 1 a sum or difference
    word_prec: int | None = None  # the words' own precedence when it differs ("average inventory" is one term)


@dataclass
class Evaluation:
    """An expression evaluated for one fiscal year: the value (None when an input is missing or a divisor is zero),
    the formula in words and with values, every (concept, year) read, and what was missing."""

    year: int
    value: float | None
    formula: str
    shown: str
    inputs: list[Input] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # a zero divisor, an optional line counted as 0

    @property
    def facts(self) -> list[Fact]:
        return [i.fact for i in self.inputs if i.fact is not None]


_PREC = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.Div: 2}
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def fact_value(fact: Fact) -> float:
    """The figure a measure uses: an outflow or expense by its size."""
    return abs(fact.value) if fact.concept in MAGNITUDE_CONCEPTS else fact.value


class _Evaluator:
    def __init__(self, lookup: Lookup, money_scale: float | None) -> None:
        self.lookup = lookup
        self.money_scale = money_scale  # the scale currency inputs are shown in; None: each at its printed scale
        self.inputs: dict[tuple[str, int], Input] = {}
        self.missing: list[str] = []
        self.notes: list[str] = []

    def show(self, fact: Fact) -> str:
        scale = self.money_scale if fact.unit == "currency" and self.money_scale else fact.scale
        return fmt_number(fact_value(fact) / (scale or 1.0))

    def read(self, concept: str, year: int) -> Fact | None:
        key = (concept, year)
        if key not in self.inputs:
            self.inputs[key] = Input(name=concept, fiscal_year=year, fact=self.lookup(concept, year))
        return self.inputs[key].fact

    def term(self, node: ast.expr, year: int) -> Term:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return Term(float(node.value), fmt_number(float(node.value)), fmt_number(float(node.value)), 3)
        if isinstance(node, ast.UnaryOp):
            inner = self.term(node.operand, year)
            sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
            value = None if inner.value is None else sign * inner.value
            return Term(value, f"-{self.wrap(inner, 3)}", f"-{self.wrap(inner, 3, shown=True)}", 3)
        if isinstance(node, ast.Name):
            return self.name(node.id, year)
        if isinstance(node, ast.Call):
            return self.call(node, year)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.first_of(node, year)
        if isinstance(node, ast.BinOp):
            return self.binop(node, year)
        raise ValueError(f"unsupported node {type(node).__name__}")

    def name(self, name: str, year: int) -> Term:
        if name in DERIVED:
            measure = DERIVED[name]
            inner = self.term(parse_expression(measure.expression), year)
            shown = "?" if inner.value is None else fmt_number(inner.value, 1 if measure.kind == "days" else 2)
            return Term(inner.value, measure.label, shown, 3)
        fact = self.read(name, year)
        if fact is None:
            self.missing.append(f"{concept_words(name)} FY{year}")
            return Term(None, concept_words(name), "?", 3)
        return Term(fact_value(fact), concept_words(name), self.show(fact), 3)

    def call(self, node: ast.Call, year: int) -> Term:
        func = node.func.id if isinstance(node.func, ast.Name) else ""
        arg = node.args[0]
        if func == "prior":
            inner = self.term(arg, year - 1)
            return Term(inner.value, f"prior-year {inner.words}", inner.shown, inner.prec, 3)
        if func == "abs":
            inner = self.term(arg, year)
            return Term(None if inner.value is None else abs(inner.value), inner.words, inner.shown, inner.prec)
        if func == "opt":
            return self.optional(arg, year)
        now, before = self.term(arg, year), self.term(arg, year - 1)
        if func == "avg":
            value = (now.value + before.value) / 2 if now.value is not None and before.value is not None else None
            return Term(value, f"average {now.words}",
                        f"({self.wrap(before, 1, shown=True)} + {self.wrap(now, 1, shown=True)}) / 2", 2, 3)
        value = now.value - before.value if now.value is not None and before.value is not None else None
        return Term(value, f"change in {now.words}", f"({self.wrap(now, 1, shown=True)} - {self.wrap(before, 2, shown=True)})", 3)

    def optional(self, arg: ast.expr, year: int) -> Term:
        missing_before = len(self.missing)
        inner = self.term(arg, year)
        if inner.value is not None:
            return inner
        lost = self.missing[missing_before:]
        del self.missing[missing_before:]
        self.notes.extend(f"{m} not found, counted as 0" for m in lost)
        return Term(0.0, inner.words, "0", 3)

    def first_of(self, node: ast.BinOp, year: int) -> Term:
        alternatives = _alternatives(node)
        missing_before, inputs_before = len(self.missing), dict(self.inputs)
        for alternative in alternatives:
            self.missing = self.missing[:missing_before]
            self.inputs = dict(inputs_before)
            term = self.term(alternative, year)
            if term.value is not None:
                return term
        # none could be computed: name what was missing in any of them, and keep every read
        self.missing = self.missing[:missing_before]
        self.inputs = dict(inputs_before)
        terms = [self.term(a, year) for a in alternatives]
        if all(isinstance(a, ast.Name) and a.id in CONCEPTS for a in alternatives):
            found = self.missing[missing_before:]
            del self.missing[missing_before:]
            self.missing.append(" or ".join(m.rsplit(" FY", 1)[0] for m in found) + f" FY{year}")
        else:
            self.missing[missing_before:] = list(dict.fromkeys(self.missing[missing_before:]))
        return terms[0]

    def binop(self, node: ast.BinOp, year: int) -> Term:
        op = type(node.op)
        prec = _PREC[op]
        left, right = self.term(node.left, year), self.term(node.right, year)
        right_prec = prec + 1 if op in (ast.Sub, ast.Div) else prec
        words = f"{self.wrap(left, prec)} {_SYMBOL[op]} {self.wrap(right, right_prec)}"
        shown = f"{self.wrap(left, prec, shown=True)} {_SYMBOL[op]} {self.wrap(right, right_prec, shown=True)}"
        value: float | None = None
        if left.value is not None and right.value is not None:
            if op is ast.Div and right.value == 0:
                self.notes.append(f"{right.words} FY{year} is zero (division by zero)")
                self.missing.append(f"a non-zero {right.words} FY{year}")
            elif op is ast.Add:
                value = left.value + right.value
            elif op is ast.Sub:
                value = left.value - right.value
            elif op is ast.Mult:
                value = left.value * right.value
            else:
                value = left.value / right.value
        return Term(value, words, shown, prec)

    @staticmethod
    def wrap(term: Term, prec: int, shown: bool = False) -> str:
        text, own = (term.shown, term.prec) if shown else (term.words, term.word_prec or term.prec)
        return f"({text})" if own < prec else text


def _alternatives(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [*_alternatives(node.left), *_alternatives(node.right)]
    return [node]


def evaluate(expression: str, year: int, lookup: Lookup, money_scale: float | None = None) -> Evaluation:
    """The expression for fiscal year `year`, reading facts through `lookup`. ValueError for an expression outside
    the library's language."""
    evaluator = _Evaluator(lookup, money_scale)
    term = evaluator.term(parse_expression(expression), year)
    missing = list(dict.fromkeys(evaluator.missing))
    return Evaluation(year=year, value=None if missing else term.value, formula=term.words, shown=term.shown,
                      inputs=list(evaluator.inputs.values()), missing=missing, notes=list(dict.fromkeys(evaluator.notes)))


def find_measures(text: str) -> list[tuple[Measure, int, int]]:
    """Every library measure the text names, with its span: derived measures first, then longest match first."""
    low = text.lower()
    hits: list[tuple[Measure, int, int]] = []
    for measure in MEASURES.values():
        for m in re.finditer(rf"(?<![\w-])(?:{measure.vocabulary})(?![\w-])", low):
            hits.append((measure, m.start(), m.end()))
    return sorted(hits, key=lambda h: (h[0].name not in DERIVED, -(h[2] - h[1]), h[1]))


def concept_for(phrase: str) -> str | None:
    """The concept a phrase names in full ('total current assets' -> current_assets), or None."""
    text = re.sub(r"\s+", " ", phrase.lower().replace("’", "'")).strip(" .,:;")
    text = re.sub(r"^(?:the |a |an |its |the company's |company's )+", "", text)
    text = re.sub(r" (?:balance|amount|figure|line item)s?$", "", text)
    for concept, vocabulary in CONCEPT_TERMS.items():
        if re.fullmatch(vocabulary, text):
            return concept
    return None
