"""Path shortcuts of the directory walk must give what the slow, obvious way gives: the walk's
resolved paths equal ``Path.resolve()`` (symlinked files, a symlinked root, a relative root),
and ``display_path`` equals ``os.path.relpath`` shown only inside the working directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sits_doctor.loaders import LoadResult, _walk, load_paths
from sits_doctor.source import display_path


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "x.yaml").write_text("max-model-len: 4096\n")
    (root / "real").mkdir()
    (root / "real" / "y.yaml").write_text("max-model-len: 2048\n")
    os.symlink(root / "real" / "y.yaml", root / "a" / "file-link.yaml")
    os.symlink(root / "real", root / "a" / "dir-link")  # not followed by the walk
    os.symlink(root, tmp_path / "root-link")
    return root


@pytest.mark.parametrize("how", ["absolute", "symlinked root", "relative"])
def test_walked_files_resolve_as_path_resolve_does(tmp_path, monkeypatch, how):
    root = _tree(tmp_path)
    if how == "symlinked root":
        root = tmp_path / "root-link"
    elif how == "relative":
        monkeypatch.chdir(tmp_path / "tree" / "a")
        root = Path("..")
    walked = list(_walk(root, LoadResult()))
    assert sorted(p.name for p, _ in walked) == ["file-link.yaml", "x.yaml", "y.yaml"]
    for path, key in walked:
        assert (key or path.resolve()) == path.resolve()
    assert [key is None for path, key in walked if path.name == "file-link.yaml"] == [True]


def test_a_file_linked_twice_is_read_once(tmp_path):
    root = _tree(tmp_path)
    result = load_paths([root])
    # a/file-link.yaml comes first in the walk; real/y.yaml is the same file, so it is not read again
    assert [Path(f).name for f in result.files_checked] == ["file-link.yaml", "x.yaml"]


def _slow(path) -> str:
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


@pytest.mark.parametrize("cwd", ["repo", "repo/sub", "/"])
def test_display_path_matches_relpath(tmp_path, monkeypatch, cwd):
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    monkeypatch.chdir(repo / "sub" if cwd == "repo/sub" else repo if cwd == "repo" else "/")
    cases = [
        "x.yaml", "./x.yaml", "sub/x.yaml", "sub/../x.yaml", "a//b.yaml", "..", ".", "/",
        str(repo), str(repo) + "/", str(repo / "sub" / "x.yaml"), str(repo / ".." / "other.yaml"),
        str(tmp_path), "../x.yaml", "..foo/x.yaml", Path("sub") / "x.yaml",
    ]
    for case in cases:
        assert display_path(case) == _slow(case), case
