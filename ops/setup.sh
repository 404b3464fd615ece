#!/usr/bin/env bash
# Create .venv and install finagent with the given extras (default: local), idempotent: a second run takes seconds.
# The third-party packages come from a hashed lock of ops/locks/ (ops/lock.sh writes them): `local` (the demo) from
# local.lock, anything with `dev` (the tests) from dev.lock; other extras are resolved from pyproject.toml unlocked.
# The two projects of this checkout (the client in clients/python, then the server) are installed editable on top.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-local}"
# the dev extras run the whole test tier, the llamacpp tests included: add the real small model (extra llm-local)
if [[ ",$extras," == *",dev,"* && ",$extras," != *",llm-local,"* ]]; then extras="$extras,llm-local"; fi
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "finagent needs Python >= 3.11 (found: $("$PY" --version 2>&1))" >&2
  exit 1
fi
if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
  # Debian/Ubuntu ship venv separately; install it where we can, otherwise say what is missing
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq "python3-venv" >/dev/null
  else
    echo "finagent needs Python's venv module (Debian/Ubuntu: apt-get install python3-venv)" >&2
    exit 1
  fi
fi

# the smallest lock that holds every extra asked for
within() { local e; for e in ${extras//,/ }; do [[ " $1 " == *" $e "* ]] || return 1; done; }
lock=""
if within "local embedded local-model report flower"; then lock=ops/locks/local.lock
elif within "local embedded local-model report flower dev llm-local"; then lock=ops/locks/dev.lock
fi

[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=".venv/.installed-$(cat pyproject.toml clients/python/pyproject.toml ${lock:+"$lock"} | sha256sum | cut -c1-12)-${extras//,/_}"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # llama-cpp-python builds from source (about 10 minutes on 2 cores); GGML_NATIVE=OFF builds for any x86-64 CPU
  if [[ ",$extras," == *",llm-local,"* ]]; then
    echo "installing .[${extras}]: llama-cpp-python builds from source, about 10 minutes"
    # the build needs a C/C++ compiler (cmake itself comes from PyPI through the build backend)
    if ! command -v g++ >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential >/dev/null
    fi
  fi
  export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"
  if [ -n "$lock" ]; then
    # torch is locked to the CPU build 2.13.0+cpu (PyPI's 2.13.0 is a CUDA build): this project's machines keep its
    # wheel in a directory of pip's find-links; elsewhere PyTorch's CPU index serves the same file
    torch_index=(--extra-index-url https://download.pytorch.org/whl/cpu)
    for links in ${PIP_FIND_LINKS:-} $(.venv/bin/python -m pip config get global.find-links 2>/dev/null || true); do
      if compgen -G "${links#file://}/torch-2.13.0+cpu-*.whl" >/dev/null; then torch_index=(); fi
    done
    .venv/bin/python -m pip install -q --require-hashes "${torch_index[@]}" -r "$lock"
    # the client distribution first: the server depends on finagent-client, which lives in this repository
    .venv/bin/python -m pip install -q --no-deps -e ./clients/python
    .venv/bin/python -m pip install -q --no-deps -e .
  else
    echo "no lock in ops/locks holds the extras ${extras}: resolving them from pyproject.toml, unlocked" >&2
    .venv/bin/python -m pip install -q -e ./clients/python
    .venv/bin/python -m pip install -q -e ".[${extras}]"
  fi
  touch "$stamp"
fi
# the local embedder's ONNX model: exported once from the bundled weights into the model cache (seconds when present)
if [[ ",$extras," == *",local,"* || ",$extras," == *",local-model,"* ]]; then
  .venv/bin/python -c 'from agent.providers.onnx_embedder import prepare_default; prepare_default()'
fi
# the browser tests (pytest -m browser) render the batch report in headless Chromium
if [[ ",$extras," == *",dev,"* ]] && ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
