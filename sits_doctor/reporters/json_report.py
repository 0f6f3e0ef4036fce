"""Machine-readable JSON: findings, input errors, notices, and what was checked against what."""

from __future__ import annotations

import json

from sits_doctor import __version__
from sits_doctor.engine import Report


def render(report: Report) -> str:
    data = {
        "tool": {"name": "sits-doctor", "version": __version__},
        "exit_code": report.exit_code,
        "fail_on": report.fail_on.value,
        "summary": {
            "findings": len(report.findings),
            "failing": len(report.failing),
            "files_checked": len(report.files_checked),
            "files_skipped": report.skipped,
            "errors": len(report.errors),
        },
        "findings": [f.to_dict() for f in report.findings],
        "errors": [{"file": e.path, "line": e.line, "col": e.col, "message": e.message} for e in report.errors],
        "internal_errors": report.internal_errors,
        "notices": [{"file": n.path, "line": n.line, "col": n.col, "message": n.message} for n in report.notices],
        "deployments": [p._asdict() for p in report.plans],
        "skipped": [{"file": f, "why": why} for f, why in report.skipped_files],
        "suppressed": report.suppressed,
        "baselined": report.baselined,
    }
    if report.runtime:
        data["runtime"] = report.runtime
    from sits_doctor.reporters import printable

    return json.dumps(printable(data), indent=2, ensure_ascii=False)
