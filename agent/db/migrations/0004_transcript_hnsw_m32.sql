-- Denser HNSW graph for transcript chunks (m 32, ef_construction 128; pgvector's defaults are 16 and 64).
-- Short keyword-like queries sit far from every chunk vector, and at m 16 an ef_search 200 scan found only
-- about 73% of the true top 15 semantic neighbours of bench/search.py's 100k synthetic chunks; at m 32 about
-- 89%. The cost: a slower build and slower inserts into the graph. Rebuilt only when the index lacks these
-- options, so re-running is a no-op.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_class
                   WHERE relname = 'transcript_chunks_hnsw' AND relkind = 'i'
                     AND reloptions @> ARRAY['m=32', 'ef_construction=128']) THEN
        DROP INDEX IF EXISTS transcript_chunks_hnsw;
        CREATE INDEX transcript_chunks_hnsw ON transcript_chunks
            USING hnsw (embedding vector_cosine_ops) WITH (m = 32, ef_construction = 128);
    END IF;
END $$;
