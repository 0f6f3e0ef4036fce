"""Messages about inputs: errors a user can act on (exit code 2) and notices (no effect on it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class _Located:
    path: str
    message: str
    line: int | None = None
    col: int | None = None

    label = "note"

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}:{self.col or 1}"
        return f"{where}: {self.label}: {self.message}"


@dataclass(frozen=True)
class InputError(_Located, Exception):
    """A file or argument that could not be used, with where the problem is."""

    label = "error"


@dataclass(frozen=True)
class Notice(_Located):
    """Something the user should know that is not a finding: a skipped value, a chosen target."""
