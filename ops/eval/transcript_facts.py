"""Numeric facts stated in earnings calls, for the transcript eval.

The procedure (reproducible: the same files and seed give the same list):
1. Parse each call with the product's own transcript parser; ticker and fiscal period come from the file name.
2. Keep management's prepared remarks only (no operator, no analysts' questions), split into sentences.
3. A candidate is a sentence where a metric phrase from general financial vocabulary (METRICS) is followed, within
   a few words and through a linking word ("was", "of", "to", "came in at", "expected to be"...), by a figure of the
   metric's unit (a dollar amount, a per-share amount or a percentage). Not taken: a figure reached through a change
   word ("up", "by", "increased"; but "increased 7% to $X" gives $X), a change, part or variant of the metric
   ("an increase in deposits of", "other operating income", "store-level margin", "120 loans totaling", "excluding
   ..."), a mention that follows "compared with" (the other period's figure), a sentence with another figure of
   the same unit not set apart as a comparison (a list), a sentence naming a segment or division, or one stating
   several metrics.
4. Reported facts must be about the call's own quarter: a sentence naming another period (the full year, a year
   ago, another quarter or year) before any "compared with" is left out. Guidance facts may name later periods, but
   not a figure dated to the call's year or earlier ("higher than our <year> rate of X%").
5. A sentence is guidance when it speaks of the future ("expect", "outlook", "guidance", "will be"...), once
   backward references ("above our outlook", "than we expected") are removed; otherwise it is reported.
6. Per call, metric and kind, the candidates must agree on the figure; a disagreeing group is ambiguous (which
   figure is "the" one?) and left out.
7. Sampling: per ticker, candidates are ordered by sha256(seed, fact id) and taken round-robin over the ticker's
   calls, at most one per (call, metric), until `per_ticker` are taken.
"""
from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from agent.ingest.transcripts import parse_transcript
from agent.providers.llm.extractive_rules import COMPARISON, PERIOD_TERMS, other_period
from agent.text import sentences

Unit = Literal["money", "per_share", "percent"]
Kind = Literal["reported", "guidance"]

# metric name (as asked in a question) -> (pattern of its mention, units its value comes in). Order matters: the
# first metric whose mention reaches a figure wins ("book value per share" before "earnings per share").
METRICS: list[tuple[str, str, tuple[Unit, ...]]] = [
    ("book value per share", r"(?:tangible )?book value per (?:common )?share", ("per_share",)),
    ("earnings per share", r"(?:(?:diluted|adjusted|operating|gaap|core) )*(?:earnings|eps|income) per (?:diluted |common )?share"
                           r"|(?:(?:diluted|adjusted|operating|gaap) )*eps", ("per_share",)),
    ("dividend per share", r"(?:quarterly )?dividends? per share", ("per_share",)),
    ("net interest margin", r"(?:core |reported |tax-equivalent )?net interest margin|\bnim\b", ("percent",)),
    ("net interest income", r"net interest income", ("money",)),
    ("gross margin", r"(?:adjusted )?gross (?:profit )?margin", ("percent",)),
    ("operating margin", r"(?:adjusted )?operating (?:profit |income )?margin", ("percent",)),
    ("ebitda margin", r"(?:adjusted )?ebitda margin", ("percent",)),
    ("ebitda", r"(?:adjusted )?ebitda", ("money",)),
    ("efficiency ratio", r"(?:adjusted )?efficiency ratio", ("percent",)),
    ("effective tax rate", r"(?:effective )?tax rate", ("percent",)),
    ("return on equity", r"return on (?:average )?(?:tangible )?(?:common )?(?:shareholders' |stockholders' )?equity|\brote?\b|\brotce\b",
     ("percent",)),
    ("return on assets", r"return on (?:average )?assets|\broaa?\b", ("percent",)),
    ("capital ratio", r"(?:cet ?1|common equity tier 1|tier 1|total risk-based)(?: capital)?(?: ratio)?", ("percent",)),
    ("net charge-offs", r"net charge-?offs?", ("percent", "money")),
    ("provision for credit losses", r"provision (?:expense )?for (?:credit|loan) losses|provision expense", ("money",)),
    ("net income", r"net (?:income|earnings)(?! per)(?: available to common(?: shareholders)?)?", ("money",)),
    ("operating income", r"(?:adjusted )?operating (?:income|earnings)(?! per)", ("money",)),
    ("revenue", r"(?:total |net |operating |consolidated )?revenues?|(?:total |net )sales", ("money",)),
    ("operating expenses", r"(?:total |adjusted |core )?(?:noninterest|non-interest|operating) expenses?", ("money",)),
    ("deposits", r"(?:total |average |core )?deposits", ("money",)),
    ("loans", r"(?:total |average )?loans", ("money",)),
    ("free cash flow", r"free cash flow", ("money",)),
    ("operating cash flow", r"(?:operating cash flow|cash flows? from operations|cash from operations|cash flow from operating activities)",
     ("money",)),
    ("capital expenditures", r"capital expenditures|capex", ("money",)),
    ("share repurchases", r"(?:share |stock )?repurchases?|buybacks?", ("money",)),
    ("backlog", r"backlog", ("money",)),
    ("occupancy", r"occupancy(?: rate)?", ("percent",)),
    ("comparable sales", r"(?:same-store|same store|comparable|comp) sales", ("percent",)),
]

FIGURE = re.compile(
    r"\$\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:million|billion|thousand|trillion)\b)?"
    r"|\d[\d,]*(?:\.\d+)?\s?(?:%|percent\b)",
    re.I,
)
# what may stand between a metric and its value: a few words ending in a linking word
_LINK = re.compile(
    r"^[\s,]*(?:[\w'\-]+[\s,]+){0,3}?(?:was|were|is|are|of|at|to|totaled|totaling|reached|came in at|amounted to|be|"
    r"approximately|about|roughly|around|just under|just over|nearly|almost)[\s,]*$",
    re.I,
)
# a figure reached through these is a change or a comparison, not the metric's value
_CHANGE = re.compile(r"\b(?:up|down|by|increase[ds]?|decrease[ds]?|grew|grow|rose|fell|declined?|improved?|expanded|"
                     r"contracted|higher|lower|compared|versus|from|growth|change|loss|negative)\b", re.I)
# what may follow a metric's value: a change word makes the figure a change, a second figure makes it one of a list
_AFTER = re.compile(r"^[\s,]*(?:(?:and|or|to)\s+\$?\d|decline|decrease|increase|reduction|growth|improvement|higher|lower|respectively)",
                    re.I)
# "increased 7% to $5.10": the figure after "to" is the metric's new level
_TO_LEVEL = re.compile(r"[\s,]*(?:[\w'\-]+[\s,]+){0,3}?(?:increased|rose|grew|decreased|declined|fell|improved|was up|was down|up|down)\s+"
                       r"(?:by\s+)?\$?\d[\d,]*(?:\.\d+)?\s?(?:%|percent|million|billion)?\s+to\s+", re.I)
# a change in the metric ("an increase in deposits of $X"), a part of it ("other operating income", "problem loans"),
# a level below the company ("store-level margin"), a count ("120 loans totaling $X") or a variant that leaves
# something out ("excluding ...") is not the metric's value
_BEFORE = re.compile(r"\b(?:(?:increases?|decreases?|growth|declines?|reductions?|changes?)(?:\s+[\w\-]+){0,3}|other|problem|"
                     r"nonaccrual|non-accrual|nonperforming|non-performing|criticized|classified|modified|deferred|noninterest|"
                     r"non-interest|excluding|ex|\w+[\s-]level|(?<![$\d.,])\d[\d,]*)\s*$", re.I)
_EXCLUDING = re.compile(r"\b(?:excluding|normali[sz]ed for|net of)\b", re.I)
_YEAR = re.compile(r"\b((?:19|20)\d\d)\b")
# a business segment's figure is not the company's
SEGMENT = re.compile(r"\b(?:segments?|divisions?|business units?|reportable)\b", re.I)
_FORWARD = re.compile(
    r"\b(?:expect|expects|expected(?! credit loss)|expecting|expectation|anticipate[sd]?|anticipating|guidance|guide|guiding|outlook|"
    r"forecast(?:s|ed|ing)?|project(?:s|ed|ing|ion|ions)|will|should be|going forward|next quarter|next year|"
    r"coming quarters?|we see|targeting|we target|we estimate|plan to|planning to|likely to|intend to)\b",
    re.I,
)
# references to an earlier expectation in a sentence that reports the result
_BACKWARD = re.compile(
    r"\b(?:above|below|ahead of|better than|worse than|in line with|exceed(?:ed|ing)?|beat|than|versus|vs\.?|compared to|"
    r"consistent with|within|(?:top|high|low|upper|lower) end of)\s+(?:the\s+|our\s+|prior\s+|previous\s+|previously\s+"
    r"provided\s+|original\s+|initial\s+|consensus\s+|street\s+|analysts'?\s+)*"
    r"(?:(?:outlook|guidance|consensus)(?:\s+estimates?)?|expectations?|expected|forecast|estimates?|anticipated|"
    r"we (?:had )?(?:expected|anticipated|guided|forecast))\b",
    re.I,
)
# the answerer's period words, and the whole-year ones a fact must not be taken from either
_OTHER_PERIOD = re.compile(rf"\b(?:this year|annual(?:ly|ized)?|{PERIOD_TERMS})\b", re.I)
_BOILERPLATE = re.compile(r"forward-looking|safe harbor|webcast|replay|non-gaap (?:financial )?measures|reconciliation", re.I)


class Fact(BaseModel):
    """One figure a call states for a metric, and where."""

    id: str  # '{TICKER}_{YYYY}_q{N}:{turn}:{sentence}'
    ticker: str
    fiscal_year: int
    fiscal_quarter: int
    speaker: str
    sentence: str
    figure: str  # as written: '$1.2 billion', '3.45%', '$0.87'
    metric: str  # a METRICS name
    kind: Kind

    @property
    def period_label(self) -> str:
        return f"Q{self.fiscal_quarter} {self.fiscal_year}"

    @property
    def question(self) -> str:
        """The question asked about this fact: built from its metric and period, never from its sentence."""
        if self.kind == "guidance":
            return f"What {self.metric} outlook did {self.ticker} give in Q{self.fiscal_quarter} {self.fiscal_year}?"
        return f"What was {self.ticker}'s {self.metric} in Q{self.fiscal_quarter} {self.fiscal_year}?"


class Extraction(BaseModel):
    facts: list[Fact]
    candidates: int  # candidate sentences before the ambiguity rule and sampling
    ambiguous_groups: int  # (call, metric, kind) groups left out because their figures disagree
    calls: int


def figure_unit(figure: str) -> Unit | None:
    f = figure.lower()
    if "%" in f or "percent" in f:
        return "percent"
    if not f.startswith("$"):
        return None
    if re.search(r"million|billion|thousand|trillion", f):
        return "money"
    value = float(re.sub(r"[^\d.]", "", f) or 0)
    if "." in f and value < 100:
        return "per_share"
    return "money" if value >= 1000 else None  # a bare "$25" is neither a per-share amount nor a scaled total


def normalise_figure(figure: str) -> str:
    """'$1,234.50 million' -> '1234.5 million'; '3.2 percent' -> '3.2%' (the value and its scale, for comparison)."""
    f = figure.lower()
    digits = re.sub(r"[^\d.]", "", f).rstrip(".")
    if "." in digits:
        digits = digits.rstrip("0").rstrip(".")
    digits = digits.lstrip("0") or "0"
    if digits.startswith("."):
        digits = "0" + digits
    scale = next((s for s in ("trillion", "billion", "million", "thousand") if s in f), "")
    if "%" in f or "percent" in f:
        return digits + "%"
    return f"{digits} {scale}".strip()


def is_guidance(sentence: str) -> bool:
    """Speaks of the future, once references to an earlier outlook ("above our guidance") are set aside."""
    return bool(_FORWARD.search(_BACKWARD.sub(" ", sentence)))


def names_other_period(sentence: str, fiscal_year: int, fiscal_quarter: int) -> bool:
    """Whether the sentence names a period other than the call's own quarter."""
    return other_period(sentence, fiscal_year, fiscal_quarter, _OTHER_PERIOD) is not None


def facts_in_sentence(sentence: str) -> list[tuple[str, str]]:
    """(metric, figure) pairs a sentence states: the metric's mention, a short linking phrase, then its value."""
    lowered = sentence.lower()
    out: list[tuple[str, str]] = []
    taken: list[tuple[int, int]] = []
    for name, pattern, units in METRICS:
        for m in re.finditer(rf"\b(?:{pattern})\b", lowered):
            if any(a <= m.start() < b for a, b in taken):
                continue  # inside a longer metric already read ("net interest margin" is not "net interest income")
            before = sentence[max(0, m.start() - 40):m.start()]
            if _BEFORE.search(before) or _EXCLUDING.search(sentence[:m.start()]) or COMPARISON.search(sentence[:m.start()]):
                continue  # a change, a part, a variant; or, after "compared with", the other period's figure
            to_level = _TO_LEVEL.match(sentence, m.end())
            fig = FIGURE.match(sentence, to_level.end()) if to_level else FIGURE.search(sentence, m.end())
            if fig is None:
                continue
            bridge = sentence[m.end():fig.start()]
            if not to_level and (len(bridge) > 60 or not _LINK.match(bridge) or _CHANGE.search(bridge) or _EXCLUDING.search(bridge)):
                continue
            if _AFTER.match(sentence[fig.end():]):
                continue
            figure = fig.group(0).strip()
            unit = figure_unit(figure)
            if unit not in units or _another_value(sentence, fig.end(), unit):
                continue
            taken.append((m.start(), fig.end()))
            out.append((name, figure))
            break
    return out


_COMPARED = re.compile(r"\b(?:compared|from|versus|vs|than|prior|last|ago|previous|up|down|by|higher|lower|increase[ds]?|decrease[ds]?|or|"
                       r"reflect\w*)\b", re.I)


def _another_value(sentence: str, after: int, unit: Unit) -> bool:
    """A later figure of the same unit not set apart as a comparison ("... 11% for A and 12% for B"): then
    which figure is the metric's is unclear."""
    for f in FIGURE.finditer(sentence, after):
        if figure_unit(f.group(0)) == unit and not _COMPARED.search(sentence[after:f.start()]):
            return True
    return False


def _past_year_figure(sentence: str, figure: str, fiscal_year: int) -> bool:
    """The figure is dated, just before it, to the call's year or an earlier one ("our <year> tax rate of X%")."""
    at = sentence.find(figure)
    return any(int(y) <= fiscal_year for y in _YEAR.findall(sentence[max(0, at - 40):at]))


def _candidates(path: Path) -> list[Fact]:
    doc = parse_transcript(path)
    stem = f"{doc.ticker}_{doc.fiscal_year}_q{doc.fiscal_quarter}"
    found: list[Fact] = []
    for t, turn in enumerate(doc.turns):
        if turn.section != "prepared_remarks" or turn.speaker.strip().lower().startswith("operator"):
            continue
        for s, sent in enumerate(sentences(turn.text)):
            if sent.endswith("?") or _BOILERPLATE.search(sent) or SEGMENT.search(sent) or not 6 <= len(sent.split()) <= 60:
                continue
            pairs = facts_in_sentence(sent)
            if len(pairs) != 1:
                continue  # several metrics in one sentence: which one a question is about is unclear
            metric, figure = pairs[0]
            kind: Kind = "guidance" if is_guidance(sent) else "reported"
            if kind == "reported" and names_other_period(sent, doc.fiscal_year, doc.fiscal_quarter):
                continue
            if kind == "guidance" and _past_year_figure(sent, figure, doc.fiscal_year):
                continue  # "higher than our <past year> tax rate of X%": the figure is a past result, not the outlook
            found.append(Fact(id=f"{stem}:{t}:{s}", ticker=doc.ticker, fiscal_year=doc.fiscal_year, fiscal_quarter=doc.fiscal_quarter,
                              speaker=turn.speaker, sentence=sent, figure=figure, metric=metric, kind=kind))
    return found


def _rank(seed: int, fact_id: str) -> str:
    return hashlib.sha256(f"{seed}:{fact_id}".encode()).hexdigest()


def extract_facts(paths: Iterable[Path], per_ticker: int = 5, seed: int = 12) -> Extraction:
    """The sampled fact list from these transcript files (see the module docstring for the procedure)."""
    files = sorted(paths)
    everything = [fact for path in files for fact in _candidates(path)]
    groups: dict[tuple[str, str, str], list[Fact]] = defaultdict(list)
    for f in everything:
        groups[(f.id.split(":")[0], f.metric, f.kind)].append(f)
    unambiguous = [g[0] for g in groups.values() if len({normalise_figure(f.figure) for f in g}) == 1]
    ambiguous = sum(1 for g in groups.values() if len({normalise_figure(f.figure) for f in g}) > 1)
    by_ticker: dict[str, dict[str, list[Fact]]] = defaultdict(lambda: defaultdict(list))
    for f in unambiguous:
        by_ticker[f.ticker][f.id.split(":")[0]].append(f)
    picked: list[Fact] = []
    for ticker in sorted(by_ticker):
        queues = {call: sorted(fs, key=lambda f: _rank(seed, f.id)) for call, fs in by_ticker[ticker].items()}
        order = sorted(queues, key=lambda call: _rank(seed, call))
        taken: list[Fact] = []
        while len(taken) < per_ticker and any(queues.values()):
            for call in order:
                if queues[call] and len(taken) < per_ticker:
                    taken.append(queues[call].pop(0))
        picked += taken
    return Extraction(facts=picked, candidates=len(everything), ambiguous_groups=ambiguous, calls=len(files))


def transcript_files(data_dir: Path) -> list[Path]:
    """The call files of a transcripts folder ({TICKER}_{YYYY}_q{N}.json or .txt)."""
    if not data_dir.is_dir():
        raise FileNotFoundError(f"{data_dir} is not a directory of transcripts")
    files = sorted(p for p in data_dir.iterdir() if p.suffix in (".json", ".txt") and p.is_file())
    if not files:
        raise FileNotFoundError(f"no transcript files (*.json, *.txt) in {data_dir}")
    return files
