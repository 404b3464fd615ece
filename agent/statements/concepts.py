"""The concept vocabulary: which normalised concept (a key of models.CONCEPTS) a statement's line item stands for.

Labels are matched on their letters alone, lower case, because PDF text extraction splits words ("attributab le",
"Total current asse ts") and punctuation varies ("Selling, general, and administrative"). Every rule is general US
GAAP caption vocabulary, never one filer's wording. A label that is none of them maps to None: it is stored all the
same, and a question's own definition may name it.

The statement matters: "Inventories" on a balance sheet is the balance; on a cash flow statement it is the change in
working capital (None). The section matters for a bare "Total" (under "Current assets" it is total current assets).
"""
from __future__ import annotations

import re

from agent.statements.models import Statement

_NOTE_REF = re.compile(r"\((?:see\s+)?notes?\b[^)]*\)?", re.I)  # "(Note 6)", "(See Notes 4 and 5)"
_FOOTNOTE = re.compile(r"\((?:[a-z]|\d|[ivx]{1,4})\)|\*+", re.I)  # "(a)", "(1)", "(iii)", "*"

ALL: tuple[Statement, ...] = ("income", "balance", "cash_flow")
FLOWS: tuple[Statement, ...] = ("income", "cash_flow")

_PPE = r"(?:property|premises)(?:plant)?(?:and)?equipment"
_CASH_FLOW_TOTAL = r"(?:total|net)?cash(?:flows?)?(?:provided|generated|used|received)?(?:by|from|in|for)?" \
                   r"(?:(?:used|provided)(?:in|by|for))?(?:provided)?"

# (concept, the statements it is read on, the pattern the label's letters must match whole); first match wins
_RULES: list[tuple[str, tuple[Statement, ...], str]] = [
    # income statement
    ("revenue", ("income",), r"(?:total)?(?:net)?(?:operating)?(?:revenues?|sales)(?:net)?|(?:total)?netsalesandrevenues?"
                             r"|(?:total)?salesandoperatingrevenues?|(?:total)?revenuesandsales"),
    ("cost_of_revenue", ("income",), r"(?:total)?costs?of(?:goods|products|goodsandservices|productsandservices)?"
                                     r"(?:sold|sales|revenues?)(?:net)?"),
    ("gross_profit", ("income",), r"(?:total)?gross(?:profit|margin)(?:loss)?"),
    ("sga", ("income",), r"(?:total)?sellinggeneraland?administrative(?:expenses?|costs?)?(?:net)?"),
    ("research_development", ("income",), r"(?:total)?researchanddevelopment(?:expenses?|costs?)?(?:net)?"),
    ("operating_expenses", ("income",), r"total(?:operating)?(?:costsand)?(?:operating)?expenses(?:net)?"
                                        r"|totaloperatingcostsandexpenses"),
    ("operating_income", ("income",), r"(?:total)?operating(?:income|profit|earnings)(?:loss)?|operatingloss(?:income)?"
                                      r"|(?:income|earnings|profit)(?:loss)?fromoperations|lossfromoperations"),
    ("interest_expense", ("income",), r"(?:total)?interestexpenses?(?:net)?|interestanddebtexpense"),
    ("pretax_income", ("income",), r"(?:income|earnings|profit)(?:loss)?(?:fromcontinuingoperations)?before"
                                   r"(?:provisionfor|benefitfrom|\w{0,20}?)?(?:income)?taxes|pretax(?:income|earnings)"),
    ("income_tax_expense", ("income",), r"(?:provision|benefit)(?:for|from)?(?:(?:benefit|provision)(?:for|from))?"
                                        r"incometax(?:es)?(?:expense)?|incometax(?:es)?(?:expense|provision)?(?:benefit)?"),
    # balance sheet
    ("cash", ("balance",), r"cash(?:and(?:cash)?equivalents)?|cashandcashequivalentsandrestrictedcash"),
    ("short_term_investments", ("balance",), r"shortterm(?:investments|marketablesecurities)|marketablesecurities(?:current)?"),
    ("receivables", ("balance",), r"(?:trade)?(?:accounts|notesandaccounts|accountsandnotes)?receivables?(?:trade)?"
                                  r"(?:net)?(?:(?:of|less)(?:the)?allowances?.*)?"),
    ("inventory", ("balance",), r"(?:merchandise)?inventor(?:y|ies)(?:net)?"),
    ("prepaid_other_current", ("balance",), r"prepaid(?:expenses?)?andother(?:current)?assets?"),
    ("current_assets", ("balance",), r"totalcurrentassets"),
    ("ppe_net", ("balance",), rf"net{_PPE}|{_PPE}net.*"),
    ("goodwill", ("balance",), r"goodwill(?:net)?"),
    ("intangibles", ("balance",), r"(?:other)?intangible(?:assets?)?(?:net)?(?:ofaccumulatedamortization.*)?|intangiblesnet"),
    ("total_assets", ("balance",), r"totalassets"),
    ("payables", ("balance",), r"(?:trade)?(?:accounts)?payables?(?:trade)?"),
    ("short_term_debt", ("balance",), r"shortterm(?:debt|borrowings)(?:and(?:the)?current(?:portion|maturities)oflongtermdebt)?"
                                      r"|current(?:portion|maturities)of(?:longtermdebt|longtermborrowings)"
                                      r"(?:andshortterm(?:debt|borrowings))?"),
    ("current_liabilities", ("balance",), r"totalcurrentliabilities"),
    ("long_term_debt", ("balance",), r"longterm(?:debt|borrowings)(?:net)?(?:(?:netof|less|excluding)current(?:portion|maturities))?"
                                     r"(?:noncurrent)?"),
    ("total_liabilities", ("balance",), r"totalliabilities"),
    ("liabilities_and_equity", ("balance",), r"totalliabilitiesand.*(?:equity|deficit|capital)"),
    ("total_equity", ("balance",), r"total(?:equity|deficit)"),
    ("shareholders_equity", ("balance",), r"total(?!liabilities).*(?:stockholders|shareholders|shareowners)(?:equity|deficit)"
                                          r"(?:attributableto.*)?"),
    # cash flow statement (net income and D&A are read on either flow statement: the store keeps which)
    ("depreciation_amortization", FLOWS, r"depreciation(?:depletion)?andamortization(?:expense)?"
                                         r"(?:of(?:property|plant|equipment|fixedassets|intangibles?|intangibleassets|and)+)?"
                                         r"|depreciationamortizationanddepletion"),
    ("stock_compensation", ALL, r"(?:stock|share|equity)based(?:employee)?compensation(?:expense)?|stockcompensation(?:expense)?"),
    ("operating_cash_flow", ("cash_flow",), rf"{_CASH_FLOW_TOTAL}(?:operatingactivities|operations)"),
    ("investing_cash_flow", ("cash_flow",), rf"{_CASH_FLOW_TOTAL}investingactivities"),
    ("financing_cash_flow", ("cash_flow",), rf"{_CASH_FLOW_TOTAL}financingactivities"),
    ("capex", ("cash_flow",), rf"(?:purchases?|acquisitions?|additions?|payments?|expenditures?|investments?)(?:of|to|for|in)"
                              rf"(?:{_PPE}|fixedassets|capitalassets).*|capitalexpenditures?.*|capitalspending"),
    ("dividends_paid", ("cash_flow",), r"(?:cash)?dividends?(?:paid|declaredandpaid).*|paymentsof(?:cash)?dividends?.*"
                                       r"|dividendpayments.*"),
    ("share_repurchases", ("cash_flow",), r"(?:repurchases?|purchases?|buybacks?)of(?:class[a-z])?(?:common|treasury|ordinary|capital)?"
                                          r"(?:stock|shares).*|(?:share|stock)(?:repurchases?|buybacks?).*"
                                          r"|paymentsfor(?:re)?purchasesof(?:common)?(?:stock|shares).*|commonstockrepurchased"),
]
_COMPILED = [(concept, kinds, re.compile(pattern)) for concept, kinds, pattern in _RULES]
_NOT_OURS = re.compile(r"noncontrolling|minority|redeemable|preferred|proceeds")  # another party's share, or inflows

_NET_INCOME = re.compile(r"(?:consolidated)?net(?:income|earnings|profit|loss)(?:loss|income)?(?:includingnoncontrollinginterests?)?")
_ATTRIBUTABLE = re.compile(r"net(?:income|earnings|profit)(?:loss)?attributableto.+")
_PER_SHARE = re.compile(r"pershare|persharedata|earningspershare|epsbasic|epsdiluted|perbasicshare|perdilutedshare")
_SHARE_COUNT = re.compile(r"weighted|averageshares|average(?:number)?of?(?:common|ordinary)?shares|sharesoutstanding"
                          r"|numberofshares|sharesused")

_TOTAL = re.compile(r"total.*|gross(?:profit|margin).*|operating(?:income|profit|loss).*|(?:income|earnings)(?:loss)?fromoperations"
                    r"|(?:consolidated)?net(?:income|earnings|loss|profit).*|(?:income|earnings|profit)(?:loss)?"
                    r"(?:fromcontinuingoperations)?before.*tax.*|netcash.*|net(?:increase|decrease)+(?:decrease|increase)?incash.*")


def clean_label(label: str) -> str:
    """The label as printed without its footnote markers ("Revenues(1)", "Net sales (a)", "Other *")."""
    return " ".join(_FOOTNOTE.sub(" ", label).split()).strip(" :")


def letters(text: str) -> str:
    """Lower-case letters only: what the rules match, whatever the extraction did to spaces and punctuation."""
    return re.sub(r"[^a-z]", "", _NOTE_REF.sub(" ", clean_label(text)).lower())


def is_per_share(label: str, section: str = "") -> bool:
    """A per-share figure: the label says per share, or it is a Basic/Diluted line under a per-share heading."""
    key, head = letters(label), letters(section)
    if _SHARE_COUNT.search(key):
        return False
    return bool(_PER_SHARE.search(key)) or (bool(_PER_SHARE.search(head)) and not _SHARE_COUNT.search(head))


def is_share_count(label: str, section: str = "") -> bool:
    """A share count: weighted-average shares, or a Basic/Diluted line under a share-count heading."""
    key, head = letters(label), letters(section)
    if _SHARE_COUNT.search(key):
        return True
    return not _PER_SHARE.search(key) and bool(_SHARE_COUNT.search(head)) and bool(re.fullmatch(r"(basic|diluted).*", key))


def _basic_or_diluted(key: str, head: str) -> str | None:
    for text in (key, head):
        if "diluted" in text and "basic" not in text:
            return "diluted"
        if "basic" in text:
            return "basic"
    return None


def concept_of(label: str, statement: Statement, section: str = "") -> str | None:
    """The concept (a key of models.CONCEPTS) a line item stands for on this statement, or None."""
    key, head = letters(label), letters(section)
    if not key:
        return None
    if statement == "income" and is_share_count(label, section):
        kind = _basic_or_diluted(key, head)
        return f"shares_{kind}" if kind else None
    if statement == "income" and is_per_share(label, section):
        kind = _basic_or_diluted(key, head)
        return f"eps_{kind}" if kind else None
    if key == "total" and statement == "balance":
        return "current_assets" if "currentassets" in head else "current_liabilities" if "currentliabilities" in head else None
    if key == "total" and statement == "income" and re.search(r"operating(?:costsand)?expenses|costsandexpenses", head):
        return "operating_expenses"
    if statement in FLOWS and _ATTRIBUTABLE.fullmatch(key):
        return None if _NOT_OURS.search(key) else "net_income_attributable"
    if statement in FLOWS and _NET_INCOME.fullmatch(key):
        return "net_income"
    for concept, kinds, pattern in _COMPILED:
        if statement in kinds and pattern.fullmatch(key):
            if concept in ("dividends_paid", "share_repurchases", "shareholders_equity") and _NOT_OURS.search(key):
                return None
            return concept
    return None


def is_total_label(label: str) -> bool:
    """A subtotal or total: "Total ...", gross profit, operating income, net income, pretax income, net cash flows."""
    key = letters(label)
    return bool(key) and not _PER_SHARE.search(key) and bool(_TOTAL.fullmatch(key))
