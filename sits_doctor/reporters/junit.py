"""JUnit XML: one testcase per checked file. A file with findings at or above ``--fail-on`` has
one ``<failure>`` holding all of them (the JUnit schema CI systems read allows one per testcase,
and counts failures by testcase); a file that could not be used has one ``<error>``."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict

from sits_doctor.engine import Report
from sits_doctor.reporters import printable


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_text(text: str) -> str:
    """Text XML 1.0 can hold: control characters (a form feed in a config value) as ``\\xNN``."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", printable(text))


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
        if failing:
            failures += 1
            codes = ",".join(dict.fromkeys(f.code for f in failing))
            message = failing[0].render() + (f" (and {len(failing) - 1} more)" if len(failing) > 1 else "")
            node = ET.SubElement(case, "failure", message=message, type=codes)
            node.text = "\n\n".join(
                "\n".join([f.render(), *f.evidence, *([f"help: {f.fix_hint}"] if f.fix_hint else [])]) for f in failing)
        problems = [e for e in report.errors if e.path == file]
        if problems:
            errors += 1
            ET.SubElement(case, "error", message="; ".join(str(e) for e in problems), type="input-error")
        if others:
            ET.SubElement(case, "system-out").text = "\n".join(f.render() for f in others)
    suite.set("tests", str(len(files)))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    root = ET.Element("testsuites", tests=str(len(files)), failures=str(failures), errors=str(errors))
    root.append(suite)
    for node in root.iter():
        node.text = _xml_text(node.text) if node.text else node.text
        for k, v in node.attrib.items():
            node.set(k, _xml_text(v))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
