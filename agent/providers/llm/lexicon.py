"""Rules the extractive provider plans and evaluates with: finance vocabulary, question concepts,
keyword-phrase expansions, answer-mode and data-source routing."""
from __future__ import annotations

import re

from agent.models.research import DataSource
from agent.settings import AnswerMode
from agent.text import stem

# concept -> (words that signal it in a question, words that show an answer addresses it, search phrase)
CONCEPTS: dict[str, tuple[set[str], set[str], str]] = {
    "revenue": ({"revenue", "revenues", "sales", "topline"}, {"revenue", "sales", "billion", "million"}, "revenue growth quarterly results"),
    "drivers": ({"drove", "drive", "drives", "driving", "driver", "drivers", "why", "reason", "reasons", "behind", "cause"},
                {"driven", "drove", "driver", "drivers", "demand", "due", "led", "reflect", "reflecting", "because", "growth", "strength"},
                "growth drivers demand strength"),
    "margin": ({"margin", "margins", "profitability"}, {"margin", "margins"}, "gross margin operating margin profitability"),
    "guidance": ({"guidance", "outlook", "forecast", "expect", "expects", "expectations", "next"},
                 {"guidance", "outlook", "expect", "expects", "anticipate", "forecast"}, "guidance outlook next quarter expectations"),
    "capex": ({"capex", "capital", "expenditure", "expenditures", "investment", "investments"},
              {"capex", "capital", "expenditures", "investment", "investing"}, "capital expenditures capex investment plans"),
    "cloud": ({"cloud", "subscription", "subscriptions", "saas", "hosting"}, {"cloud", "subscription", "subscriptions"},
              "cloud subscription revenue growth"),
    "growth": ({"grown", "grow", "growth", "grew", "trend", "trends", "change", "changed"},
               {"growth", "grew", "increase", "increased", "up", "year-over-year", "sequential", "sequentially", "decline", "declined"},
               "year over year growth sequential change"),
    "earnings": ({"eps", "earnings", "profit", "income"}, {"earnings", "income", "per share", "eps", "profit"}, "earnings per share net income"),
    "capital_return": ({"dividend", "dividends", "buyback", "buybacks", "repurchase", "repurchases"},
                       {"dividend", "repurchase", "buyback", "returned"}, "dividend share repurchase capital return"),
    "credit": ({"loan", "loans", "deposit", "deposits", "credit", "charge-offs", "nim", "interest"},
               {"loan", "loans", "deposit", "deposits", "credit", "interest", "margin"}, "loan growth deposits net interest margin credit quality"),
    "costs": ({"expense", "expenses", "cost", "costs", "opex"}, {"expense", "expenses", "cost", "costs"}, "operating expenses cost efficiency"),
    "risk": ({"risk", "risks", "threat", "threats"}, {"risk", "risks", "uncertain", "uncertainty"}, "risk factors uncertainty"),
    "segments": ({"segment", "segments", "product", "products", "split", "mix", "breakdown"},
                 {"segment", "segments", "product", "products", "services", "division", "divisions", "category", "categories"},
                 "segment revenue breakdown product mix"),
    "inventory": ({"inventory", "inventories", "turnover"}, {"inventory", "inventories", "turnover"}, "inventory cost of sales"),
}

FINANCE_TERMS = {stem(w) for signals, _, _ in CONCEPTS.values() for w in signals} | {
    stem(w) for w in """company companies business quarter quarterly annual results report filing 10-k call earnings
    stock shares guidance strategy market customers growth performance financial financials ceo cfo management
    segment balance sheet cash flow debt acquisition operating""".split()
}


def _stems(words: set[str]) -> set[str]:
    return {stem(w) for w in words}


def concept_groups(question: str) -> list[set[str]]:
    """For each concept the question asks about, the stemmed words that show an answer covers it."""
    words = {stem(w) for w in re.findall(r"[a-z][a-z\-]+", question.lower())}
    return [_stems(evidence) for signals, evidence, _ in CONCEPTS.values() if _stems(signals) & words]


def expand_queries(topic_words: list[str], question: str) -> list[str]:
    """Declarative keyword phrases (not questions) for the initial search."""
    words = {stem(w) for w in re.findall(r"[a-z][a-z\-]+", question.lower())} | {stem(w) for w in topic_words}
    phrases = [phrase for signals, _, phrase in CONCEPTS.values() if _stems(signals) & words]
    core = " ".join(dict.fromkeys(topic_words))[:80]
    # the raw topic adds little once two concept phrases cover the question, and costs a search per quarter
    out = phrases if len(phrases) >= 2 else ([core] if core else []) + phrases
    return list(dict.fromkeys(out))[:4] or ["financial results quarter highlights"]


def pick_mode(question: str, n_tickers: int, refs: list[str]) -> AnswerMode:
    """direct for single lookups, detailed for comparisons/trends/multi-part, standard otherwise."""
    multi_part = question.count(" and ") + question.count("?") > 2
    if n_tickers > 1 or re.search(r"\bcompar|\btrend|\banaly[sz]|\bover the (last|past)|\bexplain\b.*\band\b", question) or multi_part:
        return AnswerMode.detailed
    if re.search(r"^(what|how much|when)\b.*\b(was|were|is)\b", question) and " and " not in question and len(question) < 90:
        return AnswerMode.direct
    return AnswerMode.standard


def route_sources(question: str) -> list[DataSource]:
    q = question.lower()
    sources: list[DataSource] = []
    tenk = re.search(r"10-?k|annual report|risk factor|balance sheet|inventory turnover|fiscal (year )?20\d\d|\bfy ?20\d\d|"
                     r"total net sales|cash flow statement|md&a|item \d", q)
    call = re.search(r"call|quarter|management said|commentary|guidance|last \w+ quarters|q[1-4]", q)
    if call or not tenk:
        sources.append("earnings_transcripts")
    if tenk:
        sources.append("10k")
    if re.search(r"\bnews\b|latest developments|recent(ly)? (announce|develop)|this week|today|headline", q):
        sources.append("news")
    return sources
