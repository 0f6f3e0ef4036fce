"""Which vLLM releases define each command-line flag that SITS204 knows about.

Reads vLLM source releases (the PyPI sdists, unpacked as ``ROOT/<version>/vllm-<version>/``) and
writes, for every flag that sits_doctor.frameworks.vllm says was added or removed, the releases whose ``vllm/engine/arg_utils.py`` or
``vllm/entrypoints/openai/cli_args.py`` contain it literally. The result is committed as
``tests/data/vllm_flags.json``; ``tests/rules/test_sits204.py`` checks the table against it.

    pip download --no-deps --no-binary :all: vllm==X   # for each release, then unpack
    python tools/scan_vllm_flags.py ROOT > tests/data/vllm_flags.json
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from packaging.version import Version

from sits_doctor.frameworks.vllm import OPTIONS

FILES = ("vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py")


def main(root: Path) -> None:
    versions = sorted((d.name for d in root.iterdir() if d.is_dir()), key=Version)
    flags = {o.flag for o in OPTIONS.values() if o.removed or o.added or o.deprecated}
    present: dict[str, list[str]] = {f: [] for f in sorted(flags)}
    for version in versions:
        (src,) = (root / version).glob("vllm-*")
        text = "\n".join((src / f).read_text(encoding="utf-8") for f in FILES if (src / f).is_file())
        for flag in flags:
            if re.search(r"[\"']" + re.escape(flag) + r"[\"']", text):
                present[flag].append(version)
    json.dump({"scanned": versions, "present": present}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
