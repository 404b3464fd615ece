#!/usr/bin/env bash
# The test suite: unit tests (no services) and integration tests (embedded Postgres+pgvector,
# embedded Redis and real Celery workers, all started by the tests themselves).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ops/setup.sh local,dev
exec .venv/bin/python -m pytest -q "$@"
