# The one image of every finagent service in docker-compose.yml (API, workers, beat, Flower, migrations).
# The third-party packages come from ops/locks/image.lock (hashed; ops/lock.sh): the base install, the local
# embedding model, the report's plots and Flower. Postgres and Redis are compose services, not embedded.

# the two projects of this repository, built as wheels
FROM python:3.11-slim AS wheels
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY clients/python clients/python
COPY pyproject.toml README.md LICENSE ./
COPY agent agent
COPY tasks tasks
COPY workers workers
COPY api_stub api_stub
COPY ops ops
RUN pip wheel --no-cache-dir --no-deps -w /wheels ./clients/python .

FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
# the locked packages first: this layer is rebuilt only when the lock changes. torch is the CPU build 2.13.0+cpu,
# which PyTorch's CPU index serves (PyPI's 2.13.0 is a CUDA build).
COPY ops/locks/image.lock /tmp/image.lock
RUN pip install --no-cache-dir --require-hashes --extra-index-url https://download.pytorch.org/whl/cpu -r /tmp/image.lock \
    && rm /tmp/image.lock
COPY --from=wheels /wheels /tmp/wheels
# the projects themselves as wheels, not editable: the image holds no source tree
RUN pip install --no-cache-dir --no-deps /tmp/wheels/*.whl && rm -r /tmp/wheels
# the local embedding model, exported to ONNX at its default precision now, as ops/setup.sh does, so that no container
# exports it at its first embedding; outside /data, which is a volume. Owned by the app user: a service whose
# EMBEDDING_QUANTIZE differs from the default exports its own variant there at first use.
ENV FINAGENT_MODEL_CACHE_DIR=/opt/finagent/models
RUN python -c 'from agent.providers.onnx_embedder import prepare_default; prepare_default()' \
    && test -n "$(find /opt/finagent/models -name '*.onnx')"
# Not root. /data (state: beat schedule, Flower's history) and /metrics exist owned by the app user, so the
# named volumes mounted there start with that owner.
RUN useradd --system --uid 10001 --home-dir /data finagent && mkdir -p /data /metrics \
    && chown finagent /data /metrics && chown -R finagent /opt/finagent/models
USER finagent
ENV FINAGENT_DATA_DIR=/data HOME=/data
EXPOSE 8000
# by default the API (docker-compose.yml runs the other services from the same image, each with its own check)
CMD ["finagent", "api", "--host", "0.0.0.0", "--port", "8000"]
HEALTHCHECK --interval=15s --timeout=10s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=5)"]
