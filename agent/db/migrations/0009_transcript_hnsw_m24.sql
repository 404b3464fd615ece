-- finagent: no-transaction
-- Transcript chunks' HNSW graph at m 24 (was 32, migration 0004), ef_construction 128.
-- On pgvector 0.6 an insert re-prunes the neighbour list of each of its up to 2m neighbours, a cost that grows with
-- the square of m: on these 2 cores an insert took ~10 ms at m 32 and ~2.5 ms at m 24 (the graph of a real ingest
-- competed with the embedding model for the CPU and held ingest below 50 chunks/s). Search recall at 100k chunks is
-- measured by bench/search.py (docs/benchmarks.md).
-- Built CONCURRENTLY beside the old graph (writes go on; searches use the old graph until the swap), then swapped
-- in by name. Each statement runs on its own (agent/db/migrate.py): a run stopped part-way is run again from the top.
DROP INDEX CONCURRENTLY IF EXISTS transcript_chunks_hnsw_next;
CREATE INDEX CONCURRENTLY IF NOT EXISTS transcript_chunks_hnsw_next ON transcript_chunks
    USING hnsw (embedding vector_cosine_ops) WITH (m = 24, ef_construction = 128);
DROP INDEX CONCURRENTLY IF EXISTS transcript_chunks_hnsw;
ALTER INDEX transcript_chunks_hnsw_next RENAME TO transcript_chunks_hnsw;
