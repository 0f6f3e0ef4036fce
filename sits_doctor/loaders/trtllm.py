"""TensorRT-LLM: engine ``config.json`` (written by ``trtllm-build``) and LLM-API / ``trtllm-serve``
YAML (``--extra_llm_api_options`` / ``--config``).

Shapes from shared/research/trtllm-ortgenai-facts.md §1 (engine: ``version`` /
``pretrained_config`` / ``build_config``) and §3 (LLM-API keys = ``LlmArgs`` fields). Engines
built before 0.8 (each model's ``examples/<model>/build.py``) have another layout: the top-level
``builder_config`` (every keyword the build script gave ``Builder.create_builder_config``: name,
precision, tensor_parallel, num_layers, num_heads, num_kv_heads, hidden_size, vocab_size,
max_position_embeddings, max_batch_size, max_input_len, max_output_len, ...) and
``plugin_config`` — ``BuilderConfig.to_dict()`` in ``tensorrt_llm/builder.py``, written by
``Builder.save_config``; the C++ runtime reads it when the file has no ``version``
(``cpp/tensorrt_llm/runtime/gptJsonConfig.cpp``: ``builder_config`` name/precision/
tensor_parallel/num_heads/hidden_size/vocab_size/num_layers required, ``plugin_config``
paged_kv_cache/tokens_per_block/gpt_attention_plugin/remove_input_padding required).
"""

from __future__ import annotations

from typing import Any

from sits_doctor.frameworks.trtllm import LLMAPI_KEYS
from sits_doctor.loaders.flatten import flatten
from sits_doctor.plan import Plan, Provenance, Setting
from sits_doctor.source import SourceDoc

LEGACY_BUILDER = "builder_config"  # pre-0.8 engine config.json: the build's keywords
LEGACY_PLUGINS = "plugin_config"
# keys of builder_config the pre-0.8 runtime requires (gptJsonConfig.cpp); two of them mark the file as ours
_LEGACY_MARKS = ("precision", "tensor_parallel", "num_layers", "num_heads", "hidden_size", "vocab_size")
# model facts builder_config states under other names: (the config.json name, builder_config's)
_LEGACY_RENAMED = {"intermediate_size": "mlp_hidden_size", "dtype": "precision"}


def is_engine_config(data: Any) -> bool:
    """An engine's config.json, in the layout of 0.8+ (``pretrained_config``/``build_config``) or of
    the releases before (:func:`is_legacy_engine_config`)."""
    return (isinstance(data, dict) and isinstance(data.get("pretrained_config"), dict)
            and isinstance(data.get("build_config"), dict)) or is_legacy_engine_config(data)


def is_legacy_engine_config(data: Any) -> bool:
    """A pre-0.8 engine config.json: ``builder_config`` and ``plugin_config`` mappings at the top,
    no ``pretrained_config``, and ``builder_config`` holding at least two of the keys the runtime
    requires (other tools also name a mapping ``builder_config``)."""
    if not isinstance(data, dict) or "pretrained_config" in data:
        return False
    builder, plugins = data.get(LEGACY_BUILDER), data.get(LEGACY_PLUGINS)
    if not isinstance(builder, dict) or not isinstance(plugins, dict):
        return False
    return sum(k in builder for k in _LEGACY_MARKS) >= 2


def is_disagg_yaml(data: Any) -> bool:
    """A ``trtllm-serve disaggregated -c`` config (its ``context_servers``/``generation_servers``
    sections hold the workers' LLM-API options): read by :mod:`sits_doctor.loaders.trtllm_disagg`."""
    from sits_doctor.frameworks.trtllm_disagg import is_disagg_config

    return is_disagg_config(data)


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

    if is_legacy_engine_config(doc.data):
        return plan_from_legacy_engine(doc)
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


def plan_from_legacy_engine(doc: SourceDoc) -> Plan:
    """A pre-0.8 engine's config.json: its settings as written (``builder_config.max_batch_size``,
    ``plugin_config.paged_kv_cache``, ...) and the model's shape from ``builder_config``, whose
    ``num_layers``/``num_heads``/``num_kv_heads``/``hidden_size``/``vocab_size``/
    ``max_position_embeddings`` are the whole model's (the runtime divides heads and hidden size
    by ``tensor_parallel``), ``mlp_hidden_size`` (the MLP's width) and ``precision`` (the dtype).
    A ``multi_query_mode: true`` build (0.5's GPT/Falcon scripts) without
    ``num_kv_heads`` has one KV head."""
    from sits_doctor.plan import ModelFacts

    settings = flatten(doc, doc.data)
    builder = doc.data[LEGACY_BUILDER]
    overrides: dict[str, Setting] = {}
    mqa = settings.get(f"{LEGACY_BUILDER}.multi_query_mode")
    if mqa is not None and mqa.value is True and builder.get("num_kv_heads") is None:
        overrides["num_key_value_heads"] = mqa.with_(
            key="num_key_value_heads", value=1,
            prov=Provenance.derived(f"builder_config.multi_query_mode: true ({mqa.prov}): one KV head"), site=None)
    for key, written in _LEGACY_RENAMED.items():  # builder_config's names for what model_dims reads
        found = settings.get(f"{LEGACY_BUILDER}.{written}")
        if found is not None and key not in builder:
            overrides[key] = found.with_(key=key)
    model = ModelFacts(doc.path, doc.data, "/" + LEGACY_BUILDER, doc, overrides=overrides)
    return Plan(
        model=model,
        framework="trtllm",
        kind="trtllm-engine",
        label=f"TensorRT-LLM engine (pre-0.8 layout) {doc.path}",
        file=doc.path,
        anchor=Provenance.at(doc, "/" + LEGACY_BUILDER, key=False),
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
