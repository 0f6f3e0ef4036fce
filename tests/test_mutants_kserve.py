"""KServe objects (sits_doctor/loaders/kserve.py): edge cases that mutation testing showed no test
noticing — what the last word of a command means, why an object gave no plan, where a model
reference came from."""

from __future__ import annotations

from sits_doctor.loaders.kserve import plans, why_not
from sits_doctor.source_yaml import parse_yaml

ISVC = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: qwen
spec:
  predictor:
    model:
      modelFormat:
        name: huggingface
      storageUri: hf://org/from-storage
      args: [{args}]
"""


def _plans(text):
    (doc,) = parse_yaml(text, "k.yaml")
    return doc, plans(doc)


def _isvc(*args: str):
    return _plans(ISVC.format(args=", ".join(args)))


def test_why_not_an_isvc_without_a_predictor_model():
    doc, found = _plans("apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: x}\n"
                        "spec:\n  predictor:\n    containers: []\n")
    assert found == []
    assert why_not(doc) == " (a KServe InferenceService whose predictor does not run vLLM)"


def test_why_not_a_runtime_without_the_hf_server():
    doc, found = _plans("apiVersion: serving.kserve.io/v1alpha1\nkind: ServingRuntime\nmetadata: {name: r}\n"
                        "spec:\n  containers:\n    - name: c\n      image: python:3.12\n"
                        "      command: [python, app.py]\n")
    assert found == []
    assert why_not(doc) == " (a KServe ServingRuntime, but none of its containers runs vLLM)"


def test_a_storage_uri_model_names_its_field():
    _, (plan,) = _isvc("--max-model-len=2048")
    assert (plan.model_ref.value, plan.model_ref.raw_key) == ("org/from-storage", "storageUri")
    llmisvc = ("apiVersion: serving.kserve.io/v1alpha1\nkind: LLMInferenceService\nmetadata: {name: b}\n"
               "spec:\n  model:\n    uri: hf://org/m\n")
    _, (plan,) = _plans(llmisvc)
    assert (plan.model_ref.value, plan.model_ref.raw_key) == ("org/m", "uri")


def test_model_id_as_the_last_word_has_no_value_and_storage_uri_names_the_model():
    _, (plan,) = _isvc("--max-model-len=2048", "--model_id")
    assert plan.model_ref.value == "org/from-storage"
    assert plan.settings["max_model_len"].value == 2048


def test_model_id_and_its_value_are_the_words_of_the_model_reference():
    _, (plan,) = _isvc("--model_id", "org/written", "--max-model-len=2048")
    assert plan.model_ref.value == "org/written" and plan.model_ref.raw_key == "--model_id"
    assert [w.pointer for w in plan.model_ref.site.words] == ["/spec/predictor/model/args/0",
                                                               "/spec/predictor/model/args/1"]


def test_a_kserve_flag_does_not_take_a_short_vllm_flag_as_its_value():
    # `--model_name -tp 2`: argparse does not take "-tp" as --model_name's value
    _, (plan,) = _isvc("--model_name", "-tp", "2")
    assert plan.settings["tensor_parallel_size"].value == 2


def test_a_two_letter_flag_is_not_a_kserve_flags_value():
    _, (plan,) = _isvc("--model_name", "-q", "fp8")
    assert plan.settings["quantization"].value == "fp8"


def test_a_lone_dash_is_a_value_word():
    _, (plan,) = _isvc("--model_name", "-", "--max-model-len=2048")
    assert set(plan.settings) == {"max_model_len"}


def test_only_kserve_flags_a_new_flag_goes_after_the_last_word():
    _, (plan,) = _isvc("--model_name", "qwen", "--model_id", "org/m")
    assert plan.settings == {}
    assert plan.args_site.kind == "argv" and plan.args_site.pointer == "/spec/predictor/model/args/3"
    assert [w.text for w in plan.args_site.words] == ["org/m"]


def test_backend_as_the_last_word_names_no_backend():
    doc, found = _isvc("--max-model-len=2048", "--backend")
    assert found == []
    assert why_not(doc) == " (a KServe InferenceService whose Hugging Face server uses the  backend, not vLLM)"


def test_a_backend_the_file_does_not_show_may_be_vllm():
    _, (plan,) = _isvc("--max-model-len=2048", "--backend", "$(BACKEND)")
    assert plan.settings["max_model_len"].value == 2048


def test_a_backend_flag_followed_by_a_shell_operator_has_no_value():
    doc, found = _plans("apiVersion: serving.kserve.io/v1alpha1\nkind: ServingRuntime\nmetadata: {name: r}\n"
                        "spec:\n  containers:\n    - name: c\n      image: kserve/huggingfaceserver:v0.18.0\n"
                        "      command: [sh, -c, 'python -m huggingfaceserver --backend=huggingface --backend; echo vllm']\n")
    assert found == []
    assert why_not(doc) == " (a KServe ServingRuntime whose Hugging Face server uses the  backend, not vLLM)"


def test_a_nested_json_option_keeps_its_name_under_the_hf_server():
    _, (plan,) = _isvc("--compilation-config", "'{\"level\": 3}'")
    assert plan.settings["compilation_config.level"].value == 3
    assert plan.settings["compilation_config.level"].raw_key == "level"


def test_a_gpu_count_that_is_not_a_number_sets_no_tensor_parallel_size():
    text = ISVC.format(args="--max-model-len=2048") + "      resources:\n        limits:\n          nvidia.com/gpu: two\n"
    _, (plan,) = _plans(text)
    assert plan.hardware["gpu_count"].value == "two"
    assert "tensor_parallel_size" not in plan.settings


def test_python_dash_m_as_the_last_word_runs_no_hf_server():
    doc, found = _plans("apiVersion: serving.kserve.io/v1alpha1\nkind: ServingRuntime\nmetadata: {name: r}\n"
                        "spec:\n  containers:\n    - name: c\n      image: python:3.12\n"
                        "      command: [python, -m]\n")
    assert found == []
    assert why_not(doc) == " (a KServe ServingRuntime, but none of its containers runs vLLM)"


LLMISVC = """apiVersion: serving.kserve.io/v1alpha1
kind: LLMInferenceService
metadata:
  name: q
spec:
  model:
    uri: hf://org/m
  parallelism:
    tensor: 2
  worker:
    containers:
      - name: main
        image: vllm/vllm-openai:v0.10.0
        args: [--max-model-len=4096]
  template:
    containers:
      - name: main
        image: vllm/vllm-openai:v0.10.1
        args: [--max-model-len=2048]
"""


def test_llmisvc_main_and_worker_containers_are_read_once():
    _, found = _plans(LLMISVC)
    assert [p.label for p in found] == ["LLMInferenceService/q main (vllm serve)"]
    (plan,) = found
    assert plan.settings["max_model_len"].value == 2048
    assert (plan.image.value, plan.image.prov.line, plan.image.prov.col) == ("vllm/vllm-openai:v0.10.1", 18, 16)
    tp = plan.settings["tensor_parallel_size"]
    assert (tp.value, tp.templated, tp.prov.line) == (2, False, 9)


def test_llmisvc_main_container_without_words_is_anchored_at_the_container():
    _, (plan,) = _plans(LLMISVC.replace("        args: [--max-model-len=2048]\n", ""))
    assert plan.settings["tensor_parallel_size"].value == 2 and "max_model_len" not in plan.settings
    assert (plan.anchor.line, plan.anchor.col) == (17, 9)  # the container, not /spec
