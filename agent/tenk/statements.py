"""The primary financial statements: which page of a filing is one, and which of them a question needs.

A question about a ratio or a line item ("quick ratio", "days payable outstanding", "capex as a share of revenue")
rarely shares words with the statement page that answers it: that page is a table of line items under a caption.
So pages are classified once, at ingest, by their caption and by being a table of figures, and a page search puts
the statement pages a question needs first (agent/retrieval/page_search.py).

Captions are matched on letters alone, because PDF text extraction splits and joins words ("Statem ents of
Operations", "BALANCESHEETS"). The vocabulary is general financial-statement vocabulary, not any filer's wording.
"""
from __future__ import annotations

import re
from typing import Literal

from agent.tenk.lexicon import BALANCE, CASH_FLOW, INCOME

Statement = Literal["income", "balance", "cash_flow"]
STATEMENTS: tuple[Statement, ...] = ("income", "balance", "cash_flow")

# on the page's opening letters, lower case, every other character removed
_CAPTIONS: dict[Statement, re.Pattern] = {
    # "statements of comprehensive income" alone is another statement; "of operations and comprehensive income" is not
    "income": re.compile(r"statements?of(consolidated)?(operations|income|earnings|loss)|incomestatements?"
                         r"|profitandlossaccount"),
    "balance": re.compile(r"balancesheets?|statements?of(consolidated)?financial(position|condition)"),
    "cash_flow": re.compile(r"statements?of(consolidated)?cashflows?|cashflows?statements?"),
}
# a notes page quotes the captions ("Notes to Consolidated Balance Sheets"); so do an index and a report's prose
# ("Index to Consolidated Financial Statements" is also many filings' running header, so an index is told by the
# several captions it lists instead)
_NOT_A_STATEMENT = re.compile(r"notesto|tableofcontentsitem|reportofindependent|managementsdiscussion")
HEAD_LETTERS = 300  # how far into the page's letters a caption may start (running headers come first)
MIN_FIGURES = 30  # a statement page is a table: at least this many figures
_FIGURE = re.compile(r"\(?\$?\s?\d[\d,]*(?:\.\d+)?\)?")


# A caption is a heading. The same words also appear inside a sentence ("included in our consolidated balance
# sheets"), qualified ("Selected Income Statement Data", "Supplemental Balance Sheet Information", "Off-balance sheet
# arrangements", "Analysis of the Statements of Cash Flows") or describing a table that is not the statement
# ("Statement of Income Location", "Balance Sheet Components").
_LEAD_WORDS = re.compile(r"(?:\b(?:consolidated|combined|condensed)\s*)+$", re.I)
_QUALIFIER = re.compile(r"\b(selected|summary|summari[sz]ed|supplemental|consolidating|comprehensive|quarterly|pro ?forma|"
                        r"segment|off|analysis\W+of(\W+the)?)\W*$", re.I)
_DESCRIPTOR = re.compile(r"\b(data|information|analysis|discussion|location|components?|line items?|impact|"
                         r"classification|highlights)\b", re.I)


def _letters_at(text: str, n: int) -> tuple[str, list[int]]:
    """The first n letters, lower case, and each one's index in the text."""
    letters, at = [], []
    for i, ch in enumerate(text[: n * 3]):
        c = ch.lower()
        if "a" <= c <= "z":
            letters.append(c)
            at.append(i)
            if len(letters) == n:
                break
    return "".join(letters), at


def figures(text: str) -> int:
    return len(_FIGURE.findall(text))


def _is_heading(text: str, start: int, end: int) -> bool:
    """Whether the caption at text[start:end] stands as a heading, not inside a sentence or a qualified title."""
    before = _LEAD_WORDS.sub("", text[max(0, start - 160):start].rstrip()).rstrip(" \t:-–—|")
    words = re.findall(r"[A-Za-z]+", before)
    if words and words[-1].islower():  # a sentence runs into it, maybe from the line before
        return False
    if _QUALIFIER.search(before):
        return False
    rest = text[end:end + 80].split("\n", 1)[0]
    return not _DESCRIPTOR.search(re.sub(r"\([^)]*\)?", " ", rest))  # "(except per share data)" is the units


def page_statement(text: str) -> Statement | None:
    """The primary statement a page holds, when its caption heads the page and the page is a table of figures."""
    if figures(text) < MIN_FIGURES:
        return None
    head, at = _letters_at(text, HEAD_LETTERS + 80)
    found = [(m, kind) for kind, pat in _CAPTIONS.items() if (m := pat.search(head)) and m.start() <= HEAD_LETTERS]
    if len(found) != 1:  # none, or an index of the statements
        return None
    m, kind = found[0]
    if _NOT_A_STATEMENT.search(head[:m.start() + 20]):
        return None
    return kind if _is_heading(text, at[m.start()], at[m.end() - 1] + 1) else None


def classify_pages(texts: list[str]) -> list[Statement | None]:
    """Each page's statement. A statement often runs onto a second page with no caption of its own (a balance
    sheet's liabilities): a table of figures right after a statement page, with no caption or notes heading,
    continues it."""
    out: list[Statement | None] = []
    for i, text in enumerate(texts):
        kind = page_statement(text)
        if kind is None and i and out[i - 1] and (i < 2 or out[i - 2] != out[i - 1]) and figures(text) >= MIN_FIGURES:
            head, _ = _letters_at(text, HEAD_LETTERS)
            if not _NOT_A_STATEMENT.search(head) and not any(p.search(head) for p in _CAPTIONS.values()):
                kind = out[i - 1]
        out.append(kind)
    return out


# Which statement reports what. A question that names a statement needs it; one that names a line item or a ratio
# needs the statements its inputs are reported on.
_NEEDS: dict[Statement, re.Pattern] = {
    "income": re.compile(
        r"income statements?|statements? of (consolidated )?(comprehensive )?(income|operations|earnings)|\bp&l\b|"
        r"profit and loss|revenues?|net sales|\bsales\b|top.?line|turnover ratio|cost of (goods|sales|revenues?)|\bcogs\b|"
        r"capital.intensi|"
        r"gross (margin|profit)|operating (income|profit|margin|expenses?)|\bebit(da)?\b|income from operations|"
        r"interest expense|interest coverage|net (income|earnings|loss|profit)|profit margin|earnings per share|\beps\b|"
        r"effective tax rate|income tax|selling,? general|\bsg&a\b|research and development|\br&d\b|"
        r"return on (assets|equity|invested capital)|\bro[aei]c?\b|payout ratio|days (payable|sales|inventory)|"
        r"\bd[spi]o\b|inventory turnover|asset turnover|depreciation and amortization", re.I),
    "balance": re.compile(
        r"balance sheets?|statements? of (consolidated )?financial (position|condition)|total assets|"
        r"current (assets|liabilities)|working capital|current ratio|quick ratio|cash ratio|liquidity|inventor|"
        r"cash (and|&) (cash )?equivalents|accounts (receivable|payable)|receivables|payables|property,? plant|"
        r"property and equipment|\bpp&?n?e\b|fixed assets?|capital.intensi|goodwill|"
        r"intangible|total liabilities|(shareholders|stockholders)['’]? equity|total equity|book value|"
        r"debt.to.(equity|assets|capital)|leverage|long.term debt|total debt|net debt|return on (assets|equity)|"
        r"\bro[ae]\b|days (payable|sales|inventory)|\bd[spi]o\b|asset turnover", re.I),
    "cash_flow": re.compile(
        r"cash ?flows? statements?|statements? of (consolidated )?cash ?flows?|cash ?flows? from|operating activities|"
        r"investing activities|financing activities|free cash ?flow|cash (flow )?conversion|cash from operations|"
        r"capital.intensi|\bcapex\b|"
        r"capital expenditures?|purchases? of property|dividends? paid|cash dividends|payout ratio|"
        r"(share|stock) (repurchases?|buybacks?)|repurchases? of (common )?stock|"
        r"depreciation and amortization", re.I),
}


_OF_CAPTION: dict[re.Pattern, Statement] = {INCOME: "income", BALANCE: "balance", CASH_FLOW: "cash_flow"}


def caption_statement(caption: re.Pattern) -> Statement | None:
    """The statement a lexicon metric's caption pattern (agent/tenk/lexicon.py) stands for."""
    return _OF_CAPTION.get(caption)


def question_statements(question: str) -> list[Statement]:
    """The statements whose line items a question asks about, in the order of STATEMENTS."""
    return [kind for kind in STATEMENTS if _NEEDS[kind].search(question)]
