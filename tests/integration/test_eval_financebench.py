"""FinanceBench retrieval eval on a real stack (embedded Postgres and Redis, hash embedder, extractive planner):
real FinanceBench pages keep their page through ingest; a small made-up filings corpus gives recall figures that can
be checked by hand; the planner's filter follows the question text, not the gold document; the command prints the
JSON object the issue asks for and refuses bad input in one line."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.ingest.filing_pages import read_pages
from agent.models.corpus import Period
from ops.eval.financebench_filters import planner_filter
from ops.eval.financebench_ingest import PagesDirError, ingest_financebench
from ops.eval.financebench_questions import FinanceBenchQuestion, load_questions
from ops.eval.financebench_retrieval import CONDITIONS, evaluate_retrieval

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
REAL_DOCS = {"FOOTLOCKER_2022_8K_dated-2022-05-20", "FOOTLOCKER_2022_8K_dated_2022-08-19", "ULTABEAUTY_2023Q4_EARNINGS"}


def _squash(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


@pytest.fixture(scope="module")
def real_pages(ctx, shared_data):
    data = shared_data / "financebench"
    report = ingest_financebench(ctx, data, doc_names=REAL_DOCS, fanout=None)
    assert not report.errors and sorted(f.status for f in report.files) == ["added"] * 3, report.files
    return data


def test_real_pages_keep_their_page_kind_period_and_date(ctx, real_pages):
    with ctx.pool.connection() as conn:
        docs = {r["source_path"].rsplit("/", 1)[-1]: r for r in conn.execute(
            "SELECT id, kind, ticker, fiscal_year, fiscal_quarter, variant, call_date, source_path FROM documents"
            " WHERE kind IN ('8k', 'earnings')")}
        ulta = docs["ULTABEAUTY_2023Q4_EARNINGS.jsonl.gz"]
        assert (ulta["kind"], ulta["fiscal_year"], ulta["fiscal_quarter"], ulta["variant"]) == ("earnings", 2023, 4, "")
        first, second = docs["FOOTLOCKER_2022_8K_dated-2022-05-20.jsonl.gz"], docs["FOOTLOCKER_2022_8K_dated_2022-08-19.jsonl.gz"]
        # two 8-Ks of one company and year live side by side, told apart by their date
        assert first["ticker"] == second["ticker"] and (first["kind"], first["fiscal_year"]) == (second["kind"], second["fiscal_year"])
        assert (first["variant"], str(second["call_date"])) == ("2022-05-20", "2022-08-19")
        for name in REAL_DOCS:
            pages = {p.page: _squash(p.text) for p in read_pages(real_pages / "pages" / f"{name}.jsonl.gz", 1000)}
            rows = conn.execute("SELECT page, text, fiscal_quarter FROM tenk_chunks WHERE document_id = %s ORDER BY chunk_index",
                                (docs[f"{name}.jsonl.gz"]["id"],)).fetchall()
            assert rows and {r["page"] for r in rows} == {p for p, t in pages.items() if t}
            for r in rows:  # every chunk's body (after the document header and the page's lead) is text of its page
                body = r["text"].split("\n", 1)[1]
                lead, _, rest = body.partition(" …\n")
                assert _squash(rest or lead) in pages[r["page"]] and (not rest or pages[r["page"]].startswith(_squash(lead)))
                assert r["fiscal_quarter"] == docs[f"{name}.jsonl.gz"]["fiscal_quarter"]
        names = {r["name"] for r in conn.execute("SELECT name FROM companies WHERE ticker IN (%s, %s)", (ulta["ticker"], first["ticker"]))}
    assert names == {"Ulta Beauty", "Foot Locker"}


def test_reingesting_unchanged_pages_is_a_no_op(ctx, real_pages):
    with ctx.pool.connection() as conn:
        before = conn.execute("SELECT count(*) AS n, max(id) AS top FROM tenk_chunks").fetchone()
    report = ingest_financebench(ctx, real_pages, doc_names=REAL_DOCS, fanout=None)
    assert [f.status for f in report.files] == ["unchanged"] * 3 and report.chunks_embedded == 0
    with ctx.pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n, max(id) AS top FROM tenk_chunks").fetchone() == before


def test_a_requested_document_without_pages_is_reported(ctx, real_pages):
    report = ingest_financebench(ctx, real_pages, doc_names={"ULTABEAUTY_2023Q4_EARNINGS", "NO_SUCH_2020_10K"}, fanout=None)
    assert [(f.path, f.status, f.reason) for f in report.errors] == [("NO_SUCH_2020_10K", "error", "no pages file for this document")]
    with pytest.raises(PagesDirError, match="no such directory"):
        ingest_financebench(ctx, real_pages / "nope")


# --- a made-up corpus small enough to check recall by hand --------------------------------------------

MADE_UP = {  # doc_name -> (company, doc_type, year, pages); one short page is one chunk
    "QUILLON_2021_10K": ("Quillon Instruments", "10k", 2021, ["Cover page of the annual report.",
                                                             "Backlog rose to 412 units at year end.",
                                                             "Legal proceedings: none pending."]),
    "QUILLON_2022Q2_10Q": ("Quillon Instruments", "10q", 2022, ["Quarterly report cover.", "Backlog was 380 units."]),
    "BRAMBLEWAY_2022_10K": ("Brambleway Foods", "10k", 2022, ["Cover.", "Backlog of orders was 90 pallets."]),
}
QUESTION = "What was the backlog of Quillon Instruments at the end of FY2021?"


def _made_up_dir(root: Path) -> Path:
    (root / "pages").mkdir(parents=True)
    with open(root / "documents.jsonl", "w") as fh:
        for name, (company, kind, year, pages) in MADE_UP.items():
            fh.write(json.dumps({"doc_name": name, "company": company, "doc_type": kind, "doc_period": year}) + "\n")
            with gzip.open(root / "pages" / f"{name}.jsonl.gz", "wt") as pf:
                for i, text in enumerate(pages):
                    pf.write(json.dumps({"doc_name": name, "page": i, "text": text}) + "\n")
    return root


def _question(fid: str, doc: str, page: int, text: str = QUESTION) -> dict:
    return {"financebench_id": fid, "question": text, "doc_name": doc, "company": "x",
            "evidence": [{"doc_name": doc, "evidence_page_num": page, "evidence_text": ""}]}


@pytest.fixture(scope="module")
def made_up(ctx, tmp_path_factory):
    data = _made_up_dir(tmp_path_factory.mktemp("made-up-filings"))
    report = ingest_financebench(ctx, data, fanout=None)
    assert not report.errors, report.errors
    questions = tmp_path_factory.mktemp("q") / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in [
        _question("q1", "QUILLON_2021_10K", 1),  # the backlog page: found in every filtered condition
        _question("q2", "QUILLON_2021_10K", 7),  # a page the filing does not have: the document is found, the page never
        _question("q3", "BRAMBLEWAY_2022_10K", 1),  # gold points at another company: the text's filter excludes it
        _question("q4", "MISSING_2020_10K", 0),  # no pages for its evidence: skipped
    ]) + "\n")
    return data, questions


def test_recall_on_the_made_up_corpus_matches_the_hand_count(ctx, made_up):
    _, questions = made_up
    report = evaluate_retrieval(ctx, load_questions(questions))
    assert (report.questions, report.evaluated) == (4, 3)
    assert [(s.financebench_id, s.reason) for s in report.skipped] == [
        ("q4", "evidence document(s) not ingested (no pages): MISSING_2020_10K")]
    # The planner scopes q1-q3 to Quillon's FY2021 10-K: three one-chunk pages, all of them in every top 5.
    # q1 finds its page; q2 its document but not its (missing) page; q3 neither. Page recall 1/3, document 2/3.
    for name in ("hybrid_filtered", "vector_filtered", "keyword_filtered"):
        r = report.conditions[name]
        assert (r.questions, r.page_recall_at_5, r.page_recall_at_15, r.doc_recall_at_15) == (3, 0.3333, 0.3333, 0.6667), name
    by_id = {r.financebench_id: r for r in report.results}
    assert sorted(by_id["q1"].conditions["hybrid_filtered"].pages) == [("QUILLON_2021_10K", p) for p in range(3)]
    assert by_id["q1"].conditions["keyword_filtered"].first_evidence_rank == 1  # the only page with "backlog" and "fy2021"
    assert [by_id[q].filter_covers_evidence for q in ("q1", "q2", "q3")] == [True, True, False]
    assert report.planner.scopes == {"company_period": 3, "company": 0, "none": 0}
    assert set(report.conditions) == set(CONDITIONS) and report.halves.keys() == {"a", "b"}


def test_the_filter_comes_from_the_question_text_not_the_gold_fields(ctx, made_up):
    _, questions = made_up
    full = load_questions(questions)
    report = evaluate_retrieval(ctx, full)
    for q, r in zip([q for q in full if q.financebench_id != "q4"], report.results):
        blind = FinanceBenchQuestion(financebench_id=q.financebench_id, question=q.question)  # no doc_name, company, evidence
        assert planner_filter(ctx, blind.question) == r.filter
    f = report.results[2].filter  # q3: the gold document is Brambleway's, the text names Quillon
    [scope] = f.scopes
    assert f.tickers == [scope.ticker] and scope.ticker.startswith("QUILLON") and scope.periods == [Period(fiscal_year=2021)]
    other = planner_filter(ctx, "How large was the order backlog at Brambleway Foods in FY2022?")
    assert [s.ticker for s in other.scopes] == ["BRAMBLEWAYFOODS"] and other.scopes[0].periods == [Period(fiscal_year=2022)]


def _finagent(ctx, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(FINAGENT_DATA_DIR=str(ctx.settings.data_dir), FINAGENT_DATABASE_URL=ctx.database_url,
               FINAGENT_REDIS_URL=ctx.redis_url, FINAGENT_EMBEDDING_PROVIDER="hash", FINAGENT_LLM_PROVIDER="extractive")
    # this checkout's code (cwd first on sys.path), not whatever an installed console script points at
    return subprocess.run([sys.executable, "-m", "ops.cli.main", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=180)


def test_the_command_prints_one_json_object(ctx, made_up):
    data, questions = made_up
    r = _finagent(ctx, "eval", "financebench", "--questions", str(questions), "--data", str(data), "--json", "--inline")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["questions"] == 4 and out["skipped_count"] == 1 and out["ingest"]["unchanged"] == 3
    assert set(out["conditions"]) == {"hybrid_filtered", "hybrid_shared", "vector_filtered", "vector_shared",
                                      "keyword_filtered", "keyword_shared"}
    for entry in out["conditions"].values():
        assert {"page_recall_at_5", "page_recall_at_15", "doc_recall_at_15"} <= set(entry)
        assert all(0.0 <= entry[k] <= 1.0 for k in ("page_recall_at_5", "page_recall_at_15", "doc_recall_at_15"))
    assert out["conditions"]["hybrid_filtered"]["page_recall_at_15"] == 0.3333


@pytest.mark.parametrize("content,says", [
    (None, "no such questions file"),
    ('{"financebench_id": "a", "question": "q"}\n{oops\n', "line 2: not JSON"),
    ('{"financebench_id": "a"}\n', "line 1: question: Field required"),
])
def test_bad_questions_files_fail_in_one_line(ctx, made_up, tmp_path, content, says):
    data, _ = made_up
    path = tmp_path / "questions.jsonl"
    if content is not None:
        path.write_text(content)
    r = _finagent(ctx, "eval", "financebench", "--questions", str(path), "--data", str(data), "--json", "--inline")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().startswith("error: ") and says in r.stderr and len(r.stderr.strip().splitlines()) == 1


# --- statement pages: classified at ingest, put first for the line items a question needs ------------------------

def _statement_page(caption: str, rows: list[str]) -> str:
    lines = [f"{label}\n$ {1200 + 41 * i:,} \n {1100 + 37 * i:,} " for i, label in enumerate(rows * 6)]
    return f"Vexmoor Labs, Inc.\n{caption}\n(in thousands)\nDecember 31, 2021 2020\n" + "\n".join(lines)


VEXMOOR_PAGES = [
    "Annual report cover. Vexmoor Labs, Inc.",
    # a notes page that says "balance sheet" and "current assets" more often than the statement does
    "Notes to Consolidated Financial Statements. Balance sheet components: current assets and current liabilities "
    "on the balance sheet are described here; the balance sheet presentation of current assets follows the guidance. "
    "Balance sheet, balance sheet, current assets.",
    _statement_page("CONSOLIDATED STATEMENTS OF OPERATIONS", ["Revenue", "Cost of revenue", "Operating expenses", "Net income"]),
    _statement_page("CONSOLIDATED BALANCE SHEETS", ["Cash and cash equivalents", "Accounts receivable", "Inventories",
                                                    "Total current assets", "Total current liabilities"]),
    _statement_page("", ["Long-term debt", "Total liabilities", "Stockholders' equity"]),  # the balance sheet, continued
]


@pytest.fixture(scope="module")
def vexmoor(ctx, tmp_path_factory):
    root = tmp_path_factory.mktemp("vexmoor")
    (root / "pages").mkdir()
    (root / "documents.jsonl").write_text(json.dumps({"doc_name": "VEXMOOR_2021_10K", "company": "Vexmoor Labs",
                                                      "doc_type": "10k", "doc_period": 2021}) + "\n")
    with gzip.open(root / "pages" / "VEXMOOR_2021_10K.jsonl.gz", "wt") as fh:
        for i, text in enumerate(VEXMOOR_PAGES):
            fh.write(json.dumps({"doc_name": "VEXMOOR_2021_10K", "page": i, "text": text}) + "\n")
    report = ingest_financebench(ctx, root, fanout=None)
    assert not report.errors, report.errors
    with ctx.pool.connection() as conn:
        rows = conn.execute("SELECT DISTINCT c.page, c.statement FROM tenk_chunks c JOIN documents d ON d.id = c.document_id"
                            " WHERE d.source_path LIKE %s ORDER BY c.page", (f"{root}%",)).fetchall()
    return {r["page"]: r["statement"] for r in rows}


def test_statement_pages_are_classified_at_ingest(vexmoor):
    assert vexmoor == {0: None, 1: None, 2: "income", 3: "balance", 4: "balance"}


def test_the_statement_pages_a_question_needs_come_first(ctx, vexmoor):
    from agent.retrieval.page_search import search_pages
    from agent.tenk.statements import question_statements

    question = "What is Vexmoor Labs' FY2021 quick ratio?"
    flt = planner_filter(ctx, question)
    scopes = [s.filters for s in flt.scopes]
    needed = question_statements(question)
    assert needed == ["balance"]
    pages = search_pages(ctx.pool, ctx.embed_query, [question], scopes, "hybrid", statements=needed)
    assert [p for _, p in pages[:2]] == [3, 4]  # the balance sheet and its continuation, ahead of the notes page
    unranked = search_pages(ctx.pool, ctx.embed_query, [question], scopes, "hybrid")
    assert {p for _, p in unranked} == {0, 1, 2, 3, 4}


def test_the_10k_agent_reads_a_line_item_from_its_statement_page(ctx, vexmoor):
    from agent.models.tenk import SubQuestion
    from agent.tenk.retrieval import statement_search

    ticker = planner_filter(ctx, "Vexmoor Labs FY2021").scopes[0].ticker
    sq = SubQuestion(id=1, text="What were total current assets in FY2021?", kind="TABLE", items=["8"],
                     keywords="total current assets consolidated balance sheets")
    found = statement_search(ctx, ticker, 2021, sq)
    assert found and {e.page for e in found} <= {3, 4} and any("Total current assets" in e.text for e in found)
    other = SubQuestion(id=2, text="Who audits the company?", kind="TABLE", items=["8"], keywords="auditor")
    assert statement_search(ctx, ticker, 2021, other) == []  # no statement reports it
