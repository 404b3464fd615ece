"""The finagent HTTP API's Python client: `from finagent import FinagentClient`."""
from finagent.client import FinagentClient
from finagent.errors import (
    BadRequest,
    Conflict,
    FinagentError,
    NotFound,
    NotReady,
    PayloadTooLarge,
    ServerError,
    Unauthorized,
)

__all__ = ["BadRequest", "Conflict", "FinagentClient", "FinagentError", "NotFound", "NotReady", "PayloadTooLarge",
           "ServerError", "Unauthorized"]
