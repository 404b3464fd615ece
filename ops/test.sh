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
# system tools two tiers need: promtool (ops/prometheus checks), Debian's redis-server (TLS) and prometheus (the
# cluster tier). Installed here as root with apt; without them those tests skip and say why.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! { command -v promtool && command -v redis-server; } >/dev/null; then
  echo "== apt: prometheus redis-server"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus redis-server) >/dev/null 2>&1 \
    || echo "apt-get could not install prometheus and redis-server: their tests skip"
fi
echo "== ruff"; .venv/bin/ruff check .
echo "== mypy"; .venv/bin/mypy
echo "== unit tier"; .venv/bin/python -m pytest -q -m "not integration" -n 2 --durations=5
# two processes, each with its own embedded stack and workers; a file stays in one process (module fixtures)
echo "== integration tier"; exec .venv/bin/python -m pytest -q -m integration -n 2 --dist loadfile --durations=25
