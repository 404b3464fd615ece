"""A statement page's value columns and scale, read from its header: the fiscal year of each column, the duration of a
flow column ("Three Months Ended" = 3), the column's header as printed, and "(in millions, except per share data)".

The header is the text above the first row of figures. Captions and subtitles may name years too ("For the years
ended December 31, 2023, 2022 and 2021"), so the columns take the last years before the first row, as many as the
rows have figures."""
from __future__ import annotations

import re
from typing import NamedTuple

from agent.statements.models import Statement

YEAR = re.compile(r"(?:\d{1,2}/\d{1,2}/)?((?:19|20)\d\d)")  # a whole token: "2023", "3/25/2023"
_MONTH = (r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
          r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?")
_DATE = re.compile(rf"\b{_MONTH}\s+\d{{1,2}}\b|\b\d{{1,2}}/\d{{1,2}}(?=/(?:19|20)\d\d)", re.I)
_WORD_MONTHS = {"three": 3, "six": 6, "nine": 9, "twelve": 12, "3": 3, "6": 6, "9": 9, "12": 12}
_WEEKS = {"12": 3, "13": 3, "14": 3, "16": 3, "24": 6, "26": 6, "28": 6, "36": 9, "39": 9, "40": 9, "52": 12, "53": 12}
_DURATION = re.compile(r"\b(three|six|nine|twelve|3|6|9|12)\s*-?\s*months?\s+ended|\b(\d\d)\s*-?\s*weeks?\s+ended"
                       r"|\b(quarters?)\s+ended|\b((?:fiscal\s+)?years?)(?:\s+ended)?\b", re.I)
_SCALE = re.compile(r"(?:\bin\s|\(|\$\s*in\s|\bdollars\s+in\s|\bamounts\s+in\s|^)\s*(thousands|millions?|billions?)\b", re.I)
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9}
_SHARES_SCALE = re.compile(r"shares(?:arestated|are)?in(thousands|millions|billions)")


class Column(NamedTuple):
    period_label: str
    fiscal_year: int | None
    months: int | None


class Scale(NamedTuple):
    value: float  # of currency figures
    shares: float  # of share counts


def _duration(match: re.Match) -> int | None:
    months, weeks, quarter, year = match.groups()
    if months:
        return _WORD_MONTHS[months.lower()]
    if weeks:
        return _WEEKS.get(weeks)
    if quarter:
        return 3
    return 12 if year else None


def header_columns(words: list[str], years_at: list[int], ncols: int, statement: Statement) -> list[Column] | None:
    """The columns from the header's words, given the indexes of its year tokens: None when the header names fewer
    years than the rows have figures (the columns would be a guess)."""
    if ncols < 1 or len(years_at) < ncols:
        return None
    used = years_at[-ncols:]
    years = [int(YEAR.fullmatch(words[i]).group(1)) for i in used]  # type: ignore[union-attr]
    text = " ".join(words[: used[-1] + 1])
    groups = [(m.group(0), _duration(m)) for m in _DURATION.finditer(text)]
    groups = [(g, n) for g, n in groups if n is not None]
    months: list[int | None] = [None] * ncols
    names: list[str] = [""] * ncols
    if statement != "balance" and groups:
        if len({n for _, n in groups}) == 1:
            months = [groups[-1][1]] * ncols
            names = [groups[-1][0]] * ncols
        elif ncols % len(groups) == 0:
            size = ncols // len(groups)
            months = [groups[i // size][1] for i in range(ncols)]
            names = [groups[i // size][0] for i in range(ncols)]
    dates = [d.group(0) for d in _DATE.finditer(text)]
    if len(dates) >= ncols:
        dates = dates[-ncols:]
    elif dates and groups and ncols % len(dates) == 0 and len(dates) == len(groups):
        dates = [dates[i // (ncols // len(dates))] for i in range(ncols)]
    elif dates and len(set(dates)) == 1:
        dates = [dates[0]] * ncols
    else:
        dates = [""] * ncols
    out = []
    for name, date, year, n in zip(names, dates, years, months):
        label = " ".join(p for p in (_title(name), f"{date}," if date and "/" not in date else date, str(year)) if p)
        out.append(Column(label, year, n))
    return out


def _title(phrase: str) -> str:
    return " ".join(w.capitalize() if w.islower() else w for w in phrase.split())


def page_scale(text: str) -> Scale:
    """The scale of a page's figures and of its share counts ("in thousands, except share and per share data"
    leaves share counts unscaled; "shares in millions" states their own)."""
    flat = " ".join(text.split())
    m = _SCALE.search(flat)
    value = _SCALES[m.group(1).lower().rstrip("s")] if m else 1.0
    shares = value
    if m:
        aside = re.sub(r"[^a-z]", "", flat[m.end(): m.end() + 120].split(")", 1)[0].lower())
        if aside.startswith("except") and "share" in aside.replace("pershare", ""):
            shares = 1.0
    own = _SHARES_SCALE.search(re.sub(r"[^a-z]", "", flat.lower()))
    if own:
        shares = _SCALES[own.group(1).rstrip("s")]
    return Scale(value, shares)
