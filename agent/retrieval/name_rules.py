"""How a company's name is compared and abbreviated, by general rules: the registry (companies.py) and the SEC
symbol lookup (exchange_symbols.py) both match names through these."""
from __future__ import annotations

import re

_SUFFIX = re.compile(r"(?:,?\s+(?:inc|incorporated|corp|corporation|co|company|companies|plc|ltd|limited|holdings|group|llc|lp))+\.?$",
                     re.IGNORECASE)


def base_name(name: str) -> str:
    """The name without its legal form: 'Acme Widgets, Inc.' -> 'Acme Widgets'."""
    return _SUFFIX.sub("", " ".join(name.split())).strip(" ,.")


def derived_aliases(name: str) -> list[str]:
    """Ways a question names a company, derived from its registered name by general rules: without the legal
    form ('Acme Corporation' -> 'Acme'), hyphens as spaces ('Acme-Cola' -> 'Acme Cola'), a leading acronym of a
    longer name ('ACME Resorts' -> 'ACME') and the initials of a two-name firm ('Smith & Jones' -> 'S&J', 'SnJ')."""
    base = base_name(name)
    out = [base]
    if "-" in base:
        out.append(base.replace("-", " "))
    words = base.split()
    if len(words) > 1 and re.fullmatch(r"[A-Z]{2,}", words[0]):
        out.append(words[0])
    pair = re.fullmatch(r"([A-Za-z])\w*\s*&\s*([A-Za-z])\w*", base)
    if pair:
        out += [f"{pair[1]}&{pair[2]}".upper(), f"{pair[1].upper()}n{pair[2].upper()}"]
    return [a for a in dict.fromkeys(out) if a and a != name]


def normalised_name(name: str) -> str:
    """A company name without legal form, case or punctuation: 'Acme-Cola Co.' -> 'acme cola'."""
    return re.sub(r"[^a-z0-9]+", " ", base_name(name).lower().replace("&", " and ")).strip()
