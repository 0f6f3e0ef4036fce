"""Kubernetes ConfigMaps that hold a TensorRT-LLM LLM-API options file as a string: the
``--extra-engine-args`` / ``--extra_llm_api_options`` YAML that ai-dynamo/dynamo recipes
(``recipes/*/trtllm/**/deploy.yaml``: ``data: {config.yaml: |, prefill_config.yaml: |}``) mount
into the worker. Each such string is read as an LLM-API file (or a disaggregated serving config)
at its own positions in the manifest (sits_doctor.source_yaml.parse_embedded), so findings point
at the manifest's lines and fixes edit it.
"""

from __future__ import annotations

from typing import Any

from sits_doctor.frameworks.trtllm import LLMAPI_KEYS
from sits_doctor.loaders import trtllm
from sits_doctor.plan import Plan
from sits_doctor.source import SourceDoc, join_pointer


def _texts(data: Any) -> list[tuple[str, str]]:
    cm = data.get("data") if isinstance(data, dict) and data.get("kind") == "ConfigMap" else None
    if not isinstance(cm, dict):
        return []
    return [(k, v) for k, v in cm.items() if isinstance(k, str) and isinstance(v, str)]


def _mentions_llmapi(text: str) -> bool:
    """A cheap look before parsing: a line that starts with an LLM-API-only key."""
    starts = {line.split(":", 1)[0].strip() for line in text.splitlines() if ":" in line and not line.startswith(" ")}
    return bool(starts & LLMAPI_KEYS) or "context_servers:" in text or "generation_servers:" in text


def is_llmapi_configmap(data: Any) -> bool:
    return any(_mentions_llmapi(text) for _, text in _texts(data))


def plans(doc: SourceDoc) -> list[Plan]:
    from sits_doctor.source_yaml import parse_embedded

    meta = doc.data.get("metadata")
    name = meta.get("name", "?") if isinstance(meta, dict) else "?"
    out: list[Plan] = []
    for key, text in _texts(doc.data):
        if not _mentions_llmapi(text):
            continue
        where = f"ConfigMap/{name} data.{key}"
        for inner in parse_embedded(doc, join_pointer("/data", key)):
            if trtllm.is_disagg_yaml(inner.data):
                from sits_doctor.loaders import trtllm_disagg

                out += [p.copy(label=p.label.replace(doc.path, f"{doc.path} {where}", 1))
                        for p in trtllm_disagg.plans(inner)]
            elif trtllm.is_llmapi_yaml(inner.data):
                plan = trtllm.plan_from_llmapi(inner)
                out.append(plan.copy(label=f"TensorRT-LLM LLM-API options {doc.path} {where}"))
    return out
