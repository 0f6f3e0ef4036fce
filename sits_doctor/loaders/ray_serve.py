"""Ray Serve LLM configs: ``llm_configs`` entries (in a Serve config's ``applications[].args``,
or a single LLMConfig file) whose ``engine_kwargs`` Ray passes to vLLM's engine arguments
(``AsyncEngineArgs(**engine_kwargs)``); ``model_loading_config.model_source`` (else
``model_id``) is the model and ``accelerator_type`` the GPU. Source:
https://docs.ray.io/en/latest/serve/llm/ (LLMConfig reference, python/ray/llm/_internal/serve/
configs/server_models.py).
"""

from __future__ import annotations

from typing import Any, Iterator

from sits_doctor.frameworks import vllm as fw
from sits_doctor.loaders.flatten import flatten
from sits_doctor.loaders.vllm_args import coerce, normalize_key
from sits_doctor.plan import Plan, Provenance, Setting, Site
from sits_doctor.source import SourceDoc, join_pointer



def _is_llm_config(node: Any) -> bool:
    return isinstance(node, dict) and isinstance(node.get("model_loading_config"), dict) and (
        isinstance(node.get("engine_kwargs"), dict) or "accelerator_type" in node)


def llm_configs(data: Any) -> Iterator[tuple[str, dict]]:
    """(pointer, LLMConfig) of each inline LLM config (file references are not followed)."""
    if _is_llm_config(data):
        yield "", data
        return
    apps = data.get("applications") if isinstance(data, dict) else None
    for i, app in enumerate(apps if isinstance(apps, list) else []):
        args = app.get("args") if isinstance(app, dict) else None
        configs = args.get("llm_configs") if isinstance(args, dict) else None
        for j, config in enumerate(configs if isinstance(configs, list) else []):
            if _is_llm_config(config):
                yield f"/applications/{i}/args/llm_configs/{j}", config
    if isinstance(data, dict) and isinstance(data.get("llm_configs"), list):
        for j, config in enumerate(data["llm_configs"]):
            if _is_llm_config(config):
                yield f"/llm_configs/{j}", config


def is_ray_serve_llm(data: Any) -> bool:
    return next(llm_configs(data), None) is not None


def is_rayservice(data: Any) -> bool:
    """A KubeRay RayService whose ``spec.serveConfigV2`` (a YAML string) deploys LLM configs."""
    spec = data.get("spec") if isinstance(data, dict) and data.get("kind") == "RayService" else None
    return isinstance(spec, dict) and isinstance(spec.get("serveConfigV2"), str) and "llm_configs" in spec["serveConfigV2"]


def rayservice_plans(doc: SourceDoc) -> list[Plan]:
    """The LLM configs of a RayService's serveConfigV2, located in the manifest itself, and its
    cluster's containers whose command runs ``vllm serve`` (read like any Kubernetes container)."""
    from sits_doctor.source_yaml import parse_embedded

    from sits_doctor.loaders import kubernetes

    out = []
    for inner in parse_embedded(doc, "/spec/serveConfigV2"):
        out += plans(inner)
    return out + kubernetes.plans(doc)  # and containers that start vLLM themselves


def plans(doc: SourceDoc) -> list[Plan]:
    out = []
    for pointer, config in llm_configs(doc.data):
        if "sglang" in str(config.get("server_cls", "")).lower():
            continue  # Ray Serve's SGLangServer: not vLLM (sits_doctor.loaders.foreign says so)
        loading = config["model_loading_config"]
        kwargs = config.get("engine_kwargs") if isinstance(config.get("engine_kwargs"), dict) else {}
        kw_pointer = join_pointer(pointer, "engine_kwargs")
        settings: dict[str, Setting] = {}
        for key, setting in flatten(doc, kwargs, kw_pointer, normalize=normalize_key).items():
            settings[key] = setting.with_(value=coerce(key, setting.value) if not setting.templated else setting.value)
        model_ref = settings.get(fw.MODEL)
        for field in ("model_source", "model_id"):
            if model_ref is None and isinstance(loading.get(field), str):
                ptr = join_pointer(join_pointer(pointer, "model_loading_config"), field)
                model_ref = Setting(key=fw.MODEL, raw_key=field, value=loading[field], raw=loading[field],
                                    prov=Provenance.at(doc, ptr), templated=ptr in doc.templated,
                                    site=Site("mapping", doc, ptr))
        name = loading.get("model_id", "?")
        plan = Plan(framework="vllm", kind=fw.KWARGS, label=f"Ray Serve LLM {name}", file=doc.path,
                    anchor=Provenance.at(doc, pointer or "", key=bool(pointer)), settings=settings,
                    model_ref=model_ref, doc=doc, entry="Ray Serve LLM engine_kwargs")
        if isinstance(config.get("accelerator_type"), str):
            ptr = join_pointer(pointer, "accelerator_type")
            plan.hardware = {"gpu_product": Setting(
                key="gpu_product", raw_key="accelerator_type", value=config["accelerator_type"],
                raw=config["accelerator_type"], prov=Provenance.at(doc, ptr), site=Site("mapping", doc, ptr))}
        out.append(plan)
    return out
