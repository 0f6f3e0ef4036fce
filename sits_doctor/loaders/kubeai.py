"""KubeAI ``Model`` resources (``apiVersion: kubeai.org/v1``, ``kind: Model``).

KubeAI's operator writes the vLLM server command itself: ``python3 -m
vllm.entrypoints.openai.api_server --model=<spec.url's repository> --served-model-name=<name>``
followed by ``spec.args``; ``spec.env`` (a map) is added to the server's environment;
``spec.resourceProfile: nvidia-gpu-l4:1`` names a resource profile (defined in KubeAI's Helm
values; the default ones are named after the GPU) and how many of its units one replica takes.
Source: https://github.com/substratusai/kubeai api/v1/model_types.go and
internal/modelcontroller/engine_vllm.go (vLLMPodForModel), read at commit 07722ae.
"""

from __future__ import annotations

import re
from typing import Any

from sits_doctor.frameworks import vllm as fw
from sits_doctor.loaders.commands import words
from sits_doctor.loaders.vllm import plan_from_command
from sits_doctor.plan import Plan, Provenance, Setting, Site
from sits_doctor.source import SourceDoc, join_pointer

API_GROUP = "kubeai.org/"
VLLM_ENGINE = "VLLM"
ENTRY = "KubeAI: python3 -m vllm.entrypoints.openai.api_server"
# The GPU behind every resource profile KubeAI's chart defines (charts/kubeai/values.yaml
# resourceProfiles, and the nodeSelectors charts/kubeai/values-gke.yaml and values-eks.yaml give
# them, substratusai/kubeai@2f32ef4): the catalog card each one gets.
CHART = "substratusai/kubeai charts/kubeai/values.yaml resourceProfiles @2f32ef4"
# A Model names no image: the operator runs the one its chart sets (modelServers.VLLM.images).
IMAGE_NOTE = ("the KubeAI operator picks the vLLM image, modelServers.VLLM.images in its chart: "
              "vllm/vllm-openai:v0.8.3 by default at substratusai/kubeai@2f32ef4")
PROFILES: dict[str, str] = {
    "nvidia-gpu-t4": "T4",
    "nvidia-gpu-l4": "L4",  # GKE: nvidia-l4
    "nvidia-gpu-l40s": "L40S",
    "nvidia-gpu-h100": "H100-SXM-80GB",  # GKE: nvidia-h100-80gb
    "nvidia-gpu-gh200": "GH200-96GB",  # ASSUMED says why
    "nvidia-gpu-a100-80gb": "A100-SXM-80GB",  # GKE: nvidia-a100-80gb
    "nvidia-gpu-a100-40gb": "A100-SXM-40GB",  # GKE: nvidia-tesla-a100
    "nvidia-gpu-a16": "A16-16GB",  # one of the board's four GPUs (nvidia.com/gpu: 1)
    "nvidia-gpu-rtx4070-8gb": "RTX-4070-Laptop-8GB",  # ASSUMED says why
    "amd-gpu-mi300x": "MI300X",
}
# What a profile's card was chosen on where the chart leaves it open: said with the GPU it sizes for.
ASSUMED: dict[str, str] = {
    "nvidia-gpu-gh200": "the chart does not say which GH200: assumed the 96 GB one (the smaller memory)",
    "nvidia-gpu-rtx4070-8gb": "8 GB: assumed the RTX 4070 Laptop GPU (the desktop card has 12 GB)",
}
# Profile names outside the chart that follow its pattern, "<vendor>-gpu-<card>" (a profile a user
# added, nvidia-gpu-h200): the card is read from the name; a profile of another name says nothing.
_PROFILE = re.compile(r"^(?P<name>(?:nvidia|amd)-gpu-(?P<card>[A-Za-z0-9-]+?))(?::(?P<count>\d+))?$")


def is_kubeai_model(data: Any) -> bool:
    return (isinstance(data, dict) and str(data.get("apiVersion", "")).startswith(API_GROUP)
            and data.get("kind") == "Model" and isinstance(data.get("spec"), dict))


def is_kubeai_catalog(data: Any) -> bool:
    """The values of KubeAI's ``models`` Helm chart: ``catalog.<name>`` entries that are Model specs
    (charts/models/values.yaml in the KubeAI repository)."""
    catalog = data.get("catalog") if isinstance(data, dict) else None
    return isinstance(catalog, dict) and any(
        isinstance(v, dict) and "engine" in v and "url" in v for v in catalog.values())


def plans(doc: SourceDoc) -> list[Plan]:
    """The vLLM Plan of a Model whose engine is VLLM (other engines: none)."""
    meta = doc.data.get("metadata")
    name = meta.get("name", "?") if isinstance(meta, dict) else "?"
    plan = _spec_plan(doc, doc.data["spec"], "/spec", f"Model/{name}")
    return [plan] if plan is not None else []


def catalog_plans(doc: SourceDoc) -> list[Plan]:
    """A Plan for every VLLM entry of a models chart catalog (enabled or not: each is a Model
    someone can switch on)."""
    out = []
    for name, spec in doc.data["catalog"].items():
        if isinstance(spec, dict):
            plan = _spec_plan(doc, spec, join_pointer("/catalog", name), f"catalog model {name}")
            if plan is not None:
                out.append(plan)
    return out


def _spec_plan(doc: SourceDoc, spec: dict, pointer: str, label: str) -> Plan | None:
    if str(spec.get("engine", "")).upper() != VLLM_ENGINE:
        return None
    args = spec.get("args") if isinstance(spec.get("args"), list) else []
    tokens = words(doc, [(join_pointer(pointer, "args"), args)])
    env = _env_map(doc, spec.get("env"), join_pointer(pointer, "env"))
    plan = plan_from_command(doc, tokens, label=label, anchor=Provenance.at(doc, pointer), env=env, engine_args=ENTRY,
                             parser=fw.PARSER_API_SERVER)
    if plan is None:  # pragma: no cover - engine_args always gives a plan
        return None
    if plan.model_ref is None and isinstance(spec.get("url"), str):
        plan.model_ref = _model_from_url(doc, spec["url"], join_pointer(pointer, "url"))
    plan.hardware = _hardware(doc, spec.get("resourceProfile"), join_pointer(pointer, "resourceProfile"))
    plan.image_note = IMAGE_NOTE
    return plan


def _env_map(doc: SourceDoc, env: Any, pointer: str) -> dict[str, Setting]:
    out: dict[str, Setting] = {}
    if not isinstance(env, dict):
        return out
    for key, value in env.items():
        ptr = join_pointer(pointer, key)
        out[key] = Setting(key=key, raw_key=key, value=None if value is None else str(value), raw=value,
                           prov=Provenance.at(doc, ptr), templated=ptr in doc.templated,
                           site=Site("mapping", doc, ptr))
    return out


def _model_from_url(doc: SourceDoc, url: str, pointer: str) -> Setting:
    """``hf://org/name`` names a Hugging Face repository; other schemes (s3://, pvc://,
    ollama://) name storage the file does not show."""
    scheme, sep, rest = url.partition("://")
    value = rest if sep and scheme == "hf" else url
    return Setting(key="model", raw_key="url", value=value, raw=url, prov=Provenance.at(doc, pointer),
                   templated=bool(sep and scheme != "hf") or pointer in doc.templated,
                   site=Site("mapping", doc, pointer))


def _hardware(doc: SourceDoc, profile: Any, pointer: str) -> dict[str, Setting]:
    if not isinstance(profile, str):
        return {}
    m = _PROFILE.match(profile.strip())
    if m is None:
        return {}
    prov = Provenance.at(doc, pointer)
    site = Site("mapping", doc, pointer)
    card = PROFILES.get(m["name"].lower(), m["card"])
    assumed = ASSUMED.get(m["name"].lower())
    out = {"gpu_product": Setting(key="gpu_product", raw_key="resourceProfile", value=card,
                                  raw=f"{profile} ({assumed})" if assumed else profile, prov=prov, site=site)}
    if m["count"]:
        out["gpu_count"] = Setting(key="gpu_count", raw_key="resourceProfile", value=m["count"], raw=profile,
                                   prov=prov, site=site)
    return out
