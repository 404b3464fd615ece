-- finagent: no-transaction
-- The primary financial statement a filing page holds ('income', 'balance' or 'cash_flow'; NULL for any other
-- page and for filings parsed by item), classified at ingest (agent/tenk/statements.py). A page search puts the
-- statement pages a question needs first. Filings ingested before this migration are classified when they are
-- ingested again (the chunking version in their content hash changed). The index is built CONCURRENTLY.
ALTER TABLE tenk_chunks ADD COLUMN IF NOT EXISTS statement text;
CREATE INDEX CONCURRENTLY IF NOT EXISTS tenk_chunks_statement ON tenk_chunks (document_id, statement) WHERE statement IS NOT NULL;
