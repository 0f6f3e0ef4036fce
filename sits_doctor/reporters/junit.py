"""JUnit XML: one testcase per checked file; findings at or above ``--fail-on`` are failures,
files that could not be used are errors."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict

from sits_doctor.engine import Report


def render(report: Report) -> str:
    by_file = defaultdict(list)
    for f in report.findings:
        by_file[f.location.file].append(f)
    files = list(dict.fromkeys([*report.files_checked, *by_file, *(e.path for e in report.errors)]))
    suite = ET.Element("testsuite", name="sits-doctor")
    failures = errors = 0
    for file in files:
        case = ET.SubElement(suite, "testcase", classname="sits-doctor", name=file)
        failing = [f for f in by_file.get(file, []) if report.fails(f)]
        others = [f for f in by_file.get(file, []) if not report.fails(f)]
        for f in failing:
            failures += 1
            node = ET.SubElement(case, "failure", message=f.render(), type=f.code)
            node.text = "\n".join([f.render(), *f.evidence, *( [f"help: {f.fix_hint}"] if f.fix_hint else [])])
        for e in (e for e in report.errors if e.path == file):
            errors += 1
            ET.SubElement(case, "error", message=str(e), type="input-error")
        if others:
            ET.SubElement(case, "system-out").text = "\n".join(f.render() for f in others)
    suite.set("tests", str(len(files)))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    root = ET.Element("testsuites", tests=str(len(files)), failures=str(failures), errors=str(errors))
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
