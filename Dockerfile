FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY agent agent
COPY tasks tasks
COPY workers workers
COPY api_stub api_stub
COPY ops ops
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu -e ".[local]"
ENV FINAGENT_DATA_DIR=/data
