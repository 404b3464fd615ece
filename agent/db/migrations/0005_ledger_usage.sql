-- each LLM call's tokens, cost and whether the response cache answered it, so a job's totals add up from its ledger
ALTER TABLE job_tool_calls ADD COLUMN IF NOT EXISTS prompt_tokens integer NOT NULL DEFAULT 0;
ALTER TABLE job_tool_calls ADD COLUMN IF NOT EXISTS completion_tokens integer NOT NULL DEFAULT 0;
ALTER TABLE job_tool_calls ADD COLUMN IF NOT EXISTS cost_usd double precision NOT NULL DEFAULT 0;
ALTER TABLE job_tool_calls ADD COLUMN IF NOT EXISTS cached boolean NOT NULL DEFAULT false;
