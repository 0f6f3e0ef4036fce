"""``check --runtime`` for Hugging Face model configs: build the architecture with the installed
transformers on PyTorch's meta device (no weights are made, nothing is downloaded, code from a
model repository is never run) and read off what it would run: the attention implementation
``from_config`` settles on, where rotary embeddings are computed, the cache ``generate()`` builds,
and the quantization integration ``from_pretrained`` would use.

Imports torch and transformers: only ever called when ``--runtime`` is asked for.
"""

from __future__ import annotations

import warnings

from sits_doctor.facts import Runtime, Value
from sits_doctor.frameworks import transformers as tf

MAX_LAYERS = 4  # decoder layers built: enough for every layer kind (dense, MoE, sliding) to appear


def available() -> str | None:
    """The installed transformers version, or None when transformers or torch is missing."""
    from importlib import metadata
    from importlib.util import find_spec

    if find_spec("torch") is None or find_spec("transformers") is None:
        return None
    return metadata.version("transformers")


def introspect(model) -> Runtime:
    """The :class:`Runtime` of a model config (a :class:`~sits_doctor.plan.ModelFacts`)."""
    import torch
    import transformers
    from torch import nn
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    version = transformers.__version__
    data = dict(model.data)
    how = f"built with transformers {version} on the meta device"
    if tf.CUSTOM_CODE_KEY in data:
        return Runtime(how=f"not built: the config names code from the model repository ({tf.CUSTOM_CODE_KEY}), "
                           "which sits-doctor never runs", custom_code=True)
    transformers.logging.set_verbosity_error()
    model_type = data.pop("model_type", None)
    if not isinstance(model_type, str):
        return Runtime(how="not built: the config has no model_type")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = AutoConfig.for_model(model_type, **data)
        n_layers = _shrink(config)
        auto = AutoModelForCausalLM if type(config) in AutoModelForCausalLM._model_mapping else AutoModel
        with torch.device("meta"):
            built = auto.from_config(config)
    modules = dict(built.named_modules())
    prefixes = tuple(f"{name}.{i}." for name, mod in modules.items()
                     if isinstance(mod, nn.ModuleList) and len(mod) == n_layers for i in range(n_layers))
    rotary = [name for name, mod in modules.items() if "rotary" in type(mod).__name__.lower()]
    placement = "none" if not rotary else "attention" if any(p.startswith(prefixes) for p in rotary) else "model"
    shown = tuple(sorted({next((pre.rsplit(".", 2)[0] + ".*." + p[len(pre):] for pre in prefixes if p.startswith(pre)), p)
                          for p in rotary}))
    gen_cache = getattr(built.generation_config, "cache_implementation", None)
    if model.generation is not None and model.generation.data.get("cache_implementation"):
        gen_cache = model.generation.data["cache_implementation"]
    src = f"{type(built).__name__} {how}"
    return Runtime(
        attention=Value.default(built.config._attn_implementation, src),
        supports_sdpa=Value.default(bool(getattr(built, "_supports_sdpa", False)), src),
        rope=Value.default(placement, src),
        rotary_modules=shown,
        cache=Value.default(gen_cache or tf.DEFAULT_CACHE, src),
        quantizer=_quantizer(data.get("quantization_config"), src),
        model_class=type(built).__name__,
        how=how,
    )


def _shrink(config) -> int:
    """At most MAX_LAYERS decoder layers (per-layer lists cut to match); the number built."""
    text = config.get_text_config()
    n = getattr(text, "num_hidden_layers", None)
    if not isinstance(n, int):
        return -1
    if n > MAX_LAYERS:
        for name, value in list(vars(text).items()):
            if isinstance(value, list) and len(value) == n:
                setattr(text, name, value[:MAX_LAYERS])
        text.num_hidden_layers = n = MAX_LAYERS
    return n


def _quantizer(quant, src: str) -> Value | None:
    """The HfQuantizer class transformers picks for ``quantization_config.quant_method``."""
    if not isinstance(quant, dict) or not isinstance(quant.get("quant_method"), str):
        return None
    from transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING

    cls = AUTO_QUANTIZER_MAPPING.get(quant["quant_method"])
    name = cls.__name__ if cls is not None else f"none: transformers has no quantizer for {quant['quant_method']!r}"
    return Value.default(name, src)
