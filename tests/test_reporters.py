"""Reporters: ``--format json | sarif | github | junit`` (text is covered in test_cli.py).

SARIF is validated against the official 2.1.0 schema (tests/data/sarif-schema-2.1.0.json) and
checked for what GitHub code scanning needs (shared/research/linter-anchors.md §3): rule
metadata, repository-relative URIs under %SRCROOT%, regions from line 1, stable
``partialFingerprints``, input errors as tool execution notifications.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from functools import lru_cache
from pathlib import Path

import pytest
from jsonschema.validators import validator_for

from conftest import REPO, run_cli, write
from test_cli import ALL, GOOD, INFO_ONLY, K8S, PREFIX_FALSE, TOO_LONG, model_folder

SCHEMA_PATH = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"


@lru_cache(maxsize=None)
def sarif_validator():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def assert_valid_sarif(doc: dict) -> None:
    errors = sorted(sarif_validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:10])


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    model_folder(tmp_path)
    for name, text in {
        "good.yaml": GOOD, "too_long.yaml": TOO_LONG, "prefix_false.yaml": PREFIX_FALSE,
        "info_only.yaml": INFO_ONLY, "all.yaml": ALL, "k8s.yaml": K8S,
    }.items():
        write(tmp_path, name, text)
    write(tmp_path, "bad.yaml", "max-model-len: [unclosed\n")
    return tmp_path


def sarif(*args: str, cwd: Path) -> tuple[int, dict]:
    r = run_cli("check", "--format", "sarif", *args, cwd=cwd)
    return r.exit_code, json.loads(r.stdout)


def fingerprints(doc: dict) -> dict[tuple[str, str], str]:
    """(ruleId, pointer) → primaryLocationLineHash."""
    out = {}
    for res in doc["runs"][0]["results"]:
        pointer = res["locations"][0]["logicalLocations"][0]["fullyQualifiedName"]
        out[(res["ruleId"], pointer)] = res["partialFingerprints"]["primaryLocationLineHash"]
    return out


# --------------------------------------------------------------------------- JSON


def test_json_is_parseable_with_locations(proj):
    r = run_cli("check", "all.yaml", "--target", "vllm==0.20.0", "--format", "json", cwd=proj)
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    assert data["tool"]["name"] == "sits-doctor"
    assert data["exit_code"] == 1 and data["fail_on"] == "warning"
    assert data["summary"]["findings"] == 4 and data["summary"]["failing"] == 4
    assert data["summary"]["files_checked"] == 1 and data["summary"]["errors"] == 0
    first = data["findings"][0]
    assert first["code"] == "SITS202" and first["severity"] == "error" and first["name"] == "max-model-len-exceeds-model"
    assert first["location"]["file"] == "all.yaml"
    assert (first["location"]["line"], first["location"]["col"]) == (2, 1)
    assert first["location"]["pointer"] == "/max-model-len"
    assert [(f["code"], f["location"]["pointer"]) for f in data["findings"]] == [
        ("SITS202", "/max-model-len"),
        ("SITS205", "/enable-prefix-caching"),
        ("SITS204", "/swap-space"),
        ("SITS204", "/max-seq-len-to-capture"),
    ]
    assert any("max_position_embeddings = 8192" in e for e in first["evidence"])
    assert first["fix_hint"] == "set max_model_len to at most 8192"
    (deployment,) = data["deployments"]
    assert deployment["framework"] == "vllm" and "0.20.0" in deployment["target"]


def test_json_stdout_stays_parseable_with_input_errors(proj):
    r = run_cli("check", "bad.yaml", "missing.yaml", "too_long.yaml", "--format", "json", cwd=proj)
    assert r.exit_code == 2
    data = json.loads(r.stdout)
    assert data["exit_code"] == 2
    errors = {e["file"]: e for e in data["errors"]}
    assert set(errors) == {"bad.yaml", "missing.yaml"}
    assert errors["bad.yaml"]["line"] == 2 and "invalid YAML" in errors["bad.yaml"]["message"]
    assert [f["code"] for f in data["findings"]] == ["SITS202"]


def test_json_info_and_fail_on(proj):
    data = json.loads(run_cli("check", "info_only.yaml", "--format", "json", cwd=proj).stdout)
    assert data["exit_code"] == 0 and data["summary"]["failing"] == 0
    assert data["findings"][0]["severity"] == "info"
    data = json.loads(run_cli("check", "info_only.yaml", "--format", "json", "--fail-on", "info", cwd=proj).stdout)
    assert data["exit_code"] == 1 and data["fail_on"] == "info"


# --------------------------------------------------------------------------- SARIF


@pytest.mark.parametrize(
    "args",
    [
        ["all.yaml", "--target", "vllm==0.20.0"],
        ["good.yaml"],
        ["info_only.yaml", "k8s.yaml", "--target", "vllm==0.33.0"],
        ["bad.yaml", "missing.yaml", "too_long.yaml"],
        ["too_long.yaml", "--select", "SITS999"],
        [".", "--target", "vllm==0.10.2"],
    ],
    ids=["findings", "clean", "info-and-k8s", "input-errors", "argument-error", "directory"],
)
def test_sarif_validates_against_the_schema(proj, args):
    _, doc = sarif(*args, cwd=proj)
    assert_valid_sarif(doc)
    assert doc["version"] == "2.1.0"
    assert len(doc["runs"]) == 1


def test_sarif_with_internal_error_validates(proj, monkeypatch):
    from sits_doctor.rules import sits205_yaml_false_dropped as sits205

    def boom(plan, ctx):
        raise RuntimeError("boom")

    monkeypatch.setattr(sits205, "check", boom)
    rc, doc = sarif("all.yaml", "--target", "vllm==0.20.0", cwd=proj)
    assert rc == 3
    assert_valid_sarif(doc)
    (invocation,) = doc["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    assert any(n["descriptor"]["id"] == "internal-error" for n in invocation["toolExecutionNotifications"])


def test_sarif_rule_metadata(proj):
    from sits_doctor.rules import RULES

    _, doc = sarif("good.yaml", cwd=proj)
    driver = doc["runs"][0]["tool"]["driver"]
    assert driver["name"] == "sits-doctor"
    assert driver["semanticVersion"]
    rules = driver["rules"]
    assert [r["id"] for r in rules] == [m.RULE.code for m in RULES]
    for descriptor, module in zip(rules, RULES):
        rule = module.RULE
        assert descriptor["name"] == rule.name
        assert descriptor["shortDescription"]["text"] == rule.summary
        assert 0 < len(descriptor["fullDescription"]["text"]) <= 1024
        assert "## Sources" in descriptor["help"]["text"]
        assert descriptor["help"]["markdown"]
        assert descriptor["defaultConfiguration"]["level"] == {"error": "error", "warning": "warning", "info": "note"}[rule.severity.value]
        assert len(descriptor["properties"]["tags"]) <= 20


def test_sarif_results(proj):
    rc, doc = sarif("all.yaml", "info_only.yaml", "--target", "vllm==0.20.0", cwd=proj)
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    results = run["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [
        ("SITS202", "error"), ("SITS205", "warning"), ("SITS204", "error"), ("SITS204", "error"), ("SITS202", "note"),
    ]
    for res in results:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["message"]["text"]
        assert len(res["locations"]) == 1
    first = results[0]
    loc = first["locations"][0]
    assert loc["physicalLocation"]["region"] == {"startLine": 2, "startColumn": 1}
    assert loc["logicalLocations"][0]["fullyQualifiedName"] == "/max-model-len"
    assert "\nhelp: set max_model_len to at most 8192" in first["message"]["text"]


def test_sarif_uris_are_relative(proj):
    _, doc = sarif(str(proj / "all.yaml"), str(proj / "bad.yaml"), "--target", "vllm==0.20.0", cwd=proj)
    run = doc["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].startswith("file://")
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].endswith("/")
    locations = [res["locations"][0]["physicalLocation"] for res in run["results"]]
    locations += [n["locations"][0]["physicalLocation"] for n in run["invocations"][0]["toolExecutionNotifications"]]
    assert locations
    for loc in locations:
        art = loc["artifactLocation"]
        assert art["uriBaseId"] == "%SRCROOT%"
        assert art["uri"] in ("all.yaml", "bad.yaml")
        assert not art["uri"].startswith(("/", "file:"))
        assert str(proj) not in json.dumps(art)
        assert loc["region"]["startLine"] >= 1 and loc["region"]["startColumn"] >= 1


def test_sarif_uris_relative_to_the_git_root(tmp_path):
    (tmp_path / ".git").mkdir()
    model_folder(tmp_path / "deploy")
    write(tmp_path, "deploy/serve.yaml", TOO_LONG)
    _, from_sub = sarif("serve.yaml", cwd=tmp_path / "deploy")
    _, from_root = sarif("deploy/serve.yaml", cwd=tmp_path)
    for doc in (from_sub, from_root):
        (res,) = doc["runs"][0]["results"]
        assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "deploy/serve.yaml"
        assert doc["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"
    assert fingerprints(from_sub) == fingerprints(from_root)


def test_sarif_regions_start_at_line_1(proj):
    # a finding on the first line of a file, and a JSON input error
    write(proj, "first.yaml", "swap-space: 4\nmodel: ./llama\n")
    write(proj, "broken.json", '{"a": ')
    _, doc = sarif("first.yaml", "broken.json", "--target", "vllm==0.33.0", cwd=proj)
    run = doc["runs"][0]
    (res,) = run["results"]
    assert res["locations"][0]["physicalLocation"]["region"]["startLine"] == 1
    (note,) = run["invocations"][0]["toolExecutionNotifications"]
    assert note["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1
    assert_valid_sarif(doc)


def test_sarif_fingerprint_stable_when_lines_are_inserted_above(proj):
    _, before = sarif("all.yaml", "--target", "vllm==0.20.0", cwd=proj)
    write(proj, "all.yaml", "# a comment\n# another\n\nserved-model-name: llama\n" + ALL)
    _, after = sarif("all.yaml", "--target", "vllm==0.20.0", cwd=proj)
    lines_before = [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in before["runs"][0]["results"]]
    lines_after = [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in after["runs"][0]["results"]]
    assert lines_after == [n + 4 for n in lines_before]
    assert fingerprints(before) == fingerprints(after)
    assert len(fingerprints(before)) == 4


def test_sarif_fingerprint_differs_by_pointer_rule_and_file(proj):
    write(proj, "copy.yaml", ALL)
    _, doc = sarif("all.yaml", "copy.yaml", "--target", "vllm==0.20.0", cwd=proj)
    results = doc["runs"][0]["results"]
    prints = [r["partialFingerprints"]["primaryLocationLineHash"] for r in results]
    assert len(results) == 8
    assert len(set(prints)) == len(prints)
    swap, capture = [r for r in results if r["ruleId"] == "SITS204"][:2]
    assert swap["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] != capture["locations"][0]["logicalLocations"][0]["fullyQualifiedName"]


def test_sarif_input_errors_are_notifications(proj):
    rc, doc = sarif("bad.yaml", "missing.yaml", "too_long.yaml", cwd=proj)
    assert rc == 2
    run = doc["runs"][0]
    assert [r["ruleId"] for r in run["results"]] == ["SITS202"]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    by_uri = {n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: n for n in notes}
    assert set(by_uri) == {"bad.yaml", "missing.yaml"}
    assert all(n["level"] == "error" for n in notes)
    assert "invalid YAML" in by_uri["bad.yaml"]["message"]["text"]
    assert by_uri["bad.yaml"]["locations"][0]["physicalLocation"]["region"]["startLine"] == 2
    assert "no such file" in by_uri["missing.yaml"]["message"]["text"]


def test_sarif_argument_error_is_a_notification(proj):
    rc, doc = sarif("too_long.yaml", "--target", "vllm=0.1", cwd=proj)
    assert rc == 2
    assert_valid_sarif(doc)
    (note,) = doc["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert note["level"] == "error" and "vllm=0.1" in note["message"]["text"]
    assert "locations" not in note  # an argument is not a file


@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select"])
def test_sarif_selector_error_is_a_notification_without_location(proj, option):
    rc, doc = sarif("too_long.yaml", option, "SITS999", cwd=proj)
    assert rc == 2
    (note,) = doc["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert "SITS999" in note["message"]["text"]
    assert "locations" not in note


def test_sarif_security_severity_only_for_security_rules(proj):
    from sits_doctor.rules import RULES

    _, doc = sarif("good.yaml", cwd=proj)
    for descriptor in doc["runs"][0]["tool"]["driver"]["rules"]:
        if not descriptor["id"].startswith("SITS3"):
            assert "security-severity" not in descriptor.get("properties", {})
    if not any(m.RULE.code.startswith("SITS3") for m in RULES):
        pytest.skip("no SITS3xx (security) rule exists yet")
    for descriptor in doc["runs"][0]["tool"]["driver"]["rules"]:
        if descriptor["id"].startswith("SITS3"):
            value = descriptor["properties"]["security-severity"]
            assert isinstance(value, str) and 0.1 <= float(value) <= 10.0


# --------------------------------------------------------------------------- GitHub


GITHUB_LINE = re.compile(r"^::(error|warning|notice) file=([^,]+),line=(\d+),col=(\d+),title=([^:]+)::(.*)$")


def test_github_annotations(proj):
    r = run_cli("check", "all.yaml", "info_only.yaml", "--target", "vllm==0.20.0", "--format", "github", cwd=proj)
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    commands = [GITHUB_LINE.match(line) for line in lines if line.startswith("::")]
    assert all(commands), lines
    assert [(m[1], m[2], m[3], m[4], m[5]) for m in commands] == [
        ("error", "all.yaml", "2", "1", "SITS202 max-model-len-exceeds-model"),
        ("warning", "all.yaml", "3", "1", "SITS205 yaml-false-dropped"),
        ("error", "all.yaml", "4", "1", "SITS204 removed-or-renamed-option"),
        ("error", "all.yaml", "5", "1", "SITS204 removed-or-renamed-option"),
        ("notice", "info_only.yaml", "2", "1", "SITS202 max-model-len-exceeds-model"),
    ]
    # the fix hint travels in the message, its newline escaped
    assert commands[0][6].endswith("%0Ahelp: set max_model_len to at most 8192")
    # and so do the lines that finish the message (the framework's words, the why), not other evidence
    assert "%0AvLLM 0.20.0 prints: ValueError: User-specified max_model_len" in commands[0][6]
    assert "%0Aargparse prints: error: unrecognized arguments: " in commands[2][6]
    assert "max_position_embeddings = " not in commands[0][6]
    # and a summary, since Actions shows only a few annotations
    assert any(line.startswith("Found 5 finding(s)") for line in lines)
    assert "target: vLLM 0.20.0 (--target)" in lines


def test_github_input_errors(proj):
    r = run_cli("check", "bad.yaml", "too_long.yaml", "--format", "github", cwd=proj)
    assert r.exit_code == 2
    assert "::error file=bad.yaml,line=2,col=1,title=sits-doctor input error::invalid YAML" in r.stdout


@pytest.mark.parametrize("args", [["--select", "SITS999"], ["--target", "vllm=0.1"]], ids=["selector", "target"])
def test_github_argument_errors_have_no_file(proj, args):
    r = run_cli("check", "too_long.yaml", *args, "--format", "github", cwd=proj)
    assert r.exit_code == 2
    (line,) = [line for line in r.stdout.splitlines() if line.startswith("::")]
    assert line.startswith("::error title=sits-doctor argument error::")


def test_github_escapes_percent_newlines_and_property_separators():
    from sits_doctor.engine import Report
    from sits_doctor.finding import Finding, Location, Severity
    from sits_doctor.reporters import render

    finding = Finding(
        code="SITS202", name="max-model-len-exceeds-model", severity=Severity.WARNING,
        message="uses 95% of memory\r\nsecond line",
        location=Location(file="dir,x/a:b.yaml", line=3, col=5, pointer="/x"),
        fix_hint="lower it to 90%",
    )
    out = render(Report(findings=[finding], files_checked=["dir,x/a:b.yaml"]), "github")
    first, *rest = out.split("\n")
    assert first == (
        "::warning file=dir%2Cx/a%3Ab.yaml,line=3,col=5,title=SITS202 max-model-len-exceeds-model"
        "::uses 95%25 of memory%0D%0Asecond line%0Ahelp: lower it to 90%25"
    )
    assert rest[0].startswith("Found 1 finding(s) (1 warning) in 1 file(s)")


# --------------------------------------------------------------------------- JUnit


def junit(*args: str, cwd: Path):
    r = run_cli("check", "--format", "junit", *args, cwd=cwd)
    return r.exit_code, ET.fromstring(r.stdout)


def test_junit_one_testcase_per_file(proj):
    rc, root = junit("good.yaml", "too_long.yaml", "info_only.yaml", "bad.yaml", "missing.yaml", cwd=proj)
    assert rc == 2
    assert root.tag == "testsuites"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert len(list(root.iter("testcase"))) == len(cases) == 5
    assert set(cases) == {"good.yaml", "too_long.yaml", "info_only.yaml", "bad.yaml", "missing.yaml"}
    assert list(cases["good.yaml"]) == []
    (failure,) = cases["too_long.yaml"].findall("failure")
    assert failure.get("type") == "SITS202"
    assert failure.get("message").startswith("too_long.yaml:2:1: SITS202 [error]")
    assert "help: set max_model_len to at most 8192" in failure.text
    assert cases["info_only.yaml"].findall("failure") == []  # info is below --fail-on warning
    assert "SITS202 [info]" in cases["info_only.yaml"].find("system-out").text
    assert len(cases["bad.yaml"].findall("error")) == 1 and cases["bad.yaml"].findall("failure") == []
    assert "invalid YAML" in cases["bad.yaml"].find("error").get("message")
    assert len(cases["missing.yaml"].findall("error")) == 1
    for node in (root, root.find("testsuite")):
        assert (node.get("tests"), node.get("failures"), node.get("errors")) == ("5", "1", "2")


def test_junit_follows_fail_on(proj):
    _, root = junit("info_only.yaml", "--fail-on", "info", cwd=proj)
    (case,) = root.iter("testcase")
    assert len(case.findall("failure")) == 1
    _, root = junit("prefix_false.yaml", "--target", "vllm==0.10.2", "--fail-on", "error", cwd=proj)
    (case,) = root.iter("testcase")
    assert case.findall("failure") == []


def test_junit_directory(proj):
    rc, root = junit(".", "--target", "vllm==0.20.0", cwd=proj)
    names = [c.get("name") for c in root.iter("testcase")]
    assert len(names) == len(set(names))
    assert {"all.yaml", "good.yaml", "k8s.yaml", "bad.yaml"} <= {Path(n).name for n in names}
    cases = {Path(c.get("name")).as_posix(): c for c in root.iter("testcase")}
    (failure,) = cases["all.yaml"].findall("failure")  # one per testcase, holding the four findings
    assert failure.get("message").endswith("(and 3 more)") and failure.text.count("\n\n") == 3
    assert cases["good.yaml"].findall("failure") == []


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github", "junit"])
def test_a_file_name_that_is_not_utf8_keeps_every_format_valid(tmp_path, fmt):
    """Python keeps undecodable file-name bytes as lone surrogates; no format may crash on them or
    emit invalid UTF-8 / XML (issue "Reliability")."""
    import json as _json
    import os

    name = os.fsdecode(b"bad\xff.yaml")
    (tmp_path / name).write_text("model: ./m\nswap-space: 4\nserved-model-name: m\n", encoding="utf-8")
    r = run_cli("check", ".", "--isolated", "--format", fmt, cwd=tmp_path)
    assert r.exit_code == 1, r.stderr
    r.stdout.encode("utf-8")  # no lone surrogate left
    if fmt in ("json", "sarif"):
        assert "bad\\xff.yaml" in _json.dumps(_json.loads(r.stdout), ensure_ascii=False).replace("\\\\", "\\")
    else:
        assert "bad\\xff.yaml" in r.stdout
    if fmt == "sarif":
        assert "bad%FF.yaml" in r.stdout
    if fmt == "junit":
        ET.fromstring(r.stdout)


# --- the default text output: a block a deployer can read at 3 a.m. ----------------------------

def _text(*args, gpu="H100"):
    from conftest import run_cli

    return run_cli("check", *args, "--isolated", "--gpu", gpu, cwd=REPO, env={"NO_COLOR": "1"})


def _blocks(stdout: str) -> list[list[str]]:
    import re

    blocks: list[list[str]] = []
    for line in stdout.splitlines():
        if re.match(r"^\S+:\d+:\d+: SITS\d{3} \[", line):
            blocks.append([line])
        elif blocks and line.startswith("  "):
            blocks[-1].append(line)
    return blocks


def test_each_finding_quotes_its_source_line_with_a_caret():
    block = _blocks(_text("fixtures/k8s/bad_statefulset_sh_c.yaml").stdout)[0]
    assert block[1] == "  25 |                 --max-seq-len-to-capture 8192 \\"
    assert block[2] == "     |                 " + "^" * len("--max-seq-len-to-capture")


def test_a_long_line_is_quoted_as_a_window_around_the_column():
    block = _blocks(_text("fixtures/compose/bad_string_command.yaml").stdout)[1]  # the one-line command string
    source, caret = block[1], block[2]
    assert source.startswith("  9 | …") and len(source) <= 110
    assert source[caret.index("^"):].startswith("--swap-space 8")


def test_at_most_three_evidence_lines_by_default_and_all_with_verbose():
    """SITS001's pool arithmetic is one line by default (its first evidence line)."""
    short = _blocks(_text("fixtures/k8s/bad_llama70b_one_gpu.yaml").stdout)[0]
    evidence = [line for line in short if line.startswith("  = ")]
    assert len(evidence) == 4 and evidence[-1].startswith("  = … ") and evidence[-1].endswith("more (-v shows them)")
    assert evidence[0].startswith("  = memory per rank (GiB): budget 71.28 − weights 131.41")
    full = _blocks(_text("fixtures/k8s/bad_llama70b_one_gpu.yaml", "-v").stdout)[0]
    assert len([line for line in full if line.startswith("  = ")]) == int(evidence[-1].split()[2]) + 3


def test_the_target_is_said_once_per_deployment():
    blocks = _blocks(_text("fixtures/compose/bad_string_command.yaml").stdout)
    targets = [line for b in blocks for line in b if line.startswith("  = target: ")]
    assert len(blocks) == 3 and targets == [
        "  = target: vLLM 0.19.0 (image vllm/vllm-openai:v0.19.0 (fixtures/compose/bad_string_command.yaml:3:12))"]
    verbose = _blocks(_text("fixtures/compose/bad_string_command.yaml", "-v").stdout)
    assert sum(line.startswith("  = target: ") for b in verbose for line in b) == 3


def test_statistics_prints_counts_only():
    out = _text("fixtures/compose/", "--statistics").stdout.splitlines()
    assert _blocks("\n".join(out)) == []
    assert out[:3] == ["    1  SITS001  unbounded-kv-cache", "    1  SITS201  value-rejected-by-parser",
                       "    7  SITS204  removed-or-renamed-option"]
    assert out[3].startswith("Found 9 finding(s)")


def test_one_cannot_check_per_deployment():
    out = _text("fixtures/kubeai/bad_model_removed_flags.yaml").stdout
    lines = out.splitlines()
    unchecked = [i for i, line in enumerate(lines) if "cannot check" in line]
    assert len(unchecked) == 1
    assert ("SITS001 [info] cannot check this deployment against the model (SITS001, SITS007, SITS202): model "
            "'neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8' was not found locally") in lines[unchecked[0]]
    # what each rule would have checked follows as evidence
    assert "  = not checked: this deployment, the KV cache dtype or max_model_len 16384" in lines


def test_notes_about_the_run_have_no_placeholder_path():
    result = _text("fixtures/vllm/bad_swap_space.yaml", "--target", "vllm==99.0")
    assert "<arguments>" not in result.stderr and result.stderr.startswith("note: --target vllm==99.0")
    assert _text("fixtures/vllm/bad_swap_space.yaml", "--target", "vllm==99.0", "-q").stderr == ""
