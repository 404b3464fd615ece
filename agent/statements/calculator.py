"""The calculator: a MeasureQuery computed from stored facts, per fiscal year and then aggregated (average, CAGR,
change), with every input it read; and the answer lines that show the work. The code computes; nobody does arithmetic
in prose."""
from __future__ import annotations

import ast
from collections.abc import Callable

from pydantic import BaseModel, Field

from agent.statements.formulas import MEASURES, Evaluation, Kind, Lookup, evaluate, fact_value, fmt_number, parse_expression
from agent.statements.models import Computation, Fact, Input, MeasureQuery

__all__ = ["Lookup", "Working", "YearValue", "calculate", "format_result", "render"]

SCALE_WORDS = {1e3: "thousand", 1e6: "million", 1e9: "billion"}
STATEMENT_WORDS = {"income": "income statement", "balance": "balance sheet", "cash_flow": "cash flow statement"}
DEFAULT_DECIMALS: dict[str, int] = {"percent": 1, "ratio": 2, "times": 2, "days": 1, "money": 0, "per_share": 2, "shares": 0}


class YearValue(BaseModel):
    """The measure for one fiscal year, as the working shows it."""

    fiscal_year: int
    formula: str
    expression: str  # with the inputs' values
    value: float | None
    number: str = ""  # the value as shown, without its unit ("13.3", "9,068")
    unit: str = ""  # after the number: "%", " (USD millions)"


class Working(Computation):
    """A Computation with what the answer lines need beyond it: the kind, each year's value, the unit and notes.
    render() reads a plain Computation too (one line and its inputs)."""

    kind: Kind = "ratio"
    aggregate: str = "each"
    unit: str = ""  # after a number: "%", " days", " (USD millions)"
    number: str = ""  # the result's figure as the formula line ends: "13.3", "9,068"
    scale: float = 1.0  # the scale money is shown in
    years: list[YearValue] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def _memo(lookup: Lookup) -> Lookup:
    seen: dict[tuple[str, int], Fact | None] = {}

    def read(concept: str, year: int) -> Fact | None:
        if (concept, year) not in seen:
            seen[(concept, year)] = lookup(concept, year)
        return seen[(concept, year)]
    return read


def _infer_kind(expression: str) -> Kind:
    tree = parse_expression(expression)
    if "365" in expression:
        return "days"
    return "ratio" if isinstance(tree, ast.BinOp) and isinstance(tree.op, ast.Div) else "money"


def _spec(query: MeasureQuery) -> tuple[str, str, Kind] | None:
    """(label, expression, kind) the query asks; the question's own definition first, the library's otherwise."""
    measure = MEASURES.get(query.measure or "")
    if query.expression:
        try:
            kind = measure.kind if measure is not None else _infer_kind(query.expression)
            return (query.label or (measure.label if measure else "Result"), query.expression, kind)
        except ValueError:
            pass
    if measure is None:
        return None
    return (query.label or measure.label, measure.expression, measure.kind)


def format_result(value: float, kind: Kind, scale: float = 1.0, decimals: int | None = None,
                  percent: bool | None = None) -> tuple[str, str, str]:
    """(result, number, unit): '13.3%' / '13.3' / '%'; '$9,068 million' / '9,068' / ' (USD millions)'."""
    as_percent = kind == "percent" and percent is not False or kind == "ratio" and percent is True
    if as_percent:
        number = fmt_number(100 * value, 1 if decimals is None else decimals)
        return f"{number}%", number, "%"
    if kind in ("ratio", "times", "days", "percent"):
        number = fmt_number(value, decimals if decimals is not None else DEFAULT_DECIMALS["ratio" if kind == "percent" else kind])
        return (f"{number} days", number, " days") if kind == "days" else (number, number, "")
    scaled = value / (scale or 1.0)
    if decimals is None:
        decimals = DEFAULT_DECIMALS[kind] if abs(scaled) >= 100 or kind != "money" else 2
    number = fmt_number(scaled, decimals)
    word = SCALE_WORDS.get(scale, "")
    if kind == "shares":
        return f"{number}{' ' + word if word else ''} shares", number, f" ({word + 's of ' if word else ''}shares)"
    sign, digits = ("-", number[1:]) if number.startswith("-") else ("", number)
    unit = " (USD per share)" if kind == "per_share" else f" (USD {word}s)" if word else " (USD)"
    return f"{sign}${digits}{' ' + word if word else ''}", number, unit


def _money_scale(query: MeasureQuery, kind: Kind, facts: list[Fact]) -> float:
    """The scale money is shown in: the one asked, else the scale the filing printed (the largest among inputs)."""
    if query.scale and kind in ("money", "shares"):
        return query.scale
    printed = [f.scale for f in facts if f.unit in ("currency", "shares") and f.scale]
    return max(printed) if printed else 1.0


def _years(query: MeasureQuery) -> list[int]:
    years = sorted(set(query.fiscal_years))
    if query.aggregate in ("change", "cagr"):
        if len(years) == 1:  # "year-over-year change in FY2022": against the year before
            years = [years[0] - 1, years[0]]
        years = [years[0], years[-1]]
    return years


def calculate(query: MeasureQuery, lookup: Lookup) -> Computation | None:
    """The query computed from facts; None when it names no measure or definition the library can compute, or no
    year. A missing input gives value None with the input named in `missing`."""
    spec = _spec(query)
    years = _years(query)
    if spec is None or not years:
        return None
    label, expression, kind = spec
    read = _memo(lookup)
    first = [evaluate(expression, y, read, query.scale if kind in ("money", "shares") else None) for y in years]
    scale = _money_scale(query, kind, [f for e in first for f in e.facts])
    evaluations = [evaluate(expression, y, read, scale) for y in years]

    inputs: dict[tuple[str, int], Input] = {}
    missing: list[str] = []
    notes: list[str] = []
    for e in evaluations:
        for i in e.inputs:
            inputs.setdefault((i.name, i.fiscal_year), i)
        missing.extend(m for m in e.missing if m not in missing)
        notes.extend(n for n in e.notes if n not in notes)

    year_values = [_year_value(e, kind, scale, query) for e in evaluations]
    value, result_kind, aggregate_expression = _aggregate(query, kind, evaluations, year_values, notes)
    if missing:
        value = None
    result, number, unit = format_result(value, result_kind, scale, query.decimals, query.percent) if value is not None \
        else ("", "", "")
    if query.aggregate == "change" and kind == "percent" and value is not None:
        result = f"{number} percentage points"
        unit = " percentage points"
    last = evaluations[-1]
    verdict = _verdict(query, label, value, year_values, result, unit)
    return Working(verdict=verdict, label=label, formula=last.formula,
                   expression=aggregate_expression if query.aggregate != "each" else last.shown,
                   value=value, result=result, fiscal_years=years, inputs=list(inputs.values()), missing=missing,
                   kind=result_kind, aggregate=query.aggregate, unit=unit, number=number, scale=scale, years=year_values,
                   notes=notes)


def _verdict(query: MeasureQuery, label: str, value: float | None, years: list[YearValue], result: str, unit: str) -> str:
    """The yes/no a question about the figure asks (MeasureQuery.asks), from the computed values; '' when it asks none
    or they are missing."""
    from agent.statements.formulas import HEALTHY_AT_LEAST

    if query.asks == "value" or value is None:
        return ""
    if query.asks == "healthy":
        floor = HEALTHY_AT_LEAST.get(query.measure or "")
        if floor is None:
            return ""
        ok = value >= floor
        return (f"{'Yes' if ok else 'No'}: the {label.lower()} of {years[-1].number}{years[-1].unit} in FY{years[-1].fiscal_year} is "
                f"{'at or above' if ok else 'below'} {floor:g}, the usual floor for a healthy liquidity profile.")
    first, last = years[0], years[-1]
    if value == 0:
        return f"No: the {label.lower()} was unchanged, {last.number}{last.unit} in FY{first.fiscal_year} and FY{last.fiscal_year}."
    rose = value > 0
    yes = rose if query.asks == "rise" else not rose
    return (f"{'Yes' if yes else 'No'}: the {label.lower()} {'rose' if rose else 'fell'} from {first.number}{first.unit} in "
            f"FY{first.fiscal_year} to {last.number}{last.unit} in FY{last.fiscal_year} ({result}).")


def _year_value(e: Evaluation, kind: Kind, scale: float, query: MeasureQuery) -> YearValue:
    _, number, unit = format_result(e.value, kind, scale, query.decimals, query.percent) if e.value is not None else ("", "", "")
    return YearValue(fiscal_year=e.year, formula=e.formula, expression=e.shown, value=e.value, number=number, unit=unit)


def _aggregate(query: MeasureQuery, kind: Kind, evaluations: list[Evaluation], years: list[YearValue],
               notes: list[str]) -> tuple[float | None, Kind, str]:
    """(value, its kind, the aggregate's expression with the per-year values)."""
    values = [e.value for e in evaluations]
    if query.aggregate == "each":
        return values[-1], kind, ""
    unit = "%" if kind == "percent" and query.percent is not False else ""
    shown = [f"{y.number}{unit}" if y.value is not None else "?" for y in years]
    if any(v is None for v in values):
        return None, "percent" if query.aggregate != "average" else kind, ""
    present = [v for v in values if v is not None]
    if query.aggregate == "average":
        return sum(present) / len(present), kind, f"({' + '.join(shown)}) / {len(shown)}"
    first, last = present[0], present[-1]
    span = evaluations[-1].year - evaluations[0].year
    if query.aggregate == "change":
        if kind == "percent":  # a margin's change is the difference, in percentage points
            return last - first, "percent", f"{shown[-1]} - {shown[0]}"
        if first == 0:
            notes.append(f"FY{evaluations[0].year} is zero: no change in percent")
            return None, "percent", ""
        base = shown[0].lstrip("-")
        return (last - first) / abs(first), "percent", f"({shown[-1]} - {shown[0]}) / {base}"
    if first <= 0 or last <= 0 or span <= 0:
        notes.append("a compound annual growth rate needs positive values at both ends")
        return None, "percent", ""
    return (last / first) ** (1 / span) - 1, "percent", f"({shown[-1]} / {shown[0]})^(1/{span}) - 1"


def _span(years: list[int]) -> str:
    return f"FY{years[0]}" if len(years) == 1 else f"FY{years[0]}-FY{years[-1]}"


def _input_line(item: Input, scale: float, cite: Callable[[Fact], str]) -> str:
    name = MEASURES[item.name].label if item.name in MEASURES else item.name
    if item.fact is None:
        return f"- {name}, FY{item.fiscal_year}: not found in the filings' statements"
    fact = item.fact
    if fact.unit == "currency":
        _, _, unit = format_result(fact_value(fact), "money", scale or fact.scale)
        number = fmt_number(fact_value(fact) / (scale or fact.scale))
    elif fact.unit == "per_share":
        number, unit = fmt_number(fact.value), " (USD per share)"
    elif fact.unit == "percent":
        number, unit = fmt_number(fact.value), "%"
    else:
        number, unit = fmt_number(fact.value / (fact.scale or 1.0)), ""
    where = f"'{fact.label}' on the {STATEMENT_WORDS.get(fact.statement, fact.statement)}"
    if fact.page is not None:
        where += f", page {fact.page + 1}"
    marker = cite(fact)
    return f"- {name}, FY{fact.fiscal_year}: {number}{unit}, {where}{' ' + marker if marker else ''}"


def render(c: Computation, cite: Callable[[Fact], str]) -> list[str]:
    """The answer lines that show the work: the formula line(s), whose last figure (after the last '=') is the
    result, then one line per input with its value, year, printed label, statement, page and citation marker."""
    working = c if isinstance(c, Working) else None
    lines: list[str] = [c.verdict] if c.verdict else []
    unit = working.unit if working else ""
    aggregate = working.aggregate if working else "each"
    years = working.years if working else []
    if c.value is None:
        lines.append(f"{c.label} ({_span(c.fiscal_years)}), {c.formula}: not computed; missing {', '.join(c.missing) or 'inputs'}")
    elif aggregate == "each" and len(years) > 1:
        lines.extend(f"{c.label} (FY{y.fiscal_year}) = {y.formula} = {y.expression} = {y.number}{unit}" for y in years)
    elif aggregate == "each":
        number = working.number if working else c.result
        lines.append(f"{c.label} ({_span(c.fiscal_years)}) = {c.formula} = {c.expression} = {number}{unit}")
    else:
        per_year = "; ".join(f"FY{y.fiscal_year} {y.expression + ' -> ' if y.expression != y.number else ''}{y.number}{y.unit}"
                             for y in years)
        formula = f" ({c.formula})" if c.formula.lower() != c.label.lower() else ""
        lines.append(f"{c.label}{formula} by year: {per_year}")
        head = {"average": f"{len(years)}-year average", "cagr": "CAGR", "change": "change"}.get(aggregate, aggregate)
        number = working.number if working else _number_of(c.result)
        lines.append(f"{c.label} {head} ({_span(c.fiscal_years)}) = {c.expression} = {number}{unit}")
    notes = working.notes if working else []
    lines.extend(f"  ({note})" for note in notes if "zero" in note or "counted as 0" in note or "needs" in note)
    scale = working.scale if working else _display_scale(c)
    lines.extend(_input_line(i, scale, cite) for i in c.inputs)
    return lines


def _number_of(result: str) -> str:
    """'$9,068 million' -> '9,068'; '13.3%' -> '13.3'; '-$5 million' -> '-5'."""
    head = result.split()[0] if result else ""
    sign = "-" if head.startswith("-") else ""
    return sign + head.lstrip("-$").rstrip("%")


def _display_scale(c: Computation) -> float:
    """The scale the working shows money in: from the result's word, else the printed scale of the inputs."""
    for scale, word in SCALE_WORDS.items():
        if word in c.result.split():
            return scale
    printed = [i.fact.scale for i in c.inputs if i.fact is not None and i.fact.unit == "currency"]
    return max(printed) if printed else 1.0


