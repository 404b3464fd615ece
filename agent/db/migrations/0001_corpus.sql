-- Corpus: companies, source documents, transcript and 10-K chunks, 10-K tables.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE IF NOT EXISTS companies (
    ticker           text PRIMARY KEY,
    name             text NOT NULL,
    aliases          text[] NOT NULL DEFAULT '{}',
    fiscal_year_end  text            -- 'MM-DD' of the fiscal year end, e.g. '09-28' for Apple
);

CREATE TABLE IF NOT EXISTS documents (
    id             bigserial PRIMARY KEY,
    kind           text NOT NULL CHECK (kind IN ('transcript', '10k')),
    ticker         text NOT NULL REFERENCES companies(ticker),
    fiscal_year    int  NOT NULL,
    fiscal_quarter int  NOT NULL DEFAULT 0,   -- 0 for annual documents
    call_date      date,
    source_path    text NOT NULL,
    content_hash   text NOT NULL,
    title          text,
    ingested_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (kind, ticker, fiscal_year, fiscal_quarter)
);

CREATE TABLE IF NOT EXISTS transcript_chunks (
    id             bigserial PRIMARY KEY,
    document_id    bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ticker         text NOT NULL,
    fiscal_year    int  NOT NULL,
    fiscal_quarter int  NOT NULL,
    call_date      date,
    speaker        text,
    section        text NOT NULL CHECK (section IN ('prepared_remarks', 'qa')),
    chunk_index    int  NOT NULL,
    text           text NOT NULL,
    embedding      vector(384) NOT NULL,
    tsv            tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    UNIQUE (document_id, chunk_index)
);
CREATE INDEX IF NOT EXISTS transcript_chunks_period ON transcript_chunks (ticker, fiscal_year, fiscal_quarter);
CREATE INDEX IF NOT EXISTS transcript_chunks_tsv ON transcript_chunks USING gin (tsv);
CREATE INDEX IF NOT EXISTS transcript_chunks_hnsw ON transcript_chunks USING hnsw (embedding vector_cosine_ops);

CREATE TABLE IF NOT EXISTS tenk_chunks (
    id             bigserial PRIMARY KEY,
    document_id    bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ticker         text NOT NULL,
    fiscal_year    int  NOT NULL,
    item           text NOT NULL,          -- '1', '1A', '7', '7A', '8', ...
    item_title     text,
    chunk_index    int  NOT NULL,
    text           text NOT NULL,
    embedding      vector(384) NOT NULL,
    tsv            tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    UNIQUE (document_id, chunk_index)
);
CREATE INDEX IF NOT EXISTS tenk_chunks_filter ON tenk_chunks (ticker, fiscal_year, item);
CREATE INDEX IF NOT EXISTS tenk_chunks_tsv ON tenk_chunks USING gin (tsv);
CREATE INDEX IF NOT EXISTS tenk_chunks_hnsw ON tenk_chunks USING hnsw (embedding vector_cosine_ops);

CREATE TABLE IF NOT EXISTS tenk_tables (
    id             bigserial PRIMARY KEY,
    document_id    bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ticker         text NOT NULL,
    fiscal_year    int  NOT NULL,
    item           text NOT NULL,
    table_index    int  NOT NULL,
    caption        text NOT NULL DEFAULT '',
    rows           jsonb NOT NULL,
    markdown       text NOT NULL,
    tsv            tsvector GENERATED ALWAYS AS (to_tsvector('english', caption || ' ' || markdown)) STORED,
    UNIQUE (document_id, table_index)
);
CREATE INDEX IF NOT EXISTS tenk_tables_filter ON tenk_tables (ticker, fiscal_year, item);
CREATE INDEX IF NOT EXISTS tenk_tables_tsv ON tenk_tables USING gin (tsv);

CREATE TABLE IF NOT EXISTS embedding_cache (
    model       text  NOT NULL,
    text_hash   text  NOT NULL,
    embedding   vector(384) NOT NULL,
    PRIMARY KEY (model, text_hash)
);
