# The one image of every finagent service in docker-compose.yml (API, workers, beat, Flower, migrations).
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY agent agent
COPY tasks tasks
COPY workers workers
COPY api_stub api_stub
COPY ops ops
COPY finagent finagent
# the CPU build of torch for the local embedding model (a plain index resolves to a 5.5 GB CUDA build)
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu -e ".[local]"
# Not root. /data (state: beat schedule, Flower's history) and /metrics exist owned by the app user, so the
# named volumes mounted there start with that owner.
RUN useradd --system --uid 10001 --home-dir /data finagent && mkdir -p /data /metrics && chown finagent /data /metrics
USER finagent
ENV FINAGENT_DATA_DIR=/data HOME=/data
