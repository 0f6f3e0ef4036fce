"""ONNX Runtime GenAI ``genai_config.json`` (shape: shared/research/trtllm-ortgenai-facts.md §5)."""

from __future__ import annotations

from typing import Any

from sits_doctor.loaders.flatten import flatten
from sits_doctor.plan import Plan, Provenance
from sits_doctor.source import SourceDoc


def is_genai_config(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    model = data.get("model")
    if not isinstance(model, dict):
        return False
    return "decoder" in model or "context_length" in model or isinstance(data.get("search"), dict)


def plan_from_config(doc: SourceDoc) -> Plan:
    return Plan(
        framework="ortgenai",
        kind="ortgenai-config",
        label=f"ORT GenAI config {doc.path}",
        file=doc.path,
        anchor=Provenance.at(doc, "", key=False),
        settings=flatten(doc, doc.data),
        doc=doc,
    )
