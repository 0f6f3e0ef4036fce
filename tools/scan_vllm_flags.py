"""Which vLLM releases define each command-line flag that SITS204 knows about.

Reads vLLM source releases (the PyPI sdists, unpacked as ``ROOT/<version>/vllm-<version>/``) and
writes, for every flag the committed scan covers (superseded by tools/gen_vllm_options.py, which
runs each release's own parser; kept to cross-check it), the releases whose ``vllm/engine/arg_utils.py`` or
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


FILES = ("vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py")


def main(root: Path) -> None:
    versions = sorted((d.name for d in root.iterdir() if d.is_dir()), key=Version)
    previous = Path(__file__).resolve().parent.parent / "tests" / "data" / "vllm_flags.json"
    flags = set(json.loads(previous.read_text())["present"])  # the flags the committed scan covers
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
