"""The one place tests outside the engine build a Finding by hand (baseline, suppressions).

Only the attributes the CI features rely on are set from arguments: code, message, severity,
and the location (file, line, col, pointer, doc). When the Finding class changes, adapt here.
"""

from __future__ import annotations

from sits_doctor.finding import Finding, Location, Severity


def make_finding(
    code: str, file: str, line: int = 1, col: int = 1, pointer: str = "", doc: int = 0,
    message: str = "", severity: Severity = Severity.ERROR, plan: str = "",
) -> Finding:
    return Finding(
        code=code,
        name="test-rule",
        severity=severity,
        message=message or f"{code} at {pointer or '(root)'}",
        location=Location(file=file, line=line, col=col, pointer=pointer, doc_index=doc),
        plan=plan or file,
    )
