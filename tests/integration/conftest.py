"""The integration tier's fixtures live in tests/stack_fixtures.py, shared with tests/chaos."""
