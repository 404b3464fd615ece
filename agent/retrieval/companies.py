"""Company registry: tickers, names and aliases, seeded from the sample corpus's companies.json."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources

from agent.models.corpus import Company
from agent.retrieval.exchange_symbols import exchange_symbols
from agent.retrieval.name_rules import base_name, derived_aliases, normalised_name


@lru_cache
def known_companies() -> tuple[Company, ...]:
    path = resources.files("agent") / "sample_corpus" / "companies.json"
    return tuple(Company.model_validate(c) for c in json.loads(path.read_text()))


def seed_companies(conn) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO companies (ticker, name, aliases, fiscal_year_end) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (ticker) DO NOTHING",
            [(c.ticker, c.name, c.aliases, c.fiscal_year_end) for c in known_companies()],
        )


def ensure_company(conn, ticker: str, name: str | None = None) -> None:
    """Unknown tickers found in ingested files join the registry under their own name."""
    conn.execute(
        "INSERT INTO companies (ticker, name) VALUES (%s, %s) ON CONFLICT (ticker) DO NOTHING",
        (ticker, name or ticker),
    )


def no_company_named(companies: list[Company] | tuple[Company, ...]) -> str:
    """Why a question naming no known company is rejected, with a few companies to name as examples."""
    examples = ", ".join(f"{c.ticker} ({c.name})" for c in companies[:3])
    return "No known company was named. Name one by ticker or name" + (f", e.g. {examples}." if examples else ".")


def match_company(name: str, companies: list[Company] | tuple[Company, ...]) -> Company | None:
    """The registered company that `name` is (its name or an alias, legal form and punctuation aside)."""
    want = normalised_name(name)
    for c in companies:
        if want in {normalised_name(n) for n in [c.name, *c.aliases]}:
            return c
    return None


MAX_NAME_KEY = 18


def register_company(conn, name: str) -> str:
    """The ticker of the company called `name`: a registered one it matches, or a new entry keyed by its name
    (upper case, letters and digits) with derived aliases, for corpora that name companies but give no ticker."""
    companies = load_companies(conn)
    found = match_company(name, companies)
    held = {s for c in companies for s in [c.ticker, *c.aliases]}  # a symbol another company holds stays theirs
    symbols = [s for s in exchange_symbols(name) if s not in held]
    if found:
        if symbols:  # registered before symbols were looked up
            conn.execute("UPDATE companies SET aliases = aliases || %s WHERE ticker = %s", (symbols, found.ticker))
        return found.ticker
    # a request's ticker is at most 20 characters (finagent.models.job_request): room is left for a numeric suffix
    key = re.sub(r"[^A-Z0-9]", "", base_name(name).upper())[:MAX_NAME_KEY] or "COMPANY"
    taken = {c.ticker for c in companies}
    ticker, n = key, 2
    while ticker in taken:
        ticker, n = f"{key}{n}", n + 1
    conn.execute("INSERT INTO companies (ticker, name, aliases) VALUES (%s, %s, %s) ON CONFLICT (ticker) DO NOTHING",
                 (ticker, name, derived_aliases(name) + symbols))
    return ticker


def load_companies(conn) -> list[Company]:
    rows = conn.execute("SELECT ticker, name, aliases, fiscal_year_end FROM companies ORDER BY ticker").fetchall()
    return [Company(**r) for r in rows]


def company_names(conn, tickers: list[str]) -> dict[str, str]:
    rows = conn.execute("SELECT ticker, name FROM companies WHERE ticker = ANY(%s)", (tickers,)).fetchall()
    return {r["ticker"]: r["name"] for r in rows}


def is_symbol(alias: str) -> bool:
    """An alias that is an exchange symbol ("JPM"), matched in upper case only, unlike a name."""
    return re.fullmatch(r"[A-Z]{1,5}", alias) is not None


def find_tickers(text: str, companies: list[Company] | tuple[Company, ...]) -> list[str]:
    """Tickers mentioned in `text` by symbol ($ACME, ACME) or by name/alias, in order of appearance."""
    hits: list[tuple[int, str]] = []
    for c in companies:
        symbols = [c.ticker, *(a for a in c.aliases if is_symbol(a))]
        patterns = [(rf"\$?\b{re.escape(s)}\b", 0) for s in symbols]  # bare symbols must be upper case ("ON", "ALL")
        names = [n for n in [c.name, *c.aliases] if len(n) >= 3 and not is_symbol(n)]
        patterns += [(rf"(?<!\w){re.escape(n)}(?:'s)?(?!\w)", re.IGNORECASE) for n in names]
        for pattern, flags in patterns:
            m = re.search(pattern, text, flags)
            if m:
                hits.append((m.start(), c.ticker))
                break
    hits.sort()
    return list(dict.fromkeys(t for _, t in hits))


_NOT_TICKERS = {"Q1", "Q2", "Q3", "Q4", "FY", "CEO", "CFO", "EPS", "AI", "US", "USA", "GAAP", "EBITDA", "ROE", "ROA",
                "YOY", "QOQ", "TTM", "LTM", "SEC", "IPO", "ESG", "R&D", "SG&A", "COGS", "FCF", "NIM", "API", "GPU", "CPU"}


def unknown_tickers(text: str, companies: list[Company] | tuple[Company, ...]) -> list[str]:
    """Ticker-like symbols ($ZZZQ, ZZZQ's) in `text` that no known company has."""
    known = {c.ticker for c in companies} | {a for c in companies for a in c.aliases if is_symbol(a)}
    found = re.findall(r"(?<![\w$])\$?([A-Z]{2,5})(?:'s)?(?![\w&])", text)
    return list(dict.fromkeys(t for t in found if t not in known and t not in _NOT_TICKERS))
