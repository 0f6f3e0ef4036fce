"""What transformers runs for a model, read off its module tree.

- ``check --runtime`` (:func:`introspect`): a Hugging Face model config is built with the
  installed transformers on PyTorch's meta device (no weights are made, nothing is downloaded,
  code from a model repository is never run).
- ``sits_doctor.check_model`` (:func:`live`): a model already built and loaded in this process.

Both read the same things off the built model (:func:`read_built`): the attention implementation
set on ``model.config._attn_implementation``, whether the class has an SDPA path, where rotary
embeddings are computed (one module for the model, or one in every decoder layer), the cache
``generate()`` builds (``generation_config.cache_implementation``), the quantization integration
(``model.hf_quantizer``, else the one ``quantization_config.quant_method`` names) and the dtype
the weights are in.

Imports torch and transformers: only ever called for ``--runtime`` and ``check_model``.
"""

from __future__ import annotations

import warnings

from sits_doctor.facts import LIVE_HOW, Runtime, Value
from sits_doctor.frameworks import transformers as tf

MAX_LAYERS = 4  # decoder layers built: enough for every layer kind (dense, MoE, sliding) to appear
GENERATION = tf.GENERATION_CACHE_KEY.partition(".")[0]  # the model attribute holding its GenerationConfig


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
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    version = transformers.__version__
    data = dict(model.data)
    how = f"built with transformers {version} on the meta device"
    model_type = data.pop("model_type", None)
    remote = data.pop(tf.CUSTOM_CODE_KEY, None) is not None
    if remote and not _native(model_type):
        return Runtime(how=f"not built: the config names code from the model repository ({tf.CUSTOM_CODE_KEY}), "
                           "which sits-doctor never runs", custom_code=True)
    transformers.logging.set_verbosity_error()
    if not isinstance(model_type, str):
        return Runtime(how="not built: the config has no model_type")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = AutoConfig.for_model(model_type, **data)
        n_layers = _shrink(config)
        auto = AutoModelForCausalLM if type(config) in AutoModelForCausalLM._model_mapping else AutoModel
        with torch.device("meta"):
            built = auto.from_config(config)
    src = f"{type(built).__name__} {how}"
    cache = None
    if model.generation is not None and model.generation.data.get("cache_implementation"):
        cache = Value.default(model.generation.data["cache_implementation"], f"generation_config.json; {src}")
    runtime = read_built(built, src, layers=n_layers, quant=data.get("quantization_config"), cache=cache)
    return runtime._replace(how=how, dtype=_load_dtype(built, version, src), native_over_remote=remote)


def live(model) -> Runtime:
    """The :class:`Runtime` of a model already built in this process (a ``PreTrainedModel``):
    what it runs now, not what its config asked for."""
    import transformers

    version = transformers.__version__
    src = f"live model {type(model).__name__} (transformers {version})"
    text = model.config.get_text_config()
    layers = getattr(text, "num_hidden_layers", None)
    quant = getattr(model.config, "quantization_config", None)
    if quant is not None and not isinstance(quant, dict):
        quant = quant.to_dict() if hasattr(quant, "to_dict") else None
    runtime = read_built(model, src, layers=layers if isinstance(layers, int) else -1, quant=quant)
    device = getattr(model, "device", None)
    return runtime._replace(
        how=f"{LIVE_HOW}, transformers {version}",
        dtype=Value.default(_dtype_name(model.dtype), f"{src}: the dtype of its parameters"),
        device=None if device is None else Value.default(str(device), f"{src}: where its parameters are"),
    )


def read_built(built, src: str, *, layers: int, quant=None, cache: Value | None = None) -> Runtime:
    """What a built module tree runs (shared by :func:`introspect` and :func:`live`): ``layers``
    is the number of decoder layers it has (a ModuleList of that length holds them); ``quant`` the
    config's quantization_config; ``cache`` a cache_implementation to take instead of the model's
    generation_config's. Every value's provenance is ``src``."""
    from torch import nn

    modules = dict(built.named_modules())
    prefixes = tuple(f"{name}.{i}." for name, mod in modules.items()
                     if isinstance(mod, nn.ModuleList) and len(mod) == layers for i in range(layers))
    rotary = [name for name, mod in modules.items() if "rotary" in type(mod).__name__.lower()]
    placement = "none" if not rotary else "attention" if any(p.startswith(prefixes) for p in rotary) else "model"
    shown = tuple(sorted({next((pre.rsplit(".", 2)[0] + ".*." + p[len(pre):] for pre in prefixes if p.startswith(pre)), p)
                          for p in rotary}))
    if cache is None:
        generation = getattr(built, GENERATION, None)
        asked = getattr(generation, "cache_implementation", None)
        cache = Value.default(asked or tf.DEFAULT_CACHE,
                              f"generation_config.cache_implementation; {src}" if asked else f"generate() default; {src}")
    quantizer = getattr(built, "hf_quantizer", None)
    return Runtime(
        attention=Value.default(built.config._attn_implementation, src),
        supports_sdpa=Value.default(bool(getattr(built, "_supports_sdpa", False)), src),
        rope=Value.default(placement, src),
        rotary_modules=shown,
        cache=cache,
        quantizer=(Value.default(type(quantizer).__name__, src) if quantizer is not None
                   else _quantizer(quant, src)),
        model_class=type(built).__name__,
        how=src,
    )


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _load_dtype(built, version: str, src: str) -> Value:
    """The dtype ``from_pretrained`` loads the weights in when none is asked for: the config's
    (transformers 5: dtype="auto", which is also what ``from_config`` built on the meta device),
    float32 in transformers 4 (``torch_dtype`` defaults to float32 there)."""
    from sits_doctor.frameworks.transformers_attention import DTYPE_AUTO_DEFAULT
    from sits_doctor.versions import V

    if V(version) >= V(DTYPE_AUTO_DEFAULT):
        return Value.default(_dtype_name(built.dtype), f"{src}: from_pretrained's default dtype='auto' "
                                                       "(the config's dtype, else float32)")
    return Value.default("float32", f"from_pretrained's default in transformers {version} (float32 unless "
                                    "torch_dtype is given)")


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


def _native(model_type) -> bool:
    """Whether the installed transformers has its own config class for ``model_type``."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return isinstance(model_type, str) and model_type in CONFIG_MAPPING


def _quantizer(quant, src: str) -> Value | None:
    """The HfQuantizer class transformers picks for a quantization_config: the key
    AutoQuantizationConfig.from_dict derives (``load_in_4bit`` / ``load_in_8bit`` make it
    ``bitsandbytes_4bit`` / ``_8bit`` whatever quant_method says; src/transformers/quantizers/
    auto.py@5.25.0), looked up in the installed AUTO_QUANTIZER_MAPPING."""
    if not isinstance(quant, dict):
        return None
    from transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING

    key = quant.get("quant_method")
    if quant.get("load_in_8bit") or quant.get("load_in_4bit"):
        key = "bitsandbytes_4bit" if quant.get("load_in_4bit") else "bitsandbytes_8bit"
    elif not isinstance(key, str):
        return Value.default("none: the quantization_config has no quant_method (from_pretrained raises ValueError)", src)
    cls = AUTO_QUANTIZER_MAPPING.get(key)
    name = cls.__name__ if cls is not None else f"none: transformers has no quantizer for {key!r}"
    return Value.default(name, src)