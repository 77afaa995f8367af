"""Errors a user can act on: each names the file and the cause in one line."""


class TraceError(Exception):
    """A trace that cannot be analysed. ``str()`` is the one-line message shown to users."""

    def __init__(self, path: str, cause: str):
        self.path = str(path)
        self.cause = cause
        super().__init__(f"{self.path}: {cause}")
