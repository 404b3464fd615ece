"""FinanceBench retrieval eval without services: the questions loader, the pages reader, recall arithmetic on cases
checked by hand, the docs section writer, company aliases and the search modes' SQL."""
from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path

import pytest

from agent.ingest.failures import IngestError
from agent.ingest.filing_pages import FilingMeta, ManifestError, filing_from_pages, page_chunks, read_manifest, read_pages
from agent.models.corpus import Company, Period, SearchFilters
from agent.retrieval.companies import derived_aliases, find_tickers, match_company
from agent.retrieval.hybrid import _query, filter_clause
from ops.eval.financebench_filters import PlannerFilter
from ops.eval.financebench_questions import QuestionsFileError, load_questions
from ops.eval.financebench_retrieval import (
    ConditionResult,
    QuestionResult,
    doc_recall,
    half_of,
    mean_recall,
    page_recall,
)


def _q(**over) -> dict:
    row = {"financebench_id": "fb_1", "company": "Acme", "doc_name": "ACME_2022_10K", "question": "What was Acme's FY2022 revenue?",
           "answer": "$1", "evidence": [{"doc_name": "ACME_2022_10K", "evidence_page_num": 4, "evidence_text": "..."}],
           "some_new_field": 1}
    return row | over


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_questions_load_with_unknown_fields_kept_and_gold_fields_optional(tmp_path):
    blind = {k: v for k, v in _q(financebench_id="fb_2").items() if k not in ("doc_name", "evidence", "answer", "company")}
    qs = load_questions(_write(tmp_path, [json.dumps(_q()), "", json.dumps(blind)]))
    assert [q.financebench_id for q in qs] == ["fb_1", "fb_2"]
    assert qs[0].evidence_pages == {("ACME_2022_10K", 4)} and qs[0].model_extra == {"some_new_field": 1}
    assert qs[1].evidence == [] and qs[1].doc_name is None


@pytest.mark.parametrize("lines,message", [
    (["{not json"], "line 1: not JSON"),
    (["[1, 2]"], "line 1: expected a JSON object, got list"),
    ([json.dumps(_q(question=""))], "line 1: question: String should have at least 1 character"),
    ([json.dumps(_q()), json.dumps({"question": "q"})], "line 2: financebench_id: Field required"),
    ([json.dumps(_q(evidence=[{"doc_name": "X", "evidence_page_num": -1}]))], "line 1: evidence.0.evidence_page_num"),
    ([json.dumps(_q()), json.dumps(_q())], "line 2: duplicate financebench_id 'fb_1'"),
    (["", "  "], "no questions"),
])
def test_bad_questions_files_fail_with_one_line_naming_the_line(tmp_path, lines, message):
    with pytest.raises(QuestionsFileError) as exc:
        load_questions(_write(tmp_path, lines))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_missing_or_binary_questions_file(tmp_path):
    with pytest.raises(QuestionsFileError, match="no such questions file"):
        load_questions(tmp_path / "nope.jsonl")
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(QuestionsFileError, match="not UTF-8"):
        load_questions(tmp_path / "bin.jsonl")


# --- manifest and pages ---------------------------------------------------------------------------

@pytest.mark.parametrize("row,kind,period,filed_on", [
    ({"doc_name": "ACME_2022_10K", "doc_type": "10k", "doc_period": 2022}, "10k", Period(fiscal_year=2022), None),
    ({"doc_name": "ACME_2024Q2_10Q", "doc_type": "10q", "doc_period": 2024}, "10q", Period(fiscal_year=2024, fiscal_quarter=2), None),
    ({"doc_name": "Acme_2023q3_10Q", "doc_type": "10-Q", "doc_period": 2023}, "10q", Period(fiscal_year=2023, fiscal_quarter=3), None),
    ({"doc_name": "ACME_2022Q4_EARNINGS", "doc_type": "Earnings", "doc_period": 2022}, "earnings",
     Period(fiscal_year=2022, fiscal_quarter=4), None),
    ({"doc_name": "ACME_2023_8K_dated-2023-05-30", "doc_type": "8k", "doc_period": 2023}, "8k", Period(fiscal_year=2023),
     dt.date(2023, 5, 30)),
    ({"doc_name": "ACME_2022_8K_dated_2022-08-19", "doc_type": "8k", "doc_period": 2022}, "8k", Period(fiscal_year=2022),
     dt.date(2022, 8, 19)),
])
def test_manifest_rows_give_kind_period_and_date(row, kind, period, filed_on):
    meta = FilingMeta.model_validate(row | {"company": "Acme"})
    assert (meta.kind, meta.period, meta.filed_on) == (kind, period, filed_on)


def test_manifest_errors_name_the_line(tmp_path):
    path = tmp_path / "documents.jsonl"
    path.write_text(json.dumps({"doc_name": "A", "company": "A", "doc_type": "10k", "doc_period": 2020}) + "\n"
                    + json.dumps({"doc_name": "B", "company": "B", "doc_type": "S-1", "doc_period": 2020}) + "\n")
    with pytest.raises(ManifestError, match=r"line 2: .*unknown doc_type 'S-1'"):
        read_manifest(path)
    with pytest.raises(ManifestError, match="no such manifest"):
        read_manifest(tmp_path / "missing.jsonl")


def _pages_file(tmp_path: Path, pages: list[dict], name: str = "ACME_2024Q2_10Q") -> Path:
    path = tmp_path / f"{name}.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for p in pages:
            fh.write(json.dumps(p) + "\n")
    return path


def test_pages_are_sorted_and_control_characters_become_spaces(tmp_path):
    path = _pages_file(tmp_path, [{"doc_name": "D", "page": 1, "text": "Yes x No \u0000\nnext"},
                                  {"doc_name": "D", "page": 0, "text": "cover"}])
    pages = read_pages(path, max_pages=10)
    assert [p.page for p in pages] == [0, 1] and pages[1].text == "Yes x No  \nnext"


@pytest.mark.parametrize("content,message", [
    (b"not gzip at all", "not a gzip-compressed JSONL pages file"),
    (gzip.compress(b'{"page": 0}\n', mtime=0), "line 1: not a page object"),
    (gzip.compress(b'{"page": 0, "text": "a"}\n{"page": 0, "text": "b"}\n', mtime=0), "page 0 appears twice"),
    (gzip.compress(b"".join(b'{"page": %d, "text": "a"}\n' % i for i in range(4)), mtime=0), "more than 3 pages"),
], ids=["not-gzip", "not-a-page-object", "duplicate-page", "too-many-pages"])
def test_bad_pages_files_are_refused_with_the_reason(tmp_path, content, message):
    path = tmp_path / "X.jsonl.gz"
    path.write_bytes(content)
    with pytest.raises(IngestError, match=message):
        read_pages(path, max_pages=3)


def test_every_chunk_stays_on_its_page_and_carries_the_documents_header(tmp_path):
    long = " ".join(f"Sentence {i} about operating income." for i in range(120))
    path = _pages_file(tmp_path, [{"doc_name": "D", "page": 0, "text": "Cover page."}, {"doc_name": "D", "page": 1, "text": ""},
                                  {"doc_name": "D", "page": 2, "text": long}])
    meta = FilingMeta(doc_name="ACME_2024Q2_10Q", company="Acme Widgets", doc_type="10q", doc_period=2024)
    doc = filing_from_pages(path, meta, "ACMEWIDGETS", max_pages=100)
    chunks = page_chunks(doc, size=400, overlap=50)
    assert [c.page for c in chunks][:1] == [0] and {c.page for c in chunks} == {0, 2}  # the empty page has no chunk
    assert all(c.text.startswith("Acme Widgets 10-Q Q2 FY2024\n") and len(c.text) <= 400 for c in chunks)
    assert {c.statement for c in chunks} == {None}  # prose, not a statement
    body = "".join(c.text.split("\n", 1)[1] for c in chunks if c.page == 2)
    assert "Sentence 0 " in body and "Sentence 119 " in body


def test_a_document_of_blank_pages_is_refused(tmp_path):
    path = _pages_file(tmp_path, [{"doc_name": "D", "page": 0, "text": "  \n"}])
    meta = FilingMeta(doc_name="ACME_2024Q2_10Q", company="Acme", doc_type="10q", doc_period=2024)
    with pytest.raises(IngestError, match="every page is empty"):
        filing_from_pages(path, meta, "ACME", max_pages=10)


# --- recall, checked by hand ---------------------------------------------------------------------

def test_page_and_doc_recall_by_hand():
    evidence = {("A", 3), ("A", 5)}
    retrieved = [("B", 1), ("A", 3), ("A", 3), ("B", 2), ("C", 9), ("A", 5)]
    assert page_recall(retrieved, evidence, 5) == 0.5  # page 3 at rank 2; page 5 only at rank 6
    assert page_recall(retrieved, evidence, 15) == 1.0
    assert doc_recall(retrieved, evidence, 1) == 0.0 and doc_recall(retrieved, evidence, 2) == 1.0
    assert page_recall([], evidence, 15) == 0.0


def test_pages_rank_by_their_best_chunk_and_lists_fuse_by_reciprocal_rank():
    from agent.models.corpus import SearchHit
    from agent.retrieval.page_search import fuse, ranked_pages
    from ops.eval.financebench_retrieval import StoredFiling, page_refs

    def hit(doc, page):
        return SearchHit(source_type="10k", chunk_id=0, document_id=doc, page=page, text="")

    pages = ranked_pages([hit(1, 4), hit(1, 4), hit(9, None), hit(1, 2), hit(1, 4), hit(1, 7)])
    assert pages == [(1, 4), (9, None), (1, 2), (1, 7)]
    # (1, 4): 1/61 + 1/62 = 0.03252 beats (1, 2): 1/63 + 1/61 = 0.03227
    assert fuse([pages, [(1, 2), (1, 4)]]) == [(1, 4), (1, 2), (9, None), (1, 7)]
    assert fuse([[(1, 1)], [(2, 2)], [(2, 2)]])[0] == (2, 2)  # found by two phrases beats found first by one
    filings = {1: StoredFiling(document_id=1, doc_name="A", ticker="A", period=Period(fiscal_year=2020))}
    assert page_refs(pages, filings) == [("A", 4), ("document 9", -1), ("A", 2), ("A", 7)]
    assert page_refs(pages, filings, k=2) == [("A", 4), ("document 9", -1)]


def test_search_phrases_add_the_statement_a_ratio_is_read_from():
    from ops.eval.financebench_retrieval import search_phrases

    phrases = search_phrases("What is the FY2019 inventory turnover ratio of Acme?")
    assert phrases[0] == "What is the FY2019 inventory turnover ratio of Acme?"
    assert any("cost of sales" in p for p in phrases) and any("inventories" in p and "balance" in p for p in phrases)
    assert len(phrases) == len(set(phrases)) <= 5


def test_mean_recall_averages_over_questions():
    def result(fid, pages, evidence):
        return QuestionResult(financebench_id=fid, half="a", evidence_pages=evidence, filter=PlannerFilter(),
                              filter_covers_evidence=False, conditions={"c": ConditionResult(pages=pages)})

    results = [result("1", [("A", 1)], [("A", 1)]),  # found at rank 1
               result("2", [("B", 0)] * 5 + [("A", 2)], [("A", 2), ("A", 3)]),  # half its pages, at rank 6
               result("3", [("C", 0)], [("D", 0)])]  # nothing
    r = mean_recall(results, "c")
    assert r.questions == 3
    assert r.page_recall_at_5 == round(1 / 3, 4)
    assert r.page_recall_at_15 == round((1 + 0.5) / 3, 4)
    assert r.doc_recall_at_5 == round(1 / 3, 4) and r.doc_recall_at_15 == round(2 / 3, 4)


def test_halves_are_fixed_and_roughly_even():
    ids = [f"financebench_id_{i:05d}" for i in range(400)]
    halves = [half_of(i) for i in ids]
    assert halves == [half_of(i) for i in ids]
    assert 150 < halves.count("a") < 250


def test_planner_filter_scope_kinds():
    assert PlannerFilter().kind == "none"
    from ops.eval.financebench_filters import CompanyScope

    f = PlannerFilter(tickers=["ACME"], scopes=[CompanyScope(ticker="ACME", periods=[Period(fiscal_year=2022)])])
    assert f.kind == "company_period" and f.covers("ACME", Period(fiscal_year=2022))
    assert not f.covers("ACME", Period(fiscal_year=2021)) and not f.covers("OTHER", Period(fiscal_year=2022))
    whole = PlannerFilter(tickers=["ACME"], scopes=[CompanyScope(ticker="ACME")])
    assert whole.kind == "company" and whole.covers("ACME", Period(fiscal_year=1999, fiscal_quarter=3))


# --- company aliases -------------------------------------------------------------------------------

@pytest.mark.parametrize("name,aliases", [
    ("Acme Widgets Corporation", ["Acme Widgets"]),
    ("Acme-Cola", ["Acme Cola"]),
    ("ACME Resorts", ["ACME"]),
    ("Smith & Jones", ["S&J", "SnJ"]),
    ("Zenith", []),
    ("Zenith Holdings, Inc.", ["Zenith"]),
])
def test_derived_aliases(name, aliases):
    assert derived_aliases(name) == aliases


def test_a_derived_alias_lets_the_planner_find_the_company():
    c = Company(ticker="SMITHJONES", name="Smith & Jones", aliases=derived_aliases("Smith & Jones"))
    other = Company(ticker="ACMERESORTS", name="ACME Resorts", aliases=derived_aliases("ACME Resorts"))
    assert find_tickers("Did SnJ grow its margin in FY2022?", [c, other]) == ["SMITHJONES"]
    assert find_tickers("What did ACME pay in dividends?", [c, other]) == ["ACMERESORTS"]
    assert match_company("Smith & Jones Inc.", [c, other]) == c and match_company("Jones", [c, other]) is None


# --- the search modes ------------------------------------------------------------------------------

def _sql(corpus, filters, exact, part):
    where, params = filter_clause(corpus, filters)
    return " ".join(_query(corpus, where, exact, part).as_string(None).split()), params


def test_keyword_only_ranks_every_matching_row_without_the_cap():
    text, _ = _sql("10k", SearchFilters(tickers=["ACME"]), True, "ranked_keyword")
    assert "tsv @@ to_tsquery('english', %(orq)s)" in text and "%(cap)s" not in text and "embedding <=>" in text.split("FROM kw")[0]
    assert "sem AS" not in text


def test_filing_periods_filter_on_quarter_as_well_as_year():
    where, params = filter_clause("10k", SearchFilters(tickers=["ACME"], periods=[Period(fiscal_year=2024, fiscal_quarter=2),
                                                                           Period(fiscal_year=2023)]))
    assert "fiscal_year * 10 + fiscal_quarter = ANY(%(periods)s)" in where.as_string(None)
    assert params["periods"] == [20242, 20230]


def test_the_docs_section_is_replaced_in_place_and_other_sections_are_kept(tmp_path):
    from ops.cli.eval_financebench import SECTION, write_section

    doc = tmp_path / "quality.md"
    doc.write_text("# Research quality\n\n## Transcript facts\n\nfacts v1\n\n## Calibration\n\ncal v1\n")
    write_section(doc, SECTION, f"{SECTION}\n\nretrieval v1\n")
    write_section(doc, SECTION, f"{SECTION}\n\nretrieval v2\n")
    text = doc.read_text()
    assert text.count(SECTION) == 1 and "retrieval v2" in text and "retrieval v1" not in text
    assert "facts v1" in text and "cal v1" in text
    doc.write_text(f"# Q\n\n{SECTION}\n\nold\n\n## Calibration\n\ncal\n")
    write_section(doc, SECTION, f"{SECTION}\n\nnew\n")
    assert doc.read_text() == f"# Q\n\n{SECTION}\n\nnew\n\n## Calibration\n\ncal\n"


def test_the_docs_section_has_every_condition_the_references_and_no_machine_paths():
    from ops.cli.eval_financebench import DEFAULT_DATA, REPO, plot_png, section_markdown
    from ops.eval.financebench_retrieval import CONDITIONS, Recall, RetrievalReport

    recall = Recall(questions=2, page_recall_at_5=0.5, page_recall_at_15=0.75, doc_recall_at_5=1.0, doc_recall_at_15=1.0)
    report = RetrievalReport(questions=3, evaluated=2, embedder="hash", conditions={n: recall for n in CONDITIONS},
                             halves={h: {n: recall for n in CONDITIONS} for h in "ab"})
    text = section_markdown(report, REPO / DEFAULT_DATA / "questions_dev.jsonl", REPO / DEFAULT_DATA)
    assert all(f"| `{n}` | 0.500 | 0.750 | 1.000 | 1.000 |" in text for n in CONDITIONS)
    assert "--questions ../shared/data/financebench/questions_dev.jsonl --data ../shared/data/financebench" in text
    assert "19%" in text and "50%" in text and str(REPO) not in text and "hash` test embedder" in text
    assert plot_png(report).startswith(b"\x89PNG")


def test_documents_rank_by_all_their_pages_not_one_stray_page():
    from agent.retrieval.page_search import documents_by_pages

    fused = [(7, 1), (3, 10), (3, 11), (3, 12), (3, 13), (9, 4)]  # document 7 has the best page, 3 has four
    assert documents_by_pages(fused) == [3, 7, 9]
    assert documents_by_pages(fused, depth=1) == [7, 3, 9]  # beyond the depth, first appearance


def test_a_weighted_list_counts_as_that_many_lists():
    from agent.retrieval.page_search import fuse

    question, phrase_a, phrase_b = [(1, 1), (1, 2)], [(1, 2), (1, 3)], [(1, 3), (1, 2)]
    assert fuse([question, phrase_a, phrase_b])[0] == (1, 2)  # two phrases outvote the question
    assert fuse([question, phrase_a, phrase_b], [2.0, 1.0, 1.0])[0] == (1, 2)
    assert fuse([question, [(1, 3)], [(1, 3)]], [2.0, 1.0, 1.0])[0] == (1, 1)  # as much as both phrases together


def test_shared_store_keyword_pages_keep_only_documents_the_vector_search_reached():
    from agent.retrieval.page_search import within

    keyword = [(5, 1), (2, 9), (8, 3), (2, 4)]  # document 5 and 8: a caption every filing has
    vector = [(2, 1), (6, 7)]
    assert within(keyword, vector) == [(2, 9), (2, 4)]
    assert within(keyword, []) == []


@pytest.mark.parametrize("years, quarter_of_later, kept", [
    ((2021, 2022), 0, {2022}),  # the later 10-K gives the earlier year as its comparative
    ((2020, 2022), 0, {2020, 2022}),  # not consecutive: both filings
    ((2022, 2023), 2, {2022, 2023}),  # the later year has no annual filing in scope
])
def test_a_comparison_of_consecutive_years_searches_the_later_annual_filing(years, quarter_of_later, kept):
    from ops.eval.financebench_filters import later_year_covers

    periods = [Period(fiscal_year=years[0]), Period(fiscal_year=years[1], fiscal_quarter=quarter_of_later)]
    assert {p.fiscal_year for p in later_year_covers(periods)} == kept
