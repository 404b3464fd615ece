-- Statement lines read from a filing's tables (10-Ks parsed from HTML or by item) as well as from its pages: such a
-- line has no page; it names the table it was read from, which the answer cites.
ALTER TABLE statement_lines ALTER COLUMN page DROP NOT NULL;
ALTER TABLE statement_lines ADD COLUMN IF NOT EXISTS table_id bigint REFERENCES tenk_tables(id) ON DELETE CASCADE;
