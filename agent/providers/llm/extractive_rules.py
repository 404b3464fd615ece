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
    return [evidence for _, evidence in concepts_asked(question)]


# concepts an answer can address in words alone; the others need a figure
NON_NUMERIC = {"drivers", "guidance", "risk", "segments"}


def concepts_asked(question: str) -> list[tuple[str, set[str]]]:
    """(concept, the stemmed words that show an answer covers it) for each concept the question asks about."""
    words = {stem(w) for w in re.findall(r"[a-z][a-z\-]+", question.lower())}
    return [(name, _stems(evidence)) for name, (signals, evidence, _) in CONCEPTS.items() if _stems(signals) & words]


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


# ---------- tense and period: what a figure is about ----------
# a sentence about the future: a forecast, an outlook, a plan
FORWARD_LOOKING = re.compile(
    r"\b(?:expect|expects|expected(?! credit loss)|expecting|anticipate[sd]?|anticipating|guidance|guide|guiding|outlook|"
    r"forecast(?:s|ed|ing)?|projected|projecting|projection|will|should(?! note| mention| point| add)|going forward|"
    r"next quarter|next year|"
    r"coming quarters?|we see|targeting|plan to|planning to|likely to|intend to)\b",
    re.I,
)
# a result measured against an earlier expectation ("above our outlook") is still a result
BACKWARD_REFERENCE = re.compile(
    r"\b(?:above|below|ahead of|better than|worse than|in line with|exceed(?:ed|ing)?|beat|than|versus|vs\.?|compared to|"
    r"consistent with|within|(?:top|high|low|upper|lower) end of)\s+(?:the\s+|our\s+|prior\s+|previous\s+|previously\s+"
    r"provided\s+|original\s+|initial\s+|consensus\s+|street\s+)*(?:(?:outlook|guidance|consensus)(?:\s+estimates?)?|"
    r"expectations?|expected|forecast|estimates?|anticipated|we (?:had )?(?:expected|anticipated|guided|forecast))\b",
    re.I,
)
# a question about the future, not about a reported result
OUTLOOK_QUESTION = re.compile(r"\b(?:guidance|guide|outlook|forecast|expect\w*|anticipat\w*|project\w*|next quarter|next year|"
                              r"will|going forward|plans?|targets?)\b", re.I)
# the period a sentence names, when it is not the one its call reports on
PERIOD_TERMS = (
    r"full[- ]year|for the year|year[- ]to[- ]date|ytd|first half|second half|last year|prior year|previous year|"
    r"a year ago|year-ago|prior quarter|last quarter|previous quarter|linked quarter|first quarter|second quarter|"
    r"third quarter|fourth quarter|q[1-4]|(?:19|20)\d\d"
)
PERIOD_WORDS = re.compile(rf"\b(?:{PERIOD_TERMS})\b", re.I)
COMPARISON = re.compile(r"\b(?:compared|versus|vs\.?|than|up from|down from|from)\b", re.I)
QUARTER_NAMES = {1: "first quarter", 2: "second quarter", 3: "third quarter", 4: "fourth quarter"}
ANNUAL_QUESTION = re.compile(r"\b(?:full[- ]year|annual|fiscal year|for the year|fy ?\d{2,4}|10-?k)\b", re.I)
# words of a question that say what is asked about, not which metric: left out when matching the metric
NOT_METRIC = {stem(w) for w in """what was were how much did say said report reported give gave tell its their his her
    outlook guidance expect expected forecast provide provided company company's results result number figure amount
    level drove drive driven why reason reasons behind cause change changed trend trends grow grown growth""".split()}


def is_forward_looking(sentence: str) -> bool:
    """Speaks of the future, once references to an earlier expectation ("above our guidance") are set aside."""
    return bool(FORWARD_LOOKING.search(BACKWARD_REFERENCE.sub(" ", sentence)))


def asks_outlook(question: str) -> bool:
    return bool(OUTLOOK_QUESTION.search(question))


def other_period(sentence: str, fiscal_year: int, fiscal_quarter: int, periods: re.Pattern = PERIOD_WORDS) -> str | None:
    """The first period a sentence names that is not the given quarter (what follows "compared with" is left out:
    it names the period a result is compared to, not the one it is about). A bare year counts as the call's own only
    beside its quarter: alone it is the whole year. `periods`: what counts as naming a period."""
    stated = COMPARISON.split(sentence, maxsplit=1)[0]
    named = [m.group(0).lower() for m in periods.finditer(stated)]
    quarter = {QUARTER_NAMES.get(fiscal_quarter, ""), f"q{fiscal_quarter}"}
    own = quarter | ({str(fiscal_year)} if quarter & set(named) else set())
    return next((n for n in named if n not in own), None)
# abbreviations calls use for the metrics questions spell out (and the reverse)
ABBREVIATIONS = {
    "eps": "earnings per share", "nim": "net interest margin", "roe": "return on equity", "roa": "return on assets",
    "roaa": "return on average assets", "rotce": "return on tangible common equity", "capex": "capital expenditures",
    "opex": "operating expenses", "fcf": "free cash flow", "nii": "net interest income", "sg&a": "selling general administrative",
}
# names calls use for the same metric: an answer that says "earned $X" answers a question about net income
METRIC_SYNONYMS = {
    "net income": ["earnings", "earned", "net earnings", "profit"],
    "earnings": ["net income", "earned", "profit"],
    "revenue": ["sales", "revenues"],
    "sales": ["revenue", "revenues"],
    "expenses": ["costs"],
    "costs": ["expenses"],
}
