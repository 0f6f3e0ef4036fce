"""KAITO inference ConfigMaps: each `vllm:` entry of data["inference_config.yaml"] becomes the words
`--KEY` `str(VALUE)` (kaito-project/kaito presets/workspace/inference/vllm/inference_api.py@056b828,
KAITOArgumentParser.parse_args), located in the manifest itself."""

from __future__ import annotations

from sits_doctor.loaders import parse_docs
from sits_doctor.loaders import kaito
from sits_doctor.engine import CheckOptions, check
from pathlib import Path

CM = """apiVersion: v1
kind: ConfigMap
metadata:
  name: params
data:
  inference_config.yaml: |
    max_probe_steps: 6
    vllm:
      max-model-len: 8192
      enforce_eager: true
      tensor-parallel-size: 2
      max-num-seqs:
"""
WORKSPACE = """apiVersion: kaito.sh/v1beta1
kind: Workspace
metadata:
  name: ws
inference:
  preset:
    name: phi-4-mini-instruct
  config: params
"""


def _plans(text: str):
    from sits_doctor.loaders import _plans_of
    from sits_doctor.loaders import LoadResult

    out = []
    for doc in parse_docs(text, Path("k.yaml"), "k.yaml"):
        out += _plans_of(doc, Path("k.yaml"), set(), LoadResult())
    return out


def test_each_entry_becomes_a_flag_and_the_python_str_of_its_value():
    (plan,) = _plans(CM)
    assert plan.kind == "vllm-args" and plan.entry == kaito.ENTRY
    assert plan.label == "KAITO ConfigMap/params inference_config.yaml (python -m vllm.entrypoints.openai.api_server)"
    s = plan.settings
    assert s["max_model_len"].value == 8192 and (s["max_model_len"].prov.line, s["max_model_len"].prov.col) == (9, 7)
    assert s["tensor_parallel_size"].value == 2 and s["tensor_parallel_size"].prov.line == 11
    # `true` is the word True after a flag that takes none; an empty value is the word None
    assert s["enforce_eager"].raw == "True" and [w.text for w in s["enforce_eager"].site.words] == ["--enforce_eager", "True"]
    assert s["max_num_seqs"].raw == "None"
    assert {st.site.kind for st in s.values()} == {"helm"}
    assert s["tensor_parallel_size"].site.pointer == "/vllm/tensor-parallel-size"
    assert plan.model_ref is None


def test_the_sections_other_keys_are_not_vllm_words():
    (plan,) = _plans(CM)
    assert "max_probe_steps" not in plan.settings


def test_a_configmap_without_the_kaito_key_is_not_kaito():
    assert not kaito.is_kaito_config({"kind": "ConfigMap", "data": {"other.yaml": "vllm: {}"}})
    assert not kaito.is_kaito_config({"kind": "Secret", "data": {"inference_config.yaml": "vllm: {}"}})
    assert not kaito.is_kaito_config({"kind": "ConfigMap", "data": {"inference_config.yaml": "max_probe_steps: 6"}})
    assert kaito.is_kaito_config({"kind": "ConfigMap", "data": {"inference_config.yaml": "vllm: {}"}})


def test_a_vllm_key_that_is_not_a_mapping_gives_no_plan():
    assert _plans(CM.split("    vllm:")[0] + "    vllm: 3\n") == []


def test_a_workspace_alone_is_refused_with_where_to_look(tmp_path, monkeypatch):
    (tmp_path / "ws.yaml").write_text(WORKSPACE)
    monkeypatch.chdir(tmp_path)
    report = check(["ws.yaml"], CheckOptions(isolated=True))
    (err,) = report.errors
    assert "a KAITO Workspace: its vLLM settings are in the ConfigMap its inference.config names" in err.message


def test_a_configmap_with_kaito_key_but_no_vllm_mapping_is_refused(tmp_path, monkeypatch):
    (tmp_path / "cm.yaml").write_text(CM.split("    vllm:")[0] + "    vllm: 3\n")
    monkeypatch.chdir(tmp_path)
    (err,) = check(["cm.yaml"], CheckOptions(isolated=True)).errors
    assert "a KAITO ConfigMap whose inference_config.yaml has no vllm: mapping" in err.message


def test_removed_flag_and_stray_bool_are_reported_at_their_entries(tmp_path, monkeypatch):
    text = CM.replace("      max-num-seqs:\n", "      swap-space: 4\n")
    (tmp_path / "cm.yaml").write_text(text + "---\n" + WORKSPACE)
    monkeypatch.chdir(tmp_path)
    report = check(["cm.yaml"], CheckOptions(isolated=True, targets=["vllm==0.25.1"], select=["SITS201", "SITS204"]))
    got = sorted((f.code, f.location.line, f.location.col) for f in report.findings)
    assert got == [("SITS201", 10, 7), ("SITS204", 12, 7)]
