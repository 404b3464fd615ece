"""Adjacent transcript chunks of one document, in one speaker's turn, become one passage before generation;
the text two neighbouring chunks share (the chunker's overlap) then appears once, which saves tokens."""
from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, Field

from agent.models.research import Evidence
from agent.pipeline.scopes import scope_of

CHARS_PER_TOKEN = 4
MIN_OVERLAP = 20  # shorter shared text is a coincidence, not the chunker's overlap


class Merged(BaseModel):
    evidence: list[Evidence]
    merged: dict[str, int] = Field(default_factory=dict)  # scope -> chunks folded into a neighbour
    chars_saved: dict[str, int] = Field(default_factory=dict)  # scope -> duplicated characters removed

    def tokens_saved(self, scope: str) -> int:
        return self.chars_saved.get(scope, 0) // CHARS_PER_TOKEN


def overlap(left: str, right: str, longest: int = 800) -> int:
    """The length of the longest end of `left` that `right` starts with (at least MIN_OVERLAP, else 0, and at most
    `longest`). Only where `right`'s first MIN_OVERLAP characters occur in `left`'s tail can a shared end begin, so
    those places are tried, longest first, instead of every length (which took milliseconds per job's evidence)."""
    most = min(len(left), len(right), longest)
    if most < MIN_OVERLAP:
        return 0
    lead = right[:MIN_OVERLAP]
    start = len(left) - most
    while (at := left.find(lead, start)) != -1 and len(left) - at >= MIN_OVERLAP:
        if right.startswith(left[at:]):
            return len(left) - at
        start = at + 1
    return 0


def merge_adjacent(evidence: list[Evidence]) -> Merged:
    """The evidence with each run of adjacent chunks (same document, consecutive chunk_index, same speaker and
    section) merged into its first chunk, which keeps that chunk's citation key and position."""
    by_doc: dict[int, list[Evidence]] = defaultdict(list)
    for ev in evidence:
        if ev.source_type == "transcript" and ev.document_id is not None and ev.chunk_index is not None:
            by_doc[ev.document_id].append(ev)
    replaced: dict[str, Evidence] = {}
    absorbed: set[str] = set()
    result = Merged(evidence=[])
    for chunks in by_doc.values():
        chunks.sort(key=lambda e: e.chunk_index or 0)
        head, last = chunks[0], chunks[0]
        for nxt in chunks[1:]:
            if nxt.chunk_index == (last.chunk_index or 0) + 1 and (nxt.speaker, nxt.section) == (last.speaker, last.section):
                label = f"{nxt.speaker}: " if nxt.speaker and nxt.text.startswith(f"{nxt.speaker}: ") else ""
                body = nxt.text[len(label):]  # each piece of a split turn repeats its speaker's name
                shared = overlap(head.text, body)
                # with shared text the turn simply goes on; without, the neighbour keeps its own lead-in
                joined = head.text + body[shared:] if shared else f"{head.text}\n{nxt.text}"
                head = head.model_copy(update={"text": joined, "score": max(head.score, nxt.score)})
                scope = scope_of(nxt)
                result.merged[scope] = result.merged.get(scope, 0) + 1
                saved = shared + (len(label) if shared else 0)
                result.chars_saved[scope] = result.chars_saved.get(scope, 0) + saved
                absorbed.add(nxt.citation_key)
                replaced[head.citation_key] = head  # the run keeps its first chunk's citation key
            else:
                head = nxt
            last = nxt
    result.evidence = [replaced.get(ev.citation_key, ev) for ev in evidence if ev.citation_key not in absorbed]
    return result
