"""Snapshot tests over the realistic configs under fixtures/ (conventions: fixtures/README.md).

Every fixture file has a sidecar ``<file>.snap`` holding the expected stdout of

    sits-doctor check <path relative to the repo root> --isolated --fail-on info -q

run from the repo root (without ``--isolated`` when a ``.sits-doctor.toml`` sits in the file's
folder or a folder between it and fixtures/, so that its ``target`` applies), followed, when the
fixture has fixes, by a line ``# sits-doctor fix --unsafe-fixes -q`` and that command's output
(the unified diff of every fix, safe and unsafe). Snapshots hold the
*correct* output: where the tool is known to be wrong, the case is an ``xfail(strict=True)`` listed
in ``KNOWN_BUGS`` and its snapshot is maintained by hand (``--update-snapshots`` leaves it alone).

``pytest tests/test_fixtures.py --update-snapshots`` rewrites the other snapshots from the
current output; review the diff before committing it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, run_cli

SKIP_SUFFIXES = {".snap", ".md", ".toml"}
SETTINGS_NAME = ".sits-doctor.toml"

# Fixtures whose snapshot is the correct output but where the tool currently says otherwise.
# Keys: paths relative to the repo root. Values: what is wrong (and how to see it).
KNOWN_BUGS: dict[str, str] = {}


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def fixture_files() -> list[Path]:
    out = []
    for path in sorted(FIXTURES.rglob("*")):
        if not path.is_file() or path.suffix in SKIP_SUFFIXES:
            continue
        if any(part.startswith(".") for part in path.relative_to(FIXTURES).parts):
            continue
        out.append(path)
    return out


def uses_settings(path: Path) -> bool:
    """A ``.sits-doctor.toml`` between the fixture and fixtures/ (inclusive) applies to it."""
    folder = path.parent
    while True:
        if (folder / SETTINGS_NAME).is_file():
            return True
        if folder == FIXTURES or folder == folder.parent:
            return False
        folder = folder.parent


FIX_MARK = "# sits-doctor fix --unsafe-fixes -q\n"


def command_for(path: Path, verb: str = "check") -> list[str]:
    args = [verb, _rel(path)]
    if not uses_settings(path):
        args.append("--isolated")
    # -q prints what fails the run: --fail-on info makes that every finding, infos included
    return args + (["--unsafe-fixes"] if verb == "fix" else []) + ["--fail-on", "info", "-q"]


def snapshot_text(path: Path) -> str:
    """What the snapshot holds: the check output, then the fix diff if there is one."""
    checked = run_cli(*command_for(path), cwd=REPO)
    assert checked.exit_code in (0, 1), f"exit {checked.exit_code}: {checked.stderr}"
    assert checked.stderr == ""
    fixed = run_cli(*command_for(path, "fix"), cwd=REPO)
    assert fixed.exit_code in (0, 1), f"fix exit {fixed.exit_code}: {fixed.stderr}"
    return checked.stdout + (FIX_MARK + fixed.stdout if fixed.stdout.strip() else "")


def snapshot_of(path: Path) -> Path:
    return path.with_name(path.name + ".snap")


@pytest.fixture(autouse=True)
def _hermetic(hermetic):
    """Every fixture run is hermetic (see conftest.hermetic)."""


def _params():
    for path in fixture_files():
        rel = _rel(path)
        marks = [pytest.mark.xfail(reason=KNOWN_BUGS[rel], strict=True)] if rel in KNOWN_BUGS else []
        yield pytest.param(path, id=rel.removeprefix("fixtures/"), marks=marks)


@pytest.mark.parametrize("path", list(_params()))
def test_fixture_snapshot(path: Path, update_snapshots: bool):
    text = snapshot_text(path)
    snap = snapshot_of(path)
    if update_snapshots:
        if _rel(path) in KNOWN_BUGS:
            pytest.skip("snapshot of a known bug is maintained by hand")
        snap.write_text(text, encoding="utf-8")
        return
    assert snap.is_file(), f"no snapshot {_rel(snap)}; run pytest --update-snapshots and review it"
    assert text == snap.read_text(encoding="utf-8")


def test_fixture_set_is_complete():
    files = fixture_files()
    by_folder: dict[str, int] = {}
    for path in files:
        top = path.relative_to(FIXTURES).parts[0]
        by_folder[top] = by_folder.get(top, 0) + 1
    for framework in ("hf", "vllm", "trtllm", "ortgenai"):
        assert by_folder.get(framework, 0) >= 6, framework
    for wrapper in ("k8s", "compose", "helm"):
        assert by_folder.get(wrapper, 0) >= 3, wrapper
    # no orphaned snapshots, and every snapshot belongs to a fixture this test walks
    walked = {snapshot_of(p) for p in files}
    orphans = [_rel(s) for s in FIXTURES.rglob("*.snap") if s not in walked]
    assert orphans == []
    assert set(KNOWN_BUGS) <= {_rel(p) for p in files}


@pytest.mark.parametrize("path", [p for p in fixture_files() if p.name.startswith(("good_", "bad_"))],
                         ids=lambda p: _rel(p).removeprefix("fixtures/"))
def test_good_and_bad_fixtures(path: Path):
    """Judged on the snapshot (the expected output): bad_* has findings, good_* has none."""
    expected = snapshot_of(path).read_text(encoding="utf-8")
    if path.name.startswith("bad_"):
        assert expected.strip(), f"{_rel(path)} is named bad_ but expects no finding"
    else:
        assert expected == "", f"{_rel(path)} is named good_ but expects findings"


def test_whole_tree():
    """One run over fixtures/ finds problems in every framework and in every wrapper format, and
    HF model configs are read (as configs and as the served models)."""
    result = run_cli("check", "fixtures/", "--format", "json", cwd=REPO)
    assert result.exit_code == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["errors"] == [] and report["internal_errors"] == []
    framework_of = {d["label"]: d["framework"] for d in report["deployments"]}
    by_framework: dict[str, int] = {}
    by_folder: dict[str, int] = {}
    for f in report["findings"]:
        fw = framework_of[f["plan"]]
        by_framework[fw] = by_framework.get(fw, 0) + 1
        folder = Path(f["location"]["file"]).relative_to("fixtures").parts[0]
        by_folder[folder] = by_folder.get(folder, 0) + 1
    for framework in ("hf", "vllm", "trtllm", "ortgenai"):
        assert by_framework.get(framework), f"no finding from {framework}"
    for folder in ("hf", "vllm", "trtllm", "ortgenai", "k8s", "compose", "helm"):
        assert by_folder.get(folder), f"no finding in fixtures/{folder}"
    # HF model configs are read as configs and as the models vLLM configs serve.
    hf_files = {d["file"] for d in report["deployments"] if d["framework"] == "hf"}
    assert len(hf_files) >= 6
    cited = {e for f in report["findings"] for e in f["evidence"] if "fixtures/hf/" in e}
    assert cited, "no finding cites an HF model config"
    # the pinned folder's settings apply when walking the tree
    pinned = [f for f in report["findings"] if "/pinned-0.10/" in f["location"]["file"]]
    assert pinned and all(any("0.10.2" in e for e in f["evidence"]) for f in pinned)


def test_target_from_settings_file_is_named():
    result = run_cli("check", "fixtures/vllm/pinned-0.10/good_yarn_131k.yaml", cwd=REPO)
    assert result.exit_code == 0
    assert "target: vLLM 0.10.2 (target in " in result.stdout
    assert "pinned-0.10/.sits-doctor.toml)" in result.stdout
