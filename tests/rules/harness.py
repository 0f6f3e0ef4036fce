"""The one way rule tests run a check: write the files, check one of them in isolation against a
target, assert nothing else went wrong, and return the findings of the rule under test."""

from __future__ import annotations

from conftest import write
from sits_doctor import CheckOptions, check


def findings(tmp_path, monkeypatch, files: dict[str, str], main: str, code: str, targets=(), **opts):
    for name, text in files.items():
        write(tmp_path, name, text)
    monkeypatch.chdir(tmp_path)
    targets = [targets] if isinstance(targets, str) else list(targets)
    report = check([main], CheckOptions(targets=targets, isolated=True, select=[code], **opts))
    assert not report.errors, report.errors
    assert not report.internal_errors, report.internal_errors
    return report.findings
