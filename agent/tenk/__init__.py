"""The SEC 10-K retrieval agent: plan sub-questions, route them to Items,
retrieve tables and text in parallel, answer, evaluate, replan; at most 5 iterations."""
