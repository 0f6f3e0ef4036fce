"""Errors a user can act on: a file or an argument that could not be used (exit code 2)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InputError(Exception):
    """A file or argument that could not be used, with where the problem is."""

    path: str
    message: str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}:{self.col or 1}"
        return f"{where}: error: {self.message}"


@dataclass(frozen=True)
class Notice:
    """Something the user should know that is not a finding: a skipped value, a chosen target."""

    path: str
    message: str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}:{self.col or 1}"
        return f"{where}: note: {self.message}"
