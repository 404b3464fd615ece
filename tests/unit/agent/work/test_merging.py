"""Adjacent chunks of one document and one speaker's turn become one passage; their shared text appears once."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.models.research import Evidence
from agent.work.merging import merge_adjacent, overlap


def chunk(cid: int, index: int, text: str, doc: int = 7, speaker: str = "CFO", quarter: int = 4) -> Evidence:
    return Evidence(source_type="transcript", chunk_id=cid, document_id=doc, chunk_index=index, ticker="ACME",
                    fiscal_year=2024, fiscal_quarter=quarter, speaker=speaker, section="prepared_remarks", text=text,
                    score=cid / 10)


SHARED = "Gross margin expanded on a richer mix of higher-priced units."


def test_overlapping_neighbours_merge_and_the_shared_text_is_sent_once():
    a = chunk(1, 4, "Revenue grew in every region. " + SHARED)
    b = chunk(2, 5, SHARED + " Operating expenses were flat.")
    far = chunk(3, 9, "Cash returned to shareholders rose.")
    out = merge_adjacent([b, far, a])
    assert [e.citation_key for e in out.evidence] == ["transcript:3", "transcript:1"]  # b folded into a
    merged = out.evidence[1]
    assert merged.text == "Revenue grew in every region. " + SHARED + " Operating expenses were flat."
    assert merged.score == 0.2 and out.merged == {"ACME:2024_q4": 1}
    assert out.chars_saved == {"ACME:2024_q4": len(SHARED)} and out.tokens_saved("ACME:2024_q4") == len(SHARED) // 4


def test_other_speakers_documents_and_sources_stay_apart():
    a, b = chunk(1, 4, "Question on margins."), chunk(2, 5, "Answer on margins.", speaker="CEO")
    other_doc = chunk(3, 5, "Same index, other call.", doc=8)
    news = Evidence(source_type="news", chunk_id="u", text="Headline.")
    out = merge_adjacent([a, b, other_doc, news])
    assert len(out.evidence) == 4 and out.merged == {}


def test_a_run_of_three_merges_into_the_first():
    out = merge_adjacent([chunk(1, 1, "One."), chunk(2, 2, "Two."), chunk(3, 3, "Three.")])
    assert [e.text for e in out.evidence] == ["One.\nTwo.\nThree."] and out.merged == {"ACME:2024_q4": 2}


def test_overlap_needs_a_real_shared_stretch():
    assert overlap("abc " + SHARED, SHARED + " xyz") == len(SHARED)
    assert overlap("ends with the", "the start") == 0  # three shared characters are a coincidence


def test_the_chunkers_own_pieces_of_a_long_turn_merge_back_into_the_turn():
    from agent.ingest.chunking import chunk_turns
    from agent.models.corpus import Turn

    speech = " ".join(f"Sentence number {i} talks about deposits and loans in some detail." for i in range(1, 31))
    pieces = chunk_turns([Turn(speaker="Jane Doe", section="prepared_remarks", text=speech)], size=300, overlap=120)
    assert len(pieces) > 3
    evidence = [chunk(i, i, p.text, speaker="Jane Doe") for i, p in enumerate(pieces, 1)]
    out = merge_adjacent(evidence)
    assert [e.text for e in out.evidence] == [f"Jane Doe: {speech}"]  # the whole turn, once, in order
    assert out.merged == {"ACME:2024_q4": len(pieces) - 1}
    repeated = sum(len(e.text) for e in evidence) - len(out.evidence[0].text)
    assert out.chars_saved["ACME:2024_q4"] == repeated and out.tokens_saved("ACME:2024_q4") > 0


def _overlap_by_every_length(left: str, right: str, longest: int = 800) -> int:
    """The definition overlap() had before it searched only where a shared end can begin: every length, longest first."""
    for k in range(min(len(left), len(right), longest), 19, -1):
        if left.endswith(right[:k]):
            return k
    return 0


@settings(max_examples=400, deadline=None)
@given(shared=st.text("ab ", max_size=60), left=st.text("ab ", max_size=40), right=st.text("ab ", max_size=40),
       longest=st.sampled_from([800, 30, 20, 19, 5]))
def test_overlap_is_the_longest_shared_end_as_defined_by_every_length(shared, left, right, longest):
    # a two-letter alphabet repeats itself everywhere: the worst case for a search that skips lengths
    for a, b in ((left + shared, shared + right), (left, right), (shared, shared)):
        assert overlap(a, b, longest) == _overlap_by_every_length(a, b, longest)


def test_overlap_finds_a_long_shared_stretch_but_none_over_800_characters():
    stretch = "".join(f"Sentence {i} of the remarks. " for i in range(40))[:900]
    assert overlap("Lead-in. " + stretch[:700], stretch[:700] + " More.") == 700
    assert overlap("Lead-in. " + stretch, stretch + " More.") == 0  # 900 shared characters: longer than any overlap
