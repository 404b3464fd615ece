-- how many LLM requests a call made: a 10-K retrieval asks the model to pick tables inside a search call, so a
-- call's tool name alone does not tell whether it waited on the model (the critical path counts it)
ALTER TABLE job_tool_calls ADD COLUMN IF NOT EXISTS llm_requests integer NOT NULL DEFAULT 0;
