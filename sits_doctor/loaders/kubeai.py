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

from sits_doctor.loaders.commands import words
from sits_doctor.loaders.vllm import plan_from_command
from sits_doctor.plan import Plan, Provenance, Setting, Site
from sits_doctor.source import SourceDoc, join_pointer

API_GROUP = "kubeai.org/"
VLLM_ENGINE = "VLLM"
ENTRY = "KubeAI: python3 -m vllm.entrypoints.openai.api_server"
# Default resource profile names: "<vendor>-gpu-<card>" (nvidia-gpu-l4, nvidia-gpu-h100,
# nvidia-gpu-a100-80gb, amd-gpu-mi300x); a profile of another name says nothing about the card.
_PROFILE = re.compile(r"^(?:nvidia|amd)-gpu-(?P<card>[A-Za-z0-9-]+?)(?::(?P<count>\d+))?$")


def is_kubeai_model(data: Any) -> bool:
    return (isinstance(data, dict) and str(data.get("apiVersion", "")).startswith(API_GROUP)
            and data.get("kind") == "Model" and isinstance(data.get("spec"), dict))


def plans(doc: SourceDoc) -> list[Plan]:
    """The vLLM Plan of a Model whose engine is VLLM (other engines: none)."""
    spec = doc.data["spec"]
    if str(spec.get("engine", "")).upper() != VLLM_ENGINE:
        return []
    name = (doc.data.get("metadata") or {}).get("name", "?") if isinstance(doc.data.get("metadata"), dict) else "?"
    args = spec.get("args") if isinstance(spec.get("args"), list) else []
    tokens = words(doc, [("/spec/args", args)])
    env = _env_map(doc, spec.get("env"), "/spec/env")
    plan = plan_from_command(doc, tokens, label=f"Model/{name}", anchor=Provenance.at(doc, "/spec"),
                             env=env, engine_args=ENTRY)
    if plan is None:  # pragma: no cover - engine_args always gives a plan
        return []
    if plan.model_ref is None and isinstance(spec.get("url"), str):
        plan.model_ref = _model_from_url(doc, spec["url"])
    plan.hardware = _hardware(doc, spec.get("resourceProfile"))
    return [plan]


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


def _model_from_url(doc: SourceDoc, url: str) -> Setting:
    """``hf://org/name`` names a Hugging Face repository; other schemes (s3://, pvc://,
    ollama://) name storage the file does not show."""
    scheme, sep, rest = url.partition("://")
    value = rest if sep and scheme == "hf" else url
    return Setting(key="model", raw_key="url", value=value, raw=url, prov=Provenance.at(doc, "/spec/url"),
                   templated=bool(sep and scheme != "hf") or "/spec/url" in doc.templated,
                   site=Site("mapping", doc, "/spec/url"))


def _hardware(doc: SourceDoc, profile: Any) -> dict[str, Setting]:
    if not isinstance(profile, str):
        return {}
    m = _PROFILE.match(profile.strip())
    if m is None:
        return {}
    prov = Provenance.at(doc, "/spec/resourceProfile")
    site = Site("mapping", doc, "/spec/resourceProfile")
    out = {"gpu_product": Setting(key="gpu_product", raw_key="resourceProfile", value=m["card"], raw=profile,
                                  prov=prov, site=site)}
    if m["count"]:
        out["gpu_count"] = Setting(key="gpu_count", raw_key="resourceProfile", value=m["count"], raw=profile,
                                   prov=prov, site=site)
    return out
