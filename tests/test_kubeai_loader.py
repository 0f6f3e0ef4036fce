"""KubeAI Model resources (sits_doctor/loaders/kubeai.py)."""

from __future__ import annotations

from pathlib import Path

from sits_doctor.fixer import apply_edits
from sits_doctor.fixes import config as edit
from sits_doctor.loaders import load_paths
from sits_doctor.loaders.kubeai import is_kubeai_model, plans
from sits_doctor.source_yaml import parse_yaml

MODEL = """apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: m1
spec:
  url: hf://org/name
  engine: VLLM
  args:
    - --max-model-len=4096
    - --swap-space=4
  env:
    VLLM_USE_V1: "1"
  resourceProfile: nvidia-gpu-a100-80gb:2
"""


def _plans(text):
    (doc,) = parse_yaml(text, "m.yaml")
    return doc, plans(doc)


def test_a_vllm_model_is_the_command_kubeai_writes():
    doc, (plan,) = _plans(MODEL)
    assert plan.label == "Model/m1 (KubeAI: python3 -m vllm.entrypoints.openai.api_server)"
    assert plan.model_ref.value == "org/name" and plan.model_ref.raw == "hf://org/name"
    assert (plan.model_ref.prov.line, plan.model_ref.prov.col) == (6, 3)
    assert plan.settings["max_model_len"].value == 4096
    assert (plan.settings["swap_space"].prov.line, plan.settings["swap_space"].prov.col) == (10, 7)
    assert {k: v.value for k, v in plan.env.items()} == {"VLLM_USE_V1": "1"}
    assert {k: v.value for k, v in plan.hardware.items()} == {"gpu_product": "a100-80gb", "gpu_count": "2"}


def test_removing_an_arg_takes_its_list_item():
    doc, (plan,) = _plans(MODEL)
    fix = edit.remove(plan.settings["swap_space"], "remove")
    assert apply_edits(MODEL, fix.edits) == MODEL.replace("    - --swap-space=4\n", "")
    fix = edit.remove(plan.env["VLLM_USE_V1"], "remove")  # the only key: `env:` would be left null
    assert fix.edits == () and "only key of its mapping" in fix.why_not


def test_other_schemes_and_profiles():
    text = MODEL.replace("hf://org/name", "s3://bucket/llama").replace("nvidia-gpu-a100-80gb:2", "my-gpus:1")
    _, (plan,) = _plans(text)
    assert plan.model_ref.templated and plan.model_ref.value == "s3://bucket/llama"
    assert plan.hardware == {}


def test_other_engines_give_no_plan_and_say_so(tmp_path: Path):
    text = MODEL.replace("engine: VLLM", "engine: OLlama")
    doc, found = _plans(text)
    assert is_kubeai_model(doc.data) and found == []
    (tmp_path / "m.yaml").write_text(text)
    loaded = load_paths([tmp_path / "m.yaml"])
    assert loaded.errors == [] and loaded.plans == []  # read, and said to be another server's
    (note,) = loaded.notices
    assert note.message.startswith("runs Ollama: not checked")
    (tmp_path / "f.yaml").write_text(MODEL.replace("engine: VLLM", "engine: FasterWhisper"))
    (err,) = load_paths([tmp_path / "f.yaml"]).errors
    assert err.message.startswith("not a recognized config (a KubeAI Model whose engine is 'FasterWhisper', not VLLM)")


def test_the_gpu_of_the_profile_feeds_the_facts(tmp_path: Path):
    from sits_doctor.engine import check

    (tmp_path / "m.yaml").write_text(MODEL.replace("hf://org/name", "hf://meta-llama/Llama-3.1-8B-Instruct"))
    report = check([tmp_path / "m.yaml"])
    (plan,) = report.deployments
    assert plan.facts.gpu.name == "A100-SXM-80GB" and plan.facts.gpu.count == 2
    assert "resourceProfile 'a100-80gb'" in plan.facts.gpu.source
