"""Split text into overlapping chunks that end on sentence boundaries where possible."""
from __future__ import annotations

import re

from pydantic import BaseModel

from agent.models.corpus import Turn

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(\[])")


def split_text(text: str, size: int, overlap: int) -> list[str]:
    if size < 1:
        raise ValueError(f"chunk size must be positive, got {size}")
    text = re.sub(r"[ \t]+", " ", text).strip()
    if len(text) <= size:
        return [text] if text else []
    sentences = _SENTENCE_END.split(text)
    chunks: list[str] = []
    current = ""
    step = size - min(overlap, size // 2)  # at least half a chunk: an overlap >= size would never move on
    for sentence in sentences:
        if len(sentence) > size:  # one very long "sentence" (tables, lists, a file with no punctuation): hard split
            if current:
                chunks.append(current)
                current = ""
            start = 0
            while len(sentence) - start > size:  # slices by offset: re-slicing the rest each time is quadratic
                chunks.append(sentence[start:start + size])
                start += step
            sentence = sentence[start:]
        if current and len(current) + 1 + len(sentence) > size:
            chunks.append(current)
            # the overlap must leave room for the sentence, or the next chunk grows past `size`
            current = _tail(current, min(overlap, size - len(sentence) - 1))
        current = f"{current} {sentence}".strip()
    if current and (not chunks or current != _tail(chunks[-1], overlap)):
        chunks.append(current)
    return chunks


def _tail(text: str, overlap: int) -> str:
    """The last whole sentences of `text` that fit in `overlap` characters."""
    if overlap <= 0:
        return ""
    tail = ""
    for sentence in reversed(_SENTENCE_END.split(text)):
        if len(tail) + len(sentence) + 1 > overlap:
            break
        tail = f"{sentence} {tail}".strip()
    return tail


class TurnChunk(BaseModel):
    speaker: str
    section: str
    text: str


def chunk_turns(turns: list[Turn], size: int, overlap: int) -> list[TurnChunk]:
    """Pack consecutive short turns of one section together; split long turns.

    Each chunk's text starts with "Speaker: " for every turn in it, so the speaker is searchable (a name longer than
    half a chunk is cut there, or it would leave no room for the words). The chunk's `speaker` is the one who
    contributed most of its text.
    """
    out: list[TurnChunk] = []
    buf: list[tuple[str, str]] = []
    section = None

    def flush() -> None:
        if buf:
            main = max(buf, key=lambda st: len(st[1]))[0]
            out.append(TurnChunk(speaker=main, section=section, text="\n".join(f"{s}: {t}" for s, t in buf)))
            buf.clear()

    for turn in turns:
        text = turn.text.strip()
        if not text:
            continue
        if turn.section != section:
            flush()
            section = turn.section
        label = turn.speaker[:size // 2]
        piece_len = len(label) + 2 + len(text)
        if piece_len > size:
            flush()
            for part in split_text(text, max(size - len(label) - 2, 1), overlap):
                out.append(TurnChunk(speaker=turn.speaker, section=turn.section, text=f"{label}: {part}"))
            continue
        if sum(len(s) + len(t) + 3 for s, t in buf) + piece_len > size:
            flush()
        buf.append((label, text))
    flush()
    return out
