"""The offline question reader: what figure a question asks (a library measure, a line item, or the question's own
definition over concepts), for which fiscal years, aggregated how, and stated at what scale and rounding. Rules over
general analyst vocabulary only."""
from __future__ import annotations

import re
from typing import Literal

from agent.statements.formulas import HEALTHY_AT_LEAST, MEASURES, Measure, concept_for, find_measures, parse_expression
from agent.statements.models import MeasureQuery

Aggregate = Literal["each", "average", "cagr", "change"]

_YEAR = r"(?:fy\s*'?|fiscal\s+(?:year\s+)?|year\s+(?:end(?:ed|ing)?\s+)?)?((?:19|20)\d{2})\b|\bfy\s*'?(\d{2})\b"
_RANGE = re.compile(rf"(?:{_YEAR})\s*(?:-|–|—|to|through|thru|until)\s*(?:{_YEAR})", re.I)
_BETWEEN = re.compile(rf"\b(?:from|between)\s+(?:{_YEAR})\s*(?:,\s*)?(?:to|and|through)\s+(?:{_YEAR})", re.I)
_QUALITATIVE = re.compile(r"^\s*(?:why|explain|describe|discuss|summari[sz]e|list)\b|\bwhat (?:drove|caused|explains|were the "
                          r"(?:reasons|drivers|main)|are the (?:main|key|primary))\b|\b(?:risks?|strateg(?:y|ies))\b(?!.*\d)", re.I)
_CAGR = re.compile(r"\bcagr\b|\bcompound(?:ed)? annual(?: growth)?(?: rate)?|\bannuali[sz]ed growth", re.I)
_AVERAGE = re.compile(r"\b(?:\d+|two|three|four|five)[- ]years? average\b|\baverage (?:of|over|across|for)\b|\bon average\b|"
                      r"\baverage annual\b|\bmean\b", re.I)
_CHANGE = re.compile(r"\b(?:year[- ]over[- ]year|yoy|y/y)\b|\bgrowth\b|\bgr[eo]w(?:n)?\b|\bchange[ds]?\b|\bincrease[ds]?\b|"
                     r"\bdecrease[ds]?\b|\bdecline[ds]?\b", re.I)
_SCALES = [
    (re.compile(r"\b(?:billions?|bn)\b", re.I), 1e9),
    (re.compile(r"\b(?:millions?|mm|mn)\b", re.I), 1e6),
    (re.compile(r"\bthousands?\b", re.I), 1e3),
]
_SCALE_CONTEXT = re.compile(r"\b(?:in|of)\s+(?:usd|us\$|\$|u\.s\. dollars)?\s*(?:billions?|millions?|thousands?|bn|mm|mn)\b|"
                            r"\b(?:usd|us\$|\$)\s*(?:billions?|millions?|thousands?|bn|mm|mn)\b|\((?:in\s+)?(?:usd\s+)?"
                            r"(?:billions?|millions?|thousands?)\)", re.I)
_NUMBER_WORDS = {"zero": 0, "no": 0, "one": 1, "two": 2, "three": 3, "four": 4}
_DECIMALS = re.compile(r"\b(\d|zero|one|two|three|four)\s+decimal(?:\s+places?|\s+points?|s)?\b", re.I)
_WHOLE = re.compile(r"\bnearest (?:whole (?:number|percent(?:age)?)|integer)\b|\bwhole number\b|\bno decimals?\b", re.I)
_NEAREST = re.compile(r"\bnearest (tenth|hundredth|thousandth)\b", re.I)
_PERCENT = re.compile(r"\bin (?:units of )?percent(?:s|age)?\b|\bas an? (?:%|percent(?:age)?\b)|%\s*(?:margin|change|growth)\b|"
                      r"\bin %|\bpercentage\b|\bin percent\b|\bper ?cent\b", re.I)

_SHARE_OF_REVENUE = re.compile(r"\s*(?:\([^)]{0,80}\)\s*)?(?:(?:%|percent(?:age)?)\s+margin\b|(?:as\s+an?\s+)?(?:%|percent(?:age)?)\s+"
                               r"of\s+(?:total\s+)?(?:net\s+)?(?:revenues?|sales)\b)", re.I)
_YES_NO = re.compile(r"^\s*(?:is|are|was|were|has|have|had|does|do|did)\b", re.I)
_RISE = re.compile(r"\b(?:improv\w*|increas\w*|gr[eo]w\w*|rais\w*|expand\w*|higher)\b", re.I)
_FALL = re.compile(r"\b(?:declin\w*|decreas\w*|drop\w*|fall|fell|lower|reduc\w*|shrink\w*|shrank|worsen\w*|deteriorat\w*)\b", re.I)
_HEALTHY = re.compile(r"\b(?:healthy|strong|adequate|sound|comfortable)\b[^.?]{0,40}\bliquidity\b|"
                      r"\bliquidity\b[^.?]{0,40}\b(?:healthy|strong|adequate|sound)\b", re.I)
# measures where a lower figure is the better one: "improving" asks whether they fell
LOWER_IS_BETTER = frozenset({"dso", "dio", "cash_conversion_cycle", "debt_to_equity", "debt_to_assets", "total_debt",
                             "net_debt", "long_term_debt", "short_term_debt", "cost_of_revenue", "sga", "operating_expenses"})
_DEFINE = re.compile(r"\bdefine\s+(?:the\s+)?(?P<term>[^.;:]+?)\s+as\s*:?\s*(?P<body>[^;]+?)(?:\.\s|\.$|;|$)", re.I)
_DEFINED = re.compile(r"(?P<term>[\w'&/ -]+?)\s+(?:is|are)\s+(?:defined|calculated|computed|measured)\s+as\s*:?\s*"
                      r"(?P<body>[^;]+?)(?:\.\s|\.$|;|$)", re.I)
_NUM_DEN = re.compile(r"\busing\s+(?P<num>[^.;]+?)\s+as\s+the\s+numerator\s+and\s+(?P<den>[^.;]+?)\s+as\s+the\s+denominator", re.I)

_OPERATORS = [
    (r"\bdivided\s+by\b|\bover\b|÷", " / "),
    (r"\bmultiplied\s+by\b|\btimes\b|×", " * "),
    (r"\bplus\b|\badded\s+to\b", " + "),
    (r"\bminus\b|\bless\b|\bsubtract(?:ing)?\b", " - "),
]
_TOKEN = re.compile(r"(\s[-–]\s|[()+*/])")


def _year(m: re.Match[str], first: int) -> int:
    full, short = m.group(first), m.group(first + 1)
    return int(full) if full else 2000 + int(short)


def fiscal_years(text: str) -> list[int]:
    """The fiscal years a text names, ascending; a range ('FY2018 - FY2020', 'from FY2016 to FY2017') is every year
    in it."""
    years: set[int] = set()
    for pattern in (_RANGE, _BETWEEN):
        for m in pattern.finditer(text):
            a, b = _year(m, 1), _year(m, 3)
            years.update(range(min(a, b), max(a, b) + 1))
    for m in re.finditer(_YEAR, text, re.I):
        years.add(_year(m, 1))
    return sorted(y for y in years if 1950 <= y <= 2100)


def _scale(text: str) -> float | None:
    for context in _SCALE_CONTEXT.finditer(text):
        for pattern, scale in _SCALES:
            if pattern.search(context.group(0)):
                return scale
    return None


def _decimals(text: str) -> int | None:
    m = _DECIMALS.search(text)
    if m:
        word = m.group(1).lower()
        return int(word) if word.isdigit() else _NUMBER_WORDS[word]
    if _WHOLE.search(text):
        return 0
    m = _NEAREST.search(text)
    return {"tenth": 1, "hundredth": 2, "thousandth": 3}[m.group(1).lower()] if m else None


def _operand(phrase: str, year: int | None) -> str | None:
    """One operand of a definition as an expression over concepts: a number, 'average X between FYa and FYb' ->
    avg(x), 'change in X' -> change(x), 'FY2016 X' when the year asked is 2017 -> prior(x); None if unmapped."""
    text = re.sub(r"\s+", " ", phrase.lower()).strip(" .,:;")
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return text
    shift = 0
    func = ""
    m = re.match(r"^(?:the )?(average|mean|change in|changes in|increase in|prior[- ]year|previous[- ]year|beginning(?: of year)?)\s+"
                 r"(?:the )?(?:(?:balance|level) of )?(.*)$", text)
    if m:
        word = m.group(1)
        func = "avg" if word in ("average", "mean") else "change" if "in" in word.split() else "prior"
        text = m.group(2)
    # "between FY2016 and FY2017": the function's two years ("cash from operations" keeps its words)
    text = re.sub(r"\s*\b(?:between|from)\s+(?:the\s+)?(?:fy\s*'?|fiscal\s+(?:year\s+)?)?'?\d{2,4}\b.*$", "", text)
    years = [int(y) for y in re.findall(r"(?:19|20)\d{2}", text)]
    text = re.sub(r"\b(?:in |for |of |at )?(?:the )?(?:fy\s*'?|fiscal (?:year )?)?(?:19|20)\d{2}(?:'s)?\b", " ", text)
    text = re.sub(r"^'s\b|\byear[- ]end\b", " ", text).strip(" ,'")
    if years and year is not None and not func:
        shift = year - years[0]
        if shift not in (0, 1):
            return None
    concept = concept_for(text)
    if concept is None:
        return None
    inner = f"prior({concept})" if shift == 1 else concept
    if func == "prior":
        return f"prior({inner})"
    return f"{func}({inner})" if func else inner


def definition_expression(body: str, year: int | None) -> str | None:
    """A definition in words as an expression over concepts, or None when any part of it cannot be mapped."""
    text = body.replace("’", "'")
    text = re.sub(r"\bthe\s+(?:sum|total)\s+of\s+(.+?)\s+and\s+(.+?)(?=\)|\s+divided|\s+over|$)", r"(\1 plus \2)", text, flags=re.I)
    text = re.sub(r"\bthe\s+difference\s+between\s+(.+?)\s+and\s+(.+?)(?=\)|\s+divided|\s+over|$)", r"(\1 minus \2)", text,
                  flags=re.I)
    text = re.sub(r"\bthe\s+ratio\s+of\s+(.+?)\s+to\s+(.+)$", r"\1 divided by \2", text, flags=re.I)
    for pattern, symbol in _OPERATORS:
        text = re.sub(pattern, symbol, text, flags=re.I)
    parts: list[str] = []
    for token in _TOKEN.split(f" {text} "):
        piece = token.strip()
        if not piece:
            continue
        if piece in "()+*/" or piece in ("-", "–"):
            parts.append("-" if piece == "–" else piece)
            continue
        operand = _operand(piece, year)
        if operand is None:
            return None
        parts.append(operand)
    expression = re.sub(r"\(\s+|\s+\)", lambda m: m.group(0).strip(), " ".join(parts))
    try:
        parse_expression(expression)
    except ValueError:
        return None
    return expression


def _definition(question: str, year: int | None) -> tuple[str | None, str | None, tuple[int, int] | None]:
    """(the defined term, its expression, the span of the definition) from the question's own definition."""
    m = _NUM_DEN.search(question)
    if m:
        num, den = definition_expression(m.group("num"), year), definition_expression(m.group("den"), year)
        expression = f"({num}) / ({den})" if num and den else None
        return None, expression, m.span()
    for pattern in (_DEFINE, _DEFINED):
        m = pattern.search(question)
        if m:
            term = re.sub(r"^.*?\b(?:and|where|with|here|,)\s+", "", m.group("term").strip(), flags=re.I)
            return term, definition_expression(m.group("body"), year), m.span()
    return None, None, None


def _measure(text: str) -> tuple[Measure | None, tuple[int, int] | None]:
    hits = find_measures(text)
    return (hits[0][0], (hits[0][1], hits[0][2])) if hits else (None, None)


def _aggregate(text: str, years: list[int], span: tuple[int, int] | None) -> Aggregate:
    if _CAGR.search(text):
        return "cagr"
    if len(years) >= 2 and (_AVERAGE.search(text) or span and re.search(r"\baverage\s+$", text[: span[0]], re.I)):
        return "average"
    if _CHANGE.search(text):
        return "change"
    return "each"


def measure_query(question: str) -> MeasureQuery | None:
    """What figure the question asks, read by rules; None for a question that asks no figure."""
    if _QUALITATIVE.search(question):
        return None
    # years and wording outside a definition: a definition's own years are the periods of its terms
    _, _, span = _definition(question, None)
    outside = question if span is None else question[: span[0]] + " " + question[span[1]:]
    years = fiscal_years(outside) or fiscal_years(question)
    year = years[-1] if years else None
    term, expression, _ = _definition(question, year)
    measure, measure_span = _measure(outside)
    if term and measure is None:
        measure, measure_span = _measure(term)
    if measure is None and expression is None:
        return None
    if expression is None and measure is not None and measure.kind == "money" and measure_span is not None:
        share = _SHARE_OF_REVENUE.match(outside[measure_span[1]:])
        if share:  # "operating income % margin", "capex as a % of revenue": the line item over revenue
            expression = f"({measure.expression}) / revenue"
            term = f"{measure.label} as % of revenue" if "of" in share.group(0).lower() else f"{measure.label} margin"
            measure = None
    aggregate = _aggregate(outside, years, measure_span)
    if measure is not None and measure.growth_of and aggregate == "each" and len(years) > 1:
        aggregate = "change"
    if measure is not None and measure.growth_of and aggregate in ("change", "cagr"):
        measure = MEASURES[measure.growth_of]
    label = term[:1].upper() + term[1:] if term and expression else measure.label if measure else ""
    percent = True if _PERCENT.search(outside) else None
    asks = _asks(outside, measure)
    if asks in ("rise", "fall"):
        aggregate = "change"
    elif asks == "healthy":
        aggregate = "each"
    return MeasureQuery(measure=measure.name if measure else None, expression=expression, label=label, fiscal_years=years,
                        aggregate=aggregate, scale=_scale(outside), decimals=_decimals(outside), percent=percent, asks=asks)


def _asks(question: str, measure: Measure | None) -> str:
    """Whether a yes/no question asks if the figure rose, fell or is healthy (see MeasureQuery.asks)."""
    if not _YES_NO.search(question):
        return "value"
    if measure is not None and measure.name in HEALTHY_AT_LEAST and _HEALTHY.search(question):
        return "healthy"
    rise, fall = _RISE.search(question), _FALL.search(question)
    if rise and not fall:
        improving = rise.group(0).lower().startswith("improv")
        return "fall" if improving and measure is not None and measure.name in LOWER_IS_BETTER else "rise"
    if fall and not rise:
        return "fall"
    return "value"
