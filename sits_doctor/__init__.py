"""sits-doctor: lint, measure and fix LLM inference deployment configs.

The static check path (this package's import, the CLI, loaders, rules, reporters) never imports
torch, transformers or triton.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "check", "CheckOptions", "Report", "check_model", "patch", "unpatch"]


def _run_from_a_clone() -> None:
    """Imported from the source folder of a clone (``python -m sits_doctor`` or ``import
    sits_doctor`` in the clone root, where the root comes first on ``sys.path``, whatever was
    installed): the subpackages ``rules``, ``fixes`` and ``kernels`` are the clone's top-level
    folders (pyproject's package-dir), so the root joins this package's ``__path__``; and the
    root leaves ``sys.path``, where its ``kernels/`` would shadow the PyPI package of that name
    that transformers imports. An installed package has its subpackages inside: nothing to do."""
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    if os.path.isdir(os.path.join(here, "rules")) or not os.path.isfile(os.path.join(root, "rules", "__init__.py")):
        return
    if root not in __path__:
        __path__.append(root)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != root]


_run_from_a_clone()


def __getattr__(name: str):
    if name in ("check", "CheckOptions", "Report"):
        from sits_doctor import engine

        return getattr(engine, name)
    if name == "check_model":  # a live transformers model: imports torch and transformers when called
        from sits_doctor.live_model import check_model

        return check_model
    if name in ("patch", "unpatch"):  # live-model kernel patches: imports torch and triton
        from sits_doctor.fixes import kernel_patches

        return getattr(kernel_patches, name)
    raise AttributeError(name)
