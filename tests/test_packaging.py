"""rules/, fixes/ and kernels/ ship inside the sits_doctor namespace, in a real (non-editable)
wheel, and nothing named rules/fixes/kernels lands at the top of site-packages."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    build_dir = tmp_path_factory.mktemp("src")
    # Build from a copy so the test never writes build/ or *.egg-info into the checkout.
    subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True, capture_output=True,
    )
    files = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--cached", "--others", "--exclude-standard"],
        check=True, capture_output=True, text=True,
    ).stdout.split("\n")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            dst = build_dir / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(build_dir)],
        check=True, capture_output=True, text=True,
    )
    (whl,) = out.glob("sits_doctor-*.whl")
    return whl


def test_wheel_file_list(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert "sits_doctor" in tops
    assert not tops & {"rules", "fixes", "kernels", "tests", "fixtures", "bench"}, tops
    rule_files = {Path(p).name for p in (REPO / "rules").glob("sits*.py")}
    shipped = {n.rsplit("/", 1)[-1] for n in names if n.startswith("sits_doctor/rules/")}
    assert rule_files <= shipped
    assert "sits_doctor/fixes/__init__.py" in names
    assert "sits_doctor/fixes/kernel_patches/__init__.py" in names
    shipped_kernels = {n.rsplit("/", 1)[-1] for n in names if n.startswith("sits_doctor/kernels/")}
    assert {p.name for p in (REPO / "kernels").glob("*.py")} <= shipped_kernels
    assert "sits_doctor/kernels/__init__.py" in names
    assert "sits_doctor/schemas/ortgenai.py" in names
    # the framework knowledge made by tools/ ships with the wheel (the rules read it at run time)
    data = {n.rsplit("/", 1)[-1] for n in names if n.startswith("sits_doctor/frameworks/data/")}
    assert data >= {"vllm_options.json", "trtllm_options.json", "ortgenai_probes.json"}, data
    assert "sits_doctor/fixes/config_insert.py" in names


def test_installed_wheel_runs_outside_the_checkout(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
        check=True, capture_output=True, text=True,
    )
    assert not any((target / name).exists() for name in ("rules", "fixes", "kernels"))
    config = tmp_path / "serve.yaml"
    config.write_text("model: org/model\nswap-space: 4\n")
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = (
        "import sits_doctor, sits_doctor.rules as r, sys; "
        f"assert sits_doctor.__file__.startswith({str(target)!r}), sits_doctor.__file__; "
        "from sits_doctor.cli import main; sys.argv=['sits-doctor','check','serve.yaml','-q']; main()"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    assert "SITS204" in proc.stdout


def test_python_dash_m_and_the_api_from_the_clone_root():
    """Where the README leaves a user (the clone root, after the editable install of the test
    command): ``python -m sits_doctor`` and ``import sits_doctor`` work and find the rules."""
    import subprocess
    import sys

    ran = subprocess.run([sys.executable, "-m", "sits_doctor", "check", "fixtures/vllm/bad_swap_space.yaml",
                          "--isolated", "-q"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 1, ran.stderr
    assert ran.stdout.startswith("fixtures/vllm/bad_swap_space.yaml:4:1: SITS204 [error] --swap-space")
    api = subprocess.run([sys.executable, "-c", "import sits_doctor; r = sits_doctor.check('fixtures/vllm/"
                          "bad_swap_space.yaml', sits_doctor.CheckOptions(isolated=True)); print(r.exit_code)"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert api.stdout.strip() == "1", api.stderr


def test_the_clone_root_with_a_regular_install(wheel, tmp_path):
    """After the README's first command (a regular install, no -e) the clone root's sits_doctor/
    comes first on sys.path and has no rules/ inside: it finds them at the top level, and the
    root's kernels/ does not shadow the PyPI package of that name afterwards."""
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
        check=True, capture_output=True, text=True,
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    ran = subprocess.run([sys.executable, "-m", "sits_doctor", "check", "fixtures/vllm/bad_swap_space.yaml",
                          "--isolated", "-q"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 1, ran.stderr
    assert ran.stdout.startswith("fixtures/vllm/bad_swap_space.yaml:4:1: SITS204 [error] --swap-space")
    code = ("import os, sys, importlib.util, sits_doctor, sits_doctor.rules, sits_doctor.kernels; "
            "spec = importlib.util.find_spec('kernels'); "
            "print(spec.origin if spec else None); print(os.getcwd() in [os.path.abspath(p or '.') for p in sys.path])")
    shown = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    origin, on_path = shown.stdout.split()
    assert origin == "None" or not origin.startswith(str(REPO / "kernels")), origin
    assert on_path == "False"


def test_every_slow_module_exists():
    """A renamed module would silently join the fast loop: each entry of SLOW_MODULES names one."""
    from conftest import SLOW_MODULES

    tests = REPO / "tests"
    assert all((tests / name).exists() for name in SLOW_MODULES), [n for n in SLOW_MODULES if not (tests / n).exists()]
