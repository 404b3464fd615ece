#!/usr/bin/env bash
# Zero-config demo: install, start embedded Postgres+pgvector and Redis and local workers,
# ingest the sample corpus, and answer a question through the full Celery path.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ops/setup.sh local
exec .venv/bin/finagent demo "$@"
