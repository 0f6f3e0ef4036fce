"""Hugging Face model configs: ``config.json`` with ``generation_config.json``,
``hf_quant_config.json`` (ModelOpt) and ``quantize_config.json`` (AutoGPTQ) beside it.

Handles multimodal configs (the text config under ``text_config``/``decoder``/``generator``/
``text_encoder``, as transformers' ``get_text_config()`` does, shared/research/vllm-hf-facts.md §10)
and both v4 and v5 field names (``torch_dtype``/``dtype``, ``rope_scaling``+``rope_theta``/
``rope_parameters``, §8).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sits_doctor.loaders.flatten import flatten
from sits_doctor.plan import ModelFacts, Plan, Provenance
from sits_doctor.source import SourceDoc

TEXT_CONFIG_KEYS = ("text_config", "decoder", "generator", "text_encoder")
_MODEL_KEYS = frozenset(
    """num_hidden_layers hidden_size max_position_embeddings num_attention_heads vocab_size
    n_positions n_layer n_embd text_config intermediate_size""".split()
)
_GENERATION_KEYS = frozenset(
    """max_new_tokens max_length do_sample temperature top_p top_k num_beams repetition_penalty
    eos_token_id bos_token_id pad_token_id min_new_tokens cache_implementation""".split()
)
SIDECARS = ("generation_config.json", "hf_quant_config.json", "quantize_config.json")  # AUTOGPTQ_NAME last


# Keys of other tools' model configs that look like transformers' (MLC LLM's mlc-chat-config.json).
_FOREIGN_KEYS = frozenset({"conv_template", "tokenizer_files", "model_config", "context_window_size"})


def is_model_config(data: Any) -> bool:
    if not isinstance(data, dict) or _FOREIGN_KEYS & data.keys():
        return False
    has_identity = "architectures" in data or "model_type" in data
    return has_identity and (bool(_MODEL_KEYS & data.keys()) or _known_model_type(data.get("model_type")))


def _known_model_type(kind: Any) -> bool:
    """A model_type transformers has a config class for: ``{"model_type": "llama"}`` alone loads
    with LlamaConfig's defaults (AutoConfig.for_model), so it is a model config."""
    if not isinstance(kind, str):
        return False
    from sits_doctor.frameworks.transformers import known_model_types

    return kind in known_model_types()


def is_generation_config(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and "architectures" not in data
        and bool(_GENERATION_KEYS & data.keys())
        and ("transformers_version" in data or "_from_model_config" in data or "max_new_tokens" in data or "do_sample" in data)
    )


def is_quant_config(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("quantization"), dict) and isinstance(data.get("producer"), dict)


AUTOGPTQ_NAME = "quantize_config.json"


def is_autogptq_config(data: Any) -> bool:
    """AutoGPTQ's quantize_config.json: its bit width and group size (optimum / auto_gptq
    BaseQuantizeConfig.save_pretrained)."""
    return isinstance(data, dict) and isinstance(data.get("bits"), int) and "group_size" in data


def text_pointer(data: dict) -> str:
    """Where transformers' ``get_text_config()`` would look, as a JSON Pointer ("" = top level)."""
    for key in TEXT_CONFIG_KEYS:
        sub = data.get(key)
        if isinstance(sub, dict) and ("num_hidden_layers" in sub or "hidden_size" in sub or "max_position_embeddings" in sub):
            return f"/{key}"
    return ""


def model_facts(doc: SourceDoc, sidecars: dict[str, SourceDoc] | None = None) -> ModelFacts:
    sidecars = sidecars or {}
    return ModelFacts(
        path=doc.path,
        data=doc.data,
        text_pointer=text_pointer(doc.data),
        doc=doc,
        generation=sidecars.get("generation_config.json"),
        quant=sidecars.get("hf_quant_config.json"),
        stored_weights=stored_weights(doc.path),
        autogptq=sidecars.get("quantize_config.json"),
    )


WEIGHTS_INDEX = "model.safetensors.index.json"
WEIGHTS_INDEX_LIMIT = 16 * 1024 * 1024  # an index lists every tensor; larger files are not read


def stored_weights(config_path: str) -> tuple[int, str] | None:
    """The checkpoint's size in bytes as its ``model.safetensors.index.json`` states it
    (``metadata.total_size``, written by huggingface_hub / transformers' save_pretrained), when
    that file sits beside the config; None otherwise (a missing, oversized or broken index is
    not an error: the size is then computed from the shape)."""
    import json
    from pathlib import Path

    from sits_doctor.errors import InputError
    from sits_doctor.source import read_input

    index = Path(config_path).with_name(WEIGHTS_INDEX)
    try:
        if not index.is_file():
            return None
        raw = read_input(index, str(index), what="a weights index", limit=WEIGHTS_INDEX_LIMIT)
        total = json.loads(raw.decode("utf-8")).get("metadata", {}).get("total_size")
    except (InputError, ValueError, AttributeError, RecursionError):
        return None
    if isinstance(total, int) and not isinstance(total, bool) and total > 0:
        return total, str(index)
    return None


def plan_from_config(doc: SourceDoc, sidecars: dict[str, SourceDoc] | None = None) -> Plan:
    facts = model_facts(doc, sidecars)
    settings = flatten(doc, doc.data)
    for name, side in (sidecars or {}).items():
        prefix = name.removesuffix(".json")
        settings.update(flatten(side, side.data, prefix=prefix))
    return Plan(
        framework="hf",
        kind="hf-config",
        label=f"model config {doc.path}",
        file=doc.path,
        anchor=Provenance.at(doc, "", key=False),
        settings=settings,
        model=facts,
        doc=doc,
    )


def plan_from_sidecar(doc: SourceDoc, kind: str) -> Plan:
    """A generation or quant config found without a ``config.json`` beside it."""
    prefix = Path(doc.path).name.removesuffix(".json")
    return Plan(
        framework="hf",
        kind=kind,
        label=f"{kind} {doc.path}",
        file=doc.path,
        anchor=Provenance.at(doc, "", key=False),
        settings=flatten(doc, doc.data, prefix=prefix),
        doc=doc,
    )
