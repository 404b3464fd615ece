"""Test support shared by the unit and integration tiers (fault-injecting LLM server, ...)."""
