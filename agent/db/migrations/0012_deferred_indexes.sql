-- vector indexes a bulk load dropped to build again after its last write (agent/ingest/vector_index.py): the
-- definition is recorded in the transaction that drops the index, so a load that dies leaves what to rebuild.
-- A later migration that redefines an HNSW index must also rewrite its row here, if one is present.
CREATE TABLE IF NOT EXISTS deferred_indexes (
    name         text PRIMARY KEY,
    table_name   text NOT NULL,
    definition   text NOT NULL,
    deferred_at  timestamptz NOT NULL DEFAULT now()
);
