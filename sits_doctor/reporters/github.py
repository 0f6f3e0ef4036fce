"""GitHub Actions workflow commands (``::error file=...::message``) plus a text summary, since
Actions shows only a few annotations per step."""

from __future__ import annotations

from sits_doctor.engine import Report
from sits_doctor.reporters.text import summary

COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(report: Report) -> str:
    lines = []
    for f in report.findings:
        loc = f.location
        message = "\n".join([f.message, *f.explanation()]) + (f"\nhelp: {f.fix_hint}" if f.fix_hint else "")
        lines.append(
            f"::{COMMAND[f.severity.value]} file={_prop(loc.file)},line={loc.line},col={loc.col},"
            f"title={_prop(f'{f.code} {f.name}')}::{_data(message)}"
        )
    for e in report.errors:
        if e.path.startswith("<"):  # an argument, not a file
            lines.append(f"::error title=sits-doctor argument error::{_data(e.message)}")
            continue
        where = f"file={_prop(e.path)}" + (f",line={e.line},col={e.col or 1}" if e.line else "")
        lines.append(f"::error {where},title=sits-doctor input error::{_data(e.message)}")
    for e in report.internal_errors:
        lines.append(f"::error title=sits-doctor internal error::{_data(e)}")
    from sits_doctor.reporters import printable

    lines = printable(lines)
    lines.append(summary(report))
    return "\n".join(lines)
