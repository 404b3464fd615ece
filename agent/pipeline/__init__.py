"""The research loop as a pure state machine (`machine`) and its rules: decision, router, budget, scopes, search plan."""
