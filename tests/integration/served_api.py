"""The HTTP API served for real in the tests: uvicorn in a thread, on the test session's stack."""
from __future__ import annotations

import socket
import threading
import time

import uvicorn

from api_stub.asgi import create_app
from api_stub.runtime import Runtime


class ServedApp:
    """uvicorn in a thread on a socket we bound (port 0: the OS picks a free one)."""

    def __init__(self, rt: Runtime):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(create_app(rt), log_level="warning", timeout_graceful_shutdown=2))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> ServedApp:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self.sock.close()


def quick_runtime(settings, **overrides) -> Runtime:
    """A runtime with short readiness cache, inspect timeout and keep-alive ping, so the tests need not wait."""
    return Runtime(settings=settings.model_copy(update=overrides), ready_cache_s=0.5, inspect_timeout_s=1.0, sse_ping_s=1.0)
