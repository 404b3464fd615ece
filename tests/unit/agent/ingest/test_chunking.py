"""split_text and chunk_turns: size limits, overlap, sentence boundaries, no lost text."""
from __future__ import annotations

import random
import re

import pytest

from agent.ingest.chunking import _SENTENCE_END, chunk_turns, split_text
from agent.models.corpus import Turn


def _sentences(n: int, start: int = 0) -> list[str]:
    return [f"Sentence number {i} says net interest margin moved by {i} basis points." for i in range(start, start + n)]


# ---------------------------------------------------------------- split_text


def test_short_text_is_one_chunk_with_whitespace_collapsed():
    assert split_text("  Revenue  grew.\tMargins   held.  ", 100, 10) == ["Revenue grew. Margins held."]


def test_empty_text_gives_no_chunks():
    assert split_text("", 100, 10) == []
    assert split_text("   \t ", 100, 10) == []


@pytest.mark.parametrize("size,overlap", [(120, 0), (200, 60), (300, 80), (1000, 150)])
def test_chunks_respect_size_and_keep_every_sentence(size, overlap):
    sentences = _sentences(60)
    chunks = split_text(" ".join(sentences), size, overlap)
    assert len(chunks) > 1
    assert all(len(c) <= size for c in chunks), [len(c) for c in chunks]
    for s in sentences:
        assert any(s in c for c in chunks), f"lost: {s}"


def test_chunks_end_on_sentence_boundaries():
    sentences = _sentences(40)
    chunks = split_text(" ".join(sentences), 300, 80)
    for c in chunks:
        assert c.endswith("."), c
        # every chunk is a run of whole sentences, never a cut one
        for piece in _SENTENCE_END.split(c):
            assert piece in sentences, piece


def test_consecutive_chunks_overlap_by_whole_sentences():
    sentences = _sentences(40)
    overlap = 80  # each sentence is ~70 chars, so exactly one sentence fits in the overlap
    chunks = split_text(" ".join(sentences), 300, overlap)
    for prev, nxt in zip(chunks, chunks[1:]):
        last_of_prev = _SENTENCE_END.split(prev)[-1]
        assert nxt.startswith(last_of_prev), (prev, nxt)
        assert len(last_of_prev) <= overlap


def test_no_overlap_means_disjoint_chunks_in_order():
    sentences = _sentences(30)
    chunks = split_text(" ".join(sentences), 250, 0)
    pieces = [p for c in chunks for p in _SENTENCE_END.split(c)]
    assert pieces == sentences  # every sentence exactly once, in order


def test_overlap_tail_never_pushes_a_chunk_over_size():
    # a 91-char sentence after a 31-char one: the 31-char overlap + the 91-char sentence is over 100
    text = " ".join(["A" * 30 + ".", "B" * 90 + ".", "C" * 20 + "."])
    chunks = split_text(text, 100, 50)
    assert all(len(c) <= 100 for c in chunks), [len(c) for c in chunks]
    for s in ("A" * 30 + ".", "B" * 90 + ".", "C" * 20 + "."):
        assert any(s in c for c in chunks)


def test_random_texts_respect_size_and_lose_nothing():
    rng = random.Random(7)
    for _ in range(500):
        sentences = [f"W{i}" + "x" * rng.randint(1, 200) + "." for i in range(rng.randint(1, 25))]
        size = rng.randint(220, 500)
        overlap = rng.randint(0, size // 2)
        chunks = split_text(" ".join(sentences), size, overlap)
        assert all(len(c) <= size for c in chunks), (size, overlap, [len(c) for c in chunks])
        for s in sentences:
            assert any(s in c for c in chunks), (size, overlap, s)


def test_one_overlong_sentence_is_hard_split_with_overlap_and_nothing_lost():
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))  # no sentence end at all
    chunks = split_text(text, 300, 50)
    assert all(len(c) <= 300 for c in chunks)
    assert chunks[0] == text[:300]
    for prev, nxt in zip(chunks, chunks[1:]):
        assert nxt.startswith(prev[-50:])  # hard splits overlap by `overlap` characters
    # stitching the chunks back (dropping each overlap) gives the original text
    stitched = chunks[0] + "".join(c[50:] for c in chunks[1:])
    assert stitched == text


def test_long_sentence_between_normal_ones_keeps_all_text():
    long = "Table " + " ".join(f"row{i} value{i}" for i in range(80)) + "."
    sentences = ["First point here.", long, "Last point here."]
    chunks = split_text(" ".join(sentences), 200, 40)
    assert all(len(c) <= 200 for c in chunks)
    joined = " ".join(chunks)
    assert "First point here." in joined and "Last point here." in joined
    for word in re.findall(r"row\d+", long):
        assert re.search(rf"\b{word}\b", joined), word


# ---------------------------------------------------------------- chunk_turns


def _turn(speaker: str, text: str, section: str = "prepared_remarks") -> Turn:
    return Turn(speaker=speaker, section=section, text=text)


def test_short_turns_of_one_section_are_packed_with_speaker_prefixes():
    turns = [_turn("Operator", "Welcome to the call."), _turn("Jane Doe", "Thanks. Revenue grew 5%.")]
    chunks = chunk_turns(turns, 1000, 100)
    assert len(chunks) == 1
    assert chunks[0].text == "Operator: Welcome to the call.\nJane Doe: Thanks. Revenue grew 5%."
    assert chunks[0].section == "prepared_remarks"
    assert chunks[0].speaker == "Jane Doe"  # contributed most of the text


def test_sections_are_never_mixed_in_one_chunk():
    turns = [
        _turn("CEO", "Prepared words."),
        _turn("CFO", "More prepared words."),
        _turn("Operator", "First question please.", "qa"),
        _turn("Analyst", "What about margins?", "qa"),
    ]
    chunks = chunk_turns(turns, 1000, 100)
    assert [c.section for c in chunks] == ["prepared_remarks", "qa"]
    assert "Operator:" not in chunks[0].text and "CEO:" not in chunks[1].text
    assert chunks[1].text == "Operator: First question please.\nAnalyst: What about margins?"


def test_every_chunk_line_starts_with_a_speaker_and_respects_size():
    turns = [_turn(f"Speaker {i % 3}", " ".join(_sentences(2, i))) for i in range(30)]
    chunks = chunk_turns(turns, 400, 60)
    assert len(chunks) > 1
    assert all(len(c.text) <= 400 for c in chunks)
    for c in chunks:
        for line in c.text.split("\n"):
            assert re.match(r"^Speaker \d: ", line), line
    # every turn's text is in some chunk
    for t in turns:
        assert any(f"{t.speaker}: {t.text}" in c.text for c in chunks)


def test_long_turn_is_split_into_prefixed_chunks_of_that_speaker():
    sentences = _sentences(30)
    turns = [_turn("Op", "Hello."), _turn("Kevin Blair", " ".join(sentences), "qa"), _turn("Op", "Bye.", "qa")]
    chunks = chunk_turns(turns, 300, 80)
    long_chunks = [c for c in chunks if c.speaker == "Kevin Blair"]
    assert len(long_chunks) > 3
    assert all(c.text.startswith("Kevin Blair: ") for c in long_chunks)
    assert all(c.section == "qa" for c in long_chunks)
    assert all(len(c.text) <= 300 for c in chunks)
    for s in sentences:
        assert any(s in c.text for c in long_chunks), s
    # the long turn is not glued to its neighbours
    assert chunks[0].text == "Op: Hello."
    assert chunks[-1].text == "Op: Bye."


def test_blank_turns_are_dropped():
    chunks = chunk_turns([_turn("A", "   "), _turn("B", "Real text.")], 1000, 0)
    assert [c.text for c in chunks] == ["B: Real text."]


@pytest.mark.timeout(10)
def test_overlap_not_smaller_than_size_still_terminates():
    # chunk_turns passes size - len(speaker) - 2, which a long speaker name can push below the overlap
    text = "".join(chr(ord("a") + i % 26) for i in range(500))
    chunks = split_text(text, 100, 100)
    assert all(len(c) <= 100 for c in chunks)
    assert chunks[0] == text[:100] and chunks[-1].endswith(text[-20:])
    assert len(chunks) < 20


@pytest.mark.timeout(10)
def test_long_speaker_name_with_long_turn_terminates():
    text = "".join(chr(ord("a") + i % 26) for i in range(400))  # one unbroken "sentence": hard split
    chunks = chunk_turns([_turn("S" * 60, text)], 150, 100)  # 150 - 62 = 88 < overlap
    assert len(chunks) > 1
    assert all(len(c.text) <= 150 for c in chunks)
    assert all(c.text.startswith("S" * 60 + ": ") for c in chunks)
    assert chunks[-1].text.endswith(text[-20:])
