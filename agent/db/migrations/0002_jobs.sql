-- Research jobs, their accumulated evidence and the outputs of fan-out steps.
CREATE TABLE IF NOT EXISTS research_jobs (
    id               uuid PRIMARY KEY,
    idempotency_key  text UNIQUE,
    parent_job_id    uuid REFERENCES research_jobs(id),
    question         text NOT NULL,
    status           text NOT NULL,
    step             text NOT NULL,
    state            jsonb NOT NULL,
    result           jsonb,
    error            text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS research_jobs_status ON research_jobs (status, created_at);

-- Evidence is keyed by citation so a redelivered search task cannot add a row twice.
CREATE TABLE IF NOT EXISTS job_evidence (
    job_id        uuid NOT NULL REFERENCES research_jobs(id) ON DELETE CASCADE,
    citation_key  text NOT NULL,
    iteration     int  NOT NULL,
    source_type   text NOT NULL,
    score         double precision NOT NULL DEFAULT 0,
    payload       jsonb NOT NULL,
    added_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, citation_key)
);

-- One row per fan-out task output, keyed by its deterministic task key (job:iter:step:n).
CREATE TABLE IF NOT EXISTS job_step_outputs (
    job_id     uuid NOT NULL REFERENCES research_jobs(id) ON DELETE CASCADE,
    step_key   text NOT NULL,
    payload    jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, step_key)
);

-- Tool ledger (seed 002): every tool call of every job, written by whichever worker ran it.
CREATE TABLE IF NOT EXISTS job_tool_calls (
    job_id       uuid NOT NULL REFERENCES research_jobs(id) ON DELETE CASCADE,
    call_key     text NOT NULL,
    tool         text NOT NULL,
    params       jsonb NOT NULL,
    started_at   timestamptz NOT NULL,
    duration_ms  double precision NOT NULL,
    result_size  int NOT NULL DEFAULT 0,
    retries      int NOT NULL DEFAULT 0,
    error_class  text,
    error        text,
    PRIMARY KEY (job_id, call_key)
);
