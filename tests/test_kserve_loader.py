"""KServe objects (sits_doctor/loaders/kserve.py, sits_doctor/frameworks/kserve.py)."""

from __future__ import annotations

import pytest

from conftest import REPO
from sits_doctor.fixer import apply_edits
from sits_doctor.fixes import config as edit
from sits_doctor.frameworks import kserve as fw
from sits_doctor.loaders import read_docs
from sits_doctor.loaders.commands import words
from sits_doctor.loaders.kserve import is_kserve, kserve_words, plans, why_not
from sits_doctor.source_yaml import parse_yaml

REAL = REPO / "tests" / "data" / "real" / "k8s"

HF_ISVC = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: qwen
spec:
  predictor:
    nodeSelector:
      nvidia.com/gpu.product: NVIDIA-L4
    model:
      modelFormat:
        name: huggingface
      args:
        - --model_name=qwen
        - --model_id
        - Qwen/Qwen2.5-7B-Instruct
        - --backend=vllm
        - --http_port
        - "8080"
        - --enable_docs_url=true
        - --max_length=8192
        - --swap-space=4
        - --trust_remote_code
        - --gpu-memory-utilization
        - "0.85"
      env:
        - name: HF_HOME
          value: /tmp
      resources:
        limits:
          nvidia.com/gpu: "2"
"""

LLMISVC = """apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata:
  name: qwen-pd
spec:
  model:
    uri: hf://Qwen/Qwen2.5-7B-Instruct
    name: Qwen/Qwen2.5-7B-Instruct
  parallelism:
    tensor: 2
    data: 4
  template:
    containers:
      - name: main
        env:
          - name: VLLM_ADDITIONAL_ARGS
            value: "--max-model-len 8192 --swap-space 4 --kv_transfer_config '{\\"kv_connector\\":\\"NixlConnector\\"}'"
        args:
          - --max-model-len=4096
          - --enforce-eager
        resources:
          limits:
            nvidia.com/gpu: "2"
  prefill:
    replicas: 2
    template:
      containers:
        - name: main
          env:
            - name: VLLM_ADDITIONAL_ARGS
              value: --max-num-seqs 16
"""


def _plans(text, index=0):
    docs = parse_yaml(text, "k.yaml")
    return docs[index], plans(docs[index])


def _at(setting):
    return setting.prov.line, setting.prov.col


# --- is_kserve ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["InferenceService", "ServingRuntime", "ClusterServingRuntime", "LLMInferenceService"])
def test_the_four_kinds_are_kserve(kind):
    assert is_kserve({"apiVersion": "serving.kserve.io/v1beta1", "kind": kind})


@pytest.mark.parametrize("data", [
    {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "TrainedModel"},
    {"apiVersion": "apps/v1", "kind": "InferenceService"},
    {"apiVersion": "serving.kserve.io/v1beta1"},
    ["not", "a", "mapping"],
])
def test_other_objects_are_not(data):
    assert not is_kserve(data)


# --- the Hugging Face server ---------------------------------------------------------------------

def test_the_hf_server_passes_what_is_not_its_own_to_vllm():
    doc, (plan,) = _plans(HF_ISVC)
    assert plan.label == "InferenceService/qwen predictor (KServe huggingfaceserver (vLLM backend))"
    assert plan.entry == "KServe huggingfaceserver (vLLM backend)"
    assert {k: v.value for k, v in plan.settings.items()} == {
        "max_model_len": 8192, "swap_space": 4, "trust_remote_code": True, "gpu_memory_utilization": 0.85,
        "tensor_parallel_size": 2,
    }
    assert plan.settings["max_model_len"].raw_key == "--max_length"  # KServe's spelling, read as max_model_len
    assert _at(plan.settings["max_model_len"]) == (20, 11)
    assert _at(plan.settings["swap_space"]) == (21, 11)
    assert _at(plan.settings["gpu_memory_utilization"]) == (23, 11)
    assert plan.settings["gpu_memory_utilization"].site.kind == "argv"
    assert [w.pointer for w in plan.settings["gpu_memory_utilization"].site.words] == [
        "/spec/predictor/model/args/10", "/spec/predictor/model/args/11"]


def test_kserve_flags_are_taken_out_with_their_values():
    doc, _ = _plans(HF_ISVC)
    tokens = words(doc, [("/spec/predictor/model/args", doc.data["spec"]["predictor"]["model"]["args"])])
    vllm_words, own = kserve_words(tokens)
    assert [t.text for t in own] == [
        "--model_name=qwen", "--model_id", "Qwen/Qwen2.5-7B-Instruct", "--backend=vllm", "--http_port", "8080",
        "--enable_docs_url=true"]
    assert [t.text for t in vllm_words] == [
        "--max_model_len=8192", "--swap-space=4", "--trust_remote_code", "--gpu-memory-utilization", "0.85"]


def test_the_model_is_model_id_and_the_gpus_are_the_predictors():
    _, (plan,) = _plans(HF_ISVC)
    assert plan.model_ref.value == "Qwen/Qwen2.5-7B-Instruct" and plan.model_ref.raw_key == "--model_id"
    assert _at(plan.model_ref) == (14, 11) and not plan.model_ref.templated
    assert {k: v.value for k, v in plan.hardware.items()} == {"gpu_count": "2", "gpu_product": "NVIDIA-L4"}
    tp = plan.settings["tensor_parallel_size"]  # VLLMModel.start_engine: torch.cuda.device_count()
    assert tp.prov.kind == "derived" and tp.site is None and "device_count" in tp.prov.note
    assert {k: v.value for k, v in plan.env.items()} == {"HF_HOME": "/tmp"}


def test_a_written_tensor_parallel_size_is_kept():
    _, (plan,) = _plans(HF_ISVC.replace("        - --trust_remote_code\n", "        - --tensor-parallel-size=1\n"))
    assert plan.settings["tensor_parallel_size"].value == 1 and plan.settings["tensor_parallel_size"].site is not None


def test_removing_a_flag_takes_its_list_items():
    _, (plan,) = _plans(HF_ISVC)
    fix = edit.remove(plan.settings["swap_space"], "remove")
    assert apply_edits(HF_ISVC, fix.edits) == HF_ISVC.replace("        - --swap-space=4\n", "")
    fix = edit.remove(plan.settings["gpu_memory_utilization"], "remove")
    assert apply_edits(HF_ISVC, fix.edits) == HF_ISVC.replace('        - --gpu-memory-utilization\n        - "0.85"\n', "")


@pytest.mark.parametrize("backend", ["--backend=huggingface", "--backend huggingface"])
def test_the_huggingface_backend_gives_no_plan_and_says_so(backend):
    text = HF_ISVC.replace("        - --backend=vllm\n", "".join(f"        - {w}\n" for w in backend.split()))
    doc, found = _plans(text)
    assert found == []
    assert why_not(doc) == (" (a KServe InferenceService whose Hugging Face server uses the huggingface backend,"
                            " not vLLM)")


def test_no_backend_is_auto_which_runs_vllm():
    _, (plan,) = _plans(HF_ISVC.replace("        - --backend=vllm\n", ""))
    assert plan.settings["swap_space"].value == 4


def test_storage_uri_names_the_model_without_model_id():
    text = HF_ISVC.replace("        - --model_id\n        - Qwen/Qwen2.5-7B-Instruct\n", "").replace(
        "      modelFormat:", "      storageUri: hf://Qwen/Qwen2.5-7B-Instruct\n      modelFormat:")
    _, (plan,) = _plans(text)
    assert (plan.model_ref.value, plan.model_ref.raw, plan.model_ref.templated) == (
        "Qwen/Qwen2.5-7B-Instruct", "hf://Qwen/Qwen2.5-7B-Instruct", False)
    assert _at(plan.model_ref) == (10, 7)
    _, (plan,) = _plans(text.replace("hf://Qwen/Qwen2.5-7B-Instruct", "s3://bucket/qwen"))
    assert plan.model_ref.value == "s3://bucket/qwen" and plan.model_ref.templated


def test_the_pre_0_11_huggingface_predictor():
    text = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: old
spec:
  predictor:
    huggingface:
      args: [--model_id=org/name, --max-model-len=2048]
"""
    _, (plan,) = _plans(text)
    assert plan.model_ref.value == "org/name" and plan.settings["max_model_len"].value == 2048


def test_a_vllm_model_format_appends_args_to_the_vllm_runtime():
    text = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llama
spec:
  predictor:
    model:
      modelFormat:
        name: vLLM
      runtime: my-vllm
      storageUri: hf://meta-llama/Llama-3.1-8B-Instruct
      args: ["--max-model-len=8192"]
"""
    _, (plan,) = _plans(text)
    assert plan.entry == "python -m vllm.entrypoints.openai.api_server"
    assert plan.model_ref.value == "meta-llama/Llama-3.1-8B-Instruct"
    assert plan.settings["max_model_len"].value == 8192


def test_other_model_formats_give_no_plan():
    text = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: iris
spec:
  predictor:
    model:
      modelFormat:
        name: sklearn
      storageUri: gs://kfserving-examples/models/sklearn/1.0/model
"""
    doc, found = _plans(text)
    assert found == []
    assert why_not(doc) == " (a KServe InferenceService whose predictor serves modelFormat 'sklearn', not vLLM)"


def test_predictor_containers_are_read_once_as_plain_containers():
    doc = read_docs(REAL / "kserve-inferenceservice/kserve-website-vllm-container-isvc.yaml", "w.yaml")[0]
    (plan,) = plans(doc)
    assert plan.label == "InferenceService/llama-2-7b container kserve-container (python -m vllm.entrypoints.api_server)"


# --- ServingRuntime / ClusterServingRuntime --------------------------------------------------------

RUNTIME = """apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: hf
spec:
  nodeSelector:
    nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
  containers:
    - name: kserve-container
      image: kserve/huggingfaceserver:v0.18.0-gpu
      command: ["python", "-m", "huggingfaceserver"]
      args:
        - --model_name={{.Name}}
        - --max-model-len=8192
        - --max_log_len=100
      resources:
        limits:
          nvidia.com/gpu: "1"
    - name: sidecar
      image: vllm/vllm-openai:v0.11.0
      args: ["--model", "org/other", "--max-model-len", "4096"]
"""


def test_a_runtime_of_the_hf_server_and_a_vllm_sidecar():
    doc, (hf, side) = _plans(RUNTIME)
    assert hf.label == "ServingRuntime/hf container kserve-container (KServe huggingfaceserver (vLLM backend))"
    # --max_log_len is the server's own only with the Hugging Face backend (v0.15.0+): vLLM's here,
    # whose flag is --max-log-len; parse_known_args does not rewrite _ to -, so it is never read
    assert list(hf.settings) == ["max_model_len", "unread:max_log_len", "tensor_parallel_size"]
    assert hf.lenient.startswith("KServe's huggingfaceserver reads its arguments with parse_known_args")
    assert hf.settings["max_model_len"].value == 8192 and hf.settings["tensor_parallel_size"].value == 1
    assert hf.model_ref is None
    assert {k: v.value for k, v in hf.hardware.items()} == {"gpu_count": "1", "gpu_product": "NVIDIA-H100-80GB-HBM3"}
    assert side.label == "ServingRuntime/hf container sidecar (vllm image entrypoint)"
    assert side.settings["max_model_len"].value == 4096


def test_the_hf_image_entrypoint_is_the_server():
    text = RUNTIME.replace('      command: ["python", "-m", "huggingfaceserver"]\n', "")
    _, (hf, _side) = _plans(text)
    assert hf.entry == "KServe huggingfaceserver (vLLM backend)" and hf.settings["max_model_len"].value == 8192


def test_a_runtime_whose_hf_server_uses_transformers():
    text = RUNTIME.replace("        - --max-model-len=8192\n", "        - --backend=huggingface\n").replace(
        "    - name: sidecar\n      image: vllm/vllm-openai:v0.11.0\n"
        '      args: ["--model", "org/other", "--max-model-len", "4096"]\n', "")
    doc, found = _plans(text)
    assert found == []
    assert why_not(doc) == " (a KServe ServingRuntime whose Hugging Face server uses the huggingface backend, not vLLM)"


# --- LLMInferenceService -------------------------------------------------------------------------

def test_llmisvc_words_come_from_the_variable_then_the_args():
    doc, (main, prefill) = _plans(LLMISVC)
    assert main.label == "LLMInferenceService/qwen-pd main (vllm serve)" and main.entry == "vllm serve"
    assert {k: v.value for k, v in main.settings.items()} == {
        "max_model_len": 4096,  # the args come after $VLLM_ADDITIONAL_ARGS: they win
        "swap_space": 4,
        "kv_transfer_config": {"kv_connector": "NixlConnector"},
        "kv_transfer_config.kv_connector": "NixlConnector",
        "enforce_eager": True,
        "tensor_parallel_size": 2,
    }
    assert _at(main.settings["swap_space"]) == (17, 42)
    assert main.settings["swap_space"].site.kind == "shell"
    assert _at(main.settings["max_model_len"]) == (19, 13)
    tp = main.settings["tensor_parallel_size"]
    assert (tp.raw_key, _at(tp), tp.site.kind) == ("tensor", (10, 5), "mapping")
    assert "data_parallel_size" not in main.settings  # only the data-parallel presets (with a worker) write it
    assert main.model_ref.value == "Qwen/Qwen2.5-7B-Instruct"
    assert {k: v.value for k, v in main.hardware.items()} == {"gpu_count": "2"}
    assert main.args_site.kind == "argv" and main.args_site.pointer == "/spec/template/containers/0/args/0"
    assert prefill.label == "LLMInferenceService/qwen-pd prefill (vllm serve)"
    assert {k: v.value for k, v in prefill.settings.items()} == {"max_num_seqs": 16}
    assert _at(prefill.settings["max_num_seqs"]) == (31, 22)


def test_removing_a_flag_inside_the_variable():
    _, (main, _prefill) = _plans(LLMISVC)
    fix = edit.remove(main.settings["swap_space"], "remove")
    assert apply_edits(LLMISVC, fix.edits) == LLMISVC.replace("8192 --swap-space 4 --kv", "8192 --kv")
    fix = edit.remove(main.settings["enforce_eager"], "remove")
    assert apply_edits(LLMISVC, fix.edits) == LLMISVC.replace("          - --enforce-eager\n", "")


def test_llmisvc_with_a_worker_has_data_parallel_options_and_one_plan():
    text = LLMISVC.replace("  template:\n    containers:", """  worker:
    containers:
      - name: main
        image: ghcr.io/llm-d/llm-d-cuda:v0.9.0
        args: [--max-model-len=4096]
  template:
    containers:""", 1)
    _, (main, _prefill) = _plans(text)
    assert main.settings["data_parallel_size"].value == 4 and main.settings["data_parallel_size"].raw_key == "data"


def test_llmisvc_without_a_template_still_runs_vllm():
    text = """apiVersion: serving.kserve.io/v1alpha1
kind: LLMInferenceService
metadata:
  name: bare
spec:
  model:
    uri: pvc://models/llama
"""
    _, (plan,) = _plans(text)
    assert plan.settings == {} and plan.model_ref.templated and plan.model_ref.value == "pvc://models/llama"
    assert plan.args_site.words == ()  # nowhere to add a flag: such a fix is shown, not applied


def test_a_main_container_with_its_own_command_is_a_plain_container():
    text = LLMISVC.replace("      - name: main\n        env:", """      - name: main
        command: [vllm, serve, org/name, --max-model-len, "2048"]
        env:""", 1)
    _, found = _plans(text)
    assert [p.label for p in found] == ["LLMInferenceService/qwen-pd prefill (vllm serve)",
                                        "LLMInferenceService/qwen-pd container main (vllm serve)"]
    assert found[1].settings["max_model_len"].value == 4096  # command then args


# --- what KServe's parsers define ----------------------------------------------------------------

def test_the_flag_lists():
    assert {"--http_port", "--model_id", "--model_dir", "--backend", "--model_name", "--timeout-keep-alive",
            "--disable_log_requests"} <= fw.OWN_FLAGS
    assert not {"--max_model_len", "--max_length", "--trust_remote_code", "--task", "--dtype"} & fw.OWN_FLAGS
    every = {f for r in fw.RELEASES for f in r.model_server + r.hf_server}
    assert fw.STORE_TRUE <= every and set(fw.FEEDS_VLLM) <= every
    for older, newer in zip(fw.RELEASES, fw.RELEASES[1:]):  # no flag was ever removed
        assert set(older.model_server) <= set(newer.model_server), newer.tag
        assert set(older.hf_server) - {"--task", "--max_log_len", "--max-log-len"} <= set(newer.hf_server), newer.tag
    assert all(len(r.commit) == 40 for r in fw.RELEASES)


# --- the real files --------------------------------------------------------------------------------

REAL_PLANS = {  # file -> labels of its plans
    "kserve-inferenceservice/kserve-hf-llama2-isvc.yaml": [],
    "kserve-inferenceservice/kserve-website-vllm-container-isvc.yaml": [
        "InferenceService/llama-2-7b container kserve-container (python -m vllm.entrypoints.api_server)"],
    "kserve-inferenceservice/kubeflow-docs-agent-llama-isvc.yaml": [
        "InferenceService/llama predictor (KServe huggingfaceserver (vLLM backend))"],
    "kserve-inferenceservice/kubeflow-docs-agent-qwen-kserve-multidoc.yaml": [
        "ServingRuntime/llm-runtime container kserve-container (KServe huggingfaceserver (vLLM backend))",
        "InferenceService/qwen-llm predictor (KServe huggingfaceserver (vLLM backend))"],
    "kserve-inferenceservice/rhoai-obs-llama-3.2-1b-isvc.yaml": [
        "InferenceService/llama-32-1b-instruct predictor (python -m vllm.entrypoints.openai.api_server)"],
    "kserve-llminferenceservice/kserve-llmisvc-dp-ep-deepseek-r1-deepep.yaml": [
        "LLMInferenceService/deepseek-r1-0528 main (vllm serve)"],
    "kserve-llminferenceservice/kserve-llmisvc-pd-qwen2-7b.yaml": [
        "LLMInferenceService/qwen2-7b-instruct-pd main (vllm serve)",
        "LLMInferenceService/qwen2-7b-instruct-pd prefill (vllm serve)"],
    "kserve-servingruntime/kserve-huggingfaceserver-multinode.yaml": [
        "ClusterServingRuntime/kserve-huggingfaceserver-multinode container kserve-container "
        "(KServe huggingfaceserver (vLLM backend))"],
    "kserve-servingruntime/kserve-vllmserver-clusterservingruntime.yaml": [
        "ClusterServingRuntime/kserve-vllmserver container kserve-container "
        "(python -m vllm.entrypoints.openai.api_server)"],
    "kserve-servingruntime/rhai-vllm-servingruntime.yaml": [
        "ServingRuntime/vllm container kserve-container (vllm image entrypoint)"],
}


@pytest.mark.parametrize("name", sorted(REAL_PLANS))
def test_real_files(name):
    docs = read_docs(REAL / name, name)
    labels = [p.label for d in docs if is_kserve(d.data) for p in plans(d)]
    assert labels == REAL_PLANS[name]


def test_real_kubeflow_isvc_drops_kserve_flags_and_keeps_vllms():
    (doc,) = read_docs(REAL / "kserve-inferenceservice/kubeflow-docs-agent-llama-isvc.yaml", "l.yaml")
    (plan,) = plans(doc)
    assert list(plan.settings) == ["max_model_len", "gpu_memory_utilization", "enable_auto_tool_choice",
                                   "tool_call_parser", "enable_tool_call_parser", "tensor_parallel_size"]
    assert plan.model_ref.value == "RedHatAI/Llama-3.1-8B-Instruct"
    assert plan.env["HF_TOKEN"].templated and plan.env["CUDA_VISIBLE_DEVICES"].value == "0"


def test_real_deepseek_llmisvc():
    (doc,) = read_docs(REAL / "kserve-llminferenceservice/kserve-llmisvc-dp-ep-deepseek-r1-deepep.yaml", "d.yaml")
    (plan,) = plans(doc)
    assert {k: v.value for k, v in plan.settings.items()} == {
        "gpu_memory_utilization": 0.95, "max_model_len": 8192, "enforce_eager": True, "tensor_parallel_size": 1,
        "data_parallel_size": 32, "data_parallel_size_local": 8, "enable_expert_parallel": True}
    assert _at(plan.settings["max_model_len"]) == (38, 51)
    assert plan.model_ref.templated  # pvc://
    assert plan.hardware["gpu_count"].value == "8"


def test_real_multinode_runtime_reads_the_script():
    (doc,) = read_docs(REAL / "kserve-servingruntime/kserve-huggingfaceserver-multinode.yaml", "m.yaml")
    (plan,) = plans(doc)
    assert {k: (v.value, v.templated) for k, v in plan.settings.items()} == {
        "tensor_parallel_size": ("${TENSOR_PARALLEL_SIZE}", True),
        "pipeline_parallel_size": ("${PIPELINE_PARALLEL_SIZE}", True)}
    assert plan.model_ref is None


def test_the_hf_isvc_without_vllm_says_why():
    (doc,) = read_docs(REAL / "kserve-inferenceservice/kserve-hf-llama2-isvc.yaml", "h.yaml")
    assert plans(doc) == []
    assert "uses the huggingface backend, not vLLM" in why_not(doc)


def test_the_fixture_folder_exists():
    folder = REPO / "fixtures" / "kserve"
    names = sorted(p.name for p in folder.iterdir() if p.suffix == ".yaml")
    assert any(n.startswith("good_") for n in names) and any(n.startswith("bad_") for n in names)
    assert all((folder / f"{n}.snap").is_file() for n in names)
    assert all((folder / f"{n}.snap").read_text() == "" for n in names if n.startswith("good_"))
    assert all((folder / f"{n}.snap").read_text() for n in names if n.startswith("bad_"))



def test_kserve_placeholders_are_templated_and_model_id_is_the_model():
    text = RUNTIME.replace("        - --max_log_len=100\n",
                           "        - --served-model-name={{.Name}}\n        - --model_id=org/name\n")
    _, (hf, _side) = _plans(text)
    assert hf.settings["served_model_name"].templated
    assert (hf.model_ref.value, hf.model_ref.raw_key, _at(hf.model_ref)) == ("org/name", "--model_id", (16, 11))


def test_a_variable_from_a_secret_gives_no_words():
    text = LLMISVC.replace(
        "            value: \"--max-model-len 8192 --swap-space 4 --kv_transfer_config '{\\\"kv_connector\\\":\\\"NixlConnector\\\"}'\"\n",
        "            valueFrom: {secretKeyRef: {name: s, key: k}}\n")
    assert "valueFrom" in text
    _, (main, _prefill) = _plans(text)
    assert list(main.settings) == ["max_model_len", "enforce_eager", "tensor_parallel_size"]


def test_a_manifest_written_as_json():
    from sits_doctor.source import parse_json

    text = ('{"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "j"},'
            ' "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"},'
            ' "args": ["--model_id=org/name", "--max-model-len=2048", "--http_port=8080"]}}}}')
    doc = parse_json(text, "j.json")
    (plan,) = plans(doc)
    assert list(plan.settings) == ["max_model_len"] and plan.model_ref.value == "org/name"
    fix = edit.remove(plan.settings["max_model_len"], "remove")
    assert apply_edits(text, fix.edits) == text.replace(' "--max-model-len=2048",', "")
