"""The exchange ticker symbol of a company the registry knows by name alone (a filing corpus that names companies but
gives no ticker), from the SEC's company ticker list that edgartools ships with its package: offline, no download.

A question often names a company by its symbol ("JPM", "MMM"); the registry then knows it under its name. A name
maps to a symbol when exactly one SEC registrant has that name, or, failing that, exactly one has a name that starts
with it ("Verizon" -> "Verizon Communications"). An ambiguous or unknown name gets none."""
from __future__ import annotations

import functools
import logging
import re
from collections import defaultdict

from agent.retrieval.name_rules import normalised_name

log = logging.getLogger(__name__)


@functools.cache
def _registrants() -> dict[str, dict[str, list[str]]]:
    """normalised name -> {cik: [symbols]}"""
    try:
        from edgar.reference.tickers import load_company_tickers_from_package

        table = load_company_tickers_from_package()
    except Exception as exc:  # edgartools missing or its data unreadable: the registry simply gets no symbols
        log.warning("no SEC ticker list: %s", exc)
        return {}
    if table is None:
        return {}
    out: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for cik, ticker, name in zip(table["cik"], table["ticker"], table["company"]):
        if isinstance(ticker, str) and isinstance(name, str) and ticker.isascii():
            out[normalised_name(name)][str(cik)].append(ticker.upper())
    return {k: dict(v) for k, v in out.items()}


def exchange_symbols(name: str) -> list[str]:
    want = normalised_name(name)
    if not want:
        return []
    table = _registrants()
    found = table.get(want)
    if found is None:
        starts = [v for k, v in table.items() if k.startswith(want + " ")]
        ciks = {cik for v in starts for cik in v}
        if len(ciks) != 1:
            return []
        found = starts[0]
    if len(found) != 1:
        return []
    # the SEC lists a registrant's common stock first; preferred shares ("JPM-PC") and notes come after
    plain = [t for t in next(iter(found.values())) if re.fullmatch(r"[A-Z]{1,5}", t)]
    return plain[:1]
