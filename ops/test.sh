#!/usr/bin/env bash
# The test suite: lint and types, then the unit tier alone (no services), then the integration tier
# (embedded Postgres+pgvector, embedded Redis and real Celery workers, all started by the tests themselves).
# With arguments, runs just `pytest ARGS`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ops/setup.sh local,dev
if [ "$#" -gt 0 ]; then
  exec .venv/bin/python -m pytest -q "$@"
fi
echo "== ruff"; .venv/bin/ruff check .
echo "== mypy"; .venv/bin/mypy
echo "== unit tier"; .venv/bin/python -m pytest -q -m "not integration" -n 2 --durations=5
# two processes, each with its own embedded stack and workers; a file stays in one process (module fixtures)
echo "== integration tier"; exec .venv/bin/python -m pytest -q -m integration -n 2 --dist loadfile --durations=25
