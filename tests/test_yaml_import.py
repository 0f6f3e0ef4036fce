"""``source_yaml.yaml_module`` defers PyYAML's import-time NON_PRINTABLE regex: the pattern is
not compiled by the import, and PyYAML still behaves exactly as before (the pure-Python reader
still refuses control characters; the C parser still parses). Each test runs in a fresh
interpreter, since this one has imported yaml long ago."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import json, re, sys
compiled = []
real = re._compile
def spy(pattern, flags):
    if isinstance(pattern, str) and pattern.startswith("[^\x09\x0A\x0D\x20-\x7E\x85"):
        compiled.append(sys._getframe(1).f_code.co_name)
    return real(pattern, flags)
re._compile = spy
from sits_doctor.source_yaml import parse_yaml, yaml_module
yaml = yaml_module()
after_import = len(compiled)
docs = parse_yaml("a: 1\nb: [x, y]\n", "f.yaml")
after_c_parse = len(compiled)
try:
    yaml.load("a: \x07\n", Loader=yaml.SafeLoader)
    pure = "accepted"
except yaml.reader.ReaderError as exc:
    pure = f"refused at {exc.position}"
print(json.dumps({"after_import": after_import, "after_c_parse": after_c_parse, "pure": pure,
                  "data": docs[0].data, "same_module": yaml_module() is yaml,
                  "re_compile_restored": re.compile.__module__ == "re"}))
"""


def _probe() -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_regex_waits_for_the_pure_python_reader():
    out = _probe()
    assert out["after_import"] == 0
    assert out["data"] == {"a": 1, "b": ["x", "y"]}
    assert out["same_module"] and out["re_compile_restored"]
    # The C parser (used when the wheel has it) never needs the pattern; the pure-Python reader
    # compiles it on first use and still refuses the control character where it is.
    import yaml

    if getattr(yaml, "__with_libyaml__", False):
        assert out["after_c_parse"] == 0
    assert out["pure"] == "refused at 3"
