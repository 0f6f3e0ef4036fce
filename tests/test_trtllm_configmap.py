"""LLM-API options held as strings in a Kubernetes ConfigMap (ai-dynamo/dynamo recipes):
sits_doctor.loaders.trtllm_configmap reads each as an LLM-API file at its positions in the
manifest (issue 26, case 5)."""

from __future__ import annotations

from sits_doctor import engine
from sits_doctor.loaders import load_paths, trtllm_configmap
from sits_doctor.source_yaml import parse_yaml

MANIFEST = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: agg-config
data:
  notes.txt: "not an options file"
  config.yaml: |
    backend: pytorch
    max_num_tokens: 8192
    print_iter_logs: true
    kv_cache_config:
      free_gpu_memory_fraction: 0.8
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: plain
data:
  app.yaml: |
    port: 8080
"""


def test_each_llm_api_string_is_a_plan_positioned_in_the_manifest(tmp_path):
    path = tmp_path / "deploy.yaml"
    path.write_text(MANIFEST)
    result = load_paths([path])
    (plan,) = result.plans
    assert (plan.framework, plan.kind) == ("trtllm", "trtllm-llmapi")
    assert plan.label == f"TensorRT-LLM LLM-API options {path} ConfigMap/agg-config data.config.yaml"
    s = plan.get("kv_cache_config.free_gpu_memory_fraction")
    assert (s.value, s.prov.line, s.prov.col) == (0.8, 12, 7)
    assert (plan.get("backend").prov.line, plan.get("backend").prov.col) == (8, 5)


def test_findings_and_fixes_point_at_the_manifest(tmp_path):
    path = tmp_path / "deploy.yaml"
    path.write_text(MANIFEST)
    report = engine.check([path], engine.CheckOptions(isolated=True))
    (finding,) = report.findings
    assert (finding.code, finding.location.line, finding.location.col) == ("SITS204", 10, 5)
    (fix,) = finding.fixes
    (edit,) = fix.edits
    assert MANIFEST[edit.start:edit.end] == "print_iter_logs" and edit.new == "print_iter_log"


def test_sniffing():
    (cm, plain) = parse_yaml(MANIFEST, "m.yaml")
    assert trtllm_configmap.is_llmapi_configmap(cm.data)
    assert not trtllm_configmap.is_llmapi_configmap(plain.data)
    assert not trtllm_configmap.is_llmapi_configmap({"kind": "Secret", "data": {"a": "backend: x"}})
    assert not trtllm_configmap.is_llmapi_configmap({"kind": "ConfigMap", "data": ["max_num_tokens: 1"]})
    assert trtllm_configmap.is_llmapi_configmap({"kind": "ConfigMap", "data": {"n": 5, "c.yaml": "max_num_tokens: 1"}})
    # an indented line is not a top-level key of the inner file
    assert not trtllm_configmap.is_llmapi_configmap({"kind": "ConfigMap", "data": {"a": "x:\n  backend: y\n"}})
    assert trtllm_configmap.is_llmapi_configmap({"kind": "ConfigMap", "data": {"d.yaml": "context_servers:\n  a: 1\n"}})


def test_a_disaggregated_config_in_a_configmap(tmp_path):
    path = tmp_path / "disagg.yaml"
    path.write_text("kind: ConfigMap\nmetadata:\n  name: d\ndata:\n  disagg.yaml: |\n    hostname: h\n"
                    "    context_servers:\n      num_instances: 1\n      max_num_tokens: 8\n")
    (plan,) = load_paths([path]).plans
    assert plan.label == f"TensorRT-LLM disaggregated serving config {path} ConfigMap/d data.disagg.yaml (context_servers)"
    assert plan.get("max_num_tokens").prov.line == 9
    assert engine.check([path], engine.CheckOptions(isolated=True)).findings == []


def test_invalid_yaml_in_the_string_is_an_input_error_at_the_manifest_line(tmp_path):
    import pytest

    from sits_doctor.cli import main

    path = tmp_path / "cm.yaml"
    path.write_text("kind: ConfigMap\nmetadata:\n  name: x\ndata:\n  config.yaml: |\n    max_num_tokens: 8\n"
                    "    backend: a: b\n    print_iter_log: true\n")
    (err,) = load_paths([path]).errors
    assert (err.line, err.col) == (7, 15)
    assert err.message.endswith("(in the LLM-API options of ConfigMap/x data.config.yaml)")
    with pytest.raises(SystemExit) as exited:
        main(["check", str(path), "--isolated"])
    assert exited.value.code == 2
    quoted = tmp_path / "q.yaml"
    quoted.write_text('kind: ConfigMap\ndata:\n  c.yaml: "max_num_tokens: [1"\n')
    (err,) = load_paths([quoted]).errors
    assert (err.line, err.col) == (3, 11)  # not a literal block: the string's own position
