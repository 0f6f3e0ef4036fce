"""Findings and their fixes, as frozen values. A finding's one-line rendering is the test oracle.

A fix is data (ruff's model): a title, a safety level and character-range edits of one file.
``safe`` keeps the meaning of the config (a removed option that did nothing, a spelling the
parser reads); ``unsafe`` changes behaviour (a lower ``max_model_len``) and is applied only with
``--unsafe-fixes``; ``display`` is shown but never applied (the edit would need reformatting, or
the right value is a human's choice).
"""

from enum import Enum
from typing import Any, NamedTuple


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return ("info", "warning", "error").index(self.value)


class Safety(str, Enum):
    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY = "display"


class Edit(NamedTuple):
    """Replace ``text[start:end]`` of a file's text with ``new``."""

    start: int
    end: int
    new: str


class Fix(NamedTuple):
    title: str
    file: str  # display path of the file the edits apply to
    edits: tuple[Edit, ...] = ()
    safety: Safety = Safety.SAFE
    why_not: str | None = None  # set when the fix cannot be applied (then safety is DISPLAY)
    source: str = ""  # the text the offsets refer to

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title, "file": self.file, "safety": self.safety.value, "why_not": self.why_not,
            "edits": [{"start": e.start, "end": e.end, "new": e.new} for e in self.edits],
        }


class Location(NamedTuple):
    file: str  # a path, or "<model LlamaForCausalLM>" for sits_doctor.check_model's live model
    line: int = 1  # 0: no position in a file (a live model; ``pointer`` still says which value)
    col: int = 1
    pointer: str = ""
    doc_index: int = 0  # YAML document number (0 for JSON and single-document YAML)


class Finding(NamedTuple):
    code: str
    name: str
    severity: Severity
    message: str
    location: Location
    plan: str = ""  # which deployment (label) it is about
    evidence: tuple[str, ...] = ()
    fix_hint: str | None = None
    fixes: tuple[Fix, ...] = ()
    impact: dict[str, Any] | None = None  # measured cost: a later issue
    # For an option written as command-line words (an args list, a shell string, a script): where the command
    # is (the list's or the string's pointer; "" in a script, whose word index moves with every edit) and the
    # option's own words. Baselines and SARIF fingerprints key on these, so editing another flag of the same
    # command does not make this finding new.
    subject: tuple[str, str] | None = None
    # How many of the first evidence lines finish the message (the framework's own words, and how it
    # comes to do what the message says: Rule.finding's quote and why): reporters that show no
    # evidence (GitHub annotations, SARIF's message) still show these.
    explained: int = 0

    def explanation(self) -> tuple[str, ...]:
        return self.evidence[:self.explained]

    def identity(self) -> tuple[str, str]:
        """(pointer, what to hash) that identify this finding across edits elsewhere in its file."""
        if self.subject is not None:
            return self.subject
        return self.location.pointer, ""

    def render(self) -> str:
        loc = self.location
        where = f"{loc.file}:{loc.line}:{loc.col}" if loc.line > 0 else loc.file  # line 0: no file (a live model)
        return f"{where}: {self.code} [{self.severity.value}] {self.message}"

    def sort_key(self) -> tuple:
        loc = self.location
        return (loc.file, loc.doc_index, loc.line, loc.col, self.code, self.message)

    def to_dict(self) -> dict[str, Any]:
        loc = self.location
        return {
            "code": self.code, "name": self.name, "severity": self.severity.value, "message": self.message,
            "location": {"file": loc.file, "line": loc.line, "col": loc.col, "pointer": loc.pointer, "doc": loc.doc_index},
            "plan": self.plan, "evidence": list(self.evidence), "fix_hint": self.fix_hint,
            "fixes": [f.to_dict() for f in self.fixes], "impact": self.impact,
        }
