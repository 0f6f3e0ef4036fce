"""Files recognized by their names: launch scripts (``*.sh``, ``*.bash``, or a ``#!`` line for
a shell) and Dockerfiles. Kept apart from the script loader so a directory walk can ask without
importing it."""

from __future__ import annotations

import os

SCRIPT_SUFFIXES = frozenset({".sh", ".bash"})
# Batch scripts of job schedulers (Slurm's sbatch): shell scripts under another suffix, read when
# their #! line names a shell
SHEBANG_SUFFIXES = frozenset({".sbatch", ".slurm"})


def is_dockerfile(path: str) -> bool:
    name = os.path.basename(path)
    return name in ("Dockerfile", "Containerfile") or name.startswith("Dockerfile.") or name.endswith(".Dockerfile")


def is_script(path: str, text: str | None = None) -> bool:
    """A shell script by its name (``.sh``, ``.bash``) or, without a suffix or with a batch
    scheduler's (``.sbatch``, ``.slurm``), by its ``#!`` line."""
    name = os.path.basename(path)
    suffix = os.path.splitext(name)[1].lower()
    if suffix in SCRIPT_SUFFIXES:
        return True
    if (suffix and suffix not in SHEBANG_SUFFIXES) or text is None or not text.startswith("#!"):
        return False
    first = text.split("\n", 1)[0]
    return any(first.rstrip().endswith(s) or f"/{s} " in first or f" {s}" in first for s in ("sh", "bash", "dash", "zsh"))
