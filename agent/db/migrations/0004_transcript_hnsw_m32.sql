-- finagent: no-transaction
-- Denser HNSW graph for transcript chunks (m 32, ef_construction 128; pgvector's defaults are 16 and 64).
-- Short keyword-like queries sit far from every chunk vector, and at m 16 an ef_search 200 scan found only
-- about 73% of the true top 15 semantic neighbours of bench/search.py's 100k synthetic chunks; at m 32 about
-- 89%. The cost: a slower build and slower inserts into the graph. (Migration 0009 replaces it with m 24.)
-- Built CONCURRENTLY beside the old graph, then swapped in by name, as 0009 does.
DROP INDEX CONCURRENTLY IF EXISTS transcript_chunks_hnsw_next;
CREATE INDEX CONCURRENTLY IF NOT EXISTS transcript_chunks_hnsw_next ON transcript_chunks
    USING hnsw (embedding vector_cosine_ops) WITH (m = 32, ef_construction = 128);
DROP INDEX CONCURRENTLY IF EXISTS transcript_chunks_hnsw;
ALTER INDEX transcript_chunks_hnsw_next RENAME TO transcript_chunks_hnsw;
