"""Helpers shared by the 10-K HTML and PDF parsers: item headings, table cleanup, markdown, dates."""
from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

from agent.ingest.failures import IngestError
from agent.models.corpus import TenKSection, TenKTable

ITEM_ORDER = ["1", "1A", "1B", "1C", "2", "3", "4", "5", "6", "7", "7A", "8",
              "9", "9A", "9B", "9C", "10", "11", "12", "13", "14", "15", "16"]
_RANK = {item: i for i, item in enumerate(ITEM_ORDER)}

STANDARD_TITLES = {
    "1": "Business", "1A": "Risk Factors", "1B": "Unresolved Staff Comments", "1C": "Cybersecurity",
    "2": "Properties", "3": "Legal Proceedings", "4": "Mine Safety Disclosures",
    "5": "Market for Registrant's Common Equity, Related Stockholder Matters and Issuer Purchases of Equity Securities",
    "6": "[Reserved]",
    "7": "Management's Discussion and Analysis of Financial Condition and Results of Operations",
    "7A": "Quantitative and Qualitative Disclosures About Market Risk",
    "8": "Financial Statements and Supplementary Data",
    "9": "Changes in and Disagreements with Accountants on Accounting and Financial Disclosure",
    "9A": "Controls and Procedures", "9B": "Other Information",
    "9C": "Disclosure Regarding Foreign Jurisdictions that Prevent Inspections",
    "10": "Directors, Executive Officers and Corporate Governance", "11": "Executive Compensation",
    "12": "Security Ownership of Certain Beneficial Owners and Management and Related Stockholder Matters",
    "13": "Certain Relationships and Related Transactions, and Director Independence",
    "14": "Principal Accountant Fees and Services", "15": "Exhibits and Financial Statement Schedules",
    "16": "Form 10-K Summary",
}


class TenKParseError(IngestError):
    """A 10-K file that cannot be parsed: TenKParseError(path, reason); str() names both."""


def normalize_item(raw: str) -> str | None:
    """'07' -> '7', '1a.' -> '1A'; None for anything that is not a 10-K item."""
    m = re.fullmatch(r"0*(\d{1,2})([A-Ca-c]?)\.?", raw.strip())
    item = f"{int(m[1])}{m[2].upper()}" if m else None
    return item if item in _RANK else None


def item_rank(item: str) -> int:
    return _RANK[item]


# A heading line: optional 'PART II', 'Item 7.' / 'ITEM 7A:' / bare 'Item 7' / 'Item 7   Title'.
# 'Item 8 of Part II ...' and 'Item 1B, 2, 3' (cross references, running headers) do not match.
_HEADING = re.compile(
    r"^\s*(?:PART\s+[IV]{1,3}\s*[,.:\-–—]?\s*)?ITEMS?\s*(?P<id>\d{1,2}[A-C]?)(?![\w,])"
    r"(?:\s*[.:\-–—]\s*|\s*$|\s{2,})(?P<title>.*)$",
    re.IGNORECASE,
)
_MAX_HEADING_LINE = 160
_GAP_CAP = 400  # chars; TOC entries sit closer together than this, most real items do not


@dataclass(frozen=True)
class Heading:
    pos: int
    item: str
    title: str


def match_heading(line: str) -> tuple[str, str] | None:
    """(item, raw title) when the line looks like an item heading."""
    line = line.replace("\xa0", " ").strip()
    if len(line) > _MAX_HEADING_LINE:
        return None
    m = _HEADING.match(line)
    if not m:
        return None
    item = normalize_item(m["id"])
    title = m["title"].strip()
    if item is None or (title and title[0].islower()):
        return None
    return item, title


def find_headings(text: str) -> list[Heading]:
    out = []
    for m in re.finditer(r"^[^\n]*$", text, re.MULTILINE):
        hit = match_heading(m.group())
        if hit:
            out.append(Heading(m.start(), *hit))
    return out


MAX_HEADING_CANDIDATES = 2000  # a 10-K has 20-50 (its table of contents, the body, running headers); select_chain is quadratic


def check_heading_count(path, cands: list[Heading]) -> None:
    if len(cands) > MAX_HEADING_CANDIDATES:
        raise TenKParseError(path, f"{len(cands)} lines look like item headings, over {MAX_HEADING_CANDIDATES}: not a 10-K")


def select_chain(cands: list[Heading], text_len: int) -> list[Heading]:
    """The body's item headings: the increasing item sequence that covers the most text.

    Each section counts for its length capped at _GAP_CAP, so a table of contents, whose
    entries sit close together, loses to the body, and skipping a short real item never
    pays. Ties go to the later heading, past repeated TOC entries and running headers.
    """
    n = len(cands)
    score = [0] * n
    pred: list[int | None] = [None] * n
    for i in range(n):
        for j in range(i):
            if _RANK[cands[j].item] < _RANK[cands[i].item]:
                cand = score[j] + min(cands[i].pos - cands[j].pos, _GAP_CAP)
                if cand >= score[i]:
                    score[i], pred[i] = cand, j
    best, best_score = None, -1
    for i in range(n):
        final = score[i] + min(text_len - cands[i].pos, _GAP_CAP)
        if final >= best_score:
            best, best_score = i, final
    chain: list[Heading] = []
    while best is not None:
        chain.append(cands[best])
        best = pred[best]
    return chain[::-1]


def clean_title(item: str, raw: str) -> str:
    title = re.sub(r"\s+", " ", raw.replace("\xa0", " ")).strip(" .:-–—")
    title = re.sub(r"\s+\d{1,3}$", "", title)  # a TOC page number
    if not title:
        return STANDARD_TITLES.get(item, "")
    if title.isupper():
        return _smart_title(title)
    return title[:200]


_SMALL_WORDS = {"a", "an", "and", "about", "by", "for", "in", "of", "on", "or", "that", "the", "to", "with"}


def _smart_title(text: str) -> str:
    words = text.lower().split(" ")
    out = [w if (i and w in _SMALL_WORDS) or any(c.isdigit() for c in w)
           else re.sub(r"[a-z]", lambda m: m.group().upper(), w, count=1) for i, w in enumerate(words)]
    return " ".join(out).replace("10-k", "10-K")[:200]


def clean_section_text(text: str) -> str:
    text = text.replace("\xa0", " ")
    text = re.sub(r"^[ \t]*Table of Contents[ \t]*$", "", text, flags=re.MULTILINE | re.IGNORECASE)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def split_by_headings(text: str, chain: list[Heading]) -> list[TenKSection]:
    sections = []
    for h, nxt in zip(chain, [*chain[1:], None]):
        body = clean_section_text(text[h.pos: nxt.pos if nxt else len(text)])
        if body:
            sections.append(TenKSection(item=h.item, title=clean_title(h.item, h.title), text=body))
    return sections


def merge_sections(primary: list[TenKSection], extra: Sequence[TenKSection] = ()) -> list[TenKSection]:
    """One section per item in item order: of primary's duplicates the longest, then extra's new items."""
    best: dict[str, TenKSection] = {}
    for s in primary:
        if s.item not in best or len(s.text) > len(best[s.item].text):
            best[s.item] = s
    for s in extra:
        best.setdefault(s.item, s)
    return sorted(best.values(), key=lambda s: _RANK[s.item])


# --- tables -----------------------------------------------------------------------------------

_NUMERIC = re.compile(r"^\(?[-+]?\$?\d[\d,]*(?:\.\d+)?\)?%?$|^[—–-]+$")
_FRAGMENT_RIGHT = {"$", "€", "£", "¥"}
_FRAGMENT_LEFT = {")", "%", ")%", "%)"}
FRAGMENTS = _FRAGMENT_RIGHT | _FRAGMENT_LEFT
_MARKERS = re.compile(r"^(?:[•●◦▪▫■□‣∙·*†‡\-–—]|\(?[a-z0-9]{1,3}\)|[a-z0-9]{1,3}\.)$", re.IGNORECASE)


def is_numeric_cell(text: str) -> bool:
    return bool(_NUMERIC.match(text.replace(" ", "")))


def clean_cell(text: str) -> str:
    text = re.sub(r"\s+", " ", text.replace("\xa0", " ")).strip()
    stripped = re.sub(r"^\$\s*", "", text)
    return stripped if stripped != text and is_numeric_cell(stripped) else text


def join_fragments(parts: list[str]) -> str:
    """Join the pieces of one logical cell: '$' + '391,035' -> '$391,035', '(4' + ')' + '%' -> '(4)%'."""
    out = ""
    for part in parts:
        glue = "" if not out or part in _FRAGMENT_LEFT or out[-1] in "$(€£¥" else " "
        out += glue + part
    return out


def compact_rows(rows: list[list[str]]) -> list[list[str]]:
    """Drop empty rows and empty columns; fold '$' / ')' / '%' only columns into their neighbours."""
    rows = [[clean_cell(c) for c in r] for r in rows]
    rows = [r for r in rows if any(r)]
    if not rows:
        return []
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    cols = [list(c) for c in zip(*rows)]
    merged: list[list[str]] = []
    for col in cols:
        values = {v for v in col if v}
        if not values:
            continue
        if merged and values <= _FRAGMENT_LEFT:
            merged[-1] = [join_fragments([a, b]) if b else a for a, b in zip(merged[-1], col)]
        else:
            merged.append(col)
    out_cols = []
    for i, col in enumerate(merged):  # currency-only columns go: amounts are kept without '$'
        if set(filter(None, col)) <= _FRAGMENT_RIGHT and i + 1 < len(merged):
            continue
        out_cols.append(col)
    table = [list(r) for r in zip(*out_cols)] if out_cols else []
    return [[clean_cell(c) for c in r] for r in table if any(r)]


def is_layout_table(rows: list[list[str]]) -> bool:
    """Fewer than 2 rows or columns, or a bullet/footnote list laid out as a table."""
    if len(rows) < 2 or max(len(r) for r in rows) < 2:
        return True
    firsts = [r[0] for r in rows if r and r[0]]
    if firsts and all(_MARKERS.match(c) for c in firsts) and max(len(r) for r in rows) == 2:
        return True
    filled = [c for r in rows for c in r if c]
    return len(filled) < 3


def to_markdown(rows: list[list[str]]) -> str:
    width = max(len(r) for r in rows)

    def line(r: list[str]) -> str:
        cells = [c.replace("|", "\\|").replace("\n", " ") for c in r + [""] * (width - len(r))]
        return "| " + " | ".join(cells) + " |"

    return "\n".join([line(rows[0]), "| " + " | ".join(["---"] * width) + " |", *map(line, rows[1:])])


def make_table(item: str, caption: str, rows: list[list[str]], units: str = "") -> TenKTable | None:
    rows = compact_rows(rows)
    if not rows or is_layout_table(rows):
        return None
    caption = caption or " ".join(c for c in rows[0] if c)
    return TenKTable(item=item, caption=caption[:200], rows=rows, markdown=to_markdown(rows), units=units[:200])


_UNITS = re.compile(r"^\(?\s*(?:in|dollars in|amounts in|\$ in)\s+(?:thousands|millions|billions)\b", re.I)


def pick_units(previous: list[str]) -> str:
    """The units line just before a table ("(In millions, except per-share amounts)"), nearest last; '' if none."""
    return next((ln.strip() for ln in reversed(previous[-6:]) if _UNITS.match(ln.strip())), "")


_NOISE_LINE = re.compile(
    r"^(?:[\d\s,.$%()—–-]+|table of contents|.*\|\s*\d{4} form 10-k\s*\|.*|page|index)$"
    r"|^\(?(?:in|dollars in|amounts in|\$ in|shares in)\b.*(?:millions|thousands|billions)"
    r"|^(?:year|years|fiscal year|three months|twelve months)s? ended\b.*$"
    r"|^(?:as of|at)?\s*(?:january|february|march|april|may|june|july|august|september|october|november|december)"
    r"\s+\d{1,2},?(?:\s+\d{4})?$",
    re.IGNORECASE,
)


def is_caption_noise(line: str) -> bool:
    line = line.strip()
    return not line or bool(_NOISE_LINE.match(line))


def pick_caption(previous: list[str]) -> str:
    """From the text lines just before a table (nearest last): an all-caps title if any, else the nearest line."""
    lines = [ln.strip() for ln in previous if not is_caption_noise(ln)]
    lines = [ln for ln in lines if not (len(ln) < 40 and ln.endswith(":"))][-3:]  # not row labels ('ASSETS:')
    for ln in reversed(lines):
        letters = [c for c in ln if c.isalpha()]
        if len(ln) <= 150 and len(letters) >= 4 and sum(c.isupper() for c in letters) / len(letters) > 0.8:
            return ln
    return lines[-1][:200] if lines else ""


# --- dates --------------------------------------------------------------------------------------

_DATE = re.compile(r"([A-Z][a-z]{2,8})\.?\s+(\d{1,2}),?\s+(\d{4})", re.IGNORECASE)


def parse_date(text: str) -> dt.date | None:
    text = re.sub(r"\s+", " ", text.replace("\xa0", " ")).strip()
    iso, m = re.search(r"(\d{4})-(\d{2})-(\d{2})", text), _DATE.search(text)
    if iso and (not m or iso.start() < m.start()):
        return _safe_date(int(iso[1]), int(iso[2]), int(iso[3]))
    if not m:
        return None
    for month, fmt in ((m[1], "%B %d %Y"), (m[1][:3], "%b %d %Y")):  # 'September', 'Sep', 'Sept'
        try:
            return dt.datetime.strptime(f"{month} {m[2]} {m[3]}", fmt).date()
        except ValueError:
            continue
    return None


def _safe_date(y: int, m: int, d: int) -> dt.date | None:
    try:
        return dt.date(y, m, d)
    except ValueError:
        return None


def fiscal_year_end_from_text(text: str) -> dt.date | None:
    """The date in the cover page's 'For the fiscal year ended September 28, 2024'."""
    m = re.search(r"fiscal\s+year\s+ended\s*[:\-]?\s*((?:[A-Z][a-z]+\.?\s+\d{1,2},?\s+\d{4})|\d{4}-\d{2}-\d{2})",
                  text, re.IGNORECASE)
    return parse_date(m[1]) if m else None
