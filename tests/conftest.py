"""Shared test helpers. Tests never download anything; they build what they need in tmp_path
or use the files committed under fixtures/."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

# Kernel tests run on the CPU through Triton's interpreter (set before anything imports triton).
os.environ.setdefault("TRITON_INTERPRET", "1")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"

# `python -m pytest` from the clone root puts the root on sys.path, where the top-level kernels/
# folder (installed as sits_doctor.kernels) shadows the `kernels` package transformers >= 5.25
# requires and imports (transformers/integrations/hub_kernels.py): every test that builds a
# transformers model then fails with "cannot import name 'CUDAProperties' from 'kernels'". The
# tests import the installed package, never the root's folders by name.
sys.path[:] = [p for p in sys.path if p not in ("", ".") and Path(p or ".").resolve() != REPO]


def pytest_addoption(parser):
    parser.addoption(
        "--update-snapshots", action="store_true", default=False,
        help="rewrite fixture snapshots from the current output instead of comparing",
    )


@pytest.fixture
def hermetic(monkeypatch, tmp_path):
    """Same answers on every machine: no installed framework picks the target version, and the
    local Hugging Face cache is empty (model ids never resolve from it)."""
    import huggingface_hub.constants

    from sits_doctor import versions

    monkeypatch.setattr(versions, "installed", lambda framework: None)
    empty = tmp_path / "hf-cache"
    empty.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(empty))
    monkeypatch.setenv("HF_HUB_CACHE", str(empty))


@pytest.fixture
def update_snapshots(request) -> bool:
    return request.config.getoption("--update-snapshots")


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


class Terminal(io.StringIO):
    """Captured stdout that says it is a terminal (for the colour tests)."""

    def isatty(self) -> bool:
        return True


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, tty: bool = False) -> CliResult:
    """Run ``sits-doctor ARGS`` in-process from ``cwd`` (a fresh empty folder when None), with
    ``env`` applied to os.environ for the run (a None value unsets the variable)."""
    from sits_doctor.cli import run

    out, err = (Terminal() if tty else io.StringIO()), io.StringIO()
    with contextlib.ExitStack() as stack:
        if cwd is None:
            cwd = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        stack.enter_context(_chdir(cwd))
        stack.enter_context(_environ(env or {}))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        code = run(list(args))
    return CliResult(code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _environ(changes: dict):
    saved = {k: os.environ.get(k) for k in changes}
    try:
        for k, v in changes.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class _chdir:
    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        self.old = os.getcwd()
        os.chdir(self.path)

    def __exit__(self, *exc):
        os.chdir(self.old)


@pytest.fixture
def cli():
    return run_cli


def write(root: Path, name: str, text: str) -> Path:
    """Write ``text`` (dedented) to ``root/name``, creating folders."""
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


DEPLOYMENT_HEAD = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  template:
    spec:
      containers:
        - name: vllm
"""


def k8s_deployment(*container_lines: str) -> str:
    """A one-container Deployment; ``container_lines`` (already indented 10 spaces) follow the
    container's name, starting on line 11 of the file (after the leading newline)."""
    return DEPLOYMENT_HEAD + "".join(line + "\n" for line in container_lines)


LLAMA_8B = """
{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": 4096,
  "num_hidden_layers": 32,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "max_position_embeddings": 131072,
  "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0,
  "torch_dtype": "bfloat16"
}
"""


# The fast loop (`pytest -m "not slow"`) leaves out whole modules whose tests are slow by nature:
# Triton's CPU interpreter, the fuzzer, pre-commit and wheel builds, and tests that start a fresh
# interpreter per case (bounded-time and signal tests). CI runs everything.
SLOW_MODULES = (
    "kernels/",  # every kernel test runs in Triton's interpreter
    "test_fuzz.py", "test_precommit.py", "test_packaging.py",
    "test_bounded_scanners.py", "test_bounded_inputs.py", "test_bounded_walk.py", "test_bounded_settings.py",
    "test_write_safety.py", "test_streams.py", "test_streams_fix_diff.py", "test_static_path.py",
)


def pytest_collection_modifyitems(config, items):
    root = Path(__file__).resolve().parent
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(root).as_posix()
        if rel.startswith(SLOW_MODULES):
            item.add_marker(pytest.mark.slow)
