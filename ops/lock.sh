#!/usr/bin/env bash
# Regenerate the hashed locks from pyproject.toml after changing a dependency, and commit them with it:
#   ops/locks/dev.lock    extras local,dev,llm-local: ops/test.sh and CI (through ops/setup.sh)
#   ops/locks/local.lock  extra local: ./ops/demo.sh (through ops/setup.sh)
#   ops/locks/image.lock  extras local-model,report,flower: the Dockerfile (Postgres and Redis are compose services)
# The two smaller locks are constrained to dev.lock's versions, so every install runs the versions CI tested.
# The two projects of this repository (finagent, finagent-client) are not in the locks: they are installed from
# the checkout with --no-deps after the lock.
set -euo pipefail
cd "$(dirname "$0")/.."
UV="${UV:-$(command -v uv || echo .venv/bin/uv)}"
[ -x "$UV" ] || { echo "ops/lock.sh needs uv: pip install uv (it is in the dev extras)" >&2; exit 1; }
PY="${PYTHON:-.venv/bin/python}"  # the locks are for Linux x86-64, CPython 3.11 (the image's python:3.11-slim)
# torch is the CPU build 2.13.0+cpu (PyPI's 2.13.0 is a CUDA build with 3 GB of nvidia-* packages). This project's
# machines keep its wheel in a directory of pip's find-links; elsewhere PyTorch's CPU index serves the same file.
torch_source=(--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match)
for links in ${PIP_FIND_LINKS:-} $("$PY" -m pip config get global.find-links 2>/dev/null || true); do
  if compgen -G "${links#file://}/torch-2.13.0+cpu-*.whl" >/dev/null; then torch_source=(--find-links "${links#file://}"); fi
done
compile() {  # compile OUT EXTRA... : the client is resolved from this checkout and left out of the output
  local out="$1"; shift
  echo "finagent-client @ ./clients/python" | "$UV" pip compile -q pyproject.toml - "$@" --python "$PY" \
    "${torch_source[@]}" --generate-hashes --no-emit-package finagent-client \
    --custom-compile-command "ops/lock.sh" -o "$out"
}
mkdir -p ops/locks
compile ops/locks/dev.lock --extra local --extra dev --extra llm-local "${@}"
compile ops/locks/local.lock --extra local -c ops/locks/dev.lock
compile ops/locks/image.lock --extra local-model --extra report --extra flower -c ops/locks/dev.lock
echo "ops/locks: $(grep -c '^[a-z]' ops/locks/dev.lock) packages for dev, $(grep -c '^[a-z]' ops/locks/local.lock) for local," \
     "$(grep -c '^[a-z]' ops/locks/image.lock) for the image"
