MAX_REASON_CHARS = 300


class IngestError(ValueError):
    """A file that cannot be ingested; the message names the file and the reason, on one line (a parser's
    multi-line message, or a quoted line of a hostile file, is folded and cut short)."""

    def __init__(self, path, reason: str):
        reason = " ".join(str(reason).split())
        if len(reason) > MAX_REASON_CHARS:
            reason = reason[:MAX_REASON_CHARS - 1] + "…"
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")
