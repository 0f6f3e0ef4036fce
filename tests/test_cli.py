"""The ``sits-doctor`` command line: exit codes, rule selection, the ``rules`` / ``explain``
commands, text output, colour, ``--target``, and the Python API behind it.

Every config is written to ``tmp_path``; nothing is downloaded. Versions that matter are pinned
with ``--target`` (or an image tag) so the installed packages cannot change the results.
"""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path

import pytest

from conftest import LLAMA_8B, k8s_deployment, run_cli, write
from sits_doctor.frameworks.vllm import NEWEST  # the newest release in the parser table

ANSI = "\x1b["
FINDING_LINE = re.compile(r"^(?P<path>[^\s:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>SITS\d{3}) \[(?P<sev>error|warning|info)\] \S.*$")

# vLLM --config YAML files, all next to a model folder ./llama (8192 positions).
GOOD = "model: ./llama\nmax-model-len: 4096\n"
TOO_LONG = "model: ./llama\nmax-model-len: 32768\n"  # SITS202 [error], any version
PREFIX_FALSE = "model: ./llama\nenable-prefix-caching: false\n"  # SITS205 [warning] for vLLM <= 0.27
SWAP = "model: ./llama\nswap-space: 4\n"  # SITS204 [error] for vLLM >= 0.18
INFO_ONLY = "model: sits-doctor-test/not-a-cached-model\nmax-model-len: 4096\n"  # SITS202 [info]: model not found
ALL = (  # at vLLM 0.20.0: SITS202, SITS205, SITS204 x2
    "model: ./llama\nmax-model-len: 32768\nenable-prefix-caching: false\nswap-space: 4\n"
    "max-seq-len-to-capture: 8192\n"
)
K8S = k8s_deployment('          image: vllm/vllm-openai:v0.8.5', '          args: ["--model", "sits-doctor-test/not-a-cached-model", "--swap-space", "4"]')


def model_folder(root: Path, name: str = "llama") -> Path:
    """A Llama-3-8B-like config.json declaring 8192 positions (no RoPE scaling)."""
    cfg = json.loads(LLAMA_8B)
    cfg["max_position_embeddings"] = 8192
    cfg.pop("rope_scaling")
    return write(root, f"{name}/config.json", json.dumps(cfg, indent=2))


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    model_folder(tmp_path)
    for name, text in {
        "good.yaml": GOOD, "too_long.yaml": TOO_LONG, "prefix_false.yaml": PREFIX_FALSE,
        "swap.yaml": SWAP, "info_only.yaml": INFO_ONLY, "all.yaml": ALL,
    }.items():
        write(tmp_path, name, text)
    write(tmp_path, "bad.yaml", "max-model-len: [unclosed\n")
    return tmp_path


def codes_of(result) -> list[str]:
    """Finding codes from ``--format json`` output."""
    return [f["code"] for f in json.loads(result.stdout)["findings"]]


def finding_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if FINDING_LINE.match(line)]


# --------------------------------------------------------------------------- exit codes


def test_clean_config_exits_0(proj):
    r = run_cli("check", "good.yaml", cwd=proj)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert finding_lines(r.stdout) == []
    assert "Found 0 finding(s) in 1 file(s)" in r.stdout


def test_findings_exit_1(proj):
    r = run_cli("check", "too_long.yaml", cwd=proj)
    assert r.exit_code == 1
    assert [FINDING_LINE.match(line)["code"] for line in finding_lines(r.stdout)] == ["SITS202"]


def test_info_only_findings_exit_0_unless_fail_on_info(proj):
    r = run_cli("check", "info_only.yaml", cwd=proj)
    assert r.exit_code == 0
    assert "SITS202 [info]" in r.stdout
    assert run_cli("check", "info_only.yaml", "--fail-on", "info", cwd=proj).exit_code == 1
    assert run_cli("check", "info_only.yaml", "--fail-on", "warning", cwd=proj).exit_code == 0


@pytest.mark.parametrize(("fail_on", "expected"), [(None, 1), ("info", 1), ("warning", 1), ("error", 0)])
def test_fail_on_with_a_warning(proj, fail_on, expected):
    args = ["check", "prefix_false.yaml", "--target", "vllm==0.10.2"]
    if fail_on:
        args += ["--fail-on", fail_on]
    r = run_cli(*args, cwd=proj)
    assert "SITS205 [warning]" in r.stdout
    assert r.exit_code == expected


def test_fail_on_error_still_fails_on_errors(proj):
    assert run_cli("check", "too_long.yaml", "--fail-on", "error", cwd=proj).exit_code == 1


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["bad.yaml"], "bad.yaml:2:1: error: invalid YAML"),
        (["missing.yaml"], "missing.yaml: error: no such file or directory"),
        (["not_config.json"], "not_config.json: error: not a recognized config"),
        (["empty.yaml"], "empty.yaml: error: empty file"),
        (["--select", "SITS999"], "unknown rule selector 'SITS999'"),
        (["--ignore", "NOPE"], "unknown rule selector 'NOPE'"),
        (["--extend-select", "SITS8"], "unknown rule selector 'SITS8'"),
        (["--target", "vllm=0.10.2"], "expected NAME==VERSION"),
        (["--target", "nosuchframework==1.0"], "expected NAME==VERSION"),
        (["--target", "vllm==banana"], "'banana' is not a version"),
    ],
    ids=["bad-yaml", "missing-path", "not-a-config", "empty-file", "unknown-select", "unknown-ignore",
         "unknown-extend-select", "target-single-equals", "target-unknown-framework", "target-bad-version"],
)
def test_unusable_input_exits_2_even_with_findings(proj, extra, needle):
    write(proj, "not_config.json", '{"foo": 1}')
    write(proj, "empty.yaml", "\n")
    r = run_cli("check", "too_long.yaml", *extra, cwd=proj)
    assert r.exit_code == 2, r.stdout + r.stderr
    assert needle in r.stderr


def test_unusable_file_does_not_hide_other_findings(proj):
    r = run_cli("check", "bad.yaml", "too_long.yaml", cwd=proj)
    assert r.exit_code == 2
    assert "SITS202" in r.stdout
    assert "could not be used" in r.stdout


@pytest.mark.parametrize("args", [["--fail-on", "fatal"], ["--format", "xml"], ["--gpu", "H100 x2"]])
def test_bad_option_values_exit_2(proj, args):
    r = run_cli("check", "good.yaml", *args, cwd=proj)
    assert r.exit_code == 2


def test_check_needs_a_path(proj):
    assert run_cli("check", cwd=proj).exit_code == 2


def test_usage_errors_are_short_and_point_at_help(proj):
    r = run_cli("check", "good.yaml", "--form", "json", cwd=proj)  # abbreviations are refused
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        "usage: sits-doctor check [OPTIONS] PATH...",
        "sits-doctor check: error: unrecognized arguments: --form json (did you mean --format?)",
        "Run 'sits-doctor check -h' for the options.",
    ]


def test_unknown_command_suggests_the_closest(tmp_path):
    r = run_cli("chek", "x.yaml", cwd=tmp_path)
    assert r.exit_code == 2
    assert "unknown command 'chek' (did you mean 'check'?)" in r.stderr


@pytest.mark.parametrize(("args", "code", "stream"), [((), 2, "stderr"), (("-h",), 0, "stdout"), (("--help",), 0, "stdout")])
def test_top_level_help(tmp_path, args, code, stream):
    r = run_cli(*args, cwd=tmp_path)
    assert r.exit_code == code
    text = getattr(r, stream)
    for command in ("check", "fix", "rules", "explain"):
        assert f"\n  {command} " in text


def test_command_help_lists_its_options(tmp_path):
    r = run_cli("check", "-h", cwd=tmp_path)
    assert r.exit_code == 0
    for option in ("--format", "--select", "--target", "--baseline", "--skip-unrecognized", "-q, --quiet"):
        assert option in r.stdout


def test_options_may_follow_the_paths(proj):
    r = run_cli("check", "too_long.yaml", "--format", "json", "good.yaml", "-q", cwd=proj)
    assert r.exit_code == 1
    assert sorted(Path(d["file"]).name for d in json.loads(r.stdout)["deployments"]) == ["good.yaml", "too_long.yaml"]


@pytest.mark.parametrize(("args", "needle"), [
    (["--config", "nope.toml"], "argument --config: path 'nope.toml' does not exist"),
    (["--config", "."], "argument --config: '.' is a directory, not a file"),
    (["--model-config", "nope"], "argument --model-config: path 'nope' does not exist"),
    (["-o", "."], "argument -o/--output: '.' is a directory, not a file"),
    (["--write-baseline", "."], "argument --write-baseline: '.' is a directory, not a file"),
])
def test_path_options_are_checked_before_running(proj, args, needle):
    r = run_cli("check", "good.yaml", *args, cwd=proj)
    assert r.exit_code == 2
    assert needle in r.stderr


@pytest.fixture
def crashing_sits205(monkeypatch):
    from sits_doctor.rules import sits205_yaml_false_dropped as sits205

    def boom(plan, ctx):
        raise RuntimeError("boom from a test")

    monkeypatch.setattr(sits205, "check", boom)


def test_rule_crash_exits_3_without_traceback(proj, crashing_sits205):
    r = run_cli("check", "all.yaml", "--target", "vllm==0.20.0", cwd=proj)
    assert r.exit_code == 3
    assert "internal error" in r.stderr
    assert "boom from a test" in r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    # the other rules still report
    assert "SITS202" in r.stdout and "SITS204" in r.stdout


def test_rule_crash_with_debug_shows_traceback(proj, crashing_sits205):
    r = run_cli("check", "all.yaml", "--target", "vllm==0.20.0", "--debug", cwd=proj)
    assert r.exit_code == 3
    assert "internal error" in r.stderr
    assert "Traceback" in r.stderr and "boom from a test" in r.stderr


def test_internal_error_beats_input_error(proj, crashing_sits205):
    r = run_cli("check", "all.yaml", "missing.yaml", "--target", "vllm==0.20.0", cwd=proj)
    assert r.exit_code == 3


def test_rule_crash_in_json_output(proj, crashing_sits205):
    r = run_cli("check", "all.yaml", "--target", "vllm==0.20.0", "--format", "json", cwd=proj)
    assert r.exit_code == 3
    data = json.loads(r.stdout)
    assert data["exit_code"] == 3
    assert any("SITS205" in e and "boom from a test" in e for e in data["internal_errors"])


def test_reporter_crash_exits_3(proj, monkeypatch):
    import sits_doctor.reporters

    def boom(*args, **kwargs):
        raise RuntimeError("reporter exploded")

    monkeypatch.setattr(sits_doctor.reporters, "render", boom)
    r = run_cli("check", "too_long.yaml", cwd=proj)
    assert r.exit_code == 3
    assert "internal error" in r.stderr and "reporter exploded" in r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    r = run_cli("check", "too_long.yaml", "--debug", cwd=proj)
    assert r.exit_code == 3
    assert "Traceback" in r.stderr


# --------------------------------------------------------------------------- rule selection


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], {"SITS202", "SITS204", "SITS205"}),
        (["--select", "SITS204"], {"SITS204"}),
        (["--select", "SITS2"], {"SITS202", "SITS204", "SITS205"}),
        (["--select", "SITS20"], {"SITS202", "SITS204", "SITS205"}),
        (["--select", "ALL"], {"SITS202", "SITS204", "SITS205"}),
        (["--select", "SITS202,SITS205"], {"SITS202", "SITS205"}),
        (["--select", "SITS202, SITS205"], {"SITS202", "SITS205"}),
        (["--select", "SITS202", "--select", "SITS205"], {"SITS202", "SITS205"}),
        (["--ignore", "SITS204"], {"SITS202", "SITS205"}),
        (["--ignore", "SITS202,SITS204"], {"SITS205"}),
        (["--ignore", "SITS204", "--ignore", "SITS205"], {"SITS202"}),
        (["--ignore", "SITS2"], set()),
        (["--select", "SITS2", "--ignore", "SITS205"], {"SITS202", "SITS204"}),
        (["--select", "SITS202", "--extend-select", "SITS205"], {"SITS202", "SITS205"}),
        (["--select", "SITS202", "--extend-select", "SITS204,SITS205"], {"SITS202", "SITS204", "SITS205"}),
        (["--extend-select", "SITS204"], {"SITS202", "SITS204", "SITS205"}),
        (["--select", "SITS202", "--extend-select", "SITS20", "--ignore", "SITS204"], {"SITS202", "SITS205"}),
    ],
)
def test_select_ignore_extend_select(proj, args, expected):
    r = run_cli("check", "all.yaml", "--target", "vllm==0.20.0", "--format", "json", *args, cwd=proj)
    assert set(codes_of(r)) == expected
    assert r.exit_code == (1 if expected else 0)


# --------------------------------------------------------------------------- rules / explain / version


def test_rules_text_lists_every_rule(tmp_path):
    from sits_doctor.rules import RULES

    r = run_cli("rules", cwd=tmp_path)
    assert r.exit_code == 0
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert len(lines) == len(RULES)
    for line, module in zip(lines, RULES):
        rule = module.RULE
        assert line.startswith(rule.code)
        assert rule.name in line and rule.severity.value in line and rule.summary in line


def test_rules_json_lists_every_rule(tmp_path):
    from sits_doctor.rules import RULES

    r = run_cli("rules", "--format", "json", cwd=tmp_path)
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert [d["code"] for d in data] == [m.RULE.code for m in RULES]
    for d, m in zip(data, RULES):
        assert d == {
            "code": m.RULE.code, "name": m.RULE.name, "severity": m.RULE.severity.value,
            "frameworks": list(m.RULE.frameworks), "summary": m.RULE.summary,
        }


def test_explain_prints_the_docstring(tmp_path):
    from sits_doctor.rules import BY_CODE

    r = run_cli("explain", "SITS202", cwd=tmp_path)
    assert r.exit_code == 0
    assert r.stdout.strip() == BY_CODE["SITS202"].__doc__.strip()
    assert r.stdout.startswith("max-model-len-exceeds-model (SITS202)")
    for heading in ("## What it does", "## Why it hurts", "## Example", "## Fix", "## Sources"):
        assert heading in r.stdout


def test_explain_is_case_insensitive(tmp_path):
    assert run_cli("explain", "sits202", cwd=tmp_path).stdout == run_cli("explain", "SITS202", cwd=tmp_path).stdout


@pytest.mark.parametrize("code", sorted(__import__("sits_doctor.rules", fromlist=["BY_CODE"]).BY_CODE))
def test_explain_every_rule_has_sources(tmp_path, code):
    r = run_cli("explain", code, cwd=tmp_path)
    assert r.exit_code == 0
    assert "## Sources" in r.stdout and f"({code})" in r.stdout


def test_explain_unknown_code_exits_2(tmp_path):
    r = run_cli("explain", "SITS999", cwd=tmp_path)
    assert r.exit_code == 2
    assert "unknown rule" in r.stderr and "SITS999" in r.stderr
    assert r.stdout == ""


def test_version(tmp_path):
    import sits_doctor

    r = run_cli("--version", cwd=tmp_path)
    assert r.exit_code == 0
    assert r.stdout.strip() == f"sits-doctor, version {sits_doctor.__version__}"
    assert sits_doctor.__version__ == metadata.version("sits-doctor")


# --------------------------------------------------------------------------- text output


def test_text_finding_then_evidence_then_help(proj):
    r = run_cli("check", "too_long.yaml", "--target", "vllm==0.10.2", cwd=proj)
    lines = r.stdout.splitlines()
    assert re.match(
        r"^too_long\.yaml:2:1: SITS202 \[error\] max_model_len 32768 exceeds the 8192 that vLLM 0.10.2 derives",
        lines[0],
    )
    assert lines[1:3] == ["  2 | max-model-len: 32768", "    | ^^^^^^^^^^^^^"]  # the source line, a caret under the key
    help_at = next(i for i, line in enumerate(lines) if line.startswith("  help: "))
    evidence = lines[3:help_at]
    assert evidence and all(line.startswith("  = ") for line in evidence)
    assert any("max_position_embeddings = 8192" in e for e in evidence)
    assert "  = target: vLLM 0.10.2 (--target)" in evidence
    assert lines[help_at] == "  help: set max_model_len to at most 8192"


def test_text_summary_names_target_and_source(proj):
    r = run_cli("check", "prefix_false.yaml", "--target", "vllm==0.10.2", cwd=proj)
    assert "Found 1 finding(s) (1 warning) in 1 file(s)." in r.stdout
    assert r.stdout.rstrip().endswith("target: vLLM 0.10.2 (--target)")


def test_text_summary_default_target(proj, monkeypatch):
    from sits_doctor import versions

    monkeypatch.setattr(versions, "installed", lambda framework: None)
    r = run_cli("check", "good.yaml", cwd=proj)
    assert f"target: vLLM {versions.NEWEST_KNOWN['vllm']} (newest version the rules know, assumed: nothing pins the version; pin it with --target vllm==VERSION)" in r.stdout


def test_text_summary_counts_severities_errors_and_skips(proj):
    write(proj, "d/all.yaml", ALL)
    write(proj, "d/notes.txt", "hello\n")
    r = run_cli("check", "d", "missing.yaml", "--target", "vllm==0.20.0", "--select", "SITS204,SITS205", cwd=proj)
    summary = next(line for line in r.stdout.splitlines() if line.startswith("Found "))
    assert summary.startswith("Found 3 finding(s) (2 error, 1 warning) in 1 file(s); ")
    assert "; 1 file(s) skipped as not a recognized config" in summary
    assert "1 file(s) or argument(s) could not be used" in summary


def test_input_errors_go_to_stderr_with_position(proj):
    r = run_cli("check", "bad.yaml", cwd=proj)
    assert r.exit_code == 2
    assert re.search(r"^bad\.yaml:2:1: error: invalid YAML", r.stderr, re.MULTILINE)
    assert "bad.yaml" not in r.stdout.split("Found")[0]


def test_quiet_prints_only_findings(proj):
    r = run_cli("check", "all.yaml", "--target", "vllm==0.20.0", "-q", cwd=proj)
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert len(lines) == 4
    assert all(FINDING_LINE.match(line) for line in lines), lines
    assert "Found" not in r.stdout and "help:" not in r.stdout and "  = " not in r.stdout


def test_quiet_clean_prints_nothing(proj):
    r = run_cli("check", "good.yaml", "--quiet", cwd=proj)
    assert r.exit_code == 0
    assert r.stdout.strip() == ""


def test_statistics_counts_per_rule(proj):
    r = run_cli("check", "all.yaml", "--target", "vllm==0.20.0", "--statistics", cwd=proj)
    stats = [line for line in r.stdout.splitlines() if re.match(r"^\s*\d+\s+SITS\d{3}\s", line)]
    parsed = {m[2]: (int(m[1]), m[3]) for m in (re.match(r"^\s*(\d+)\s+(SITS\d{3})\s+(\S+)$", s) for s in stats)}
    assert parsed == {
        "SITS202": (1, "max-model-len-exceeds-model"),
        "SITS204": (2, "removed-or-renamed-option"),
        "SITS205": (1, "yaml-false-dropped"),
    }


def test_output_file(proj):
    r = run_cli("check", "too_long.yaml", "--output", "report.txt", cwd=proj)
    assert r.exit_code == 1
    assert "SITS202" not in r.stdout
    text = (proj / "report.txt").read_text(encoding="utf-8")
    assert text.startswith("too_long.yaml:2:1: SITS202 [error]")
    assert "Found 1 finding(s)" in text


def test_output_file_json(proj):
    (proj / "out").mkdir()
    r = run_cli("check", "too_long.yaml", "--format", "json", "-o", "out/report.json", cwd=proj)
    assert r.exit_code == 1
    assert r.stdout == ""
    assert [f["code"] for f in json.loads((proj / "out/report.json").read_text())["findings"]] == ["SITS202"]


# --------------------------------------------------------------------------- colour
# tty=True: the captured stdout says it is a terminal; nothing strips escapes, so whatever the
# output holds was sits-doctor's own decision.


def test_no_colour_when_not_a_tty(proj):
    r = run_cli("check", "too_long.yaml", cwd=proj, env={"NO_COLOR": None, "TERM": "xterm-256color"})
    assert "SITS202" in r.stdout
    assert ANSI not in r.stdout + r.stderr


def test_colour_on_a_tty(proj):
    r = run_cli("check", "too_long.yaml", cwd=proj, env={"NO_COLOR": None, "TERM": "xterm-256color"}, tty=True)
    assert ANSI in r.stdout
    # the colour is decoration only: stripped, the text is the plain rendering
    plain = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout)
    assert plain == run_cli("check", "too_long.yaml", cwd=proj).stdout


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"NO_COLOR": ""}, {"NO_COLOR": None, "TERM": "dumb"}])
def test_no_colour_when_disabled_even_on_a_tty(proj, env):
    r = run_cli("check", "too_long.yaml", cwd=proj, env=env, tty=True)
    assert "SITS202" in r.stdout
    assert ANSI not in r.stdout + r.stderr


@pytest.mark.parametrize("fmt", ["json", "sarif", "github", "junit"])
def test_no_colour_in_machine_formats_on_a_tty(proj, fmt):
    r = run_cli("check", "too_long.yaml", "--format", fmt, cwd=proj, env={"NO_COLOR": None, "TERM": "xterm"}, tty=True)
    assert ANSI not in r.stdout


def test_no_colour_in_output_file_on_a_tty(proj):
    run_cli("check", "too_long.yaml", "-o", "report.txt", cwd=proj, env={"NO_COLOR": None, "TERM": "xterm"}, tty=True)
    assert ANSI not in (proj / "report.txt").read_text()


# --------------------------------------------------------------------------- --target and image tags


@pytest.mark.parametrize(("version", "fires"), [("0.10.2", True), ("0.27.0", True), ("0.28.0", False), ("0.33.0", False)])
def test_target_decides_sits205(proj, version, fires):
    r = run_cli("check", "prefix_false.yaml", "--target", f"vllm=={version}", "--format", "json", cwd=proj)
    assert ("SITS205" in codes_of(r)) is fires
    assert r.exit_code == (1 if fires else 0)


@pytest.mark.parametrize(("version", "fires"), [("0.10.2", False), ("0.17.0", True), ("0.18.0", True), ("0.33.0", True)])
def test_target_decides_sits204_swap_space(proj, version, fires):
    r = run_cli("check", "swap.yaml", "--target", f"vllm=={version}", "--format", "json", cwd=proj)
    assert ("SITS204" in codes_of(r)) is fires


def test_target_aliases_and_other_frameworks(proj):
    r = run_cli("check", "swap.yaml", "--target", "VLLM==0.10.2", "--target", "tensorrt-llm==1.0", cwd=proj)
    assert r.exit_code == 0
    assert "target: vLLM 0.10.2 (--target)" in r.stdout


def test_image_tag_sets_the_target(tmp_path):
    write(tmp_path, "k8s.yaml", K8S)
    r = run_cli("check", "k8s.yaml", cwd=tmp_path)
    assert r.exit_code == 0, r.stdout
    assert "SITS204" not in r.stdout  # --swap-space still exists in 0.8.5
    assert "target: vLLM 0.8.5 (image vllm/vllm-openai:v0.8.5 (k8s.yaml:10:18))" in r.stdout


def test_target_overrides_the_image_tag(tmp_path):
    write(tmp_path, "k8s.yaml", K8S)
    r = run_cli("check", "k8s.yaml", "--target", "vllm==0.33.0", cwd=tmp_path)
    assert r.exit_code == 1
    assert re.search(r"^k8s\.yaml:11:\d+: SITS204 \[error\] --swap-space was removed in vLLM 0.18.0", r.stdout, re.MULTILINE)
    assert "target: vLLM 0.33.0 (--target)" in r.stdout
    assert "0.8.5" not in r.stdout


def test_target_for_another_framework_keeps_the_image_tag(tmp_path):
    write(tmp_path, "k8s.yaml", K8S)
    r = run_cli("check", "k8s.yaml", "--target", "trtllm==1.0", cwd=tmp_path)
    assert r.exit_code == 0
    assert "target: vLLM 0.8.5 (image " in r.stdout


def test_directory_walk(proj):
    r = run_cli("check", ".", "--target", "vllm==0.20.0", "--format", "json", cwd=proj)
    data = json.loads(r.stdout)
    # bad.yaml met while walking is still an input error: it is broken and looks like a vLLM config
    assert r.exit_code == 2
    assert {Path(f["location"]["file"]).name for f in data["findings"]} >= {"too_long.yaml", "all.yaml", "swap.yaml"}
    assert "llama/config.json" in [Path(p).as_posix() for p in (d["file"] for d in data["deployments"])]


# --------------------------------------------------------------------------- the Python API


def test_api_check_returns_a_report(proj, monkeypatch):
    import sits_doctor

    monkeypatch.chdir(proj)
    report = sits_doctor.check(["all.yaml"], sits_doctor.CheckOptions(targets=["vllm==0.20.0"], isolated=True))
    assert isinstance(report, sits_doctor.Report)
    assert [f.code for f in report.findings] == ["SITS202", "SITS205", "SITS204", "SITS204"]
    assert report.exit_code == 1
    f = report.findings[0]
    assert f.render().startswith("all.yaml:2:1: SITS202 [error] ")
    assert f.location.pointer == "/max-model-len"


def test_api_accepts_paths_and_absolute_paths(proj):
    import sits_doctor

    report = sits_doctor.check([proj / "too_long.yaml"], sits_doctor.CheckOptions(isolated=True))
    assert [f.code for f in report.findings] == ["SITS202"]
    assert report.files_checked and Path(report.files_checked[0]).name == "too_long.yaml"


def test_api_options(proj):
    from sits_doctor import CheckOptions, check
    from sits_doctor.finding import Severity

    path = str(proj / "all.yaml")
    base = dict(targets=["vllm==0.20.0"], isolated=True)
    assert {f.code for f in check([path], CheckOptions(select=["SITS204"], **base)).findings} == {"SITS204"}
    assert {f.code for f in check([path], CheckOptions(ignore=["SITS2"], **base)).findings} == set()
    warn_only = check([str(proj / "prefix_false.yaml")], CheckOptions(fail_on=Severity.ERROR, **base))
    assert [f.severity for f in warn_only.findings] == [Severity.WARNING]
    assert warn_only.exit_code == 0
    assert check([str(proj / "good.yaml")], CheckOptions(isolated=True)).exit_code == 0
    assert check([path], CheckOptions(model_config=str(proj / "llama"), isolated=True)).exit_code == 1


def test_api_input_errors_do_not_raise(proj):
    from sits_doctor import CheckOptions, check

    report = check([str(proj / "too_long.yaml")], CheckOptions(select=["SITS999"], isolated=True))
    assert report.exit_code == 2
    assert "SITS999" in report.errors[0].message
    report = check([str(proj / "missing.yaml"), str(proj / "too_long.yaml")], CheckOptions(isolated=True))
    assert report.exit_code == 2
    assert [f.code for f in report.findings] == ["SITS202"]


def test_api_default_options(proj, monkeypatch):
    import sits_doctor

    monkeypatch.chdir(proj)
    assert sits_doctor.check(["good.yaml"]).exit_code == 0


def test_broken_sidecar_of_the_served_model_is_reported_and_its_facts_still_used(tmp_path):
    write(tmp_path, "llama/config.json", '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", '
          '"num_hidden_layers": 2, "hidden_size": 64, "max_position_embeddings": 8192}')
    write(tmp_path, "llama/generation_config.json", '{"max_new_tokens": 1,}')
    write(tmp_path, "serve.yaml", "model: org/llama\nmax-model-len: 16384\n")
    r = run_cli("check", "serve.yaml", "--model-config", "llama", "--target", "vllm==0.20.0", "--isolated", cwd=tmp_path)
    assert r.exit_code == 2
    assert "serve.yaml:2:1: SITS202 [error] max_model_len 16384 exceeds the 8192" in r.stdout
    assert "llama/generation_config.json:1:22: error: invalid JSON" in r.stderr


# --- skipped files, pre-commit mode, baseline ------------------------------------------------------

def test_show_skipped_lists_files_and_why(tmp_path):
    write(tmp_path, "repo/serve.yaml", "model: ./m\nswap-space: 4\nserved-model-name: m\n")
    write(tmp_path, "repo/notes.txt", "hello\n")
    write(tmp_path, "repo/ci.yaml", "on: push\njobs: {}\n")
    r = run_cli("check", "repo", "--isolated", "--show-skipped", "--target", "vllm==0.20.0", cwd=tmp_path)
    assert "repo/ci.yaml: skipped: not a recognized config\n" in r.stderr
    assert "repo/notes.txt: skipped: not a config, script or Dockerfile by its name\n" in r.stderr
    data = json.loads(run_cli("check", "repo", "--isolated", "--format", "json", cwd=tmp_path).stdout)
    assert data["skipped"] == [{"file": "repo/ci.yaml", "why": "not a recognized config"},
                               {"file": "repo/notes.txt", "why": "not a config, script or Dockerfile by its name"}]


def test_skip_unrecognized_turns_a_named_unrelated_file_into_a_skip(tmp_path):
    write(tmp_path, "package.json", '{"name": "web"}\n')
    write(tmp_path, "serve.yaml", "model: ./m\ngpu-memory-utilization: 0.9\nserved-model-name: m\n")
    assert run_cli("check", "package.json", "serve.yaml", "--isolated", cwd=tmp_path).exit_code == 2
    r = run_cli("check", "package.json", "serve.yaml", "--isolated", "--skip-unrecognized", cwd=tmp_path)
    assert r.exit_code == 0, r.stdout + r.stderr
    write(tmp_path, "broken.yaml", "model: m\nmax-model-len: 4096\n  bad: indent\n")
    r = run_cli("check", "broken.yaml", "--isolated", "--skip-unrecognized", cwd=tmp_path)
    assert r.exit_code == 2, "a broken file that looks like a deployment config is still an error"


def test_baseline_round_trip_through_the_cli(tmp_path):
    serve = write(tmp_path, "serve.yaml", "# legacy\nmodel: ./m\nswap-space: 4\nserved-model-name: m\n")
    r = run_cli("check", "serve.yaml", "--isolated", "--write-baseline", "base.json", cwd=tmp_path)
    assert r.exit_code == 1 and (tmp_path / "base.json").is_file()
    r = run_cli("check", "serve.yaml", "--isolated", "--baseline", "base.json", cwd=tmp_path)
    assert r.exit_code == 0, r.stdout
    assert "not shown: 1 in the baseline" in r.stdout
    serve.write_text("# legacy, moved down\n\nmodel: ./m\nswap-space: 4\nserved-model-name: m\n")
    assert run_cli("check", "serve.yaml", "--isolated", "--baseline", "base.json", cwd=tmp_path).exit_code == 0
    serve.write_text("model: ./m\nswap-space: 8\nserved-model-name: m\n")
    r = run_cli("check", "serve.yaml", "--isolated", "--baseline", "base.json", cwd=tmp_path)
    assert r.exit_code == 1
    assert "stale baseline entry: SITS204 at serve.yaml /swap-space" in r.stderr


def test_inline_suppression_and_unused_one(tmp_path):
    write(tmp_path, "serve.yaml",
          "model: ./m\nswap-space: 4  # sits-doctor: ignore[SITS204] removed in the next release\n"
          "served-model-name: m  # sits-doctor: ignore[SITS205] nothing here\n")
    r = run_cli("check", "serve.yaml", "--isolated", cwd=tmp_path)
    assert "SITS204" not in r.stdout
    assert "serve.yaml:3:" in r.stdout and "SITS900 [warning]" in r.stdout
    assert "not shown: 1 suppressed" in r.stdout


@pytest.mark.parametrize("image", ["vllm/vllm-openai:latest", "vllm/vllm-openai:${TAG:-latest}",
                                   "vllm/vllm-openai:2025-05-05-v1"])
def test_unpinned_image_says_the_version_is_assumed_and_how_to_pin_it(tmp_path, hermetic, image):
    write(tmp_path, "k8s.yaml", k8s_deployment(f"          image: {image}",
                                                '          args: ["--model", "m", "--swap-space", "4"]'))
    r = run_cli("check", "k8s.yaml", "--isolated", cwd=tmp_path)
    assert f"vLLM {NEWEST} (assumed) rejects it at startup" in r.stdout
    assert "pins no version; pin it with --target vllm==VERSION" in r.stdout
    assert f"image {image} (k8s.yaml:10:18)" in r.stdout


def test_summary_groups_assumed_versions(tmp_path, hermetic):
    write(tmp_path, "a.yaml", "model: ./m\nswap-space: 4\nserved-model-name: a\n")
    write(tmp_path, "k8s.yaml", k8s_deployment("          image: vllm/vllm-openai:latest",
                                                '          args: ["--model", "m", "--swap-space", "4"]'))
    r = run_cli("check", "a.yaml", "k8s.yaml", "--isolated", cwd=tmp_path)
    assert r.stdout.rstrip().splitlines()[-1] == (
        f"target: vLLM {NEWEST} (assumed newest: nothing pins it (pin it with --target) ×2; each finding says which)")


# --- arguments that used to be accepted silently (issue "Reliability") --------------------------------

def test_target_outside_what_the_rules_know_is_announced(tmp_path):
    write(tmp_path, "serve.yaml", "model: ./m\nswap-space: 4\nserved-model-name: m\n")
    r = run_cli("check", "serve.yaml", "--isolated", "--target", "vllm==99.0", cwd=tmp_path)
    assert (f"note: --target vllm==99.0: newer than {NEWEST}, the newest release the rules know; "
            f"options are judged as {NEWEST} accepts them") in r.stderr
    r = run_cli("check", "serve.yaml", "--isolated", "--target", "vllm==0.1", cwd=tmp_path)
    assert "older than 0.6.0, the oldest release whose parser the rules know; flags are not judged" in r.stderr


def test_two_targets_for_one_framework_are_refused(tmp_path):
    write(tmp_path, "serve.yaml", "model: ./m\nserved-model-name: m\n")
    r = run_cli("check", "serve.yaml", "--target", "vllm==0.10.2", "--target", "vllm==0.20.0", cwd=tmp_path)
    assert r.exit_code == 2
    assert "a second version for the same framework (already 0.10.2)" in r.stderr


def test_selectors_are_case_insensitive(tmp_path):
    write(tmp_path, "serve.yaml", "model: ./m\nswap-space: 4\nserved-model-name: m\n")
    r = run_cli("check", "serve.yaml", "--isolated", "--select", "sits204", cwd=tmp_path)
    assert r.exit_code == 1 and "SITS204" in r.stdout


def test_python_api_takes_a_single_string_as_one_item(tmp_path, monkeypatch):
    from sits_doctor import CheckOptions, check

    write(tmp_path, "serve.yaml", "model: ./m\nswap-space: 4\nserved-model-name: m\n")
    monkeypatch.chdir(tmp_path)
    report = check("serve.yaml", CheckOptions(select="SITS204", targets="vllm==0.20.0", isolated=True))
    assert not report.errors
    assert [f.code for f in report.findings] == ["SITS204"]


def test_quiet_prints_only_what_fails_and_repeats_are_folded(tmp_path, hermetic):
    """-q prints what fails the run; 2000 identical infos are one line and a count (issue 7)."""
    docs = "\n---\n".join(
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d{i}}}\nspec:\n  template:\n    spec:\n"
        f"      containers:\n        - name: v\n          image: vllm/vllm-openai:v0.11.0\n"
        f'          args: ["--model", "org/m", "--max-model-len", "8192"]' for i in range(2000))
    write(tmp_path, "many.yaml", docs)
    write(tmp_path, "serve.yaml", "model: ./m\nswap-space: 4\nserved-model-name: m\n")
    quiet = run_cli("check", "many.yaml", "serve.yaml", "--isolated", "-q", cwd=tmp_path)
    assert quiet.stdout.strip().splitlines() == [
        f"serve.yaml:2:1: SITS204 [error] --swap-space was removed in vLLM 0.18.0: vLLM {NEWEST} (assumed) rejects it "
        "at startup"]
    full = run_cli("check", "many.yaml", "--isolated", cwd=tmp_path)
    infos = [line for line in full.stdout.splitlines() if "SITS202 [info]" in line]
    assert len(infos) == 3
    assert "  = and 1997 more like it (same message, other deployments)" in full.stdout
    assert "Found 2000 finding(s) (2000 info)" in full.stdout


def test_a_reader_that_goes_away_ends_the_run_quietly():
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "sits_doctor", "rules"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # `sits-doctor rules | head -0`: nothing will be read
    err = proc.stderr.read()
    proc.wait()
    assert proc.returncode == 141 and b"Traceback" not in err and b"BrokenPipe" not in err


def test_rules_text_columns_line_up(tmp_path):
    r = run_cli("rules", cwd=tmp_path)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    severity_at = {line.index(sev) for line in lines for sev in ("error", "warning") if f"  {sev} " in line}
    assert len(severity_at) == 1  # the longest name does not push its severity out of the column


# --- standard input and the default path --------------------------------------------------------

RENDERED = """apiVersion: apps/v1
kind: Deployment
metadata: {name: v}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        args: ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--num-scheduler-steps", "8"]
"""


def _stdin(monkeypatch, text: str) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))


@pytest.mark.parametrize("path", ["-", "/dev/stdin"])
def test_check_reads_standard_input(tmp_path, monkeypatch, path):
    """`helm template ... | sits-doctor check -`: checked as a file named stdin."""
    _stdin(monkeypatch, RENDERED)
    result = run_cli("check", path, "--isolated", cwd=tmp_path)
    assert result.exit_code == 1
    assert result.stdout.startswith("stdin:10:63: SITS204 [error] --num-scheduler-steps")


def test_stdin_filename_names_the_input_and_picks_its_settings(tmp_path, monkeypatch):
    write(tmp_path, "charts/.sits-doctor.toml", 'ignore = ["SITS204"]\n')
    _stdin(monkeypatch, RENDERED)
    result = run_cli("check", "-", "--stdin-filename", "charts/rendered.yaml", cwd=tmp_path)
    assert result.exit_code == 0, result.stdout + result.stderr  # the settings beside the name apply
    _stdin(monkeypatch, RENDERED)
    result = run_cli("check", "-", "--stdin-filename", "rendered.yaml", "--isolated", cwd=tmp_path)
    assert result.stdout.startswith("rendered.yaml:10:63: SITS204")


def test_stdin_as_a_script_by_its_name(tmp_path, monkeypatch):
    _stdin(monkeypatch, "vllm serve meta-llama/Llama-3.1-8B-Instruct --swap-space 4\n")
    result = run_cli("check", "-", "--stdin-filename", "start.sh", "--isolated", cwd=tmp_path)
    assert "start.sh:1:" in result.stdout and "--swap-space" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["-", "-"], "standard input can be read only once"),
    (["fixtures", "--stdin-filename", "x.yaml"], "--stdin-filename needs '-' among the paths"),
])
def test_stdin_misuse_is_a_usage_error(tmp_path, monkeypatch, args, message):
    _stdin(monkeypatch, RENDERED)
    (tmp_path / "fixtures").mkdir()
    result = run_cli("check", *args, "--isolated", cwd=tmp_path)
    assert result.exit_code == 2 and message in result.stderr


def test_binary_standard_input_is_refused(tmp_path, monkeypatch):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\x00\x01binary")))
    result = run_cli("check", "-", "--isolated", cwd=tmp_path)
    assert result.exit_code == 2 and "stdin: error: binary file" in result.stderr


def test_the_path_defaults_to_the_current_folder(tmp_path):
    write(tmp_path, "deploy/serve.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\nswap-space: 4\n")
    result = run_cli("check", "--isolated", cwd=tmp_path)
    assert result.exit_code == 1 and "deploy/serve.yaml:2:1: SITS204" in result.stdout
    assert run_cli("capacity", "--isolated", cwd=tmp_path).exit_code in (0, 1)
