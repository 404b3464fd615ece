-- The primary statements read as data (agent/statements): every line item of a statement page with its figure per
-- column, its normalised concept and the page it is printed on, so a calculator can read "inventory, FY2021" of a
-- company and cite the page. Written with the document (deleted with it) and re-read when the reader's version
-- changes (documents.statements_version), without embedding anything again.
CREATE TABLE IF NOT EXISTS statement_lines (
    id bigserial PRIMARY KEY,
    document_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ticker text NOT NULL,
    statement text NOT NULL CHECK (statement IN ('income', 'balance', 'cash_flow')),
    page int NOT NULL,
    row_index int NOT NULL,
    label text NOT NULL,
    section text NOT NULL DEFAULT '',
    concept text,
    is_total boolean NOT NULL DEFAULT false,
    column_index int NOT NULL,
    period_label text NOT NULL DEFAULT '',
    period_year int,
    months int,
    value double precision NOT NULL,
    scale double precision NOT NULL DEFAULT 1,
    unit text NOT NULL DEFAULT 'currency'
);
CREATE INDEX IF NOT EXISTS statement_lines_lookup ON statement_lines (ticker, concept, period_year) WHERE concept IS NOT NULL;
CREATE INDEX IF NOT EXISTS statement_lines_document ON statement_lines (document_id);
ALTER TABLE documents ADD COLUMN IF NOT EXISTS statements_version text;
