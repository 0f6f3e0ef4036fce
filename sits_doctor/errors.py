"""Messages about inputs: errors a user can act on (exit code 2) and notices (no effect on it)."""

from __future__ import annotations


ARGUMENTS = "<arguments>"  # the path of a message about the command line or the run, not a file


class _Located:
    """A message about a place: a path, and a line and column when known."""

    label = "note"

    def __init__(self, path: str, message: str, line: int | None = None, col: int | None = None):
        self.path, self.message, self.line, self.col = path, message, line, col

    def __str__(self) -> str:
        if self.path == ARGUMENTS:  # about the command line or the run as a whole: no place to name
            return f"{self.label}: {self.message}"
        where = self.path
        if self.line is not None:
            where += f":{self.line}:{self.col or 1}"
        return f"{where}: {self.label}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, {self.message!r}, {self.line!r}, {self.col!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and str(other) == str(self)

    def __hash__(self) -> int:
        return hash((type(self).__name__, str(self)))


class InputError(_Located, Exception):
    """A file or argument that could not be used, with where the problem is."""

    label = "error"

    def __init__(self, path: str, message: str, line: int | None = None, col: int | None = None):
        _Located.__init__(self, path, message, line, col)
        Exception.__init__(self, path, message, line, col)


class Notice(_Located):
    """Something the user should know that is not a finding: a skipped value, a chosen target."""
