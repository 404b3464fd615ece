"""What the chaos scenarios submit (questions over the shipped sample corpus) and the checks every scenario's audit
must pass."""
from __future__ import annotations

import random

TICKERS = ("NVDA", "AAPL", "MSFT")  # the shipped sample corpus
TOPICS = ("revenue", "gross margin", "operating expenses", "guidance", "capital returns", "demand drivers", "segment growth")


def questions(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        ticker, topic = rnd.choice(TICKERS), rnd.choice(TOPICS)
        span = rnd.choice(("last quarter", "the last 2 quarters", "over the last 3 quarters"))
        out.append(f"How did {ticker}'s {topic} develop in {span}? (run {seed}-{i})")
    return out


def check(tally, report, extra: str = "") -> None:
    report(" ".join([tally.line(), extra]).strip())
    assert tally.lost == 0, tally
    assert tally.duplicated == 0, tally.duplicates
    assert tally.completed + tally.failed_with_reason == tally.submitted, tally
