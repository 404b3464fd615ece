"""Time expressions: find them in a question, and resolve them against one company's own periods."""
from __future__ import annotations

import datetime as dt
import re

from pydantic import BaseModel, Field

from agent.models.corpus import Period

_NUM = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
        "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a": 1}
_ORD = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4}
_N = r"(\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"



def _quarter_patterns(quarter: str, digit: str, words: str) -> list[tuple[str, re.Pattern]]:
    """The four ways a question names a quarter and its year ("Q3 2024", "2024 Q3", "3Q24", "third quarter of 2024"),
    for the quarter numbers `quarter` (after Q), `digit` (before Q) and the ordinal `words` allow."""
    return [
        ("quarter", re.compile(rf"\bQ{quarter}\s*(?:of\s+)?(?:FY|fiscal(?:\s+year)?\s*)?'?(\d{{4}}|\d{{2}})\b", re.I)),
        ("quarter_rev", re.compile(rf"\b(?:FY\s*)?(\d{{4}})\s*Q{quarter}\b", re.I)),
        ("quarter_short", re.compile(rf"\b{digit}Q\s*'?(\d{{2}}|\d{{4}})\b", re.I)),
        ("quarter_words", re.compile(rf"\b({words})\s+(?:fiscal\s+)?quarter\s+(?:of\s+)?(?:fiscal\s+(?:year\s+)?|FY\s*)?(\d{{4}})\b",
                                     re.I)),
    ]


_FISCAL_YEAR = ("fiscal_year", re.compile(r"\b(?:FY\s*'?|fiscal\s+(?:year\s+)?)(\d{4}|\d{2})\b", re.I))
_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("last_n_quarters", re.compile(rf"\b(?:last|past|previous|recent|latest|trailing)\s+{_N}\s+(?:fiscal\s+)?quarters?\b", re.I)),
    ("last_n_years", re.compile(rf"\b(?:last|past|previous|recent|trailing)\s+{_N}\s+(?:fiscal\s+)?years?\b", re.I)),
    *_quarter_patterns(quarter=r"([1-4])", digit=r"([1-4])", words=r"first|second|third|fourth|1st|2nd|3rd|4th"),
    _FISCAL_YEAR,
    ("latest", re.compile(r"\b(?:latest|last|most\s+recent|recent|previous|this|current)\s+(?:fiscal\s+)?(?:quarter|earnings\s+call|call|quarterly\s+results)\b|\blatest\b", re.I)),
    ("last_year", re.compile(r"\b(?:last|latest|most\s+recent|previous)\s+(?:fiscal\s+)?year\b", re.I)),
    ("year", re.compile(r"\b(?:in|for|during|of)\s+((?:19|20)\d{2})\b", re.I)),
    # a date ("as of August 30, 2023", "in March 2023"): the periods of its year
    ("date", re.compile(r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
                        r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?\s+(?:\d{1,2}(?:st|nd|rd|th)?,?\s+)?((?:19|20)\d{2})\b", re.I)),
]


def find_time_refs(text: str) -> list[str]:
    """The temporal phrases of a question, preserved exactly as written, in order."""
    spans: list[tuple[int, int]] = []
    for _, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            if not any(s <= m.start() < e or s < m.end() <= e for s, e in spans):
                spans.append((m.start(), m.end()))
    return [text[s:e].strip() for s, e in sorted(spans)]


def _year(s: str) -> int:
    y = int(s)
    if y >= 100:
        return y
    return y + 2000 if y < 69 else y + 1900  # two digits pivot as strptime's %y does: '99 is 1999, '24 is 2024


def _num(s: str) -> int:
    return int(s) if s.isdigit() else _NUM[s.lower()]


class Resolution(BaseModel):
    periods: list[Period] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)  # user-readable: "Q4 2024 is not available for ACME (...)"


def resolve(refs: list[str], available: list[Period], ticker: str, default_latest: int = 1) -> Resolution:
    """Map phrases to periods this company actually has. Unknown periods become `problems`, never guesses."""
    avail = sorted(set(available))
    out = Resolution()
    if not avail:
        out.problems.append(f"no periods are available for {ticker}")
        return out
    wanted: list[Period] = []
    for ref in refs:
        wanted += _resolve_one(ref, avail, ticker, out)
    if not refs:
        wanted = avail[-default_latest:]
    out.periods = sorted(set(wanted))
    return out


def _resolve_one(ref: str, avail: list[Period], ticker: str, out: Resolution) -> list[Period]:
    span = f"{avail[0].label} to {avail[-1].label}"
    years = sorted({p.fiscal_year for p in avail})
    for kind, pattern in _PATTERNS:
        m = pattern.search(ref)
        if not m:
            continue
        if kind in {"last_n_quarters", "last_n_years"} and _num(m.group(1)) == 0:
            out.problems.append(f"{ref!r} asks for no periods")  # avail[-0:] would be all of them
            return []
        if kind == "last_n_quarters":
            n = _num(m.group(1))
            if n > len(avail):
                out.problems.append(f"{ticker} has only {len(avail)} periods ({span}); using all of them for {ref!r}")
            return avail[-n:]
        if kind == "last_n_years":
            keep = set(years[-_num(m.group(1)):])
            return [p for p in avail if p.fiscal_year in keep]
        if kind in {"quarter", "quarter_rev", "quarter_short", "quarter_words"}:
            if kind == "quarter_rev":
                year, q = _year(m.group(1)), int(m.group(2))
            elif kind == "quarter_words":
                q, year = _ORD[m.group(1).lower()], _year(m.group(2))
            else:
                q, year = int(m.group(1)), _year(m.group(2))
            target = Period(fiscal_year=year, fiscal_quarter=q)
            if target in avail:
                return [target]
            out.problems.append(f"{target.label} is not available for {ticker} (available: {span})")
            return []
        if kind in {"fiscal_year", "year", "date"}:
            year = _year(m.group(1))
            hits = [p for p in avail if p.fiscal_year == year]
            if not hits:
                out.problems.append(f"FY{year} is not available for {ticker} (available: {span})")
            return hits
        if kind == "latest":
            return avail[-1:]
        if kind == "last_year":
            return [p for p in avail if p.fiscal_year == years[-1]]
    out.problems.append(f"could not understand the time reference {ref!r}")
    return []


# Periods no question can mean. Quarter numbers run 1 to 4; no filing predates 1900; and nothing is reported for a
# fiscal year more than YEARS_AHEAD past the current one (guidance and targets reach a few years, not decades).
EARLIEST_FISCAL_YEAR = 1900
YEARS_AHEAD = 10
_ORDINALS = {"fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "zeroth": 0}
_IMPOSSIBLE: list[tuple[str, re.Pattern]] = [
    *_quarter_patterns(quarter=r"(\d{1,2})", digit=r"(\d)",
                       words=r"first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|zeroth|\d{1,2}(?:st|nd|rd|th)"),
    _FISCAL_YEAR,
    ("no_periods", re.compile(r"\b(?:last|past|previous|recent|latest|trailing)\s+(?:0|zero)\s+(?:fiscal\s+)?(?:quarters?|years?)\b", re.I)),
]


def impossible_periods(text: str, today: dt.date | None = None) -> list[str]:
    """Why each period named in `text` cannot exist (a fifth quarter, fiscal 1850, a quarter decades ahead), as
    readable sentences; empty when every period it names could. Calendar years in prose ('founded in 1850', 'net
    zero by 2050') are not periods and are never refused."""
    latest = (today or dt.date.today()).year + YEARS_AHEAD
    problems: list[str] = []
    seen: list[tuple[int, int]] = []
    for kind, pattern in _IMPOSSIBLE:
        for m in pattern.finditer(text):
            if any(s <= m.start() < e for s, e in seen):
                continue
            seen.append((m.start(), m.end()))
            ref = m.group(0)
            if kind == "no_periods":
                problems.append(f"{ref!r} asks for no periods")
                continue
            if kind == "fiscal_year":
                quarter, year = 1, _year(m.group(1))
            elif kind == "quarter_rev":
                year, quarter = _year(m.group(1)), int(m.group(2))
            elif kind == "quarter_words":
                word = m.group(1).lower()
                quarter = _ORD.get(word) or _ORDINALS.get(word, -1)
                quarter = int(word[:-2]) if quarter == -1 else quarter
                year = _year(m.group(2))
            else:
                quarter, year = int(m.group(1)), _year(m.group(2))
            if not 1 <= quarter <= 4:
                problems.append(f"{ref!r} is not a quarter: fiscal quarters run Q1 to Q4")
            elif year < EARLIEST_FISCAL_YEAR:
                problems.append(f"{ref!r} is before {EARLIEST_FISCAL_YEAR}: no filing or earnings call covers it")
            elif year > latest:
                problems.append(f"{ref!r} is more than {YEARS_AHEAD} years ahead: nothing has been reported for it")
    return problems


def parse_quarters_option(value: str) -> list[str]:
    """CLI --quarters: 'last3', 'latest', '2024_q4,2025_q1', 'Q4 2024', 'FY2023'."""
    value = value.strip()
    m = re.fullmatch(r"last\s*(\d+)", value, re.I)
    if m:
        return [f"last {m.group(1)} quarters"]
    parts = [p.strip() for p in value.split(",") if p.strip()]
    refs = []
    for p in parts:
        m = re.fullmatch(r"(\d{4})_q([1-4])", p, re.I)
        refs.append(f"Q{m.group(2)} {m.group(1)}" if m else p)
    return refs
