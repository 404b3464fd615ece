-- A chunk row (about 1 KB of text, its tsvector, a 1.5 KB vector) is over the 2 KB past which PostgreSQL moves long
-- values to the table's TOAST relation, so every vector and many tsvectors lived there. A search then fetched each
-- one back through the TOAST index (about three page reads) every time a statement named it: the similarity of a
-- candidate, and twice per query term for its keyword score. With the target at a whole page a chunk row stays in the
-- heap, uncompressed; only a row over a page is still moved out. Rows written before this migration keep their TOAST
-- values until they are written again: ingest rewrites a changed document's rows, and `VACUUM FULL transcript_chunks`
-- rewrites a whole table (under an exclusive lock, so not here).
ALTER TABLE transcript_chunks SET (toast_tuple_target = 8160);
ALTER TABLE tenk_chunks SET (toast_tuple_target = 8160);
