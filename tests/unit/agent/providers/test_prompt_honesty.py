"""No prompt carries a figure, a company or a sentence from the corpus or the tests: the model must answer from
the passages it is given, never from an example that happens to be the answer."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent.providers.llm import prompts

REPO = Path(__file__).resolve().parents[4]
PROMPT_FILES = [REPO / "agent/providers/llm/prompts.py"]
# a figure: grouped thousands, a decimal, a currency amount or a percentage (years and small counts are rules)
FIGURE = re.compile(r"(?<![\w.])(?:\$?\d{1,3}(?:,\d{3})+(?:\.\d+)?|\$?\d+\.\d+%?|\$\d+|\d+%)")
ALLOWED = {"0.9"}  # the 10-K quality bar, a rule of the agent


def prompt_texts() -> list[str]:
    return [v for k, v in vars(prompts).items() if isinstance(v, str) and k.isupper()] + \
        [p.read_text() for p in PROMPT_FILES]


def figures(text: str) -> set[str]:
    return {m.group(0).lstrip("$").rstrip("%") for m in FIGURE.finditer(text)}


def corpus_and_test_texts() -> list[str]:
    roots = [REPO / "agent/sample_corpus", REPO / "tests"]
    shared = REPO.parent / "shared" / "data" / "financebench"
    files = [p for r in roots for p in r.rglob("*") if p.suffix in {".txt", ".json", ".py", ".htm", ".html", ".jsonl"}]
    files += list(shared.glob("*.jsonl")) if shared.is_dir() else []
    return [p.read_text(errors="replace") for p in files if "test_prompt_honesty" not in p.name]


def test_prompts_hold_no_figures():
    found = set().union(*(figures(t) for t in prompt_texts())) - ALLOWED
    assert found == set()


def test_no_figure_of_the_corpus_or_the_tests_is_in_a_prompt():
    known = set().union(*(figures(t) for t in corpus_and_test_texts()))
    assert len(known) > 100  # the check has something to check against
    leaked = {f for t in prompt_texts() for f in figures(t)} & known - ALLOWED
    assert leaked == set()


def test_prompts_name_no_company_of_the_corpus():
    companies = json.loads((REPO / "agent/sample_corpus/companies.json").read_text())
    names = {n for c in companies for n in [c["ticker"], c["name"], *c["aliases"]] if len(n) >= 3}
    text = "\n".join(prompt_texts())
    assert [n for n in sorted(names) if re.search(rf"\b{re.escape(n)}\b", text)] == []


@pytest.mark.parametrize("sample, expected", [("revenue of $94.9 billion", {"94.9"}), ("up 46.2%", {"46.2"}),
                                              ("326,288 / 33,766", {"326,288", "33,766"}), ("Q4 2024, 3 items", set())])
def test_the_figure_pattern(sample, expected):
    assert figures(sample) == expected


RULE_FILES = ["agent/providers/llm/extractive_rules.py", "agent/providers/llm/extractive.py", "agent/providers/llm/extractive_tenk.py",
              "agent/tenk/lexicon.py", "agent/tenk/rules.py", "agent/tenk/tables.py", "agent/tenk/calculations.py",
              "agent/retrieval/periods.py", "agent/retrieval/companies.py",
              "agent/retrieval/name_rules.py", "agent/statements/concepts.py", "agent/statements/formulas.py",
              "agent/statements/questions.py", "agent/statements/pages.py", "agent/statements/columns.py",
              "agent/providers/llm/extractive_figures.py"]


def corpus_companies() -> set[str]:
    """Every ticker, name and alias of the sample corpus, and the tickers of the real data beside the repository."""
    companies = json.loads((REPO / "agent/sample_corpus/companies.json").read_text())
    names = {n for c in companies for n in [c["ticker"], c["name"], *c["aliases"]] if len(n) >= 3}
    shared = REPO.parent / "shared" / "data"
    if shared.is_dir():
        names |= {p.name.split("_")[0] for p in (shared / "transcripts").glob("*_*")}
        names |= {p.name for p in (shared / "10k").iterdir() if p.is_dir()}
    return names


@pytest.mark.parametrize("path", RULE_FILES)
def test_the_extractive_rules_name_no_company_of_the_corpus(path):
    text = (REPO / path).read_text()
    assert [n for n in sorted(corpus_companies()) if re.search(rf"\b{re.escape(n)}\b", text)] == []


@pytest.mark.parametrize("path", RULE_FILES)
def test_the_extractive_rules_hold_no_figure_of_the_corpus_or_the_tests(path):
    known = set().union(*(figures(t) for t in corpus_and_test_texts()))
    # code constants (weights, thresholds like 0.5 or 2.0) are not figures from a filing
    leaked = {f for f in figures((REPO / path).read_text()) & known
              if "," in f or (float(f) >= 1 and len(f.replace(".", "")) >= 3)}
    assert leaked == set()
