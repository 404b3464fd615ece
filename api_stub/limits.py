"""Request body caps, enforced on the declared Content-Length and, for chunked bodies, on the bytes as they arrive."""
from __future__ import annotations

from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api_stub.error_responses import error_response

BATCH_PATH = "/v1/batches"


def body_limit(settings, path: str) -> int:
    return settings.api_max_batch_bytes if path.rstrip("/") == BATCH_PATH else settings.api_max_body_bytes


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, limit_for: Callable[[str], int]):
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await error_response(413, "payload_too_large", f"request body over {limit} bytes")(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # raised inside the route's body read, so the app's handler renders it as a 413 error body
                    raise HTTPException(413, f"request body over {limit} bytes")
            return message

        await self.app(scope, counted, send)
