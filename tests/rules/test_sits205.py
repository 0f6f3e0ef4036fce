"""SITS205 yaml-false-dropped: ``key: false`` in ``vllm serve --config`` YAML.

vLLM's ``load_config_file`` (vllm/utils/argparse_utils.py; vllm/utils/__init__.py before 0.11.1)
appends ``--key`` for ``true`` and, up to 0.27.1, nothing for ``false``; from 0.28.0 it appends
``--no-key`` when ``--no-key`` is one of the parser's option strings
(vllm/utils/argparse_utils.py@0.28.0, load_config_file). Facts §2; defaults §1.
"""

from __future__ import annotations

import harness
import pytest

from conftest import k8s_deployment

from sits_doctor.finding import Severity

CODE = "SITS205"


def findings(tmp_path, monkeypatch, name: str, text: str, version: str):
    return harness.findings(tmp_path, monkeypatch, {name: text}, name, CODE, f"vllm=={version}")


def serve(tmp_path, monkeypatch, line: str, version: str = "0.27.1"):
    return findings(tmp_path, monkeypatch, "serve.yaml", f"model: ./m\n{line}\nserved-model-name: m\n", version)


@pytest.mark.parametrize("version", ["0.8.0", "0.27.1"])
def test_fail_prefix_caching_false_dropped(tmp_path, monkeypatch, version):
    found = serve(tmp_path, monkeypatch, "enable-prefix-caching: false", version)
    assert [f.render() for f in found] == [
        f"serve.yaml:2:1: SITS205 [warning] `enable-prefix-caching: false` is silently dropped by vLLM {version}: "
        "enable_prefix_caching stays on (its default)"
    ]
    assert found[0].fix_hint == "pass --no-enable-prefix-caching on the command line, or upgrade to vLLM ≥0.28.0"


def test_fail_chunked_prefill_false_dropped(tmp_path, monkeypatch):
    assert [f.render() for f in serve(tmp_path, monkeypatch, "enable-chunked-prefill: false")] == [
        "serve.yaml:2:1: SITS205 [warning] `enable-chunked-prefill: false` is silently dropped by vLLM 0.27.1: "
        "enable_chunked_prefill stays on (its default)"
    ]


def test_fail_underscore_spelling_on_0_27(tmp_path, monkeypatch):
    assert [f.render() for f in serve(tmp_path, monkeypatch, "enable_prefix_caching: false")] == [
        "serve.yaml:2:1: SITS205 [warning] `enable_prefix_caching: false` is silently dropped by vLLM 0.27.1: "
        "enable_prefix_caching stays on (its default)"
    ]


@pytest.mark.parametrize("line", ["enforce-eager: false", "trust-remote-code: false", "disable-log-stats: false",
                                  "enable-lora: false", "calculate-kv-scales: false"])
def test_pass_default_off_option(tmp_path, monkeypatch, line):
    assert serve(tmp_path, monkeypatch, line) == []


def test_fail_unknown_option_is_info(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, "some-future-flag: false")
    assert [f.render() for f in found] == [
        "serve.yaml:2:1: SITS205 [info] `some-future-flag: false` is silently dropped by vLLM 0.27.1: "
        "some_future_flag keeps its default, whatever that is"
    ]
    assert found[0].fix_hint == (
        "pass --no-some-future-flag on the command line if the default is on, or upgrade to vLLM ≥0.28.0")


def test_fail_default_on_option_before_v1_default_is_info(tmp_path, monkeypatch):
    # 0.7.3: the V0 engine was the default; prefix caching was off, so its default is not known to be on
    found = serve(tmp_path, monkeypatch, "enable-prefix-caching: false", "0.7.3")
    assert [(f.code, f.severity, f.location.line, f.location.col) for f in found] == [(CODE, Severity.INFO, 2, 1)]


@pytest.mark.parametrize("version", ["0.28.0", "0.29.0", "0.33.0"])
def test_pass_false_passed_as_no_flag_from_0_28(tmp_path, monkeypatch, version):
    text = "model: ./m\nenable-prefix-caching: false\nenable-chunked-prefill: false\nsome-future-flag: false\n"
    assert findings(tmp_path, monkeypatch, "serve.yaml", text, version) == []


def test_fail_underscore_spelling_still_dropped_from_0_28(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, "enable_prefix_caching: false", "0.28.0")
    assert [(f.code, f.severity, f.location.line) for f in found] == [(CODE, Severity.WARNING, 2)]


def test_pass_true_and_non_bool_values(tmp_path, monkeypatch):
    text = ("model: ./m\nenable-prefix-caching: true\nmax-model-len: 4096\nenable-chunked-prefill: 'false'\n"
            "compilation-config:\n  use_inductor: false\n")
    assert findings(tmp_path, monkeypatch, "serve.yaml", text, "0.27.1") == []


def test_pass_kubernetes_args_are_never_judged(tmp_path, monkeypatch):
    text = k8s_deployment(
        '          image: vllm/vllm-openai:v0.27.1',
        '          args: ["--model", "./m", "--no-enable-prefix-caching", "--enable-chunked-prefill=false"]',
    )
    assert findings(tmp_path, monkeypatch, "k8s.yaml", text, "0.27.1") == []


def test_pass_helm_values_are_never_judged(tmp_path, monkeypatch):
    text = """
    servingEngineSpec:
      modelSpec:
        - name: llama
          repository: vllm/vllm-openai
          tag: v0.27.1
          modelURL: ./m
          vllmConfig:
            enablePrefixCaching: false
            enableChunkedPrefill: false
    """
    assert findings(tmp_path, monkeypatch, "values.yaml", text, "0.27.1") == []


@pytest.mark.parametrize("version", ["0.6.6.post1", "0.8.4"])
def test_pass_store_boolean_underscore_spelling_before_0_8_5(tmp_path, monkeypatch, version):
    # vllm/utils.py@0.8.0: `key not in store_boolean_arguments` -> passed on as --enable_chunked_prefill False
    assert serve(tmp_path, monkeypatch, "enable_chunked_prefill: false", version) == []


def test_fail_store_boolean_dashed_spelling_before_0_8_5(tmp_path, monkeypatch):
    # the dest is enable_chunked_prefill; the dashed YAML key is not in the list, so false is dropped
    found = serve(tmp_path, monkeypatch, "enable-chunked-prefill: false", "0.8.4")
    assert [f.code for f in found] == ["SITS205"]


def test_fail_store_boolean_underscore_spelling_from_0_8_5(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, "enable_chunked_prefill: false", "0.8.5")
    assert [f.code for f in found] == ["SITS205"]
