"""Persistence: the job store (state, evidence, step outputs) and the tool ledger."""
