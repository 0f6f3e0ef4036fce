"""Bad input never crashes the linter.

Every file here is written to ``tmp_path`` and checked through the command line, in-process. A
file named on the command line that cannot be used gives exit code 2 and one
``path:line:col: error: message`` line on stderr, pointing at the problem (whole-file problems:
empty, binary, too big, missing, have no position and print ``path: error: message``). Other
files of the same run are still checked and their findings still printed. Nothing prints a
traceback or an internal error.
"""

from __future__ import annotations

import json
import re
import time
import os
from pathlib import Path

import pytest

from conftest import LLAMA_8B, CliResult, run_cli, write

# A vLLM --config file with one certain finding (SITS204, --swap-space removed in 0.18) at 2:1,
# checked next to each bad file to show that the rest of the run still happens.
GOOD = "model: sits-doctor-test/not-a-cached-model\nswap-space: 4\n"
GOOD_FINDING = "serve.yaml:2:1: SITS204 [error]"
TARGET = ("--target", "vllm==0.20.0")


def check(root: Path, *paths: str, extra: tuple[str, ...] = TARGET) -> CliResult:
    r = run_cli("check", "--isolated", *extra, *paths, cwd=root)
    both = r.stdout + r.stderr
    assert "Traceback" not in both, both
    assert "internal error" not in both, both
    assert r.exit_code != 3, both
    return r


def error_line(r: CliResult, path: str) -> re.Match[str]:
    """The one ``path[:line:col]: error: message`` line about ``path`` on stderr."""
    pattern = re.compile(rf"^{re.escape(path)}(?::(?P<line>\d+):(?P<col>\d+))?: error: (?P<msg>.+)$", re.M)
    found = list(pattern.finditer(r.stderr))
    assert len(found) == 1, f"expected one error line for {path}:\n{r.stderr}"
    assert path not in r.stdout, r.stdout  # errors go to stderr only
    return found[0]


def assert_error_at(r: CliResult, path: str, line: int, col: int, *words: str) -> str:
    m = error_line(r, path)
    assert (m["line"], m["col"]) == (str(line), str(col)), m.group(0)
    for w in words:
        assert w.lower() in m["msg"].lower(), m.group(0)
    return m["msg"]


def bad_and_good(tmp_path: Path, name: str, content: str | bytes) -> CliResult:
    """Check a bad file named explicitly together with a good one; exit 2, the good one reported."""
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    write(tmp_path, "serve.yaml", GOOD)
    r = check(tmp_path, name, "serve.yaml")
    assert r.exit_code == 2, r.stdout + r.stderr
    assert GOOD_FINDING in r.stdout, r.stdout
    assert "1 file(s) or argument(s) could not be used" in r.stdout
    return r


# --- syntax errors ------------------------------------------------------------------------------


def test_invalid_json_points_at_the_error(tmp_path: Path) -> None:
    text = '{\n  "model_type": "llama",\n  "hidden_size": 4096\n  "num_hidden_layers": 32\n}\n'
    r = bad_and_good(tmp_path, "config.json", text)
    assert_error_at(r, "config.json", 4, 3, "invalid JSON")


def test_invalid_json_trailing_comma(tmp_path: Path) -> None:
    r = bad_and_good(tmp_path, "config.json", '{\n  "model_type": "llama",\n}\n')
    assert_error_at(r, "config.json", 3, 1, "invalid JSON")


@pytest.mark.parametrize(
    "text, line, col",
    [
        ("model: m\nmax-model-len: 4096\n  bad: indent\n", 3, 6),  # mapping value in a scalar
        ("model: m\n\tmax-model-len: 4096\n", 2, 1),  # a tab where indentation is
        ("model: m\nserved-model-name: [a, b\nmax-model-len: 4096\n", 3, 14),  # unclosed [
    ],
    ids=["indent", "tab", "unclosed-flow"],
)
def test_invalid_yaml_points_at_the_error(tmp_path: Path, text: str, line: int, col: int) -> None:
    r = bad_and_good(tmp_path, "bad.yaml", text)
    assert_error_at(r, "bad.yaml", line, col, "invalid YAML")


@pytest.mark.parametrize("name", ["conflict.yaml", "config.json"])
def test_git_merge_conflict_markers(tmp_path: Path, name: str) -> None:
    if name.endswith(".json"):
        text = '{\n  "model_type": "llama",\n<<<<<<< HEAD\n  "hidden_size": 4096\n=======\n  "hidden_size": 8192\n>>>>>>> main\n}\n'
        line = 3
    else:
        text = "model: m\nmax-model-len: 4096\n\n<<<<<<< HEAD\nmax-num-seqs: 8\n=======\nmax-num-seqs: 16\n>>>>>>> feature\n"
        line = 4
    r = bad_and_good(tmp_path, name, text)
    assert_error_at(r, name, line, 1, "merge-conflict")


# --- YAML aliases -------------------------------------------------------------------------------


def test_yaml_alias_bomb_is_refused_fast(tmp_path: Path) -> None:
    """Billion laughs: 9 levels of 9 aliases each would expand to 9**9 strings."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    start = time.perf_counter()
    r = bad_and_good(tmp_path, "bomb.yaml", "\n".join(lines) + "\n")
    assert time.perf_counter() - start < 5
    m = error_line(r, "bomb.yaml")
    assert m["line"] is not None
    assert "alias" in m["msg"]


def test_recursive_alias_in_a_sequence(tmp_path: Path) -> None:
    r = bad_and_good(tmp_path, "rec.yaml", "&a [ *a ]\n")
    assert_error_at(r, "rec.yaml", 1, 1, "recursive")


def test_recursive_alias_under_a_key(tmp_path: Path) -> None:
    """PyYAML (what vLLM uses) builds a self-containing dict here; it must be an error, not null."""
    text = "model: m\nmax-model-len: 4096\ncompilation-config: &c\n  inner: *c\n"
    r = bad_and_good(tmp_path, "rec.yaml", text)
    m = error_line(r, "rec.yaml")
    assert "recursive" in m["msg"]
    assert m["line"] in ("3", "4")  # the anchor or the alias that closes the loop


# --- encodings and non-text ---------------------------------------------------------------------


def test_non_utf8_byte_is_located(tmp_path: Path) -> None:
    r = bad_and_good(tmp_path, "latin1.yaml", b"model: m\nserved-model-name: caf\xe9\n")
    assert_error_at(r, "latin1.yaml", 2, 23, "UTF-8", "0xe9")


def test_non_utf8_after_multibyte_characters_counts_characters(tmp_path: Path) -> None:
    # "é" (2 bytes in UTF-8) before the bad byte: the column counts characters, not bytes.
    text = "model: m\nserved-model-name: é-\xff\n".encode("utf-8").replace(b"\xc3\xbf", b"\xff")
    r = bad_and_good(tmp_path, "mixed.yaml", text)
    assert_error_at(r, "mixed.yaml", 2, 22, "UTF-8")


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "bom.yaml").write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    r = check(tmp_path, "bom.yaml")
    assert r.exit_code == 1, r.stdout + r.stderr
    assert "bom.yaml:2:1: SITS204" in r.stdout


def test_binary_file(tmp_path: Path) -> None:
    r = bad_and_good(tmp_path, "model.json", bytes(range(256)) * 4)
    assert "binary" in error_line(r, "model.json")["msg"]


def test_empty_file(tmp_path: Path) -> None:
    r = bad_and_good(tmp_path, "empty.yaml", "")
    assert "empty" in error_line(r, "empty.yaml")["msg"]


def test_whitespace_only_file(tmp_path: Path) -> None:
    r = bad_and_good(tmp_path, "blank.yaml", "\n   \n\n")
    assert "empty" in error_line(r, "blank.yaml")["msg"]


@pytest.mark.parametrize("name", ["config.json", "serve-empty.yaml"])
def test_empty_mapping(tmp_path: Path, name: str) -> None:
    r = bad_and_good(tmp_path, name, "{}\n")
    msg = error_line(r, name)["msg"]
    assert "not a recognized config" in msg and "empty" in msg


def test_comment_only_yaml(tmp_path: Path) -> None:
    r = bad_and_good(tmp_path, "comments.yaml", "# model: m\n# max-model-len: 4096\n")
    assert error_line(r, "comments.yaml")


def test_huge_file_is_refused_by_size_without_reading(tmp_path: Path, monkeypatch) -> None:
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(100 * 2**20)  # sparse: 100 MiB of NULs, no disk used

    real_read_bytes, real_read_text = Path.read_bytes, Path.read_text

    def guard(real):
        def read(self, *a, **k):
            assert self.name != "huge.json", "the oversized file was read"
            return real(self, *a, **k)
        return read

    monkeypatch.setattr(Path, "read_bytes", guard(real_read_bytes))
    monkeypatch.setattr(Path, "read_text", guard(real_read_text))
    start = time.perf_counter()
    write(tmp_path, "serve.yaml", GOOD)
    r = check(tmp_path, "huge.json", "serve.yaml")
    assert time.perf_counter() - start < 2
    assert r.exit_code == 2
    assert GOOD_FINDING in r.stdout
    msg = error_line(r, "huge.json")["msg"]
    assert "MiB" in msg and "limit" in msg and "binary" not in msg


# --- nesting ------------------------------------------------------------------------------------


def test_deep_json_nesting(tmp_path: Path) -> None:
    start = time.perf_counter()
    r = bad_and_good(tmp_path, "deep.json", "[" * 5000 + "]" * 5000)
    assert time.perf_counter() - start < 2
    m = error_line(r, "deep.json")
    assert m["line"] == "1" and "nest" in m["msg"]


def test_deep_json_nesting_inside_an_object(tmp_path: Path) -> None:
    text = '{"model_type": "llama", "x": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}"
    r = bad_and_good(tmp_path, "config.json", text)
    m = error_line(r, "config.json")
    assert m["line"] == "1" and "nest" in m["msg"]


@pytest.mark.parametrize(
    "text",
    ["[" * 5000 + "]" * 5000 + "\n", "- " * 5000 + "x\n", "".join(" " * i + f"k{i}:\n" for i in range(1000))],
    ids=["flow-5000", "block-seq-5000", "block-map-1000"],
)
def test_deep_yaml_nesting(tmp_path: Path, text: str) -> None:
    start = time.perf_counter()
    r = bad_and_good(tmp_path, "deep.yaml", text)
    assert time.perf_counter() - start < 2
    m = error_line(r, "deep.yaml")
    assert m["line"] is not None, m.group(0)
    assert "nest" in m["msg"]


def test_nesting_just_over_the_limit_yaml(tmp_path: Path) -> None:
    r = bad_and_good(tmp_path, "deep.yaml", "- " * 150 + "x\n")
    m = error_line(r, "deep.yaml")
    assert m["line"] == "1" and "nest" in m["msg"]


# --- duplicate keys -----------------------------------------------------------------------------


def test_duplicate_key_json(tmp_path: Path) -> None:
    text = '{\n  "model_type": "llama",\n  "hidden_size": 4096,\n  "hidden_size": 8192\n}\n'
    r = bad_and_good(tmp_path, "config.json", text)
    assert_error_at(r, "config.json", 4, 3, "duplicate", "hidden_size")


def test_duplicate_key_json_nested(tmp_path: Path) -> None:
    text = '{"rope_scaling": {"factor": 8.0,\n                  "factor": 4.0}}\n'
    r = bad_and_good(tmp_path, "config.json", text)
    assert_error_at(r, "config.json", 2, 19, "duplicate", "factor")


def test_duplicate_key_yaml(tmp_path: Path) -> None:
    r = bad_and_good(tmp_path, "dup.yaml", "model: m\nmax-model-len: 4096\nmax-model-len: 8192\n")
    assert_error_at(r, "dup.yaml", 3, 1, "duplicate", "max-model-len")


def test_duplicate_key_yaml_nested(tmp_path: Path) -> None:
    text = "model: m\ncompilation-config:\n  level: 3\n  level: 0\n"
    r = bad_and_good(tmp_path, "dup.yaml", text)
    assert_error_at(r, "dup.yaml", 4, 3, "duplicate", "level")


# --- values of surprising types -----------------------------------------------------------------


def _small_model(root: Path) -> None:
    cfg = json.loads(LLAMA_8B)
    cfg["max_position_embeddings"] = 4096
    cfg.pop("rope_scaling")
    write(root, "small/config.json", json.dumps(cfg, indent=2))


@pytest.mark.parametrize("line", ["max-model-len: 8k", 'max_model_len: "8k"'])
def test_human_readable_max_model_len_is_valid(tmp_path: Path, line: str) -> None:
    """vLLM (>= 0.11) reads 8k as 8000: no input error, and rules see 8000."""
    _small_model(tmp_path)
    write(tmp_path, "serve.yaml", f"model: ./small\n{line}\n")
    r = check(tmp_path, "serve.yaml")
    assert r.exit_code == 1, r.stdout + r.stderr
    assert "error:" not in r.stderr
    assert re.search(r"^serve\.yaml:2:1: SITS202 \[error\] max_model_len 8000 exceeds the 4096", r.stdout, re.M), r.stdout


def test_ortgenai_bool_provider_option_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    write(tmp_path, "genai_config.json", """
        {"model": {"type": "llama", "context_length": 4096, "decoder": {"filename": "model.onnx",
          "session_options": {"provider_options": [{"cuda": {"enable_cuda_graph": true}}]}}}}
        """)
    r = check(tmp_path, "genai_config.json", extra=())
    assert r.exit_code == 1, r.stdout + r.stderr
    assert [line for line in r.stderr.splitlines() if "no GPU is known" not in line] == []
    assert re.search(r"^genai_config\.json:2:54: SITS201 \[error\] enable_cuda_graph: expected a string but saw a bool", r.stdout, re.M), r.stdout


@pytest.mark.parametrize(
    "text",
    [
        "model: m\nmax-model-len: [1, 2]\n",
        "model: m\nmax-model-len: {a: 1}\n",
        "model: m\nmax-model-len: null\n",
        "model: m\ntensor-parallel-size: two\n",
        "model: [m]\nmax-model-len: 4096\n",
        "model: m\nmax-model-len: 2024-01-01\n",
        "model: m\ncompilation-config: '{not json'\n",
        "model: m\nmax-model-len: !!binary aGVsbG8=\n",
        "model: m\nmax-model-len: !Ref Len\n",
    ],
    ids=["list", "map", "null", "word", "model-list", "date", "bad-json-string", "binary-tag", "custom-tag"],
)
def test_odd_vllm_values_do_not_crash(tmp_path: Path, text: str) -> None:
    write(tmp_path, "serve.yaml", text)
    r = check(tmp_path, "serve.yaml")
    assert r.exit_code in (0, 1, 2)


@pytest.mark.parametrize(
    "text",
    [
        '{"architectures": "LlamaForCausalLM", "model_type": "llama", "max_position_embeddings": "4096"}',
        '{"architectures": null, "model_type": 7, "hidden_size": [], "num_hidden_layers": {}}',
        '{"model_type": "llama", "max_position_embeddings": 4096, "rope_scaling": "yes"}',
        '{"model_type": "llama", "max_position_embeddings": 1e400, "rope_scaling": {"factor": NaN}}',
        '{"model": {"type": "llama", "context_length": "4096", "decoder": 5}, "search": []}',
        '{"pretrained_config": {}, "build_config": {"max_seq_len": "x"}, "version": 1}',
        '[1, 2, 3]',
        '"just a string"',
        "42",
    ],
    ids=["hf-strings", "hf-wrong-containers", "hf-rope-string", "hf-inf-nan", "ort-strings", "trt-strings", "array", "string", "number"],
)
def test_odd_json_values_do_not_crash(tmp_path: Path, text: str) -> None:
    write(tmp_path, "config.json", text)
    write(tmp_path, "serve.yaml", "model: ./\nmax-model-len: 4096\n")
    r = check(tmp_path, "config.json")
    assert r.exit_code in (0, 1, 2)
    r = check(tmp_path, "serve.yaml", "config.json")
    assert r.exit_code in (0, 1, 2)


# --- Helm templates -----------------------------------------------------------------------------

HELM_TEMPLATE = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "chart.fullname" . }}
  labels:
    {{- include "chart.labels" . | nindent 4 }}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: "vllm/vllm-openai:{{ .Values.image.tag }}"
          args:
            - --model
            - {{ .Values.model | quote }}
            - --max-model-len
            - {{ .Values.maxModelLen | quote }}
            {{- if .Values.eager }}
            - --enforce-eager
            {{- end }}
            - --swap-space
            - "16"
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
"""


def test_helm_template_values_are_skipped_with_a_notice(tmp_path: Path) -> None:
    write(tmp_path, "templates/deployment.yaml", HELM_TEMPLATE)
    r = check(tmp_path, "templates/deployment.yaml")
    assert r.exit_code == 1, r.stdout + r.stderr
    assert "error:" not in r.stderr
    assert re.search(r"^templates/deployment\.yaml: note: \d+ value\(s\) hold \{\{ \}\} template expressions", r.stderr, re.M), r.stderr
    # the rest is checked, at the right place (line numbers survive the template actions)
    assert "templates/deployment.yaml:21:15: SITS204 [error] --swap-space" in r.stdout


def test_helm_template_in_a_shell_string(tmp_path: Path) -> None:
    write(tmp_path, "deploy.yaml", """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: x}
        spec:
          template:
            spec:
              containers:
                - name: vllm
                  image: vllm/vllm-openai:v0.10.2
                  command: ["sh", "-c", "vllm serve {{ .Values.model }} --max-model-len {{ .Values.len }} --swap-space 4"]
        """)
    r = check(tmp_path, "deploy.yaml", extra=())
    assert r.exit_code in (0, 1), r.stdout + r.stderr
    assert "note:" in r.stderr and "{{ }}" in r.stderr


def test_helm_multiline_template_comment(tmp_path: Path) -> None:
    write(tmp_path, "deployment.yaml", "{{/*\n  vLLM server.\n*/}}\n" + HELM_TEMPLATE.lstrip("\n"))
    r = check(tmp_path, "deployment.yaml")
    assert "error:" not in r.stderr, r.stderr
    assert "deployment.yaml:24:15: SITS204 [error] --swap-space" in r.stdout


def test_helm_values_with_templates_do_not_crash(tmp_path: Path) -> None:
    write(tmp_path, "values.yaml", """
        servingEngineSpec:
          modelSpec:
            - name: llama
              repository: vllm/vllm-openai
              tag: "{{ .Chart.AppVersion }}"
              modelURL: "{{ .Values.model }}"
              vllmConfig:
                maxModelLen: {{ .Values.len }}
        """)
    r = check(tmp_path, "values.yaml")
    assert r.exit_code in (0, 1), r.stdout + r.stderr


def test_helm_template_that_breaks_yaml_is_an_error_with_a_hint(tmp_path: Path) -> None:
    write(tmp_path, "bad.yaml", "model: m\n{{ if .Values.x }}: [\n")
    r = check(tmp_path, "bad.yaml")
    assert r.exit_code == 2
    m = error_line(r, "bad.yaml")
    assert m["line"] is not None


# --- paths --------------------------------------------------------------------------------------


def test_nonexistent_path(tmp_path: Path) -> None:
    write(tmp_path, "serve.yaml", GOOD)
    r = check(tmp_path, "missing.yaml", "serve.yaml")
    assert r.exit_code == 2
    assert GOOD_FINDING in r.stdout
    assert "no such file" in error_line(r, "missing.yaml")["msg"]


def test_unrecognized_file_named_explicitly(tmp_path: Path) -> None:
    r = bad_and_good(tmp_path, "settings.yaml", "foo: bar\nlist: [1, 2]\n")
    assert "not a recognized config" in error_line(r, "settings.yaml")["msg"]


def test_kubernetes_manifest_without_vllm_named_explicitly(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n"
    r = bad_and_good(tmp_path, "svc.yaml", text)
    assert "no container runs vLLM" in error_line(r, "svc.yaml")["msg"]


def _walk_tree(root: Path) -> None:
    write(root, "repo/serve.yaml", GOOD)
    write(root, "repo/notes.txt", "not a config")
    write(root, "repo/unrelated.yaml", "foo: bar\n")
    write(root, "repo/package.json", '{"name": "x", "version": "1.0.0"}')
    write(root, "repo/docs/mkdocs.yml", "site_name: x\nnav: [index.md]\n")
    write(root, "repo/.hidden/serve.yaml", GOOD)
    write(root, "repo/.git/serve.yaml", GOOD)
    write(root, "repo/.git/broken.json", '{"a": ')
    write(root, "repo/node_modules/x/serve.yaml", GOOD)
    write(root, "repo/.dotfile.yaml", GOOD)


def test_directory_walk_skips_and_counts_unrelated_files(tmp_path: Path) -> None:
    _walk_tree(tmp_path)
    r = check(tmp_path, "repo")
    assert r.exit_code == 1, r.stdout + r.stderr
    assert [line for line in r.stderr.splitlines() if "no GPU is known" not in line] == []  # nothing about the walk
    assert "repo/serve.yaml:2:1: SITS204" in r.stdout
    # hidden folders, .git, node_modules and dotfiles are not walked
    for hidden in (".hidden", ".git", "node_modules", ".dotfile"):
        assert hidden not in r.stdout
    assert "in 1 file(s); 4 file(s) skipped as not a recognized config (--show-skipped lists them)." in r.stdout


def test_directory_walk_reports_broken_files_and_checks_the_rest(tmp_path: Path) -> None:
    _walk_tree(tmp_path)
    write(tmp_path, "repo/sub/broken.json", '{\n  "model_type": "llama",\n  "x": }\n')
    write(tmp_path, "repo/sub/bad.yaml", "model: m\nmax-model-len: 4096\n  bad: indent\n")
    write(tmp_path, "repo/sub/serve2.yaml", GOOD)
    r = check(tmp_path, "repo")
    assert r.exit_code == 2, r.stdout + r.stderr
    assert_error_at(r, "repo/sub/broken.json", 3, 8, "invalid JSON")
    assert_error_at(r, "repo/sub/bad.yaml", 3, 6, "invalid YAML")
    assert "repo/serve.yaml:2:1: SITS204" in r.stdout
    assert "repo/sub/serve2.yaml:2:1: SITS204" in r.stdout
    assert "4 file(s) skipped" in r.stdout


def test_directory_walk_skips_empty_files(tmp_path: Path) -> None:
    write(tmp_path, "repo/serve.yaml", GOOD)
    write(tmp_path, "repo/empty.yaml", "")
    write(tmp_path, "repo/placeholder.json", "{}")
    r = check(tmp_path, "repo")
    assert r.exit_code == 1, r.stdout + r.stderr
    assert "2 file(s) skipped" in r.stdout


def test_directory_walk_skips_oversized_files(tmp_path: Path) -> None:
    write(tmp_path, "repo/serve.yaml", GOOD)
    with open(tmp_path / "repo" / "dump.json", "wb") as f:
        f.truncate(100 * 2**20)
    start = time.perf_counter()
    r = check(tmp_path, "repo")
    assert time.perf_counter() - start < 2
    assert r.exit_code == 1, r.stdout + r.stderr
    assert "error:" not in r.stderr
    assert "repo/serve.yaml:2:1: SITS204" in r.stdout
    assert "1 file(s) skipped" in r.stdout
    assert re.search(r"^repo/dump\.json: note: skipped: .*MiB", r.stderr, re.M), r.stderr


def test_directory_walk_with_templated_broken_file_is_a_notice(tmp_path: Path) -> None:
    write(tmp_path, "chart/serve.yaml", GOOD)
    write(tmp_path, "chart/templates/svc.yaml", "{{- if .Values.svc }}\nkind: {{ .Values.kind }\n  x: [\n{{- end }}\n")
    r = check(tmp_path, "chart")
    assert r.exit_code == 1, r.stdout + r.stderr
    assert "chart/serve.yaml:2:1: SITS204" in r.stdout
    assert "chart/templates/svc.yaml" in r.stderr and "note:" in r.stderr


def test_same_file_twice_is_checked_once(tmp_path: Path) -> None:
    write(tmp_path, "serve.yaml", GOOD)
    r = check(tmp_path, "serve.yaml", "./serve.yaml", ".")
    assert r.exit_code == 1
    assert r.stdout.count(GOOD_FINDING) == 1


def test_walk_skips_broken_files_that_are_not_deployment_configs(tmp_path, cli):
    """A repository walk meets other tools' JSON/YAML: broken ones that hold nothing a deployment
    config would are skipped with a note; a broken file that looks like a config is an error."""
    write(tmp_path, "serve.yaml", "model: m\nswap-space: 4\n")
    write(tmp_path, "docs/notes.yaml", "title: [unclosed\n")
    write(tmp_path, "web/package.json", '{"name": "x", "name": "y"}')
    r = cli("check", ".", "--target", "vllm==0.20.0", cwd=tmp_path)
    assert r.exit_code == 1, r.stderr
    assert "docs/notes.yaml:2:1: note: skipped: invalid YAML" in r.stderr
    assert "web/package.json:1:15: note: skipped: duplicate key 'name'" in r.stderr
    write(tmp_path, "k8s/broken.yaml", "args: [--max-model-len, 4096\n")
    r = cli("check", ".", "--target", "vllm==0.20.0", cwd=tmp_path)
    assert r.exit_code == 2
    assert "k8s/broken.yaml:2:1: error: invalid YAML" in r.stderr


# --- inputs that used to hang or crash (issue "Reliability") -----------------------------------------

def test_fifo_and_devices_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    r = check(tmp_path, str(fifo), "/dev/zero")
    assert r.exit_code == 2
    assert "pipe.yaml: error: cannot read: a named pipe (FIFO), not a config file" in r.stderr
    assert "/dev/zero: error: cannot read: a device, not a config file" in r.stderr


def test_a_fifo_met_while_walking_is_skipped_with_a_note(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")
    write(tmp_path, "serve.yaml", "model: ./m\nswap-space: 4\nserved-model-name: m\n")
    r = check(tmp_path, ".")
    assert r.exit_code == 1
    assert "pipe.yaml: note: skipped: cannot read: a named pipe (FIFO), not a config file" in r.stderr


def test_symlink_loops_are_reported_at_the_path(tmp_path: Path) -> None:
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    r = check(tmp_path, "loop.yaml")
    assert r.exit_code == 2
    assert "loop.yaml: error: cannot read: a symbolic link to nothing (broken or a loop)" in r.stderr


def test_a_5000_digit_number_is_an_input_error_not_a_crash(tmp_path: Path) -> None:
    write(tmp_path, "genai_config.json", '{"model": {"type": "llama", "context_length": ' + "9" * 5000 + "}}")
    r = check(tmp_path, "genai_config.json")
    assert r.exit_code == 2
    assert "genai_config.json: error: invalid JSON: a number has more digits than any config value could" in r.stderr


@pytest.mark.parametrize("value", ["9" * 4400, "9" * 4400 + "k", "1" + "0" * 400 + ".5k"])
def test_a_number_past_pythons_int_limit_is_what_vllms_parser_refuses(tmp_path: Path, value: str) -> None:
    # found by the 100 000-input fuzz run (bench/results/fuzz-2026-12-01-seed1.md): SITS201 crashed converting it
    write(tmp_path, "serve.yaml", f"model: m\nmax-num-batched-tokens: {value}\n")
    r = check(tmp_path, "serve.yaml")
    assert r.exit_code == 1
    assert "SITS201 [error] argument --max-num-batched-tokens: invalid int value: '" in r.stdout
    assert "...': vLLM 0.20.0 refuses to start" in r.stdout  # the value is cut, not printed in full


MODEL_HEAD = '{"architectures": ["LlamaForCausalLM"], "model_type": "llama",\n "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,\n '


@pytest.mark.parametrize(("line", "message"), [
    ('"max_position_embeddings": -1', "max_position_embeddings is -1; a dimension or length must be a positive integer"),
    ('"max_position_embeddings": NaN', "max_position_embeddings is NaN; a dimension or length must be a positive integer"),
    ('"max_position_embeddings": 4096.5', "max_position_embeddings is 4096.5; a dimension or length must be a positive integer"),
    ('"max_position_embeddings": "4096"', 'max_position_embeddings is "4096", not a number'),
    ('"num_key_value_heads": 0', "num_key_value_heads is 0; a dimension or length must be a positive integer"),
    ('"head_dim": true', "head_dim is true, not a number"),
    ('"rope_scaling": "yes"', 'rope_scaling is "yes"; it must be a mapping'),
])
def test_an_impossible_model_fact_makes_the_config_invalid(tmp_path: Path, line: str, message: str) -> None:
    write(tmp_path, "m/config.json", MODEL_HEAD + line + "\n}\n")
    write(tmp_path, "serve.yaml", "model: ./m\nmax-model-len: 4096\nserved-model-name: m\n")
    for named in ("m/config.json", "serve.yaml"):  # alone, and as the model behind a serve config
        r = check(tmp_path, named)
        assert r.exit_code == 2, r.stdout + r.stderr
        assert f"m/config.json:3:2: error: invalid model config: {message}" in r.stderr
        assert r.stderr.count("invalid model config") == 1
        assert "at most -1" not in r.stdout


def test_null_model_facts_are_simply_not_stated(tmp_path: Path) -> None:
    write(tmp_path, "m/config.json", MODEL_HEAD + '"head_dim": null, "rope_scaling": null, "sliding_window": null,\n'
          ' "max_position_embeddings": 4096.0}\n')
    write(tmp_path, "serve.yaml", "model: ./m\nmax-model-len: 4096\nserved-model-name: m\n")
    r = check(tmp_path, "serve.yaml", "m/config.json")
    assert r.exit_code == 0, r.stdout + r.stderr


def test_the_report_never_overwrites_a_checked_file(tmp_path: Path) -> None:
    serve = write(tmp_path, "serve.yaml", "model: ./m\nswap-space: 4\nserved-model-name: m\n")
    before = serve.read_text()
    for target in ("serve.yaml", "./serve.yaml"):
        r = check(tmp_path, "serve.yaml", extra=TARGET + ("-o", target))
        assert r.exit_code == 2
        assert f"{target}: error: refusing to write the report over a file being checked" in r.stderr
    r = check(tmp_path, ".", extra=TARGET + ("-o", "serve.yaml"))
    assert r.exit_code == 2
    assert serve.read_text() == before


def test_a_tab_that_breaks_yaml_is_named(tmp_path: Path) -> None:
    write(tmp_path, "serve.yaml", "model: m\nmax-model-len:\n\t- 4\n")
    r = check(tmp_path, "serve.yaml")
    assert r.exit_code == 2
    assert "serve.yaml:3:1: error: invalid YAML: " in r.stderr and "(a tab character: YAML indents with spaces only)" in r.stderr
