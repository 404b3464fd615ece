"""A real Celery worker whose spans are written to a JSON-lines file, for the tracing tests:

    python -m tests.support.traced_worker SPAN_FILE -A workers.app worker ...

It installs tracing first with a file exporter (each span written when it ends), then runs Celery's own command
line; the worker's `tracing` setting must be on, and its own install (workers/telemetry.py) then keeps this
provider and adds nothing. Everything else is the product's: the instrumentations, the signals, the tasks."""
from __future__ import annotations

import json
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


def span_record(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    return {"trace_id": format(context.trace_id, "032x"), "span_id": format(context.span_id, "016x"),
            "parent_id": format(span.parent.span_id, "016x") if span.parent else None, "name": span.name,
            "kind": span.kind.name, "attributes": dict(span.attributes or {}),
            "service": (span.resource.attributes or {}).get("service.name")}


class JsonLinesExporter(SpanExporter):
    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(span_record(s), default=str) + "\n" for s in spans)
        with self.lock, self.path.open("a") as out:
            out.write(lines)
        return SpanExportResult.SUCCESS


def main() -> None:
    from agent.infra import tracing

    path = Path(sys.argv.pop(1))
    tracing.install("finagent-worker", SimpleSpanProcessor(JsonLinesExporter(path)))
    from celery.__main__ import main as celery_main

    celery_main()


if __name__ == "__main__":
    main()
