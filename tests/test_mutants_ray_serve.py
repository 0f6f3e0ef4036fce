"""Ray Serve LLM configs (sits_doctor/loaders/ray_serve.py): which mappings are LLM configs, the
top-level ``llm_configs`` list, and which manifests are RayServices that deploy them."""

from __future__ import annotations

from sits_doctor.loaders import ray_serve
from sits_doctor.source_yaml import parse_yaml


def _doc(text: str):
    (doc,) = parse_yaml(text, "r.yaml")
    return doc


def test_an_llm_config_needs_engine_kwargs_or_an_accelerator_type():
    doc = _doc("model_loading_config: {model_id: m}\naccelerator_type: A10G\n")
    assert ray_serve.is_ray_serve_llm(doc.data)
    (plan,) = ray_serve.plans(doc)
    assert plan.model_ref.value == "m" and plan.settings == {}
    assert plan.hardware["gpu_product"].value == "A10G"
    assert (plan.hardware["gpu_product"].prov.line, plan.hardware["gpu_product"].prov.col) == (2, 1)
    assert not ray_serve.is_ray_serve_llm(_doc("model_loading_config: {model_id: m}\ndeployment_config: {}\n").data)


def test_a_top_level_llm_configs_list():
    doc = _doc("llm_configs:\n  - model_loading_config: {model_id: a}\n    engine_kwargs: {max_model_len: 1024}\n"
               "  - not a config\n  - model_loading_config: {model_id: b}\n    engine_kwargs: {max_model_len: 2048}\n")
    assert [p for p, _ in ray_serve.llm_configs(doc.data)] == ["/llm_configs/0", "/llm_configs/2"]
    a, b = ray_serve.plans(doc)
    assert (a.label, a.settings["max_model_len"].value) == ("Ray Serve LLM a", 1024)
    assert (b.label, b.settings["max_model_len"].value) == ("Ray Serve LLM b", 2048)
    assert (b.settings["max_model_len"].prov.line, b.settings["max_model_len"].prov.col) == (6, 21)


def test_what_a_rayservice_of_llm_configs_is():
    serve = "applications:\n- args:\n    llm_configs: []\n"
    assert ray_serve.is_rayservice({"kind": "RayService", "spec": {"serveConfigV2": serve}})
    assert not ray_serve.is_rayservice({"kind": "RayCluster", "spec": {"serveConfigV2": serve}})
    assert not ray_serve.is_rayservice({"kind": "RayService", "spec": {"serveConfigV2": "applications: []\n"}})
    assert not ray_serve.is_rayservice({"kind": "RayService", "spec": {"serveConfigV2": {"llm_configs": []}}})
    assert not ray_serve.is_rayservice({"kind": "RayService", "spec": {"rayClusterConfig": {}}})
    assert not ray_serve.is_rayservice({"kind": "RayService", "spec": "llm_configs"})
