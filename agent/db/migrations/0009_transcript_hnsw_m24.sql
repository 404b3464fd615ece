-- Transcript chunks' HNSW graph at m 24 (was 32, migration 0004), ef_construction 128.
-- On pgvector 0.6 an insert re-prunes the neighbour list of each of its up to 2m neighbours, a cost that grows with
-- the square of m: on these 2 cores an insert took ~10 ms at m 32 and ~2.5 ms at m 24 (the graph of a real ingest
-- competed with the embedding model for the CPU and held ingest below 50 chunks/s). Search recall at 100k chunks is
-- measured by bench/search.py (docs/benchmarks.md). Rebuilt only when the index lacks these options.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_class
                   WHERE relname = 'transcript_chunks_hnsw' AND relkind = 'i'
                     AND reloptions @> ARRAY['m=24', 'ef_construction=128']) THEN
        DROP INDEX IF EXISTS transcript_chunks_hnsw;
        CREATE INDEX transcript_chunks_hnsw ON transcript_chunks
            USING hnsw (embedding vector_cosine_ops) WITH (m = 24, ef_construction = 128);
    END IF;
END $$;
