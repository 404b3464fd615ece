-- Filings read page by page (FinanceBench-style page texts): 10-Qs, 8-Ks and earnings releases join 10-Ks as
-- document kinds; their chunks go to tenk_chunks, the filing chunks, with their fiscal quarter (0 for annual
-- documents) and the 0-based PDF page they came from (NULL for filings parsed from HTML or PDF by item).
-- documents.variant tells apart documents of one kind, company and period: an 8-K's date ('' otherwise).
ALTER TABLE documents DROP CONSTRAINT IF EXISTS documents_kind_check;
ALTER TABLE documents ADD CONSTRAINT documents_kind_check
    CHECK (kind IN ('transcript', '10k', '10q', '8k', 'earnings'));
ALTER TABLE documents ADD COLUMN IF NOT EXISTS variant text NOT NULL DEFAULT '';
ALTER TABLE documents DROP CONSTRAINT IF EXISTS documents_kind_ticker_fiscal_year_fiscal_quarter_key;
ALTER TABLE documents DROP CONSTRAINT IF EXISTS documents_identity;
ALTER TABLE documents ADD CONSTRAINT documents_identity UNIQUE (kind, ticker, fiscal_year, fiscal_quarter, variant);

ALTER TABLE tenk_chunks ADD COLUMN IF NOT EXISTS fiscal_quarter int NOT NULL DEFAULT 0;
ALTER TABLE tenk_chunks ADD COLUMN IF NOT EXISTS page int;
CREATE INDEX IF NOT EXISTS tenk_chunks_period ON tenk_chunks (ticker, fiscal_year, fiscal_quarter);
