-- Cancelling a job, and overnight batches.
ALTER TABLE research_jobs ADD COLUMN IF NOT EXISTS cancel_requested_at timestamptz;
ALTER TABLE research_jobs ADD COLUMN IF NOT EXISTS batch boolean NOT NULL DEFAULT false;
ALTER TABLE research_jobs ADD COLUMN IF NOT EXISTS finished_at timestamptz;
-- a batch job is dispatched only when one of the batch_concurrency slots is free; this marks when it got one
ALTER TABLE research_jobs ADD COLUMN IF NOT EXISTS admitted_at timestamptz;
CREATE INDEX IF NOT EXISTS research_jobs_created ON research_jobs (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS research_jobs_batch_queue ON research_jobs (created_at) WHERE batch AND admitted_at IS NULL;

-- A batch is a named set of lines; each line is keyed by its question's own content, so an edited file
-- re-runs only the lines whose content changed.
CREATE TABLE IF NOT EXISTS batches (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS batches_name ON batches (name);

CREATE TABLE IF NOT EXISTS batch_items (
    batch_id    uuid NOT NULL REFERENCES batches(id) ON DELETE CASCADE,
    line        int  NOT NULL,
    item_key    text,             -- null for an invalid line
    question    text NOT NULL DEFAULT '',
    mode        text,
    job_id      uuid REFERENCES research_jobs(id),
    error       text,             -- why the line is invalid
    attempts    int  NOT NULL DEFAULT 1,
    PRIMARY KEY (batch_id, line)
);
CREATE INDEX IF NOT EXISTS batch_items_job ON batch_items (job_id);
