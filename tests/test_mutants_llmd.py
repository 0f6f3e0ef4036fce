"""llm-d modelservice values (sits_doctor/loaders/llmd.py): how ``parallelism`` becomes the
tensor-parallel size and the GPU count of a pod."""

from __future__ import annotations

from sits_doctor.loaders import llmd
from sits_doctor.source_yaml import parse_yaml

VALUES = """modelArtifacts:
  uri: hf://org/m
decode:
  parallelism: {parallelism}
  containers:
    - name: vllm
      image: ghcr.io/llm-d/llm-d:v0.2.0
      modelCommand: vllmServe
      args: ["--max-model-len", "8192"]
"""


def _plan(parallelism: str):
    (doc,) = parse_yaml(VALUES.format(parallelism=parallelism), "v.yaml")
    (plan,) = llmd.plans(doc)
    return plan


def test_a_tensor_parallelism_of_one_writes_no_flag():
    plan = _plan("{tensor: 1}")
    assert "tensor_parallel_size" not in plan.settings
    assert {k: v.value for k, v in plan.hardware.items()} == {"gpu_count": "1"}


def test_tensor_without_data_local_is_the_gpu_count():
    plan = _plan("{tensor: 4}")
    assert plan.settings["tensor_parallel_size"].value == 4
    assert {k: v.value for k, v in plan.hardware.items()} == {"gpu_count": "4"}


def test_data_local_without_tensor_says_nothing_about_the_gpus():
    plan = _plan("{dataLocal: 2}")
    assert plan.hardware == {} and "tensor_parallel_size" not in plan.settings
