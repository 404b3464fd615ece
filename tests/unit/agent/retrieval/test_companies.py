"""find_tickers: symbols, names, aliases and possessives; no false hits on ordinary words."""
from __future__ import annotations

import pytest

from agent.models.corpus import Company
from agent.retrieval.companies import find_tickers, known_companies

WORD_TICKERS = [
    Company(ticker="ON", name="ON Semiconductor Corporation", aliases=["onsemi"]),
    Company(ticker="ALL", name="Allstate Corporation", aliases=["Allstate"]),
    Company(ticker="NOW", name="ServiceNow, Inc.", aliases=["ServiceNow"]),
]


@pytest.fixture(scope="module")
def companies():
    return known_companies()


@pytest.mark.parametrize(
    "text,tickers",
    [
        ("What did $AAPL guide for services?", ["AAPL"]),
        ("How is Apple doing in China?", ["AAPL"]),
        ("Microsoft's Azure growth", ["MSFT"]),
        ("microsoft cloud", ["MSFT"]),  # names are case-insensitive
        ("AAPL vs MSFT margins", ["AAPL", "MSFT"]),
        ("Compare Microsoft and Apple", ["MSFT", "AAPL"]),  # order of appearance
        ("Synovus net interest margin", ["SNV"]),
        ("Darden's same-restaurant sales", ["DRI"]),
        ("What about Google and Alphabet?", ["GOOGL"]),  # two aliases, one ticker
        ("Cullen/Frost deposits", ["CFR"]),
        ("Tell me about deposits", []),
    ],
)
def test_find_tickers(companies, text, tickers):
    assert find_tickers(text, companies) == tickers


def test_lowercase_words_are_not_symbols():
    assert find_tickers("turn on all the lights now", WORD_TICKERS) == []
    assert find_tickers("what is on the call for all of us", WORD_TICKERS) == []


def test_uppercase_symbols_that_are_words_are_found():
    assert find_tickers("What did ON and ALL report?", WORD_TICKERS) == ["ON", "ALL"]
    assert find_tickers("$NOW subscription revenue", WORD_TICKERS) == ["NOW"]
    assert find_tickers("allstate catastrophe losses", WORD_TICKERS) == ["ALL"]


def test_symbol_must_be_a_whole_word(companies):
    assert find_tickers("SNVX and XAAPL are not tickers here", companies) == []


def test_each_ticker_once(companies):
    assert find_tickers("Apple, AAPL and $AAPL again; Apple's margins", companies) == ["AAPL"]


def test_alias_ending_in_a_dot(companies):
    assert find_tickers("What did F.N.B. report on loans?", companies) == ["FNB"]


def test_unknown_ticker_like_symbols():
    from agent.models.corpus import Company
    from agent.retrieval.companies import unknown_tickers

    companies = [Company(ticker="NVDA", name="NVIDIA"), Company(ticker="AAPL", name="Apple")]
    assert unknown_tickers("What was ZZZQ's revenue last quarter?", companies) == ["ZZZQ"]
    assert unknown_tickers("Compare $QQQX and NVDA EPS in Q4 FY2024", companies) == ["QQQX"]
    assert unknown_tickers("How did NVDA's GAAP EBITDA and AI revenue grow?", companies) == []
    assert unknown_tickers("What is the best pizza topping?", companies) == []


@pytest.mark.parametrize("name, symbols", [
    ("Caterpillar Inc.", ["CAT"]),  # the SEC list that edgartools ships, offline
    ("Caterpillar", ["CAT"]),
    ("Deere & Company", ["DE"]),  # "&" and "and", legal form aside
    ("American", []),  # the start of many registrants' names: ambiguous, so none
    ("Zzyzx Widgets", []),
])
def test_a_company_known_by_name_gets_its_exchange_symbol(name, symbols):
    from agent.retrieval.exchange_symbols import exchange_symbols

    assert exchange_symbols(name) == symbols


def test_a_symbol_alias_is_matched_in_upper_case_only_and_is_not_unknown():
    from agent.retrieval.companies import unknown_tickers

    registry = [Company(ticker="CATERPILLAR", name="Caterpillar", aliases=["CAT"])]
    assert find_tickers("What did CAT report for machinery sales?", registry) == ["CATERPILLAR"]
    assert find_tickers("the cat sat on the mat", registry) == []
    assert unknown_tickers("What did CAT report?", registry) == []
