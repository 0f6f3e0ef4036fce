"""Load a script of the repository that is not a package module (bench/, tools/) by its path."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_script(relpath: str, name: str):
    """The module of ``REPO / relpath``, executed under ``name`` (a fresh module each call)."""
    spec = importlib.util.spec_from_file_location(name, REPO / relpath)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
