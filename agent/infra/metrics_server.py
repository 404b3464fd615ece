"""The per-process mode's HTTP endpoint (agent/infra/metrics.py): this process's own metrics at :METRICS_PORT/metrics,
from its in-memory registry, on a daemon thread of prometheus-client's WSGI server.

Each worker starts it at worker_ready (workers/signals.py), as it starts its heartbeat; the API at its start-up, adding
the scrape-time metrics, which no worker serves (a sum over every target counts them once). Every address of the
host: Prometheus scrapes from another host. It answers without an API key, like Flower's /metrics: publish the port to
the monitoring network only (compose does not publish it at all).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from agent.infra import metrics
from agent.settings import get_settings

log = logging.getLogger(__name__)

BIND_ADDRESS = "0.0.0.0"

_lock = threading.Lock()
_server: Any = None  # the WSGI server once started: one per process


def start(scrape: Callable[[], metrics.ScrapeContext] | None = None, port: int | None = None) -> int | None:
    """Serve this process's metrics (and, with `scrape`, the scrape-time metrics of the context it returns) on `port`,
    default METRICS_PORT. Returns the port it listens on, None when METRICS_PORT is 0 (the shared-directory mode:
    the API merges the files) or the port is taken (logged: the process carries on without its endpoint, and
    Prometheus reports the target down). A second call returns the first server's port."""
    global _server
    port = get_settings().metrics_port if port is None else port
    if not port or not metrics.per_process():
        return None
    with _lock:
        if _server is None:
            from prometheus_client import CollectorRegistry, start_http_server

            registry = CollectorRegistry()
            registry.register(metrics.process_registry())
            if scrape is not None:
                registry.register(metrics.LazyScrapeCollector(scrape))
            try:
                _server, _ = start_http_server(port, addr=BIND_ADDRESS, registry=registry)
            except OSError:
                log.error("metrics: cannot listen on port %s; this process's metrics are not served", port,
                          exc_info=True)
                return None
            log.info("metrics: serving this process's metrics on port %s", port)
        return int(_server.server_port)
