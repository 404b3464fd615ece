class IngestError(ValueError):
    """A file that cannot be ingested; the message names the file and the reason."""

    def __init__(self, path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")
