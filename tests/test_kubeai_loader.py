"""KubeAI Model resources (sits_doctor/loaders/kubeai.py)."""

from __future__ import annotations

import pytest

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
    assert {k: v.value for k, v in plan.hardware.items()} == {"gpu_product": "A100-SXM-80GB", "gpu_count": "2"}


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
    assert "resourceProfile 'nvidia-gpu-a100-80gb:2'" in plan.facts.gpu.source


# Every profile KubeAI's chart defines (charts/kubeai/values.yaml resourceProfiles) is a known GPU.
@pytest.mark.parametrize("profile, card, gib", [
    ("nvidia-gpu-t4", "T4", 14.5), ("nvidia-gpu-l4", "L4", 21.9), ("nvidia-gpu-l40s", "L40S", 44),
    ("nvidia-gpu-h100", "H100-SXM-80GB", 79), ("nvidia-gpu-gh200", "GH200-96GB", 86),
    ("nvidia-gpu-a100-80gb", "A100-SXM-80GB", 79), ("nvidia-gpu-a100-40gb", "A100-SXM-40GB", 39),
    ("nvidia-gpu-a16", "A16-16GB", 14.4), ("nvidia-gpu-rtx4070-8gb", "RTX-4070-Laptop-8GB", 7.2),
    ("amd-gpu-mi300x", "MI300X", 190),
])
def test_every_chart_profile_names_its_gpu(tmp_path: Path, profile, card, gib):
    from sits_doctor.engine import check
    from sits_doctor.loaders.kubeai import PROFILES

    assert PROFILES[profile] == card
    text = MODEL.replace("hf://org/name", "hf://meta-llama/Llama-3.1-8B-Instruct").replace(
        "nvidia-gpu-a100-80gb:2", f"{profile}:1")
    (tmp_path / "m.yaml").write_text(text)
    (plan,) = check([tmp_path / "m.yaml"]).deployments
    assert plan.facts.gpu.name == card and plan.facts.gpu.count == 1
    assert plan.facts.gpu.memory_gib >= gib * 0.98
    assert f"resourceProfile '{profile}:1" in plan.facts.gpu.source
    # where the chart leaves the card open, the GPU it was sized for says what was assumed
    from sits_doctor.loaders.kubeai import ASSUMED
    assert (ASSUMED.get(profile, "") in plan.facts.gpu.source) and (("assumed" in plan.facts.gpu.source) == (profile in ASSUMED))


def test_profile_names_cover_the_chart():
    from sits_doctor.loaders.kubeai import PROFILES

    assert len(PROFILES) == 10 and "cpu" not in PROFILES


def test_an_assumed_version_says_the_operator_picks_the_image(tmp_path: Path):
    from sits_doctor.engine import CheckOptions, check

    (tmp_path / "m.yaml").write_text(MODEL)
    (plan,) = check([tmp_path / "m.yaml"], CheckOptions(isolated=True)).deployments
    assert plan.target.assumed
    assert "the KubeAI operator picks the vLLM image, modelServers.VLLM.images in its chart" in plan.target.source


def test_a_model_of_another_api_group_is_not_kubeai():
    assert is_kubeai_model({"apiVersion": "kubeai.org/v1", "kind": "Model", "spec": {}})
    assert not is_kubeai_model({"apiVersion": "serving.example.com/v1", "kind": "Model", "spec": {}})
    assert not is_kubeai_model({"apiVersion": "kubeai.org/v1", "kind": "Model", "spec": []})
    assert not is_kubeai_model(["kubeai.org/v1"])
