"""The static check path must not import torch, transformers or triton (DESIGN.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "triton")


def test_check_imports_no_heavy_frameworks():
    code = (
        "import sys, json\n"
        "from sits_doctor.cli import main\n"
        "try:\n"
        f"    main(['check', {str(REPO / 'fixtures')!r}, '--format', 'sarif', '-o', '/dev/null'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "import sits_doctor.reporters.json_report, sits_doctor.reporters.junit, sits_doctor.reporters.github\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
