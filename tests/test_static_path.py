"""The static check path must not import torch, transformers or triton (DESIGN.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Runs in a fresh interpreter: a meta-path finder records every attempt to import a heavy
# framework (installed or not), then the whole static pipeline runs over fixtures/ in every format.
PROBE = r"""
import json, sys
HEAVY = {"torch", "transformers", "triton"}
attempts = []

def _looked_up_only():
    # importlib.util.find_spec asks the finders whether a package exists without importing it
    # (sits_doctor.versions.installed does so before reading a version); that is not an import.
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == "find_spec" and f.f_code.co_filename.endswith(("importlib/util.py", "importlib.util>")):
            return True
        f = f.f_back
    return False

class Recorder:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY and not _looked_up_only():
            attempts.append(name)
        return None

sys.meta_path.insert(0, Recorder())
from sits_doctor.cli import main
for fmt in ("text", "json", "sarif", "github", "junit"):
    try:
        main(["check", sys.argv[1], "--format", fmt, "-o", "/dev/null"])
    except SystemExit as exc:
        assert exc.code in (0, 1), exc.code
for cmd in (["rules"], ["explain", "SITS202"]):
    try:
        main(cmd)
    except SystemExit as exc:
        assert exc.code in (0, None), exc.code
print(json.dumps(sorted(set(attempts))))
"""


def test_static_path_never_tries_to_import_heavy_frameworks():
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO / "fixtures")], capture_output=True, text=True, cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_the_probe_sees_an_import():
    """The recorder is not blind: an import of torch (installed or not) is recorded."""
    code = PROBE.replace("from sits_doctor.cli import main", "try:\n    import torch\nexcept ImportError:\n    pass\nfrom sits_doctor.cli import main")
    proc = subprocess.run(
        [sys.executable, "-c", code, str(REPO / "fixtures")], capture_output=True, text=True, cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert "torch" in json.loads(proc.stdout.strip().splitlines()[-1])
