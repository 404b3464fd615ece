"""Token counts for providers that do not report usage (some OpenAI-compatible servers omit it).

tiktoken downloads its BPE tables on first use, which this product cannot count on (offline machines), so the
counting uses `bpe-openai`, which ships the same encodings (o200k_base, cl100k_base, ...) behind a
tiktoken-compatible API. A model it does not know is counted with o200k_base.
"""
from __future__ import annotations

from functools import cache
from typing import Any

import bpe_openai


@cache
def _encoding(model: str) -> Any:
    try:
        return bpe_openai.encoding_for_model(model)
    except Exception:  # an unknown (local or third-party) model: the current OpenAI encoding is a fair count
        return bpe_openai.get_encoding("o200k_base")


def count_tokens(model: str, text: str) -> int:
    return len(_encoding(model).encode(text)) if text else 0


def count_messages(model: str, messages: Any) -> int:
    """The prompt's tokens: each message's content, plus the few tokens a chat message's framing takes."""
    return sum(count_tokens(model, str(m.get("content") or "")) + 4 for m in messages) + 2
