"""TensorRT-LLM: engine ``config.json`` (written by ``trtllm-build``) and LLM-API / ``trtllm-serve``
YAML (``--extra_llm_api_options`` / ``--config``).

Shapes from shared/research/trtllm-ortgenai-facts.md §1 (engine: ``version`` /
``pretrained_config`` / ``build_config``) and §3 (LLM-API keys = ``LlmArgs`` fields).
"""

from __future__ import annotations

from typing import Any

from sits_doctor.frameworks.trtllm import LLMAPI_KEYS
from sits_doctor.loaders.flatten import flatten
from sits_doctor.plan import Plan, Provenance, Setting
from sits_doctor.source import SourceDoc

def is_engine_config(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("pretrained_config"), dict) and isinstance(data.get("build_config"), dict)


def is_llmapi_yaml(data: Any) -> bool:
    if not isinstance(data, dict) or not data:
        return False
    if any("-" in str(k) for k in data):  # vLLM spelling; LlmArgs fields are snake_case
        return False
    return bool(LLMAPI_KEYS & {str(k) for k in data})


def plan_from_engine(doc: SourceDoc) -> Plan:
    """An engine's config.json: its build settings, and the model's shape in ``pretrained_config``."""
    from sits_doctor.frameworks.transformers import TRTLLM_PRETRAINED
    from sits_doctor.plan import ModelFacts

    settings = flatten(doc, doc.data)
    pretrained = doc.data.get(TRTLLM_PRETRAINED.strip("/")) if isinstance(doc.data, dict) else None
    model = ModelFacts(doc.path, doc.data, TRTLLM_PRETRAINED, doc) if isinstance(pretrained, dict) else None
    return Plan(
        model=model,
        framework="trtllm",
        kind="trtllm-engine",
        label=f"TensorRT-LLM engine {doc.path}",
        file=doc.path,
        anchor=Provenance.at(doc, "/build_config", key=False),
        settings=settings,
        doc=doc,
    )


def plan_from_llmapi(doc: SourceDoc) -> Plan:
    settings = flatten(doc, doc.data)
    model_ref: Setting | None = settings.get("model")
    return Plan(
        framework="trtllm",
        kind="trtllm-llmapi",
        label=f"TensorRT-LLM LLM-API options {doc.path}",
        file=doc.path,
        anchor=Provenance.at(doc, "", key=False),
        settings=settings,
        model_ref=model_ref,
        doc=doc,
    )
