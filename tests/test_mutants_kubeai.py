"""KubeAI Models and models-chart catalogs (sits_doctor/loaders/kubeai.py): what is and is not a
catalog, and a Model that names no resource profile."""

from __future__ import annotations

from sits_doctor.loaders.kubeai import is_kubeai_catalog, plans
from sits_doctor.source_yaml import parse_yaml


def test_what_a_models_chart_catalog_is():
    assert is_kubeai_catalog({"catalog": {"m": {"engine": "VLLM", "url": "hf://org/m"}}})
    assert not is_kubeai_catalog({"image": {"repository": "x"}})  # no catalog at all
    assert not is_kubeai_catalog({"catalog": ["engine", "url"]})
    assert not is_kubeai_catalog({"catalog": {"m": {"engine": "VLLM"}}})  # an entry needs both
    assert not is_kubeai_catalog({"catalog": {"m": {"url": "hf://org/m"}}})
    assert not is_kubeai_catalog({"catalog": {"m": "engine url"}})


def test_a_model_without_a_resource_profile_has_no_gpu_facts():
    (doc,) = parse_yaml("apiVersion: kubeai.org/v1\nkind: Model\nmetadata: {name: m}\n"
                        "spec:\n  url: hf://org/m\n  engine: VLLM\n  args: [--max-model-len=4096]\n", "m.yaml")
    (plan,) = plans(doc)
    assert plan.hardware == {} and plan.settings["max_model_len"].value == 4096
