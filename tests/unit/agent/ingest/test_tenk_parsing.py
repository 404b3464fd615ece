"""10-K parsing: real filings from ../shared/data (skipped when absent) and small files written here."""
from __future__ import annotations

import datetime as dt
from functools import lru_cache
from pathlib import Path

import pytest

from agent.ingest.failures import IngestError
from agent.ingest.tenk_common import (
    ITEM_ORDER,
    Heading,
    TenKParseError,
    compact_rows,
    normalize_item,
    select_chain,
)
from agent.ingest.tenk_html import parse_10k_html, rows_from_spans
from agent.ingest.tenk_pdf import parse_10k_pdf
from agent.models.corpus import TenKDoc

DATA = Path(__file__).parents[4].parent / "shared" / "data"
HTML_DIR = DATA / "10k"
PDF_DIR = DATA / "financebench" / "pdf"
SAMPLE_DIR = Path(__file__).parents[4] / "agent" / "sample_corpus" / "10k"
TICKERS = ["AAPL", "AMZN", "GOOGL", "META", "NVDA", "TSLA"]
PDFS = ["MICROSOFT_2023_10K", "AMAZON_2019_10K", "APPLE_2021_10K"]

needs_html = pytest.mark.skipif(not HTML_DIR.is_dir(), reason=f"real 10-K HTML not found at {HTML_DIR}")
needs_pdf = pytest.mark.skipif(not PDF_DIR.is_dir(), reason=f"real 10-K PDFs not found at {PDF_DIR}")


@lru_cache(maxsize=None)
def html_doc(ticker: str) -> TenKDoc:
    return parse_10k_html(next((HTML_DIR / ticker).glob("*.html")))


@lru_cache(maxsize=None)
def pdf_doc(name: str) -> TenKDoc:
    return parse_10k_pdf(PDF_DIR / f"{name}.pdf")


def section(doc: TenKDoc, item: str) -> str:
    return next(s.text for s in doc.sections if s.item == item)


def tables_with(doc: TenKDoc, *cells: str):
    return [t for t in doc.tables if any(all(c in row for c in cells) for row in t.rows)]


# --- real EDGAR HTML -------------------------------------------------------------------------------

@needs_html
def test_apple_html_metadata_items_and_text():
    doc = html_doc("AAPL")
    assert (doc.ticker, doc.company_name, doc.fiscal_year) == ("AAPL", "Apple Inc.", 2024)
    assert doc.period_end == dt.date(2024, 9, 28)
    assert {"1", "1A", "7", "7A", "8"} <= {s.item for s in doc.sections}
    assert "net sales" in section(doc, "7").lower()
    assert next(s.title for s in doc.sections if s.item == "1A") == "Risk Factors"


@needs_html
def test_apple_html_total_net_sales_table():
    doc = html_doc("AAPL")
    hits = tables_with(doc, "Total net sales", "391,035")
    assert hits and all(t.item in {"7", "8"} for t in hits)
    ops = [t for t in hits if t.item == "8" and "OPERATIONS" in t.caption.upper()]
    assert ops, [t.caption for t in hits]
    assert ["Total net sales", "391,035", "383,285", "394,328"] in ops[0].rows
    assert "| Total net sales | 391,035 | 383,285 | 394,328 |" in ops[0].markdown


@needs_html
def test_nvidia_fiscal_year_is_2025():
    doc = html_doc("NVDA")
    assert (doc.ticker, doc.fiscal_year, doc.period_end) == ("NVDA", 2025, dt.date(2025, 1, 26))


@needs_html
@pytest.mark.parametrize("ticker", TICKERS)
def test_every_html_filing_parses(ticker: str):
    doc = html_doc(ticker)
    items = [s.item for s in doc.sections]
    assert doc.ticker == ticker
    assert len(items) >= 8 and len(doc.tables) >= 20
    assert items == sorted(set(items), key=ITEM_ORDER.index)
    assert all(s.text.strip() for s in doc.sections)
    for t in doc.tables:
        assert t.item in ITEM_ORDER and len(t.rows) >= 2 and t.caption
        assert t.markdown.startswith("|") and t.markdown.count("\n") == len(t.rows)


# --- real PDFs -------------------------------------------------------------------------------------

@needs_pdf
@pytest.mark.parametrize("name", PDFS)
def test_every_pdf_parses_items_7_and_8(name: str):
    doc = pdf_doc(name)
    items = {s.item for s in doc.sections}
    assert {"1", "1A", "7", "8"} <= items
    assert len(section(doc, "7")) > 5000 and len(section(doc, "8")) > 5000
    assert doc.ticker == {"MICROSOFT": "MSFT", "AMAZON": "AMZN", "APPLE": "AAPL"}[name.split("_")[0]]
    assert doc.fiscal_year == int(name.split("_")[1])


@needs_pdf
def test_amazon_2019_pdf_statements():
    doc = pdf_doc("AMAZON_2019_10K")
    assert (doc.ticker, doc.fiscal_year, doc.period_end) == ("AMZN", 2019, dt.date(2019, 12, 31))
    item8 = section(doc, "8")
    assert "Total net sales" in item8 and "Inventories" in item8
    assert "TOTAL NET SALES" not in section(doc, "1").upper()[:200]  # the TOC did not swallow Item 1
    if any(t.item == "8" for t in doc.tables):  # tables are best effort; when found they must be right
        assert tables_with(doc, "Total net sales", "280,522")


# --- small files written here ----------------------------------------------------------------------

PLAIN_10K = """<html><head>
<meta name="ticker" content="acme"><meta name="fiscal_year" content="2023">
<meta name="company" content="Acme Corp"><meta name="period_end" content="2023-12-31"></head><body>
<h1>Acme Corp Form 10-K</h1><p>For the fiscal year ended December 31, 2023</p>
<ul><li>Item 1. Business</li><li>Item 7. MD&amp;A</li><li>Item 8. Financial Statements</li></ul>
<h2>Item 1. Business</h2><p>Acme makes anvils and rockets and sells them to coyotes in 40 countries.</p>
<h2>Item 7. Management's Discussion and Analysis</h2><p>Total net sales rose 12% on rocket demand.</p>
<p>Net sales by product (in millions):</p>
<table><tr><th></th><th colspan="2">2023</th><th colspan="2">2022</th></tr>
<tr><td>Anvils</td><td>$</td><td>750</td><td>$</td><td>700</td></tr>
<tr><td>Total net sales</td><td>$</td><td>1,250</td><td>$</td><td>1,116</td></tr></table>
<h2>Item 8. Financial Statements and Supplementary Data</h2><h3>CONSOLIDATED BALANCE SHEETS</h3>
<table><tr><td></td><td>2023</td><td>2022</td></tr><tr><td>Inventories</td><td>120</td><td>(95</td><td>)</td></tr>
<tr><td>Total assets</td><td>2,400</td><td>2,100</td></tr></table></body></html>"""


def test_plain_html_uses_meta_tags_items_and_tables(tmp_path: Path):
    path = tmp_path / "acme_10k.html"
    path.write_text(PLAIN_10K)
    doc = parse_10k_html(path)
    assert (doc.ticker, doc.company_name, doc.fiscal_year, doc.period_end) == (
        "ACME", "Acme Corp", 2023, dt.date(2023, 12, 31))
    assert [s.item for s in doc.sections] == ["1", "7", "8"]
    assert "rocket demand" in section(doc, "7")
    by_item = {t.item: t for t in doc.tables}
    assert ["Total net sales", "1,250", "1,116"] in by_item["7"].rows
    assert by_item["8"].caption == "CONSOLIDATED BALANCE SHEETS"
    assert ["Inventories", "120", "(95)"] in by_item["8"].rows


def test_items_only_edgartools_finds_still_get_their_text_and_tables(tmp_path: Path):
    # 'Item 7 Management's ...' has no period: the regex headings miss it, edgartools does not
    path = tmp_path / "acme_10k.html"
    path.write_text(
        "<html><head><meta name='ticker' content='ACME'><meta name='fiscal_year' content='2023'></head><body>"
        "<h2>Item 1. Business</h2><p>Acme makes anvils and rockets and sells them to coyotes everywhere.</p>"
        "<h2>Item 7 Management's Discussion and Analysis of Financial Condition and Results of Operations</h2>"
        "<p>Total net sales rose 12% on strong rocket demand.</p><table><tr><td></td><td>2023</td><td>2022</td></tr>"
        "<tr><td>Total net sales</td><td>1,250</td><td>1,116</td></tr></table>"
        "<h2>Item 8. Financial Statements and Supplementary Data</h2><p>Inventories were 120.</p></body></html>")
    doc = parse_10k_html(path)
    assert [s.item for s in doc.sections] == ["1", "7", "8"]
    assert "rocket demand" in section(doc, "7") and "rocket demand" not in section(doc, "1")
    assert [(t.item, t.rows[-1]) for t in doc.tables] == [("7", ["Total net sales", "1,250", "1,116"])]


def test_ticker_argument_wins(tmp_path: Path):
    path = tmp_path / "acme_10k.html"
    path.write_text(PLAIN_10K)
    assert parse_10k_html(path, ticker="ZZZ").ticker == "ZZZ"


@pytest.mark.skipif(not list(SAMPLE_DIR.glob("*.htm*")), reason="no sample 10-K in agent/sample_corpus/10k")
@pytest.mark.parametrize("path", sorted(SAMPLE_DIR.glob("*.htm*")), ids=lambda p: p.name)
def test_sample_corpus_10k_parses(path: Path):
    doc = parse_10k_html(path)
    assert doc.ticker and doc.fiscal_year and doc.sections
    assert {"7", "8"} <= {s.item for s in doc.sections}


@pytest.mark.parametrize(("name", "content"), [
    ("garbage.html", b"\x89PNG\r\n\x1a\n\x00\x00binary garbage"),
    ("empty.html", b""),
    ("text.html", b"just some words, no markup at all"),
    ("no_items.html", b"<html><body><p>Hello world, this is not a 10-K.</p></body></html>"),
    ("garbage.pdf", b"%PDF-1.7 this is not really a PDF"),
    ("empty.pdf", b""),
])
def test_malformed_files_raise_tenk_parse_error(tmp_path: Path, name: str, content: bytes):
    path = tmp_path / name
    path.write_bytes(content)
    parse = parse_10k_pdf if name.endswith(".pdf") else parse_10k_html
    with pytest.raises(TenKParseError) as info:
        parse(path)
    assert name in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, IngestError)


def test_pdf_that_the_empty_password_does_not_open(tmp_path: Path):
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=612, height=792)
    writer.encrypt(user_password="secret", algorithm="AES-128")
    path = tmp_path / "locked.pdf"
    with path.open("wb") as fh:
        writer.write(fh)
    with pytest.raises(TenKParseError, match="locked.pdf"):
        parse_10k_pdf(path)


# --- helpers ----------------------------------------------------------------------------------------

def test_normalize_item():
    assert [normalize_item(x) for x in ("07", "1a.", "9C", "16", "17", "7B", "x")] == [
        "7", "1A", "9C", "16", None, None, None]


def test_select_chain_skips_table_of_contents():
    toc = [Heading(100 + 40 * i, item, "") for i, item in enumerate(["1", "1A", "7", "8"])]
    body = [Heading(pos, item, "") for pos, item in [(1000, "1"), (5000, "1A"), (9000, "7"), (12000, "8")]]
    cross_ref = [Heading(6000, "15", "")]  # a stray heading-like line inside Item 1A
    chain = select_chain(sorted(toc + body + cross_ref, key=lambda h: h.pos), 20000)
    assert [(h.item, h.pos) for h in chain] == [("1", 1000), ("1A", 5000), ("7", 9000), ("8", 12000)]


def test_rows_from_spans_merges_currency_and_parenthesis_fragments():
    spans = [
        [("", 1), ("2024", 3), ("2023", 3)],
        [("Total net sales", 1), ("$", 1), ("391,035", 1), ("", 1), ("$", 1), ("383,285", 1), ("", 1)],
        [("Other", 1), ("(1,070", 2), (")", 1), ("25", 2), ("", 1)],
    ]
    assert compact_rows(rows_from_spans(spans)) == [
        ["", "2024", "2023"], ["Total net sales", "391,035", "383,285"], ["Other", "(1,070)", "25"]]
