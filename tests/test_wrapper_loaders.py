"""SkyPilot tasks, Ray Serve LLM configs, llm-d modelservice values and vLLM's example chart
values: which deployments they hold, what each says about the model, GPUs and version, and that
fixes land on the exact words."""

from __future__ import annotations

from pathlib import Path

from sits_doctor.engine import check
from sits_doctor.fixer import apply_edits
from sits_doctor.fixes import config as edit
from sits_doctor.loaders import llmd, ray_serve, skypilot, vllm_chart
from sits_doctor.source_yaml import parse_yaml


def doc_of(text: str):
    (doc,) = parse_yaml(text, "f.yaml")
    return doc


SKY = """envs:
  MODEL: org/m
  LEN: 4096
resources:
  accelerators: A100-80GB:4
num_nodes: 2
setup: |
  pip install "vllm==0.8.5" ray
run: |
  vllm serve $MODEL --max-model-len $LEN \\
    -tp $SKYPILOT_NUM_GPUS_PER_NODE --pipeline-parallel-size $SKYPILOT_NUM_NODES \\
    --swap-space 4
"""


def test_skypilot_run_script_with_its_variables_and_gpus():
    doc = doc_of(SKY)
    assert skypilot.is_skypilot_task(doc.data)
    (plan,) = skypilot.plans(doc)
    s = plan.settings
    assert plan.model_ref.value == "org/m"
    assert (s["max_model_len"].value, s["tensor_parallel_size"].value, s["pipeline_parallel_size"].value) == (4096, 4, 2)
    assert plan.unchecked == 0
    assert {k: v.value for k, v in plan.hardware.items()} == {"gpu_product": "A100-80GB", "gpu_count": "4"}
    assert (plan.pin.key, plan.pin.value) == ("vllm", "0.8.5")
    assert {"MODEL", "LEN", "SKYPILOT_NUM_GPUS_PER_NODE", "SKYPILOT_NUM_NODES"} <= set(plan.env)
    # the flag is found where it is written inside the block scalar, and removed there
    assert (s["swap_space"].prov.line, s["swap_space"].prov.col) == (12, 5)
    fix = edit.remove(s["swap_space"], "remove")
    assert apply_edits(SKY, fix.edits).endswith("--pipeline-parallel-size $SKYPILOT_NUM_NODES\n")


def test_skypilot_accelerator_forms():
    for text, expected in (("{L4: 2}", {"gpu_product": "L4", "gpu_count": "2"}), ("H100", {"gpu_product": "H100"}),
                           # any-of sets: the member with the least memory (bare A100: the 40 GB part)
                           ("[A100:8, H100:8]", {"gpu_product": "A100", "gpu_count": "8"}),
                           ("{A100: 8, H100: 8}", {"gpu_product": "A100", "gpu_count": "8"}),
                           ("{H100: 8, Z9: 8}", {})):
        doc = doc_of(SKY.replace("A100-80GB:4", text))
        (plan,) = skypilot.plans(doc)
        assert {k: v.value for k, v in plan.hardware.items()} == expected, text


def test_a_task_without_gpus_leaves_tensor_parallel_unknown_and_memory_unchecked(tmp_path: Path):
    (tmp_path / "t.yaml").write_text(SKY.replace("resources:\n  accelerators: A100-80GB:4\n", ""))
    report = check([tmp_path / "t.yaml"], None)
    (plan,) = report.deployments
    assert plan.settings["tensor_parallel_size"].templated
    assert "tensor_parallel_size" not in str(plan.facts.missing.get("gpu", ""))
    assert "-tp is '$SKYPILOT_NUM_GPUS_PER_NODE'" in plan.facts.missing["sizing"]


RAY = """applications:
  - name: app
    import_path: ray.serve.llm:build_openai_app
    args:
      llm_configs:
        - model_loading_config: {model_id: small, model_source: org/small}
          accelerator_type: L4
          engine_kwargs: {max_model_len: 2048, enable_prefix_caching: false}
        - models/big.yaml
        - model_loading_config:
            model_id: big
          engine_kwargs:
            tensor_parallel_size: 2
            num_scheduler_steps: 8
"""


def test_ray_serve_llm_configs_are_engine_kwargs():
    doc = doc_of(RAY)
    first, second = ray_serve.plans(doc)
    assert (first.kind, first.model_ref.value, first.label) == ("vllm-kwargs", "org/small", "Ray Serve LLM small")
    assert first.settings["max_model_len"].value == 2048 and first.settings["enable_prefix_caching"].value is False
    assert first.hardware["gpu_product"].value == "L4"
    assert second.model_ref.value == "big" and second.hardware == {}
    fix = edit.remove(second.settings["num_scheduler_steps"], "remove")
    assert apply_edits(RAY, fix.edits) == RAY.replace("            num_scheduler_steps: 8\n", "")


def test_ray_serve_kwargs_are_judged_as_engine_arguments(tmp_path: Path):
    (tmp_path / "app.yaml").write_text(RAY)
    report = check([tmp_path / "app.yaml"], None)
    assert [(f.code, f.location.line) for f in report.findings if f.code == "SITS204"] == [("SITS204", 14)]
    assert not any(f.code == "SITS205" for f in report.findings)  # `false` is a Python False here


LLMD = """modelArtifacts:
  uri: hf://org/m
decode:
  parallelism: {tensor: 4, dataLocal: 2}
  acceleratorTypes:
    labelKey: nvidia.com/gpu.product
    labelValues: [NVIDIA-H100-80GB-HBM3]
  containers:
    - name: vllm
      image: ghcr.io/llm-d/llm-d:v0.2.0
      modelCommand: vllmServe
      args: ["--max-model-len", "8192", "--swap-space", "4"]
prefill:
  create: false
  containers:
    - name: vllm
      modelCommand: vllmServe
---
modelArtifacts: {uri: "pvc://models/m"}
decode:
  containers:
    - name: custom
      image: vllm/vllm-openai:v0.9.2
      command: ["vllm", "serve", "org/other", "--max-model-len", "1024"]
"""


def test_llmd_roles_and_model_commands():
    docs = parse_yaml(LLMD, "v.yaml")
    (plan,) = llmd.plans(docs[0])  # prefill has create: false
    assert plan.label == "llm-d decode container vllm (llm-d modelCommand vllmServe (vllm serve))"
    assert plan.model_ref.value == "org/m" and plan.settings["max_model_len"].value == 8192
    assert plan.settings["tensor_parallel_size"].value == 4
    assert (plan.settings["tensor_parallel_size"].prov.line, plan.settings["tensor_parallel_size"].prov.col) == (4, 17)
    assert {k: v.value for k, v in plan.hardware.items()} == {"gpu_count": "8", "gpu_product": "NVIDIA-H100-80GB-HBM3"}
    (custom,) = llmd.plans(docs[1])
    assert custom.entry == "vllm serve" and custom.model_ref.value == "org/other"
    assert custom.image.value == "vllm/vllm-openai:v0.9.2"


def test_llmd_plan_of_a_pvc_model_is_unknown():
    docs = parse_yaml(LLMD.replace("hf://org/m", "pvc://claim/path"), "v.yaml")
    (plan,) = llmd.plans(docs[0])
    assert plan.model_ref.templated and plan.model_ref.value == "pvc://claim/path"


CHART = """image:
  repository: "vllm/vllm-openai"
  tag: "v0.9.2"
  command: ["vllm", "serve", "/data/", "--num-scheduler-steps", "4", "--port", "8000"]
resources:
  limits:
    nvidia.com/gpu: 2
"""


def test_vllm_chart_values():
    doc = doc_of(CHART)
    assert vllm_chart.is_vllm_chart_values(doc.data)
    (plan,) = vllm_chart.plans(doc)
    assert plan.image.value == "vllm/vllm-openai:v0.9.2" and plan.model_ref.value == "/data/"
    assert plan.hardware["gpu_count"].value == 2
    fix = edit.remove(plan.settings["num_scheduler_steps"], "remove")
    assert apply_edits(CHART, fix.edits) == CHART.replace(' "--num-scheduler-steps", "4",', "")
    assert not vllm_chart.is_vllm_chart_values(doc_of(CHART.replace("vllm", "nginx")).data)


RAYSERVICE = """apiVersion: ray.io/v1
kind: RayService
metadata: {name: llm}
spec:
  serveConfigV2: |
    applications:
    - name: llms
      import_path: ray.serve.llm:build_openai_app
      args:
        llm_configs:
        - model_loading_config: {model_id: q, model_source: org/q}
          engine_kwargs:
            max_model_len: 1024
            device: auto
            swap_space: 4
"""


def test_a_rayservice_serve_config_is_read_where_it_sits_in_the_manifest():
    doc = doc_of(RAYSERVICE)
    assert ray_serve.is_rayservice(doc.data)
    (plan,) = ray_serve.rayservice_plans(doc)
    device = plan.settings["device"]
    assert (device.prov.line, device.prov.col) == (14, 13)
    pos = plan.doc.positions[device.site.pointer]
    assert RAYSERVICE[pos.key_start:pos.end] == "device: auto"
    fix = edit.remove(plan.settings["swap_space"], "remove")
    assert apply_edits(RAYSERVICE, fix.edits) == RAYSERVICE.replace("            swap_space: 4\n", "")


def test_embedded_yaml_in_a_quoted_string_is_exact_where_the_file_has_the_characters():
    from sits_doctor.source_yaml import parse_embedded

    text = 'cfg: "a: 1\\nb: [2, 3]\\n"\n'
    doc = doc_of(text)
    (inner,) = parse_embedded(doc, "/cfg")
    assert inner.data == {"a": 1, "b": [2, 3]}
    b = inner.positions["/b"]
    assert (b.line, b.col, text[b.start:b.end], text[b.key_start:b.key_end]) == (1, 16, "[2, 3]", "b")
    # the line break between the two keys is the escape \n: a span across it is not in the file
    assert inner.positions[""].start == -1


DEPLOYER = """sampleApplication:
  baseConfigMapRefName: basic-gpu-preset
  model:
    modelArtifactURI: hf://org/m
  resources:
    limits: {nvidia.com/gpu: 4}
  decode:
    extraArgs: ["--tensor-parallel-size", "4", "--max-model-len", "20000"]
"""


def test_llmd_deployer_values():
    doc = doc_of(DEPLOYER)
    assert llmd.is_deployer_values(doc.data)
    (plan,) = llmd.deployer_plans(doc)
    assert plan.label.startswith("llm-d-deployer decode") and plan.model_ref.value == "org/m"
    assert plan.settings["tensor_parallel_size"].value == 4 and plan.hardware["gpu_count"].value == 4
    bare = doc_of(DEPLOYER.split("  resources:")[0])
    assert llmd.deployer_plans(bare) == []
    assert "preset ConfigMap 'basic-gpu-preset'" in llmd.deployer_why_not(bare)


def test_kubeai_models_chart_catalog():
    from sits_doctor.loaders import kubeai

    text = """catalog:
  llama:
    enabled: false
    url: hf://org/llama
    engine: VLLM
    args: [--max-model-len=4096, --num-scheduler-steps=8]
    resourceProfile: nvidia-gpu-l4:1
  embed:
    url: ollama://nomic
    engine: OLlama
"""
    doc = doc_of(text)
    assert kubeai.is_kubeai_catalog(doc.data)
    (plan,) = kubeai.catalog_plans(doc)
    assert plan.label.startswith("catalog model llama") and plan.model_ref.value == "org/llama"
    assert (plan.settings["num_scheduler_steps"].prov.line, plan.hardware["gpu_product"].value) == (6, "L4")


def test_only_vllms_own_image_tags_are_vllm_versions():
    from sits_doctor.versions import version_from_image

    assert version_from_image("docker.io/vllm/vllm-openai:v0.10.1") == ("vllm", "0.10.1")
    assert version_from_image("lmcache/vllm-openai:v0.3.14") is None
    assert version_from_image("opea/vllm-gaudi:1.22.0") is None


def test_shell_arithmetic_and_backticks_are_unknown_values():
    from sits_doctor.loaders.vllm_args import is_shell_templated

    assert is_shell_templated("$((LWS_GROUP_SIZE * DP_SIZE_LOCAL))") and is_shell_templated("`nproc`")
    assert not is_shell_templated("4096") and not is_shell_templated("$")
