"""A local HTTP server standing in for Tavily at the network edge: every POST gets one fixed JSON reply."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class TavilyStandIn:
    def __init__(self, status: int, reply: dict):
        self.status, self.reply = status, reply
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.url = ""


@contextmanager
def tavily_server(status: int, reply: dict) -> Iterator[TavilyStandIn]:
    stand_in = TavilyStandIn(status, reply)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            with stand_in.lock:
                stand_in.requests.append(request)
            body = json.dumps(stand_in.reply).encode()
            self.send_response(stand_in.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stand_in.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()
