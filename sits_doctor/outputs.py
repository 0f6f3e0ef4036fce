"""Where outputs go: the one rule that no report, baseline or other file sits-doctor writes
lands on a file it was asked to check (``check x.yaml -o x.yaml``, ``--write-baseline x.yaml``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable


def overwrites_input(output: str | os.PathLike, inputs: Iterable[str | os.PathLike]) -> bool:
    """Whether ``output`` is (through any symlink) one of ``inputs``."""
    try:
        target = Path(output).resolve()
        return any(Path(p).resolve() == target for p in inputs)
    except (OSError, RuntimeError):
        return False
