-- finagent: no-transaction
-- Jobs and batches belong to the API key that created them (agent/ownership.py): `owner` is a digest of the key,
-- never the key. NULL for what was made without a key (the Celery contract, the CLI, an API with no keys configured)
-- and for every row written before this migration: with keys configured only admin keys see those.
-- An owned job's idempotency key is stored prefixed with its owner, so the column's own UNIQUE constraint scopes it.
ALTER TABLE research_jobs ADD COLUMN IF NOT EXISTS owner text;
ALTER TABLE batches ADD COLUMN IF NOT EXISTS owner text;
-- one key's jobs, newest first (GET /v1/jobs with a key that is not an admin's); research_jobs grows with every
-- job, so the index is built CONCURRENTLY
CREATE INDEX CONCURRENTLY IF NOT EXISTS research_jobs_owner ON research_jobs (owner, created_at DESC, id DESC)
    WHERE owner IS NOT NULL;
-- a batch's name is unique per owner (the ownerless ones among themselves): two keys uploading the same lines, which
-- name their batch alike, get a batch each. It replaces the name's own unique index.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS batches_owner_name ON batches ((coalesce(owner, '')), name);
DROP INDEX CONCURRENTLY IF EXISTS batches_name;
