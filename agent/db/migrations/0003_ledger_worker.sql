-- which worker ran each tool call (host:pid:thread), so an operator can see a fan-out run in parallel
ALTER TABLE job_tool_calls ADD COLUMN IF NOT EXISTS worker text;
