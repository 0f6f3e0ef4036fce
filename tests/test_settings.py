"""ProjectSettings files, like ruff: ``.sits-doctor.toml`` or ``[tool.sits-doctor]`` in ``pyproject.toml``,
the closest one above each checked file wins (no merging), command-line options override it,
``--isolated`` ignores them, ``--config FILE`` names one.
"""

from __future__ import annotations

import os

import json
from pathlib import Path

import pytest

from conftest import run_cli, write
from test_cli import ALL, PREFIX_FALSE, TOO_LONG, model_folder

# ALL at vLLM 0.20.0 fires SITS202, SITS205 and SITS204 (twice).
EVERYTHING = ["SITS202", "SITS205", "SITS204", "SITS204"]


def codes(result) -> list[str]:
    return [f["code"] for f in json.loads(result.stdout)["findings"]]


def by_file(result) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in json.loads(result.stdout)["findings"]:
        out.setdefault(Path(f["location"]["file"]).as_posix(), []).append(f["code"])
    return out


def check_json(*args: str, cwd: Path):
    return run_cli("check", "--format", "json", *args, cwd=cwd)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """tmp_path/proj with a model folder and all.yaml (no settings yet)."""
    root = tmp_path / "proj"
    model_folder(root)
    write(root, "all.yaml", ALL)
    return root


def test_no_settings(proj):
    assert codes(check_json("all.yaml", "--target", "vllm==0.20.0", cwd=proj)) == EVERYTHING


# --------------------------------------------------------------------------- discovery


def test_dot_sits_doctor_toml(proj):
    write(proj, ".sits-doctor.toml", 'select = ["SITS204"]\n')
    assert codes(check_json("all.yaml", "--target", "vllm==0.20.0", cwd=proj)) == ["SITS204", "SITS204"]


def test_pyproject_tool_table(proj):
    write(proj, "pyproject.toml", '[project]\nname = "x"\n\n[tool.sits-doctor]\nignore = ["SITS204"]\n')
    assert codes(check_json("all.yaml", "--target", "vllm==0.20.0", cwd=proj)) == ["SITS202", "SITS205"]


def test_pyproject_without_the_table_is_passed_over(proj):
    write(proj, ".sits-doctor.toml", 'ignore = ["SITS202"]\n')
    write(proj, "sub/pyproject.toml", '[project]\nname = "x"\n\n[tool.ruff]\nline-length = 100\n')
    write(proj, "sub/all.yaml", ALL.replace("./llama", "../llama"))
    r = check_json("sub/all.yaml", "--target", "vllm==0.20.0", cwd=proj)
    assert codes(r) == ["SITS205", "SITS204", "SITS204"]


def test_dot_file_beats_pyproject_in_the_same_folder(proj):
    write(proj, ".sits-doctor.toml", 'ignore = ["SITS202"]\n')
    write(proj, "pyproject.toml", '[tool.sits-doctor]\nignore = ["SITS204"]\n')
    assert codes(check_json("all.yaml", "--target", "vllm==0.20.0", cwd=proj)) == ["SITS205", "SITS204", "SITS204"]


def test_closest_settings_win_without_merging(proj):
    write(proj, ".sits-doctor.toml", 'ignore = ["SITS202"]\nfail-on = "error"\n')
    write(proj, "sub/.sits-doctor.toml", 'ignore = ["SITS204"]\n')
    write(proj, "sub/all.yaml", ALL.replace("./llama", "../llama"))
    r = check_json("all.yaml", "sub/all.yaml", "--target", "vllm==0.20.0", cwd=proj)
    assert by_file(r) == {
        "all.yaml": ["SITS205", "SITS204", "SITS204"],
        "sub/all.yaml": ["SITS202", "SITS205"],  # the parent's ignore is not merged in
    }


def test_discovered_from_the_checked_file_not_the_working_directory(proj, tmp_path):
    write(proj, ".sits-doctor.toml", 'select = ["SITS205"]\n')
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere, ".sits-doctor.toml", 'select = ["SITS204"]\n')
    r = check_json(str(proj / "all.yaml"), "--target", "vllm==0.20.0", cwd=elsewhere)
    assert codes(r) == ["SITS205"]


def test_discovered_when_checking_a_directory(proj):
    write(proj, ".sits-doctor.toml", 'select = ["SITS205"]\n')
    r = check_json(".", "--target", "vllm==0.20.0", cwd=proj)
    assert codes(r) == ["SITS205"]


# --------------------------------------------------------------------------- keys


def test_extend_select(proj):
    write(proj, ".sits-doctor.toml", 'select = ["SITS202"]\nextend-select = ["SITS205"]\n')
    assert codes(check_json("all.yaml", "--target", "vllm==0.20.0", cwd=proj)) == ["SITS202", "SITS205"]


def test_ignore_by_prefix(proj):
    write(proj, ".sits-doctor.toml", 'ignore = ["SITS20"]\n')
    r = check_json("all.yaml", "--target", "vllm==0.20.0", cwd=proj)
    assert codes(r) == [] and r.exit_code == 0


def test_fail_on(proj):
    write(proj, "warn.yaml", PREFIX_FALSE)
    write(proj, ".sits-doctor.toml", 'fail-on = "error"\n')
    r = check_json("warn.yaml", "--target", "vllm==0.10.2", cwd=proj)
    assert codes(r) == ["SITS205"] and r.exit_code == 0
    assert run_cli("check", "all.yaml", "--target", "vllm==0.20.0", cwd=proj).exit_code == 1


def test_target(proj):
    write(proj, ".sits-doctor.toml", 'target = ["vllm==0.10.2"]\n')
    r = run_cli("check", "all.yaml", "--format", "json", cwd=proj)
    assert codes(r) == ["SITS202", "SITS205"]  # no SITS204: swap-space exists in 0.10.2
    assert json.loads(r.stdout)["deployments"][0]["target"].startswith("vLLM 0.10.2 ")


def test_target_from_settings_names_the_settings_file(proj):
    write(proj, ".sits-doctor.toml", 'target = ["vllm==0.10.2"]\n')
    r = run_cli("check", "all.yaml", cwd=proj)
    (target_line,) = [line for line in r.stdout.splitlines() if line.startswith("target: ")]
    assert target_line.startswith("target: vLLM 0.10.2 (")
    assert ".sits-doctor.toml" in target_line and "--target" not in target_line


def test_target_beats_image_tag(tmp_path):
    from test_cli import K8S

    write(tmp_path, "k8s.yaml", K8S)
    write(tmp_path, ".sits-doctor.toml", 'target = ["vllm==0.33.0"]\n')
    r = run_cli("check", "k8s.yaml", "--format", "json", cwd=tmp_path)
    assert codes(r) == ["SITS204"]


def test_per_file_ignores(proj):
    write(proj, "sub/all.yaml", ALL.replace("./llama", "../llama"))
    write(proj, "other/all.yaml", ALL.replace("./llama", "../llama"))
    write(proj, ".sits-doctor.toml", '[per-file-ignores]\n"sub/*.yaml" = ["SITS204"]\n"other/*" = ["SITS20"]\n')
    r = check_json(".", "--target", "vllm==0.20.0", cwd=proj)
    assert by_file(r) == {
        "all.yaml": EVERYTHING,
        "sub/all.yaml": ["SITS202", "SITS205"],
    }


def test_per_file_ignores_globs_are_relative_to_the_settings_file(proj, tmp_path):
    write(proj, "sub/all.yaml", ALL.replace("./llama", "../llama"))
    write(proj, ".sits-doctor.toml", '[per-file-ignores]\n"sub/*.yaml" = ["SITS204", "SITS205"]\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = check_json(str(proj / "sub/all.yaml"), "--target", "vllm==0.20.0", cwd=elsewhere)
    assert codes(r) == ["SITS202"]


def test_per_file_ignores_by_file_name(proj):
    write(proj, ".sits-doctor.toml", '[per-file-ignores]\n"all.yaml" = ["SITS202"]\n')
    r = check_json("all.yaml", "--target", "vllm==0.20.0", cwd=proj)
    assert codes(r) == ["SITS205", "SITS204", "SITS204"]


def test_model_config(proj):
    write(proj, "remote.yaml", "model: sits-doctor-test/not-a-cached-model\nmax-model-len: 32768\n")
    r = check_json("remote.yaml", "--isolated", cwd=proj)
    assert [f["severity"] for f in json.loads(r.stdout)["findings"]] == ["info"]
    write(proj, ".sits-doctor.toml", f'model-config = "{(proj / "llama").as_posix()}"\n')
    r = check_json("remote.yaml", cwd=proj)
    (finding,) = json.loads(r.stdout)["findings"]
    assert finding["severity"] == "error" and "8192" in finding["message"]
    assert r.exit_code == 1


def test_model_config_relative_from_the_settings_folder(proj):
    write(proj, "remote.yaml", "model: sits-doctor-test/not-a-cached-model\nmax-model-len: 32768\n")
    write(proj, ".sits-doctor.toml", 'model-config = "llama"\n')
    r = check_json("remote.yaml", cwd=proj)
    assert [f["severity"] for f in json.loads(r.stdout)["findings"]] == ["error"]


def test_model_config_relative_to_the_settings_file(proj, tmp_path):
    write(proj, "remote.yaml", "model: sits-doctor-test/not-a-cached-model\nmax-model-len: 32768\n")
    write(proj, ".sits-doctor.toml", 'model-config = "llama"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = check_json(str(proj / "remote.yaml"), cwd=elsewhere)
    assert r.exit_code == 1, r.stderr
    assert [f["severity"] for f in json.loads(r.stdout)["findings"]] == ["error"]


# --------------------------------------------------------------------------- the command line overrides


def test_cli_select_overrides_settings_select(proj):
    write(proj, ".sits-doctor.toml", 'select = ["SITS202"]\n')
    assert codes(check_json("all.yaml", "--target", "vllm==0.20.0", "--select", "SITS204", cwd=proj)) == ["SITS204", "SITS204"]


def test_cli_ignore_and_extend_select_add_to_settings(proj):
    write(proj, ".sits-doctor.toml", 'select = ["SITS202"]\nignore = ["SITS205"]\n')
    r = check_json("all.yaml", "--target", "vllm==0.20.0", "--extend-select", "SITS204,SITS205", cwd=proj)
    assert codes(r) == ["SITS202", "SITS204", "SITS204"]
    r = check_json("all.yaml", "--target", "vllm==0.20.0", "--extend-select", "SITS204", "--ignore", "SITS202", cwd=proj)
    assert codes(r) == ["SITS204", "SITS204"]


def test_cli_fail_on_overrides(proj):
    write(proj, "warn.yaml", PREFIX_FALSE)
    write(proj, ".sits-doctor.toml", 'fail-on = "error"\n')
    assert run_cli("check", "warn.yaml", "--target", "vllm==0.10.2", "--fail-on", "warning", cwd=proj).exit_code == 1
    write(proj, "strict/.sits-doctor.toml", 'fail-on = "info"\n')
    write(proj, "strict/warn.yaml", PREFIX_FALSE)
    assert run_cli("check", "strict/warn.yaml", "--target", "vllm==0.10.2", cwd=proj).exit_code == 1
    assert run_cli("check", "strict/warn.yaml", "--target", "vllm==0.10.2", "--fail-on", "error", cwd=proj).exit_code == 0


def test_cli_target_overrides(proj):
    write(proj, ".sits-doctor.toml", 'target = ["vllm==0.10.2"]\n')
    r = check_json("all.yaml", "--target", "vllm==0.33.0", cwd=proj)
    assert codes(r) == ["SITS202", "SITS204", "SITS204"]


def test_cli_model_config_overrides(proj, tmp_path):
    write(proj, "remote.yaml", "model: sits-doctor-test/not-a-cached-model\nmax-model-len: 16384\n")
    big = json.loads((proj / "llama/config.json").read_text())
    big["max_position_embeddings"] = 32768
    write(tmp_path, "big/config.json", json.dumps(big))
    write(proj, ".sits-doctor.toml", f'model-config = "{(proj / "llama").as_posix()}"\n')
    assert run_cli("check", "remote.yaml", cwd=proj).exit_code == 1
    assert run_cli("check", "remote.yaml", "--model-config", str(tmp_path / "big"), cwd=proj).exit_code == 0


def test_isolated_ignores_settings(proj):
    write(proj, ".sits-doctor.toml", 'select = ["SITS204"]\nfail-on = "error"\n')
    r = check_json("all.yaml", "--target", "vllm==0.20.0", "--isolated", cwd=proj)
    assert codes(r) == EVERYTHING


def test_isolated_ignores_invalid_settings(proj):
    write(proj, ".sits-doctor.toml", "this is = not [valid toml\n")
    r = run_cli("check", "all.yaml", "--isolated", "--target", "vllm==0.20.0", cwd=proj)
    assert r.exit_code == 1


def test_config_file_option(proj, tmp_path):
    write(proj, ".sits-doctor.toml", 'select = ["SITS205"]\n')
    custom = write(tmp_path, "ci/lint.toml", 'select = ["SITS204"]\n')
    r = check_json("all.yaml", "--target", "vllm==0.20.0", "--config", str(custom), cwd=proj)
    assert codes(r) == ["SITS204", "SITS204"]


def test_config_file_option_pyproject(proj, tmp_path):
    custom = write(tmp_path, "ci/pyproject.toml", '[tool.sits-doctor]\nignore = ["SITS204", "SITS205"]\n')
    r = check_json("all.yaml", "--target", "vllm==0.20.0", "--config", str(custom), cwd=proj)
    assert codes(r) == ["SITS202"]


def test_config_file_option_missing_file(proj):
    r = run_cli("check", "all.yaml", "--config", "nope.toml", cwd=proj)
    assert r.exit_code == 2
    assert "nope.toml" in r.stderr


# --------------------------------------------------------------------------- invalid settings


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("select = [\n", "invalid TOML"),
        ('bogus = ["SITS202"]\n', "bogus"),
        ('fail-on = "fatal"\n', "fail-on"),
        ('select = "SITS202"\n', "select"),
        ('[per-file-ignores]\n"*.yaml" = "SITS202"\n', "per-file-ignores"),
    ],
    ids=["toml-syntax", "unknown-key", "bad-fail-on", "select-not-a-list", "per-file-ignores-not-a-list"],
)
def test_invalid_settings_exit_2_naming_the_file(proj, text, needle):
    settings = write(proj, ".sits-doctor.toml", text)
    r = run_cli("check", "all.yaml", cwd=proj)
    assert r.exit_code == 2
    assert ': error:' in r.stderr and settings.name in r.stderr.split(': error:')[0]
    assert needle in r.stderr
    assert "Traceback" not in r.stderr


def test_invalid_pyproject_table_names_the_file(proj):
    write(proj, "pyproject.toml", '[tool.ruff]\nselect = ["E"]\n\n[tool.sits-doctor]\nselect = 3\n')
    r = run_cli("check", "all.yaml", cwd=proj)
    assert r.exit_code == 2
    # the line of sits-doctor's own `select`, not ruff's
    assert "pyproject.toml:5:1: error: invalid sits-doctor settings: select" in r.stderr


def test_invalid_config_option_file_exit_2(proj, tmp_path):
    custom = write(tmp_path, "lint.toml", 'unknown-key = 1\n')
    r = run_cli("check", "all.yaml", "--config", str(custom), cwd=proj)
    assert r.exit_code == 2
    assert str(custom) in r.stderr and "unknown-key" in r.stderr


def test_invalid_settings_of_a_later_path_exit_2(proj):
    bad = write(proj, "sub/.sits-doctor.toml", 'bogus = 1\n')
    write(proj, "sub/all.yaml", ALL.replace("./llama", "../llama"))
    r = run_cli("check", "all.yaml", "sub/all.yaml", "--target", "vllm==0.20.0", cwd=proj)
    assert r.exit_code == 2
    assert os.path.relpath(bad, proj) in r.stderr
    assert "all.yaml:2:1: SITS202" in r.stdout  # the first file is still checked


def test_invalid_target_in_settings_names_the_settings_file(proj):
    settings = write(proj, ".sits-doctor.toml", 'target = ["vllm=0.1"]\n')
    r = run_cli("check", "all.yaml", cwd=proj)
    assert r.exit_code == 2
    assert ': error:' in r.stderr and settings.name in r.stderr.split(': error:')[0]


@pytest.mark.parametrize(
    "text",
    ['select = ["SITS999"]\n', 'ignore = ["SITS999"]\n', 'extend-select = ["SITS999"]\n',
     '[per-file-ignores]\n"*.yaml" = ["SITS999"]\n'],
    ids=["select", "ignore", "extend-select", "per-file-ignores"],
)
def test_unknown_code_in_settings_exit_2(proj, text):
    settings = write(proj, ".sits-doctor.toml", text)
    r = run_cli("check", "all.yaml", "--target", "vllm==0.20.0", cwd=proj)
    assert r.exit_code == 2
    assert settings.name in r.stderr.split(': error:')[0] and "SITS999" in r.stderr


# --------------------------------------------------------------------------- the Python API


def test_api_uses_settings(proj, monkeypatch):
    import sits_doctor

    write(proj, ".sits-doctor.toml", 'select = ["SITS205"]\n')
    monkeypatch.chdir(proj)
    opts = sits_doctor.CheckOptions(targets=["vllm==0.20.0"])
    assert [f.code for f in sits_doctor.check(["all.yaml"], opts).findings] == ["SITS205"]
    isolated = sits_doctor.CheckOptions(targets=["vllm==0.20.0"], isolated=True)
    assert [f.code for f in sits_doctor.check(["all.yaml"], isolated).findings] == EVERYTHING


def test_api_sees_edited_settings(proj, monkeypatch):
    import sits_doctor

    monkeypatch.chdir(proj)
    opts = sits_doctor.CheckOptions(targets=["vllm==0.20.0"])
    assert [f.code for f in sits_doctor.check(["all.yaml"], opts).findings] == EVERYTHING
    write(proj, ".sits-doctor.toml", 'select = ["SITS205"]\n')
    assert [f.code for f in sits_doctor.check(["all.yaml"], opts).findings] == ["SITS205"]
    write(proj, ".sits-doctor.toml", 'select = ["SITS202"]\n')
    assert [f.code for f in sits_doctor.check(["all.yaml"], opts).findings] == ["SITS202"]


def test_fail_on_comes_from_each_files_own_settings_whatever_the_order(tmp_path):
    """A warning fails under the default threshold and passes where the nearest settings say
    fail-on = "error"; the exit code does not depend on which path comes first."""
    warn = "model: m\nenable-prefix-caching: false\nserved-model-name: m\n"  # SITS205 warning on 0.20
    write(tmp_path, "strict/serve.yaml", warn)
    write(tmp_path, "lenient/serve.yaml", warn)
    write(tmp_path, "lenient/.sits-doctor.toml", 'fail-on = "error"\ntarget = ["vllm==0.20.0"]\n')
    write(tmp_path, "strict/.sits-doctor.toml", 'target = ["vllm==0.20.0"]\n')
    assert run_cli("check", "lenient/serve.yaml", cwd=tmp_path).exit_code == 0
    assert run_cli("check", "strict/serve.yaml", cwd=tmp_path).exit_code == 1
    assert run_cli("check", "lenient/serve.yaml", "strict/serve.yaml", cwd=tmp_path).exit_code == 1
    assert run_cli("check", "strict/serve.yaml", "lenient/serve.yaml", cwd=tmp_path).exit_code == 1
    only_lenient = run_cli("check", "lenient/serve.yaml", "--format", "junit", cwd=tmp_path)
    assert only_lenient.exit_code == 0 and "<failure" not in only_lenient.stdout


def test_settings_errors_name_the_line(tmp_path):
    """A wrong type in a settings file points at the key's line (issue "Reliability")."""
    from conftest import run_cli, write

    write(tmp_path, "serve.yaml", "model: ./m\nserved-model-name: m\n")
    write(tmp_path, ".sits-doctor.toml", '# settings\nfail-on = "error"\nselect = "SITS2"\n')
    r = run_cli("check", "serve.yaml", cwd=tmp_path)
    assert r.exit_code == 2
    assert ".sits-doctor.toml:3:1: error: invalid sits-doctor settings: select: Input should be a valid list" in r.stderr
    write(tmp_path, ".sits-doctor.toml", 'fail-on = "error"\nselect = ["SITS2"\nignore = []\n')
    r = run_cli("check", "serve.yaml", cwd=tmp_path)
    assert r.exit_code == 2
    assert ".sits-doctor.toml:3:1: error: invalid TOML: Unclosed array" in r.stderr


# --- exclude / extend-exclude -------------------------------------------------------------------

BAD_SERVE = "model: meta-llama/Llama-3.1-8B-Instruct\nswap-space: 4\n"


def _walked(tmp_path, settings: str | None) -> list[str]:
    from sits_doctor.engine import CheckOptions, check

    for name in ("deploy/a.yaml", "deploy/vendor/b.yaml", "charts/rendered/c.yaml", ".hidden/d.yaml",
                 "node_modules/e.yaml"):
        write(tmp_path, name, BAD_SERVE)
    if settings is not None:
        write(tmp_path, ".sits-doctor.toml", settings)
    report = check([tmp_path], CheckOptions())
    return sorted(Path(f).relative_to(tmp_path).as_posix() for f in report.files_checked)


def test_the_default_walk_leaves_out_hidden_folders_and_installed_packages(tmp_path):
    assert _walked(tmp_path, None) == ["charts/rendered/c.yaml", "deploy/a.yaml", "deploy/vendor/b.yaml"]


def test_extend_exclude_adds_to_the_default(tmp_path):
    found = _walked(tmp_path, 'extend-exclude = ["vendor", "charts/rendered"]\n')
    assert found == ["deploy/a.yaml"]


def test_exclude_replaces_the_default(tmp_path):
    found = _walked(tmp_path, 'exclude = ["vendor"]\n')
    assert found == [".hidden/d.yaml", "charts/rendered/c.yaml", "deploy/a.yaml", "node_modules/e.yaml"]


def test_a_file_named_on_the_command_line_is_checked_even_if_excluded(tmp_path):
    from sits_doctor.engine import CheckOptions, check

    write(tmp_path, "vendor/b.yaml", BAD_SERVE)
    write(tmp_path, ".sits-doctor.toml", 'extend-exclude = ["vendor"]\n')
    assert check([tmp_path / "vendor" / "b.yaml"], CheckOptions()).findings


def test_show_settings_prints_the_file_and_its_values(tmp_path):
    write(tmp_path, "deploy/.sits-doctor.toml", 'target = ["vllm==0.10.2"]\nextend-exclude = ["vendor"]\n')
    result = run_cli("check", "deploy", "--show-settings", "--fail-on", "error", cwd=tmp_path)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert "settings file     deploy/.sits-doctor.toml" in lines
    assert "target            ['vllm==0.10.2']" in lines and "extend-exclude    ['vendor']" in lines
    assert lines[-2:] == ["command line (wins over the file):", "  --fail-on error"]
    isolated = run_cli("check", "deploy", "--show-settings", "--isolated", cwd=tmp_path)
    assert "settings file     (--isolated)" in isolated.stdout and "target            []" in isolated.stdout


@pytest.mark.parametrize("name, text, message, at", [
    ("pyproject.toml", 'x = 1\n\n[tool.sits-doctor]\ngpu = "H100"\nselect = ["SITS9999"]\n',
     "unknown rule selector 'SITS9999' in select", (5, 1)),
    (".sits-doctor.toml", 'ignore = ["SITS2"]\nper-file-ignores = { "a.yaml" = ["XX1"] }\n',
     "unknown rule selector 'XX1' in per-file-ignores", (2, 1)),
    (".sits-doctor.toml", '\ntarget = ["vllm==abc"]\n', "target: 'vllm==abc'", (2, 1)),
    (".sits-doctor.toml", '# the GPU\n  gpu = "H999"\n', "gpu: unknown GPU 'H999'", (2, 3)),
])
def test_values_judged_after_loading_are_located_errors(tmp_path, monkeypatch, name, text, message, at):
    """An unknown selector, target or GPU in a settings file is an error at its key, exit 2."""
    from sits_doctor.engine import CheckOptions, check

    (tmp_path / name).write_text(text)
    (tmp_path / "vllm.yaml").write_text("model: org/m\nmax-model-len: 4\n")
    monkeypatch.chdir(tmp_path)
    report = check(["vllm.yaml"], CheckOptions())
    (err,) = report.errors
    assert message in err.message and (err.path, err.line, err.col) == (name, *at), (err.path, err.line, err.col, err.message)
