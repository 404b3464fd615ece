-- how a document's chunks and vectors were made (the embedder, chunk size and overlap), beside its content hash:
-- the same bytes ingested under another embedder or chunking replace the document. NULL: stored before this column,
-- recipe unknown (the ingest runner checks such a document's vectors against the current embedder)
ALTER TABLE documents ADD COLUMN IF NOT EXISTS recipe text;
