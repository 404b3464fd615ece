"""BM25 candidates do not depend on how tantivy laid out its segments: score ties go to the lower chunk id."""
from __future__ import annotations

import tantivy

from agent.retrieval.keyword_index import IndexMeta, KeywordIndex


def _add(index: KeywordIndex, ids: list[int], text: str) -> None:
    writer = index._index.writer(heap_size=15_000_000, num_threads=1)
    for i in ids:
        writer.add_document(tantivy.Document(id=i, text=text))
    writer.commit()
    writer.wait_merging_threads()


def test_tied_scores_take_the_lowest_ids_whatever_the_insertion_order(tmp_path):
    index = KeywordIndex(tmp_path / "transcript")
    same = "deposit costs rose with funding rates"
    # the highest ids are written first, each batch in its own segment: address order is not id order
    for batch in ([90, 91, 92], [50, 51], [7, 8, 9]):
        _add(index, batch, same)
    _add(index, [100], "funding rates, funding rates and deposit costs")  # the one clear best match
    index._write_meta(IndexMeta(system_id="s", watermark=100, documents=9))
    found = index.search("deposit funding", 4)
    assert found[0] == 100
    assert found[1:] == [7, 8, 9]
    assert index.search("deposit funding", 4) == found


def test_fewer_hits_than_asked_are_all_returned(tmp_path):
    index = KeywordIndex(tmp_path / "transcript")
    _add(index, [3, 1, 2], "tier one capital ratio")
    index._write_meta(IndexMeta(system_id="s", watermark=3, documents=3))
    assert index.search("capital", 10) == [1, 2, 3]
    assert index.search("nothing matches this", 10) == []


def test_ties_past_twice_the_hits_asked_for_still_take_the_lowest_ids(tmp_path):
    """Eleven chunks tie for second place and two are asked for after the best: the lowest ids, not the first
    addresses, however many hits past the n-th tie with it."""
    index = KeywordIndex(tmp_path / "transcript")
    same = "net charge-offs rose with provisions"
    for batch in ([95, 96, 97, 98], [60, 61, 62], [21, 22], [4, 3]):
        _add(index, batch, same)
    _add(index, [200], "charge-offs and provisions, charge-offs and provisions")
    index._write_meta(IndexMeta(system_id="s", watermark=200, documents=12))
    assert index.search("charge-offs provisions", 3) == [200, 3, 4]
