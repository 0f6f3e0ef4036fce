"""`sits-doctor fix`: every fixture's fixes apply cleanly, and the writer is safe.

For every fixture with a fix: the dry run's text is what --apply writes, the written file parses,
the fixed findings are gone, a second apply changes nothing. The writer: atomic (an injected
failure before the rename leaves the original and no temp file), refuses a file changed since it
was checked, never writes through a symlink out of the checked tree, keeps the file mode, the
byte-order mark, CRLF line ends and a missing final newline; a file whose fixes never settle is
left alone.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli, write
from sits_doctor import atomic_write, fixer
from sits_doctor.engine import CheckOptions, check
from sits_doctor.errors import InputError
from sits_doctor.finding import Edit, Fix, Safety
from sits_doctor.loaders import parse_docs

from test_fixtures import fixture_files, uses_settings


def _options(path: Path) -> CheckOptions:
    return CheckOptions(isolated=not uses_settings(path))


def _fixable() -> list[Path]:
    out = []
    for path in fixture_files():
        snap = path.with_name(path.name + ".snap").read_text(encoding="utf-8")
        if "# sits-doctor fix" in snap:
            out.append(path)
    return out


FIXABLE = _fixable()


def test_some_fixtures_have_fixes():
    assert len(FIXABLE) >= 15
    folders = {p.relative_to(FIXTURES).parts[0] for p in FIXABLE}
    assert {"vllm", "k8s", "compose", "helm", "ortgenai"} <= folders


@pytest.fixture
def tree(tmp_path, hermetic, monkeypatch):
    """A copy of fixtures/ to write into; the working directory is its parent."""
    shutil.copytree(FIXTURES, tmp_path / "fixtures")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "fixtures"


@pytest.mark.parametrize("path", FIXABLE, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_fix_applies_cleanly(path: Path, tree: Path):
    copy = tree / path.relative_to(FIXTURES)
    rel = os.path.relpath(copy)
    before = copy.read_bytes()
    opts = _options(copy)
    dry = fixer.fix_paths([rel], opts, unsafe=True)
    assert copy.read_bytes() == before, "a dry run wrote the file"
    (result,) = dry.files
    assert result.changed and result.problem is None
    applied = fixer.fix_paths([rel], opts, unsafe=True, apply=True)
    assert not applied.errors
    written = Path(result.resolved)  # the file the fix edits: the checked one, or a model's sidecar beside it
    assert written.read_text(encoding="utf-8") == result.new, "--apply wrote something else than the diff showed"
    parse_docs(result.new, written, rel)  # raises if the fixed file does not parse
    fixed = {(f.code, f.location.pointer) for f, _ in result.fixed}
    remaining = {(f.code, f.location.pointer) for f in check([rel], opts).findings}
    assert not fixed & remaining, f"still reported after the fix: {fixed & remaining}"
    again = fixer.fix_paths([rel], opts, unsafe=True, apply=True)
    assert not any(r.changed for r in again.files), "a second apply changed the file again"
    assert written.read_text(encoding="utf-8") == result.new


def test_apply_edits_copies_everything_outside_the_edits():
    text = "abcdefghij"
    assert fixer.apply_edits(text, [Edit(7, 9, "XY"), Edit(1, 3, "")]) == "adefgXYj"
    assert fixer.apply_edits(text, [Edit(0, 0, ">"), Edit(10, 10, "<")]) == ">abcdefghij<"
    with pytest.raises(ValueError):
        fixer.apply_edits(text, [Edit(1, 4, ""), Edit(3, 5, "")])
    with pytest.raises(ValueError):
        fixer.apply_edits(text, [Edit(8, 12, "")])


# --- the CLI ------------------------------------------------------------------------------------

SWAP = "model: ./m\ngpu-memory-utilization: 0.9\nswap-space: 4   # GiB\nserved-model-name: m\n"


def test_cli_dry_run_prints_the_diff_and_writes_nothing(tmp_path, hermetic):
    path = write(tmp_path, "serve.yaml", SWAP)
    result = run_cli("fix", "serve.yaml", "--isolated", cwd=tmp_path)
    assert result.exit_code == 1
    assert path.read_text() == SWAP
    assert "-swap-space: 4   # GiB\n" in result.stdout
    assert "would fix: serve.yaml:3:1: SITS204 remove swap-space" in result.stdout
    assert "Would fix 1 finding(s) in 1 file(s) (run with --apply to write); 0 would remain." in result.stdout


def test_cli_apply_then_nothing_to_fix(tmp_path, hermetic):
    path = write(tmp_path, "serve.yaml", SWAP)
    first = run_cli("fix", "serve.yaml", "--isolated", "--apply", cwd=tmp_path)
    assert first.exit_code == 0, first.stdout + first.stderr
    assert path.read_text() == "model: ./m\ngpu-memory-utilization: 0.9\nserved-model-name: m\n"
    assert "Fixed 1 finding(s) in 1 file(s); 0 remain." in first.stdout
    second = run_cli("fix", "serve.yaml", "--isolated", "--apply", cwd=tmp_path)
    assert second.exit_code == 0
    assert "Nothing to fix; 0 finding(s) remain." in second.stdout
    assert run_cli("check", "serve.yaml", "--isolated", cwd=tmp_path).exit_code == 0


def test_cli_exit_non_zero_on_fix(tmp_path, hermetic):
    write(tmp_path, "serve.yaml", SWAP)
    result = run_cli("fix", "serve.yaml", "--isolated", "--apply", "--exit-non-zero-on-fix", cwd=tmp_path)
    assert result.exit_code == 1


def test_cli_unsafe_fixes_only_when_asked(tmp_path, hermetic):
    text = "model: ./m\ngpu-memory-utilization: 0.9\nnum-scheduler-steps: 8\nserved-model-name: m\n"
    path = write(tmp_path, "serve.yaml", text)
    result = run_cli("fix", "serve.yaml", "--isolated", "--apply", cwd=tmp_path)
    assert path.read_text() == text
    assert result.exit_code == 1
    assert ("unsafe fix available: serve.yaml:3:1: SITS204 remove num-scheduler-steps (use --unsafe-fixes)"
            in result.stdout)
    result = run_cli("fix", "serve.yaml", "--isolated", "--apply", "--unsafe-fixes", cwd=tmp_path)
    assert result.exit_code == 0
    assert "num-scheduler-steps" not in path.read_text()


def test_cli_select_limits_the_fixes(tmp_path, hermetic):
    text = "model: ./m\nswap-space: 4\nenable_prefix_caching: false\nserved-model-name: m\n"
    path = write(tmp_path, "serve.yaml", text)
    run_cli("fix", "serve.yaml", "--isolated", "--apply", "--unsafe-fixes", "--select", "SITS205", cwd=tmp_path)
    assert path.read_text() == "model: ./m\nswap-space: 4\nenable-prefix-caching: false\nserved-model-name: m\n"


def test_cli_display_only_fix_says_why(tmp_path, hermetic):
    write(tmp_path, "trt.yaml", "use_cuda_graph: true\nkv_cache_config:\n  free_gpu_memory_fraction: 0.9\n")
    result = run_cli("fix", "trt.yaml", "--isolated", cwd=tmp_path)
    assert ("no automatic fix: trt.yaml:1:1: SITS204 migrate use_cuda_graph "
            "(the 1.x option lives in another section)") in result.stdout


# --- the writer ---------------------------------------------------------------------------------

def _fix_one(tmp_path, name: str, data: bytes) -> tuple[Path, fixer.FixResult]:
    path = tmp_path / name
    path.write_bytes(data)
    return path, fixer.fix_paths([str(path)], CheckOptions(isolated=True), apply=True)


def test_keeps_crlf_bom_and_missing_final_newline(tmp_path, hermetic):
    data = "\ufeffmodel: ./m\r\nswap-space: 4\r\nserved-model-name: m".encode()
    path, result = _fix_one(tmp_path, "serve.yaml", data)
    assert not result.errors
    assert path.read_bytes() == "\ufeffmodel: ./m\r\nserved-model-name: m".encode()


def test_json_with_tabs_keeps_its_layout(tmp_path, hermetic):
    data = ('{\n\t"model": {\n\t\t"type": "llama",\n\t\t"context_length": 4096,\n\t\t"decoder": {\n'
            '\t\t\t"filename": "model.onnx",\n\t\t\t"session_options": {"provider_options": '
            '[{"cuda": {"enable_cuda_graph": true}}]}\n\t\t}\n\t}\n}').encode()
    path, result = _fix_one(tmp_path, "genai_config.json", data)
    assert not result.errors
    assert path.read_bytes() == data.replace(b'"enable_cuda_graph": true', b'"enable_cuda_graph": "1"')


def test_keeps_the_file_mode(tmp_path, hermetic):
    path = write(tmp_path, "serve.yaml", SWAP)
    path.chmod(0o640)
    fixer.fix_paths([str(path)], CheckOptions(isolated=True), apply=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert "swap-space" not in path.read_text()


def test_failure_before_rename_leaves_the_original_and_no_temp_file(tmp_path, hermetic, monkeypatch):
    path = write(tmp_path, "serve.yaml", SWAP)

    def boom(tmp, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_write, "_before_rename", boom)
    result = fixer.fix_paths([str(path)], CheckOptions(isolated=True), apply=True)
    assert path.read_text() == SWAP
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf-cache", "serve.yaml"]
    assert [e.message for e in result.errors] == ["not written: No space left on device"]


def test_refuses_a_file_changed_since_it_was_checked(tmp_path):
    path = write(tmp_path, "serve.yaml", SWAP)
    with pytest.raises(InputError, match="changed since it was checked"):
        fixer.write_atomically(path.resolve(), SWAP.replace("0.9", "0.8"), "x", [tmp_path.resolve()])
    assert path.read_text() == SWAP


def test_never_writes_through_a_symlink_out_of_the_tree(tmp_path, hermetic):
    outside = write(tmp_path / "outside", "serve.yaml", SWAP)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "serve.yaml").symlink_to(outside)
    result = fixer.fix_paths([str(tree)], CheckOptions(isolated=True), apply=True)
    assert outside.read_text() == SWAP
    assert any("symlink that leaves the checked tree" in e.message for e in result.errors)


def test_a_symlink_inside_the_tree_is_written_through(tmp_path, hermetic):
    tree = tmp_path / "tree"
    real = write(tree / "real", "serve.yaml", SWAP)
    (tree / "link.yaml").symlink_to(real)
    fixer.fix_paths([str(tree / "link.yaml"), str(tree)], CheckOptions(isolated=True), apply=True)
    assert (tree / "link.yaml").is_symlink()
    assert "swap-space" not in real.read_text()


def test_fixes_that_never_settle_write_nothing(tmp_path, hermetic, monkeypatch):
    """A (buggy) rule whose fix always finds something new: after MAX_ROUNDS the file is left."""
    from types import SimpleNamespace

    from sits_doctor import engine
    from sits_doctor.finding import Severity
    from sits_doctor.rule import Rule

    rule = Rule("SITS999", "always-more", "test", Severity.WARNING, ("vllm",))

    def check_(plan, ctx):
        text = plan.doc.text
        fix = Fix("append", plan.file, (Edit(len(text), len(text), "# more\n"),), Safety.SAFE, None, text)
        yield rule.finding(plan, plan.anchor, "never done", fixes=[fix])

    module = SimpleNamespace(RULE=rule, check=check_)
    monkeypatch.setattr(engine, "rule_modules", lambda: (module,))
    path = write(tmp_path, "serve.yaml", SWAP)
    result = fixer.fix_paths([str(path)], CheckOptions(isolated=True), apply=True)
    assert path.read_text() == SWAP
    (file_result,) = result.files
    assert file_result.problem == f"did not settle after {fixer.MAX_ROUNDS} rounds of fixes; nothing written"


# --- adding an option where the plan's options are written ------------------------------------------

@pytest.mark.parametrize(("name", "text", "expected"), [
    ("serve.yaml", "model: ./m\nmax-model-len: 4096  # ctx\n", "model: ./m\nmax-model-len: 4096  # ctx\nenforce-eager: true\n"),
    ("serve.yaml", "model: ./m\nmax_model_len: 4096", "model: ./m\nmax_model_len: 4096\nenforce_eager: true\n"),
    ("k8s.yaml", None, None),
], ids=["yaml-dashed", "yaml-underscored-no-final-newline", "k8s-args"])
def test_add_option_writes_in_the_files_style(tmp_path, hermetic, name, text, expected):
    from conftest import k8s_deployment

    from sits_doctor.fixes.config_insert import add_option
    from sits_doctor.loaders import load_paths

    if text is None:
        text = k8s_deployment("          image: vllm/vllm-openai:v0.11.0",
                              "          args:", "            - --model", "            - org/m")
        expected = text + "            - --enforce-eager\n"
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    (plan,) = load_paths([path]).plans
    fix = add_option(plan, "enforce_eager", True, "add --enforce-eager")
    assert fix.safety is Safety.SAFE, fix.why_not
    assert fixer.apply_edits(text, fix.edits) == expected


@pytest.mark.parametrize("text", [
    "defaults: &d\n  swap-space: 4\n  served-model-name: m\nmodel: ./m\n<<: *d\n",
    "common: &c\n  - --swap-space\n  - '4'\nk: {a: 1}\n",
], ids=["merge", "anchor"])
def test_what_is_written_once_for_several_places_is_not_edited(tmp_path, hermetic, text):
    from sits_doctor.source_yaml import parse_yaml

    (doc,) = parse_yaml(text, "serve.yaml")
    assert doc.is_shared("/swap-space") if "<<" in text else not doc.is_shared("/common")
    path = tmp_path / "serve.yaml"
    path.write_text(text, encoding="utf-8")
    result = fixer.fix_paths([str(path)], CheckOptions(isolated=True, select=["SITS204"]))
    assert all(not r.changed for r in result.files)
    if "<<" in text:
        assert [fx.why_not for _, fx in result.shown_only] == [
            "it is written once for several places (a YAML anchor, alias or << merge)"]


def test_an_aliased_list_is_shared_everywhere_it_is_used():
    from sits_doctor.source_yaml import parse_yaml

    (doc,) = parse_yaml("a: &x [1, 2]\nb: *x\nc: [3]\n", "t.yaml")
    assert doc.is_shared("/a/0") and doc.is_shared("/b") and not doc.is_shared("/c/0")


def test_fix_apply_on_the_whole_fixture_tree(tree: Path):
    """The issue's check, as one run over a copy of fixtures/: --apply writes exactly what the dry
    run showed, a second run has nothing to fix, and every file still parses."""
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    dry = run_cli("fix", "fixtures", "--unsafe-fixes", cwd=tree.parent)
    assert {p: p.read_bytes() for p in before} == before
    shown = {line[len("+++ b/"):] for line in dry.stdout.splitlines() if line.startswith("+++ b/")}
    applied = run_cli("fix", "fixtures", "--unsafe-fixes", "--apply", cwd=tree.parent)
    assert applied.exit_code in (0, 1), applied.stderr
    changed = {os.path.relpath(p, tree.parent) for p, data in before.items() if p.read_bytes() != data}
    assert changed == shown and len(changed) >= 15
    again = run_cli("fix", "fixtures", "--unsafe-fixes", "--apply", cwd=tree.parent)
    assert "Nothing to fix;" in again.stdout
    for rel in changed:
        parse_docs((tree.parent / rel).read_text(encoding="utf-8"), tree.parent / rel, rel)


def test_dry_run_positions_are_those_of_the_file_as_it_is():
    """Two removals in one JSON-style list, fixed in two rounds (their edits touch): the second
    finding is reported at its column in the file, not where the first removal moved it to."""
    from conftest import FIXTURES
    from sits_doctor.engine import CheckOptions
    from sits_doctor.fixer import fix_paths

    path = FIXTURES / "compose" / "bad_entrypoint_vllm_serve.yaml"
    (result,) = fix_paths([path], CheckOptions(isolated=True), unsafe=True).files
    assert len(result.rounds) == 2
    line = result.original.splitlines()[5]
    shown = [(f.location.line, f.location.col, fx.title) for f, fx in result.fixed]
    assert shown == [(6, line.index('"--max-seq-len-to-capture"') + 1, "remove --max-seq-len-to-capture and its value"),
                     (6, line.index('"--use-v2-block-manager"') + 1, "remove --use-v2-block-manager")]


@pytest.mark.parametrize("col_now, col_then", [(1, 1), (2, 2), (4, 2), (6, 4), (8, 6)])
def test_a_later_rounds_position_maps_back_through_the_edits(col_now, col_then):
    """"abcdef" with "bc" replaced by "XYZW" is "aXYZWdef": a place after the edit moves back by
    the two characters it added, a place inside the new text goes to the edit's start."""
    from make_finding import make_finding
    from sits_doctor.finding import Edit
    from sits_doctor.fixer import _at_original
    from sits_doctor.source import LineIndex

    finding = make_finding("SITS204", "f", line=1, col=col_now)
    moved = _at_original(finding, LineIndex("aXYZWdef\n"), LineIndex("abcdef\n"), [[Edit(1, 3, "XYZW")]])
    assert moved.location[1:3] == (1, col_then)
