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
    meta = doc.data.get("metadata")
    name = meta.get("name", "?") if isinstance(meta, dict) else "?"
    out: list[Plan] = []
    for key, text in _texts(doc.data):
        if not _mentions_llmapi(text):
            continue
        where = f"ConfigMap/{name} data.{key}"
        for inner in _embedded(doc, join_pointer("/data", key), where):
            if trtllm.is_disagg_yaml(inner.data):
                from sits_doctor.loaders import trtllm_disagg

                out += [p.copy(label=p.label.replace(doc.path, f"{doc.path} {where}", 1))
                        for p in trtllm_disagg.plans(inner)]
            elif trtllm.is_llmapi_yaml(inner.data):
                plan = trtllm.plan_from_llmapi(inner)
                out.append(plan.copy(label=f"TensorRT-LLM LLM-API options {doc.path} {where}"))
    return out


def _embedded(doc: SourceDoc, pointer: str, where: str) -> list[SourceDoc]:
    """The documents of the string at ``pointer``; invalid YAML is an input error at the line of
    the manifest it is on (a literal ``|`` block's line ``n`` is the ``n``-th line after the
    indicator, indented by the block's indentation)."""
    from sits_doctor.errors import InputError
    from sits_doctor.source_yaml import parse_embedded

    try:
        return parse_embedded(doc, pointer)
    except InputError as err:
        pos = doc.pos(pointer)
        line, col = pos.line, pos.col
        if pos.style == "|" and err.line is not None:
            first = doc.text.split("\n")[pos.line] if pos.line < doc.text.count("\n") + 1 else ""
            indent = len(first) - len(first.lstrip(" "))
            line, col = pos.line + err.line, indent + (err.col or 1)
        raise InputError(doc.path, f"{err.message} (in the LLM-API options of {where})", line, col) from None
