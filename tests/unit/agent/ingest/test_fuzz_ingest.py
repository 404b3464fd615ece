"""Property tests of the ingestion parsers (hypothesis): the chunker never crashes, keeps every chunk within its size
and loses no text; the transcript and 10-K HTML parsers, on generated and arbitrary files, either return a document
or fail with IngestError, never with anything else, and what they return can be stored."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.ingest.chunking import chunk_turns, split_text
from agent.ingest.documents import IngestLimits, PreparedDocument, prepare
from agent.ingest.failures import IngestError
from agent.ingest.tenk_common import ITEM_ORDER
from agent.models.corpus import Turn

PROPS = settings(max_examples=300, deadline=None, database=None)
FILES = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# prose with sentence ends, long unbroken runs and odd whitespace, plus arbitrary unicode
words = st.sampled_from(["Revenue", "grew", "8%.", "Margins", "fell.", "(see", "note)", "Q4", "$1.2", "billion.", "\t", "\n",
                         "\n\n", "  ", "\u2028", "x" * 120, "A.", "?", "!", "\"Yes.\""])
prose = st.one_of(st.lists(words, max_size=80).map(" ".join), st.text(max_size=600))


def _covered(chunks: list[str], text: str) -> bool:
    """Can the chunks be placed on the text, in order, each starting within the previous one (or right after it), the
    first at the start and the last at the end? Compared without whitespace: chunks join sentences with single spaces
    where the text had other whitespace."""
    flat = "".join(text.split())
    pieces = ["".join(c.split()) for c in chunks]
    if not pieces:
        return not flat
    starts = [0] if flat.startswith(pieces[0]) else []
    for prev, piece in zip(pieces, pieces[1:]):
        found = [m.start() for m in re.finditer(f"(?={re.escape(piece)})", flat)]
        starts = [s for s in found if any(p <= s <= p + len(prev) for p in starts)]
    return any(s + len(pieces[-1]) == len(flat) for s in starts)


def test_the_coverage_check_catches_a_lost_chunk():
    text = " ".join(f"Sentence number {i} says something new." for i in range(40))
    chunks = split_text(text, 120, 30)
    assert _covered(chunks, text)
    assert not _covered(chunks[:5] + chunks[6:], text)
    assert not _covered(chunks[:-1], text)


@PROPS
@given(prose, st.integers(20, 400), st.integers(0, 500))
def test_split_text_keeps_sizes_and_covers_the_text(text, size, overlap):
    chunks = split_text(text, size, overlap)
    assert all(0 < len(c) <= size for c in chunks)
    assert _covered(chunks, text), (chunks, text)


speakers = st.one_of(st.text(min_size=1, max_size=40), st.text(min_size=100, max_size=1200)).filter(str.strip)  # a name can be hostile too


@pytest.mark.timeout(120)  # a speaker name longer than the chunk once made the hard split loop forever
@PROPS
@given(st.lists(st.builds(Turn, speaker=speakers, section=st.sampled_from(["prepared_remarks", "qa"]), text=prose), max_size=8),
       st.integers(40, 1000), st.integers(0, 300))
def test_chunk_turns_keeps_sizes_and_every_short_turn(turns, size, overlap):
    chunks = chunk_turns(turns, size, overlap)
    assert all(0 < len(c.text) <= size for c in chunks)
    for turn in turns:
        line = f"{turn.speaker[:size // 2]}: {turn.text.strip()}"
        if turn.text.strip() and len(line) <= size:
            assert any(line in c.text for c in chunks)
    lost = sum(len("".join(t.text.split())) for t in turns) - sum(len("".join(c.text.split())) for c in chunks)
    assert lost <= 0  # whitespace aside, the chunks hold at least all the words (overlaps and labels add)


def _prepared(kind: str, path: Path, size: int = 300) -> PreparedDocument | None:
    """The document, or None for an IngestError: any other exception fails the test."""
    try:
        prepared = prepare(kind, path, size, 50, limits=IngestLimits(max_file_bytes=2 * 1024 * 1024))  # type: ignore[arg-type]
    except IngestError as exc:
        assert exc.reason and "\n" not in exc.reason
        return None
    assert all(0 < len(c.text) <= size for c in prepared.chunks)
    prepared.model_dump_json()  # storable: no lone surrogates
    return prepared


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-ingest")


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=200))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                           max_leaves=20)
turn_dicts = st.fixed_dictionaries({"speaker": st.one_of(st.text(max_size=60), json_values), "speech": st.one_of(prose, json_values)})
clean_turns = st.lists(st.fixed_dictionaries({"speaker": st.text(max_size=60), "speech": prose}), max_size=5)
transcripts = st.one_of(
    st.fixed_dictionaries({"prepared_remarks": clean_turns, "q_and_a": clean_turns}),
    st.fixed_dictionaries({}, optional={"prepared_remarks": st.lists(turn_dicts, max_size=5) | json_values,
                                        "q_and_a": st.lists(turn_dicts, max_size=5) | json_values, "other": json_values}),
    json_values,
)


@FILES
@given(transcripts, st.booleans())
def test_transcript_json_parses_or_fails_cleanly(workdir, data, ascii_only):
    path = workdir / "ZZFZ_2024_q3.json"
    path.write_text(json.dumps(data, ensure_ascii=ascii_only), encoding="utf-8", errors="surrogatepass")
    prepared = _prepared("transcript", path)
    if prepared is not None:
        assert prepared.doc.ticker == "ZZFZ" and (prepared.doc.fiscal_year, prepared.fiscal_quarter) == (2024, 3)


@FILES
@given(st.binary(max_size=3000), st.sampled_from(["ZZFZ_2024_q1.json", "ZZFZ_2024_q1.txt"]))
def test_arbitrary_bytes_as_a_transcript_fail_cleanly(workdir, data, name):
    path = workdir / name
    path.write_bytes(data)
    _prepared("transcript", path)


header_lines = st.lists(st.one_of(st.sampled_from(["ticker: ZZFZ", "fiscal_year: 2024", "fiscal_quarter: 2", "company: Example Co",
                                                  "call_date: 2024-05-01", "call_date: 2024-13-45", "fiscal_quarter: 9", "no colon"]),
                                 st.text(max_size=40)), max_size=6)
body_lines = st.lists(st.one_of(st.sampled_from(["", "== Prepared Remarks ==", "== Q&A ==", "CEO: Revenue grew.", "Analyst: What about margins?",
                                                 "Operator: Next question.", ": no speaker"]),
                                prose, st.builds("{}: {}".format, st.text(min_size=1, max_size=130), prose)), max_size=12)
good_header = st.lists(st.sampled_from(["company: Example Co", "title: Q2 call", "call_date: 2024-05-01", "speakers: 3"]), max_size=3)
text_transcripts = st.one_of(
    st.builds(lambda head, body: "\n".join(["ticker: ZZFZ", "fiscal_year: 2024", "fiscal_quarter: 2", *head, "---", *body]) + "\n",
              good_header, body_lines),
    st.builds(lambda head, body: "\n".join([*head, "---", *body]), header_lines, body_lines),
    st.lists(st.text(max_size=80), max_size=10).map("\n".join),
)


@FILES
@given(text_transcripts)
def test_text_transcripts_parse_or_fail_cleanly(workdir, text):
    path = workdir / "ZZFZ_2024_q2.txt"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _prepared("transcript", path)


# ---------- generated HTML for the 10-K parser ----------

TEXTS = ["Item 1. Business", "ITEM 1A. RISK FACTORS", "Item 7. Management's Discussion and Analysis", "Item 8.", "PART II",
         "Net sales increased 8% to $412.5 million.", "Table of Contents", "12", "(1,234)", "$", "&nbsp;", "&amp;", "<", "—",
         "Item 7A Quantitative and Qualitative Disclosures", "fiscal year ended December 31, 2024"]
text_nodes = st.one_of(st.sampled_from(TEXTS), st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40))
attrs = st.sampled_from(["", ' colspan="3"', ' colspan="0"', ' colspan="99999999999"', ' rowspan="-1"', ' style="display:none"',
                         ' class="x"', ' title="a>b"', " colspan=x"])


def _element(children: list[str], tag: str, attr: str) -> str:
    return f"<{tag}{attr}>{''.join(children)}</{tag}>"


TAGS = ["div", "p", "span", "b", "font", "table", "tr", "td", "h2", "ul", "li"]
html_nodes = st.recursive(text_nodes, lambda inner: st.builds(_element, st.lists(inner, max_size=4), st.sampled_from(TAGS), attrs),
                          max_leaves=40)


@FILES
@given(st.lists(html_nodes, max_size=12), st.booleans())
def test_tenk_html_parses_or_fails_cleanly(workdir, body, with_items):
    items = "<p>Item 1. Business</p><p>We sell pumps.</p><p>Item 7. Management's Discussion</p><p>Sales grew.</p>" if with_items else ""
    html = f'<html><head><meta name="ticker" content="ZZFK"><meta name="fiscal_year" content="2024"></head><body>{items}{"".join(body)}</body></html>'
    path = workdir / "ZZFK_10k.htm"
    path.write_text(html, encoding="utf-8")
    prepared = _prepared("10k", path, size=500)
    if prepared is not None:
        assert all(c.item in ITEM_ORDER for c in prepared.chunks)


@FILES
@given(st.binary(max_size=3000))
def test_arbitrary_bytes_as_a_10k_fail_cleanly(workdir, data):
    for name in ("ZZFK_10k.htm", "ZZFK_2024_10K.pdf"):
        path = workdir / name
        path.write_bytes(data)
        _prepared("10k", path)
