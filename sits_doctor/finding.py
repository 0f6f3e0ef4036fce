"""Findings: what a rule reports, as frozen values. Their one-line rendering is the test oracle."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return ("info", "warning", "error").index(self.value)


class Location(BaseModel):
    model_config = ConfigDict(frozen=True)

    file: str
    line: int = 1
    col: int = 1
    pointer: str = ""
    doc: int = 0  # YAML document number (0 for JSON and single-document YAML)


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: str
    name: str
    severity: Severity
    message: str
    location: Location
    plan: str = ""  # which deployment (label) it is about
    evidence: tuple[str, ...] = ()
    fix_hint: str | None = None
    fixes: tuple[Any, ...] = ()  # config edits: a later issue
    impact: dict[str, Any] | None = None  # measured cost: a later issue

    def render(self) -> str:
        loc = self.location
        return f"{loc.file}:{loc.line}:{loc.col}: {self.code} [{self.severity.value}] {self.message}"

    def sort_key(self) -> tuple:
        loc = self.location
        return (loc.file, loc.doc, loc.line, loc.col, self.code, self.message)
