"""sits-doctor: lint, measure and fix LLM inference deployment configs.

The static check path (this package's import, the CLI, loaders, rules, reporters) never imports
torch, transformers or triton.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "check", "CheckOptions", "Report", "check_model", "patch", "unpatch"]


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
