"""Company registry: tickers, names and aliases, seeded from the sample corpus's companies.json."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources

from agent.models.corpus import Company


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


def load_companies(conn) -> list[Company]:
    rows = conn.execute("SELECT ticker, name, aliases, fiscal_year_end FROM companies ORDER BY ticker").fetchall()
    return [Company(**r) for r in rows]


def company_names(conn, tickers: list[str]) -> dict[str, str]:
    rows = conn.execute("SELECT ticker, name FROM companies WHERE ticker = ANY(%s)", (tickers,)).fetchall()
    return {r["ticker"]: r["name"] for r in rows}


def find_tickers(text: str, companies: list[Company] | tuple[Company, ...]) -> list[str]:
    """Tickers mentioned in `text` by symbol ($ACME, ACME) or by name/alias, in order of appearance."""
    hits: list[tuple[int, str]] = []
    for c in companies:
        patterns = [rf"\$?\b{re.escape(c.ticker)}\b"]
        names = [c.name, *c.aliases]
        patterns += [rf"(?<!\w){re.escape(n)}(?:'s)?(?!\w)" for n in names if len(n) >= 3]
        for i, pattern in enumerate(patterns):
            flags = 0 if i == 0 else re.IGNORECASE  # bare symbols must be upper case ("ON", "ALL")
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
    known = {c.ticker for c in companies}
    found = re.findall(r"(?<![\w$])\$?([A-Z]{2,5})(?:'s)?(?![\w&])", text)
    return list(dict.fromkeys(t for t in found if t not in known and t not in _NOT_TICKERS))
