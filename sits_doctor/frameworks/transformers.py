"""What transformers accepts, by version: the one home of its config names that rules judge.

``cache_implementation`` values are read in the released wheels 4.45.2, 4.50.0, 4.53.0, 4.56.0,
5.0.0, 5.10.4 and 5.24.0 (``generation/configuration_utils.py``: ``ALL_CACHE_IMPLEMENTATIONS``
and ``"paged"`` from 5.0; ``validate()`` runs in ``GenerationConfig.__init__``).
"""

from __future__ import annotations

from functools import lru_cache



def _newest() -> str:
    return runtime_table()["transformers"]  # the release tools/gen_hf_runtime.py built every model type with


def __getattr__(name: str):
    """``NEWEST``: the newest release this module's knowledge covers, read off its data when first
    asked (not at import: every run imports this module, few need it)."""
    if name == "NEWEST":
        return _newest()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_CACHE_BASE = {"static", "offloaded_static", "sliding_window", "hybrid", "mamba", "quantized"}
STATIC_CACHE_ALIASES = frozenset(
    {"sliding_window", "hybrid", "hybrid_chunked", "offloaded_hybrid", "offloaded_hybrid_chunked"}
)
CACHE_IMPLEMENTATIONS = (
    ("4.45.2", frozenset(_CACHE_BASE)),
    ("4.50.0", frozenset(_CACHE_BASE | {"offloaded", "dynamic"})),
    ("4.53.0", frozenset(_CACHE_BASE | {"offloaded", "dynamic", "hybrid_chunked", "offloaded_hybrid",
                                         "offloaded_hybrid_chunked"})),
    ("4.56.0", frozenset({"static", "offloaded_static", "dynamic", "dynamic_full", "offloaded", "quantized"}
                         | STATIC_CACHE_ALIASES)),
    ("5.0.0", frozenset({"static", "offloaded_static", "dynamic", "dynamic_full", "offloaded", "quantized",
                         "paged"} | STATIC_CACHE_ALIASES)),
    ("5.10.4", frozenset({"static", "offloaded_static", "dynamic", "dynamic_full", "offloaded", "quantized",
                          "paged"} | STATIC_CACHE_ALIASES)),
    ("5.24.0", frozenset({"static", "offloaded_static", "dynamic", "offloaded", "quantized", "paged"}
                         | STATIC_CACHE_ALIASES)),
)
GENERATION_CACHE_KEY = "generation_config.cache_implementation"
GENERATION_MAX_LENGTH = "generation_config.max_length"
GENERATION_MAX_NEW_TOKENS = "generation_config.max_new_tokens"  # wins over max_length in generate()
STATIC_CACHES = ("static", "offloaded_static", "sliding_window", "hybrid")  # preallocated (the latter two: aliases)


def cache_implementations(version: str) -> frozenset[str] | None:
    """Values accepted at ``version``: sure only when the sampled releases around it agree.

    Between two sampled releases a value counts as accepted if either accepts it (we do not know
    where in between it changed); before the first sampled release nothing is judged.
    """
    from sits_doctor.versions import V

    ver = V(version)
    below = [(V(v), values) for v, values in CACHE_IMPLEMENTATIONS if V(v) <= ver]
    above = [values for v, values in CACHE_IMPLEMENTATIONS if V(v) > ver]
    if not below:
        return None
    sampled, values = below[-1]
    return values if sampled == ver or not above else values | above[0]


# --- model dimensions from config.json --------------------------------------------------------
# Alias lists follow transformers' per-architecture attribute maps and vLLM's
# transformers_utils/model_arch_config_convertor.py (num_kv_heads aliases, head size rules).
ALIASES: dict[str, tuple[str, ...]] = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model", "dim"),
    "heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "kv_heads": ("num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num",
                 "num_attention_groups"),
    "intermediate": ("intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size"),
    "vocab": ("vocab_size", "padded_vocab_size"),
    "sliding_window": ("sliding_window",),
    # Llama4TextConfig: layers with RoPE attend within chunks of attention_chunk_size tokens
    # (layer_types "chunked_attention", src/transformers/models/llama4/configuration_llama4.py@5.25.0)
    "attention_chunk": ("attention_chunk_size",),
    "layer_types": ("layer_types",),
    "experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
    "experts_per_token": ("num_experts_per_tok", "moe_topk", "num_experts_per_token"),
    "shared_experts": ("n_shared_experts", "num_shared_experts"),
    "kv_lora_rank": ("kv_lora_rank",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "q_lora_rank": ("q_lora_rank",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "moe_intermediate": ("moe_intermediate_size",),
    "shared_intermediate": ("shared_expert_intermediate_size",),
    "first_dense_layers": ("first_k_dense_replace",),
    "rope_theta": ("rope_theta",),
}
MAX_LENGTH_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
    "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len",
)
DTYPE_KEYS = ("dtype", "torch_dtype")  # v5 name first (shared/research §8)
ROPE_KEYS = ("rope_parameters", "rope_scaling")


# Dimensions that must be positive integers when a config states them (null means "not stated").
POSITIVE_DIMS = ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab")
# The largest a model number may be before it is a typo, not a model: lists are built per layer
# (layer_types from a pattern), so a layer count is bounded far below memory (the deepest
# published decoders have a few hundred layers); every other number stays below transformers'
# own "no limit" (VERY_LARGE_INTEGER = int(1e30), the model_max_length of an unbounded
# tokenizer), where float arithmetic on it is still exact enough and cannot overflow.
MAX_LAYERS = 100_000
MAX_NUMBER = int(1e30)


def number_limit(key: str) -> int:
    """The largest value a model config's number ``key`` may hold (:data:`MAX_LAYERS`, :data:`MAX_NUMBER`)."""
    return MAX_LAYERS if key in ALIASES["layers"] else MAX_NUMBER


def usable_number(key: str, value) -> bool:
    """Whether ``value`` is a number the model facts can compute with: an int or a finite float,
    not negative, not above :func:`number_limit` (checked before any float conversion: an
    integer of 400 digits has none)."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return 0 <= value <= number_limit(key)


def invalid_facts(model) -> list[tuple[object, str]]:
    """The model facts no framework can compute with, as (Setting, why): a dimension or maximum
    length that is not a positive integer (a string, a bool, NaN, ±inf, 0, negative, 4096.5), a
    rope configuration that is not a mapping. This is the one checked conversion of model
    numbers; :func:`model_dims` leaves such values out, and the engine reports the config as
    invalid (exit 2) instead of letting a rule compute "at most -1 tokens" from it. Kept on the
    ModelFacts, as :func:`model_dims` is."""
    found = model.__dict__.get("_invalid")
    if found is None:
        found = model._invalid = _invalid_facts(model)
    return found


def _invalid_facts(model) -> list[tuple[object, str]]:
    import math

    keys = [k for name in POSITIVE_DIMS for k in ALIASES[name]] + ["head_dim", *MAX_LENGTH_KEYS]
    bad = []
    for key in dict.fromkeys(keys):
        s = model.fact(key)
        if s is None or s.value is None:
            continue
        v = s.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            bad.append((s, f"{key} is {_shown(v)}, not a number"))
        elif (isinstance(v, float) and not math.isfinite(v)) or v <= 0 or v != int(v):
            bad.append((s, f"{key} is {_shown(v)}; a dimension or length must be a positive integer"))
        elif v > number_limit(key):
            limit = "no model has that many layers (the limit is 100000)" if number_limit(key) == MAX_LAYERS \
                else "larger than any model's (the limit is 10^30)"
            bad.append((s, f"{key} is {_shown(v)}; {limit}: a typo?"))
    for key in ROPE_KEYS:
        s = model.fact(key)
        if s is not None and s.value is not None and not isinstance(s.value, dict):
            bad.append((s, f"{key} is {_shown(s.value)}; it must be a mapping such as "
                           '{"rope_type": "linear", "factor": 2.0} (or null)'))
    return bad


def _shown(value) -> str:
    import json

    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _first(model, keys, *, number: bool = True):
    from sits_doctor.facts import Value

    for key in keys:
        s = model.fact(key)
        if s is None or s.value is None:
            continue
        if number and not usable_number(key, s.value):
            continue  # NaN, inf, negative and impossibly large dimensions are not dimensions (invalid_facts reports them)
        return Value.of(s)
    return class_default(model, keys[0])


CONFIG_DEFAULTS = "hf_config_defaults.json"  # data/, written by tools/gen_hf_config_defaults.py


@lru_cache(maxsize=1)
def _config_defaults() -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).parent / "data" / CONFIG_DEFAULTS).read_text(encoding="utf-8"))


def known_model_types() -> frozenset[str]:
    """The model types whose config classes tools/gen_hf_config_defaults.py read."""
    data = _config_defaults()
    return frozenset(data["models"]) | frozenset(data["text_types"])


def class_default(model, key: str):
    """The value transformers' config class gives ``key`` when config.json leaves it out (and
    vLLM, which loads configs through transformers): google/gemma-3-27b-it states no
    ``vocab_size``, so Gemma3TextConfig's 262208 applies. None for unknown model types and for
    defaults computed from other keys."""
    from sits_doctor.facts import Value

    text = model.text if isinstance(model.text, dict) else {}
    top = model.data.get("model_type") if isinstance(model.data, dict) else None
    data = _config_defaults()
    kind = text.get("model_type")
    if not isinstance(kind, str) and isinstance(top, str):
        kind = data["text_types"].get(top, top) if model.text_pointer else top
    found = data["models"].get(kind, {}) if isinstance(kind, str) else {}
    if key not in found:
        return None
    return Value.default(found[key], f"{key} not in config.json: default of transformers {data['transformers']} "
                                     f"for model_type {kind!r} (the value its config class sets)")


# 5.x DynamicCache built from the model config holds only the window on sliding-window layers
# (DynamicSlidingWindowLayer, src/transformers/cache_utils.py@v5.0.0)
DYNAMIC_CACHE_SLIDING_BOUNDED = "5.0.0"
TRTLLM_PRETRAINED = "/pretrained_config"  # where a TensorRT-LLM engine config.json keeps the model's shape
# TensorRT-LLM QuantAlgo (tensorrt_llm/quantization/mode.py) → the stored weight format
_TRTLLM_WEIGHTS = {
    "FP8": "fp8", "FP8_PER_CHANNEL_PER_TOKEN": "fp8", "FP8_BLOCK_SCALES": "fp8", "NVFP4": "nvfp4",
    "W4A16": "int4", "W4A16_AWQ": "int4", "W4A16_GPTQ": "int4", "W4A8_AWQ": "int4", "W8A16": "int8",
    "W8A16_GPTQ": "int8", "INT8": "int8", "W8A8_SQ_PER_CHANNEL": "int8", "W8A8_SQ_PER_TENSOR_PLUGIN": "int8",
    "W8A8_SQ_PER_CHANNEL_PER_TOKEN_PLUGIN": "int8", "W8A8_SQ_PER_TENSOR_PER_TOKEN_PLUGIN": "int8",
    "W4A16_MXFP4": "mxfp4", "FP8_PB_WO": "fp8", "W4A8_NVFP4_FP8": "nvfp4",
}


def _weight_scheme(quant: dict) -> str:
    """The weight format a quantization_config stores, named as sits_doctor.memory weighs it:
    ModelOpt's ``quant_algo`` (the QuantAlgo names TensorRT-LLM shares), compressed-tensors'
    weight ``num_bits`` / ``type`` (llm-compressor: 8-bit float → fp8, 8-bit int → int8, 4-bit →
    int4 with group scales), bitsandbytes' 4 or 8 bits; other methods by name."""
    method = quant["quant_method"]
    if method == MODELOPT_METHOD:
        return _modelopt_weights(quant)
    if method == BNB_METHOD:
        return "int8" if quant.get("load_in_8bit") is True else BNB_METHOD
    if method == "compressed-tensors":
        groups = quant.get("config_groups")
        weights = [g.get("weights") for g in groups.values() if isinstance(g, dict)] if isinstance(groups, dict) else []
        bits = {(w.get("num_bits"), w.get("type")) for w in weights if isinstance(w, dict)}
        if len(bits) == 1:
            n, kind = bits.pop()
            if n == 8:
                return "fp8" if kind == "float" else "int8"
            if n == 4:
                return "nvfp4" if kind == "float" else "int4"
    return method


def _modelopt_section(quant: dict) -> tuple[str, dict] | None:
    """Where a ModelOpt recipe keeps ``quant_algo``: the ``quantization`` mapping of the
    hf_quant_config.json layout (also copied into config.json), else the top level; with the
    pointer suffix of that mapping. None when neither holds a string ``quant_algo``."""
    inner = quant.get(HF_QUANT_SECTION)
    if isinstance(inner, dict) and isinstance(inner.get(QUANT_ALGO_KEY), str):
        return f"/{HF_QUANT_SECTION}", inner
    if isinstance(quant.get(QUANT_ALGO_KEY), str):
        return "", quant
    return None


def _modelopt_weights(quant: dict) -> str:
    found = _modelopt_section(quant)
    algo = found[1][QUANT_ALGO_KEY].upper() if found else ""
    if algo == MIXED_PRECISION:
        return "mixed precision"  # per layer (quantized_layers): not weighed
    return _TRTLLM_WEIGHTS.get(algo, UNKNOWN_WEIGHTS)


# --- where a checkpoint says it is quantized ---------------------------------------------------
# transformers reads only config.json's quantization_config (AutoHfQuantizer /
# AutoQuantizationConfig.from_dict, src/transformers/quantizers/auto.py@5.25.0): without
# quant_method it raises "ValueError: The model's quantization config from the arguments has no
# `quant_method` attribute", unless load_in_4bit / load_in_8bit say bitsandbytes (then
# "bitsandbytes_4bit" / "_8bit"). No file of src/transformers@5.25.0 reads hf_quant_config.json
# or quantize_config.json: a checkpoint quantized only there is built unquantized.
# What vLLM reads of them: sits_doctor.frameworks.vllm_quant.
BNB_METHOD = "bitsandbytes"
AUTOGPTQ_CONFIG = "quantize_config.json"  # AutoGPTQ's recipe: bits, group_size, desc_act, sym
UNKNOWN_WEIGHTS = "unknown"  # a quantization whose stored format the config does not say
UNDECLARED = "undeclared"  # quantization_config with no quant_method (and no bitsandbytes load_in_*)


def checkpoint_quant(model):
    """How a checkpoint says its weights are stored, read once from config.json's
    ``quantization_config``, else ``hf_quant_config.json`` (ModelOpt ≤ 0.29), else
    ``quantize_config.json`` (AutoGPTQ): (method, weight format, CheckpointQuant) as Values at the
    key that says it, or (None, None, None) for an unquantized checkpoint."""
    from sits_doctor.facts import CheckpointQuant, Value

    quant = model.data.get(QUANT_CONFIG_KEY) if isinstance(model.data, dict) else None
    if isinstance(quant, dict):
        setting = _top_setting(model, QUANT_CONFIG_KEY)
        method = quant.get("quant_method")
        if not isinstance(method, str) and (quant.get("load_in_4bit") is True or quant.get("load_in_8bit") is True):
            method = BNB_METHOD  # transformers' older bitsandbytes spelling: load_in_* alone
        if isinstance(method, str):
            found = CheckpointQuant(method, _weight_scheme({**quant, "quant_method": method}), QUANT_CONFIG_KEY, True)
        elif _modelopt_section(quant) is not None:
            found = CheckpointQuant(MODELOPT_METHOD, _modelopt_weights(quant), QUANT_CONFIG_KEY, False)
        else:
            found = CheckpointQuant(UNDECLARED, UNKNOWN_WEIGHTS, QUANT_CONFIG_KEY, False)
        return (Value.of(setting, found.method), Value.of(setting, found.weights), Value.of(setting, found))
    for side, method in ((getattr(model, "quant", None), MODELOPT_METHOD), (getattr(model, "autogptq", None), "gptq")):
        data = side.data if side is not None and isinstance(side.data, dict) else None
        if data is None:
            continue
        if method == MODELOPT_METHOD:
            section = _modelopt_section(data)
            if section is None:
                continue
            weights, where, at = _modelopt_weights(data), HF_QUANT_CONFIG, f"{section[0]}/{QUANT_ALGO_KEY}"
        else:
            bits = data.get("bits")
            weights = f"int{bits}" if bits in (4, 8) and not isinstance(bits, bool) else UNKNOWN_WEIGHTS
            where, at = AUTOGPTQ_CONFIG, "/bits" if "bits" in data else ""
        setting = _doc_setting(side, where, at)
        found = CheckpointQuant(method, weights, where, True)
        return (Value.of(setting, method), Value.of(setting, weights), Value.of(setting, found))
    return None, None, None


def _doc_setting(doc, name: str, at: str):
    """A whole sidecar file as one setting (its top-level mapping), positioned at the key ``at``
    that names the format (the file's start when it has none)."""
    from sits_doctor.plan import Provenance, Setting, Site

    prov = Provenance.at(doc, at) if at else Provenance.at(doc, "", key=False)
    return Setting(name, name, doc.data, doc.data, prov, site=Site("mapping", doc, ""))


# --- activation scales of quantized checkpoints (SITS005) ------------------------------------
# How each quantization_config says whether its activation scales are calibrated once (static,
# stored in the checkpoint) or computed from every batch (dynamic). Weight-only methods (awq,
# gptq, bitsandbytes, W4A16, W8A16 ...) quantize no activations and have no entry.
QUANT_CONFIG_KEY = "quantization_config"
# transformers FineGrainedFP8Config / vLLM Fp8Config (quant_method "fp8"): activation_scheme
# "dynamic" | "static"; transformers defaults to dynamic (utils/quantization_config.py@v5.24.0),
# vLLM requires the key (Fp8Config.from_config, quantization/fp8.py@v0.33.0). Static: one
# per-tensor activation scale per Linear (integrations/finegrained_fp8.py@v5.24.0 fp8_linear;
# vLLM kFp8StaticTensorSym); dynamic: per-token scales at run time (vLLM: per-token where CUTLASS
# runs, else per-tensor).
FP8_METHOD = "fp8"
FP8_ACTIVATION_KEY = "activation_scheme"
FP8_STATIC = "static"
FP8_DYNAMIC = "dynamic"
FP8_ACTIVATION_DEFAULT = FP8_DYNAMIC
# compressed-tensors (llm-compressor): config_groups.<group>.input_activations is a
# QuantizationArgs or null (weight-only); its `dynamic` defaults to False, i.e. static
# (src/compressed_tensors/quantization/quant_args.py@0.18.0); "local" (NVFP4's tensor_group)
# computes the per-group scales at run time. Without `strategy`, group_size None means "tensor".
CT_METHOD = "compressed-tensors"
CT_GROUPS = "config_groups"
CT_INPUTS = "input_activations"
CT_DYNAMIC = "dynamic"
CT_DYNAMIC_DEFAULT = False
CT_STRATEGY = "strategy"
CT_GROUP_SIZE = "group_size"
CT_TOKEN = "token"  # the dynamic strategy the fix writes (FP8_DYNAMIC / W8A8 presets, quant_scheme.py@0.18.0)
# ModelOpt (quant_method "modelopt" in config.json, or hf_quant_config.json's `quantization`) and
# TensorRT-LLM engines (pretrained_config.quantization) name the recipe by quant_algo.
# Static per-tensor activation scales: ModelOpt FP8_DEFAULT_CFG / INT8_SMOOTHQUANT_CFG /
# W4A8_AWQ_BETA_CFG calibrate `*input_quantizer` with axis None (modelopt/torch/quantization/
# config.py@0.39.0) and export them as FP8 / W8A8_SQ_PER_CHANNEL / W4A8_AWQ (modelopt/torch/export/
# quant_utils.py@0.39.0); TensorRT-LLM QuantMode.from_quant_algo leaves PER_TOKEN off for these
# (tensorrt_llm/quantization/mode.py: has_act_static_scaling).
MODELOPT_METHOD = "modelopt"
QUANT_ALGO_KEY = "quant_algo"
HF_QUANT_CONFIG = "hf_quant_config.json"  # ModelOpt <= 0.29: vLLM reads it when config.json has no quantization_config
HF_QUANT_SECTION = "quantization"
STATIC_ACTIVATION_ALGOS = {  # quant_algo -> (activation format, its per-token twin: same idea, dynamic scales)
    "FP8": ("FP8", "FP8_PER_CHANNEL_PER_TOKEN"),
    "W8A8_SQ_PER_CHANNEL": ("INT8 SmoothQuant", "W8A8_SQ_PER_CHANNEL_PER_TOKEN_PLUGIN"),
    "W8A8_SQ_PER_TENSOR_PLUGIN": ("INT8 SmoothQuant", "W8A8_SQ_PER_TENSOR_PER_TOKEN_PLUGIN"),
    "W8A8_SQ_PER_CHANNEL_PER_TENSOR_PLUGIN": ("INT8 SmoothQuant", "W8A8_SQ_PER_CHANNEL_PER_TOKEN_PLUGIN"),
    "W4A8_AWQ": ("FP8", None),
}
DYNAMIC_ACTIVATION_ALGOS = {  # quant_algo -> how its activation scales are computed at run time
    "FP8_PER_CHANNEL_PER_TOKEN": "token", "FP8_BLOCK_SCALES": "block",
    "W8A8_SQ_PER_CHANNEL_PER_TOKEN_PLUGIN": "token", "W8A8_SQ_PER_TENSOR_PER_TOKEN_PLUGIN": "token",
}
DYNAMIC_ACTIVATION_METHODS = {"fbgemm_fp8": "token"}  # quant_method -> run-time granularity
# ModelOpt with more than one recipe: quant_algo MIXED_PRECISION and one {quant_algo ...} per layer in
# quantized_layers (modelopt/torch/export/quant_utils.py@0.39.0; vLLM modelopt.py@v0.33.0 modelopt_mixed)
MIXED_PRECISION = "MIXED_PRECISION"
QUANTIZED_LAYERS = "quantized_layers"


def activation_scales(model, engine: bool = False):
    """How the checkpoint behind ``model`` (a ModelFacts) scales its input activations: a Value
    holding an :class:`~sits_doctor.facts.ActivationScales`, at the key that decides it (the
    ``activation_scheme``, the group's ``input_activations`` or its ``dynamic``, the
    ``quant_algo``); None when its activations are not quantized or nothing says."""
    data = model.data if isinstance(model.data, dict) else {}
    quant = data.get(QUANT_CONFIG_KEY)
    if engine:
        section = model.text.get(HF_QUANT_SECTION) if isinstance(model.text, dict) else None
        return _algo_scales(model.doc, model.path, f"{model.text_pointer}/{HF_QUANT_SECTION}", section, "trtllm")
    if isinstance(quant, dict):
        return _config_scales(model, quant)
    side = getattr(model, "quant", None)  # hf_quant_config.json, read only when config.json has no quantization_config
    sidecar = side.data if quant is None and side is not None and isinstance(side.data, dict) else {}
    return _algo_scales(side, side.path, f"/{HF_QUANT_SECTION}", sidecar.get(HF_QUANT_SECTION), MODELOPT_METHOD) \
        if sidecar else None


def _config_scales(model, quant: dict):
    from sits_doctor.facts import ActivationScales

    method = quant.get("quant_method")
    base = f"/{QUANT_CONFIG_KEY}"
    if method == FP8_METHOD:
        scheme = quant.get(FP8_ACTIVATION_KEY, FP8_ACTIVATION_DEFAULT)
        static = isinstance(scheme, str) and scheme.lower() == FP8_STATIC
        at = f"{base}/{FP8_ACTIVATION_KEY}" if FP8_ACTIVATION_KEY in quant else base
        shown = f"{FP8_METHOD} {FP8_ACTIVATION_KEY} {scheme}"
        return _value(model.doc, model.path, at, ActivationScales(static, "tensor" if static else "token", shown, method))
    if method == CT_METHOD:
        return _ct_scales(model, quant, base)
    if method == MODELOPT_METHOD or (method is None and _modelopt_section(quant) is not None):
        suffix, section = _modelopt_section(quant) or ("", quant)
        return _algo_scales(model.doc, model.path, base + suffix, section, MODELOPT_METHOD)
    grain = DYNAMIC_ACTIVATION_METHODS.get(method)  # None: weight-only, or a method without activation scales
    return _value(model.doc, model.path, base, ActivationScales(False, grain, method, method)) if grain else None


def _ct_scales(model, quant: dict, base: str):
    """The first config group whose activations have static scales, else the first with dynamic
    ones; None when every group is weight-only."""
    from sits_doctor.facts import ActivationScales
    from sits_doctor.source import escape_token

    groups = quant.get(CT_GROUPS)
    found = []
    for name, group in (groups.items() if isinstance(groups, dict) else ()):
        inputs = group.get(CT_INPUTS) if isinstance(group, dict) else None
        if not isinstance(inputs, dict):
            continue  # null: weight-only
        dynamic = inputs.get(CT_DYNAMIC, CT_DYNAMIC_DEFAULT)
        static = dynamic is False
        strategy = inputs.get(CT_STRATEGY) or _ct_default_strategy(inputs.get(CT_GROUP_SIZE))
        at = f"{base}/{CT_GROUPS}/{escape_token(name)}/{CT_INPUTS}"
        if CT_DYNAMIC in inputs:
            at += f"/{CT_DYNAMIC}"
        written = f"unset ({_shown(CT_DYNAMIC_DEFAULT)})" if CT_DYNAMIC not in inputs else _shown(dynamic)
        shown = f"{CT_METHOD} {CT_GROUPS}.{name}.{CT_INPUTS} with {CT_DYNAMIC} {written}, {CT_STRATEGY} {strategy}"
        found.append((not static, _value(model.doc, model.path, at,
                                         ActivationScales(static, str(strategy), shown, CT_METHOD, str(name)))))
    return min(found, key=lambda f: f[0])[1] if found else None


def _ct_default_strategy(group_size) -> str:
    if isinstance(group_size, int) and not isinstance(group_size, bool):
        return "channel" if group_size == -1 else "group"
    return "tensor"


def _algo_scales(doc, path, base: str, section, method: str):
    """ModelOpt / TensorRT-LLM: the recipe named by ``quant_algo`` in ``section`` (at ``base``)."""
    from sits_doctor.facts import ActivationScales

    if not isinstance(section, dict) or not isinstance(section.get(QUANT_ALGO_KEY), str):
        return None
    algo = section[QUANT_ALGO_KEY]
    upper = algo.upper()
    who = "ModelOpt" if method == MODELOPT_METHOD else "TensorRT-LLM"
    if upper == MIXED_PRECISION:
        return _mixed_scales(doc, path, base, section.get(QUANTIZED_LAYERS), method, who)
    if upper in STATIC_ACTIVATION_ALGOS:
        scales = ActivationScales(True, "tensor", f"{who} {QUANT_ALGO_KEY} {algo}", method, upper)
    elif upper in DYNAMIC_ACTIVATION_ALGOS:
        scales = ActivationScales(False, DYNAMIC_ACTIVATION_ALGOS[upper], f"{who} {QUANT_ALGO_KEY} {algo}", method,
                                  upper)
    else:
        return None
    return _value(doc, path, f"{base}/{QUANT_ALGO_KEY}", scales)


def _mixed_scales(doc, path, base: str, layers, method: str, who: str):
    """MIXED_PRECISION: the first layer whose recipe has static activation scales, else the first
    with dynamic ones (as :func:`_ct_scales` picks config groups)."""
    from sits_doctor.source import escape_token

    found = []
    for name, layer in (layers.items() if isinstance(layers, dict) else ()):
        one = _algo_scales(doc, path, f"{base}/{QUANTIZED_LAYERS}/{escape_token(name)}", layer, method)
        if one is not None:
            shown = f"{who} {QUANT_ALGO_KEY} {MIXED_PRECISION}, {QUANTIZED_LAYERS}.{name}: {one.value.name}"
            found.append((not one.value.static, one._replace(value=one.value._replace(scheme=shown))))
    return min(found, key=lambda f: f[0])[1] if found else None


def _value(doc, path, pointer: str, scales):
    from sits_doctor.facts import Value
    from sits_doctor.plan import Provenance, Setting, Site

    prov = Provenance.at(doc, pointer) if doc else Provenance(file=path, pointer=pointer)
    site = Site("mapping", doc, pointer) if doc else None
    key = pointer.rsplit("/", 1)[-1]
    raw = value_at(doc.data, pointer) if doc else None
    return Value(scales, prov, Setting(key, key, raw, raw, prov, site=site))


def value_at(data, pointer: str):
    """The value at a JSON Pointer in parsed data (None where it is missing)."""
    for part in pointer.strip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def model_dims(model):
    """The dimensions of a model config (sits_doctor.plan.ModelFacts), with provenance. Kept on
    the ModelFacts (which never changes once built): every plan that serves it asks again."""
    dims = model.__dict__.get("_dims")
    if dims is None:
        dims = model._dims = _model_dims(model)
    return dims


def _model_dims(model):
    from sits_doctor.facts import ModelDims, Value

    got = {name: _first(model, keys, number=name not in ("layer_types",)) for name, keys in ALIASES.items()}
    heads, hidden = got["heads"], got["hidden"]
    if got["kv_heads"] is None and heads is not None:
        got["kv_heads"] = Value.derived(heads.value, f"num_attention_heads (no kv-head key: multi-head attention; {heads.prov})")
    engine = model.text_pointer == TRTLLM_PRETRAINED  # a TensorRT-LLM engine's pretrained_config
    head_dim = _first(model, ("head_dim", "head_size") if engine else ("head_dim",))
    if head_dim is None and heads is not None and hidden is not None and heads.value:
        head_dim = Value.derived(hidden.value // heads.value,
                                 f"hidden_size {hidden.value} / num_attention_heads {heads.value}")
    arch = model.data.get("architectures")
    architecture = None
    if isinstance(arch, list) and arch and isinstance(arch[0], str):
        architecture = Value.of(_top_setting(model, "architectures"), arch[0])
    elif engine and model.fact("architecture") is not None and isinstance(model.fact("architecture").value, str):
        architecture = Value.of(model.fact("architecture"))
    model_type = _top(model, "model_type")
    dtype = next((Value.of(s) for s in (model.fact(k) or _top_setting(model, k) for k in DTYPE_KEYS)
                  if s is not None and isinstance(s.value, str)), None)
    rope = next((Value.of(s) for s in (model.fact(k) for k in ROPE_KEYS)
                 if s is not None and isinstance(s.value, dict) and s.value), None)
    quantization, scheme, checkpoint = (None, None, None) if engine else checkpoint_quant(model)
    if engine and isinstance(model.text.get("quantization"), dict):
        algo = model.text["quantization"].get("quant_algo")
        found = _TRTLLM_WEIGHTS.get(str(algo).upper()) if algo else None
        if found:
            setting = model.fact("quantization")
            quantization = Value.of(setting, str(algo))
            scheme = Value.of(setting, found)
    scales = activation_scales(model, engine)
    lengths = [_first(model, (k,)) for k in MAX_LENGTH_KEYS]
    present = [v for v in lengths if v is not None]
    max_positions = min(present, key=lambda v: v.value) if present else None
    dims = ModelDims(
        architecture=architecture, model_type=model_type, head_dim=head_dim, dtype=dtype, rope=rope,
        quantization=quantization, weight_scheme=scheme, max_positions=max_positions, activation_scales=scales,
        checkpoint_quant=checkpoint,
        **{k: got[k] for k in ALIASES},
    )
    stored = getattr(model, "stored_weights", None)
    if stored is not None:
        dims = dims._replace(stored_bytes=Value.derived(stored[0], f"metadata.total_size of {stored[1]}"))
    tie = model.fact("tie_word_embeddings")
    tie = tie.value if tie is not None and isinstance(tie.value, bool) else model.data.get("tie_word_embeddings")
    if not isinstance(tie, bool):
        default = class_default(model, "tie_word_embeddings")
        tie = default.value if default is not None else None
    if dims.layer_types is None:
        dims = dims._replace(layer_types=_layer_types_from_pattern(model, dims))
    return _with_vision(_with_params(dims, tie if isinstance(tie, bool) else None), model)


def _with_vision(dims, model):
    """Add a multimodal model's vision encoder (``vision_config``): per layer ≈ 4·h² (attention)
    + 2·h·i (its MLP), from ``hidden_size``/``embed_dim``, ``num_hidden_layers``/``depth`` and
    ``intermediate_size`` (or ``mlp_ratio``·h). SigLIP-So400m in Gemma 3 comes to 0.41 B; the
    count leaves out patch and position embeddings and projector (a few per cent of it)."""
    from sits_doctor.facts import Value

    vision = model.data.get("vision_config") if isinstance(model.data, dict) else None
    if dims.params is None or not isinstance(vision, dict):
        return dims

    def num(*keys):
        for k in keys:
            v = vision.get(k)
            if usable_number(k, v) and v > 0:
                return v
        return None

    h, layers = num("hidden_size", "embed_dim", "width"), num("num_hidden_layers", "depth", "layers")
    inter = num("intermediate_size") or (num("mlp_ratio") * h if num("mlp_ratio") and h else None)
    if not (h and layers and inter):
        return dims
    extra = int(layers * (4 * h * h + 2 * h * inter))
    parts = {**dims.param_parts.value, "vision": extra}
    note = (f"{dims.params.prov} + vision encoder ≈ {layers} layers · (4·{h}² + 2·{h}·{int(inter)}) = "
            f"{extra / 1e9:.2f} B (vision_config)")
    return dims._replace(params=Value.derived(dims.params.value + extra, note), param_parts=Value.derived(parts, note))


def _layer_types_from_pattern(model, dims):
    """Layer types a config names by their interleave instead of listing them: its own
    ``sliding_window_pattern`` N (every N-th layer full attention, the rest sliding:
    ``Gemma3TextConfig.__init__``, src/transformers/models/gemma3/configuration_gemma3.py@v4.57.1),
    else the repeating unit transformers' config class builds ``layer_types`` from when the
    file leaves it out (Gemma 2/3, gpt-oss, Qwen3-Next ...: data/hf_config_defaults.json)."""
    from sits_doctor.facts import Value

    layers = dims.layers.value if dims.layers is not None else None
    if not isinstance(layers, int) or isinstance(layers, bool) or layers <= 0:
        return None
    s = model.fact("sliding_window_pattern")
    pattern = s.value if s is not None else None
    if isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 0 and dims.sliding_window is not None:
        types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]
        return Value.derived(types, f"from sliding_window_pattern {pattern} ({s.prov}): every {pattern}th of {layers} "
                                    "layers full attention, the rest sliding")
    unit = class_default(model, "layer_types_pattern")
    if unit is None or not isinstance(unit.value, list) or not unit.value:
        return None
    period = len(unit.value)
    types = [unit.value[i % period] for i in range(layers)]
    return Value.derived(types, f"layer_types not in config.json: the pattern {unit.value} repeated over {layers} layers "
                                f"({unit.prov})")


def _top_setting(model, key):
    from sits_doctor.plan import Provenance, Setting, Site

    if key not in model.data:
        return None
    doc = model.doc
    prov = Provenance.at(doc, f"/{key}") if doc else Provenance(file=model.path, pointer=f"/{key}")
    site = Site("mapping", doc, f"/{key}") if doc else None
    return Setting(key, key, model.data[key], model.data[key], prov, site=site)


def _top(model, key):
    from sits_doctor.facts import Value

    s = _top_setting(model, key)
    return Value.of(s) if s is not None and isinstance(s.value, str) else None


def _with_params(dims, tie_embeddings=None):
    """Add a parameter count computed from the shape: embeddings (input and output), and per layer
    the attention projections (grouped-query, or MLA's low-rank ones) and a gated MLP — dense, or
    MoE experts (``moe_intermediate_size``, else ``intermediate_size`` as in Mixtral and gpt-oss)
    plus shared experts and a router, with DeepSeek's ``first_k_dense_replace`` dense layers.
    Norms and biases are left out (well under 1% of a decoder); :func:`_with_vision` adds a
    vision encoder. ``param_parts`` keeps the pieces, because quantization usually leaves the
    embeddings in 16 bits."""
    from sits_doctor.facts import Value

    def n(v):
        return int(v.value) if v is not None else None

    layers, hidden, heads, vocab = n(dims.layers), n(dims.hidden), n(dims.heads), n(dims.vocab)
    if None in (layers, hidden, heads, vocab):
        return dims
    inter, kv, hd = n(dims.intermediate), n(dims.kv_heads), n(dims.head_dim)
    if dims.kv_lora_rank is not None:  # MLA (DeepSeek V2/V3)
        rank, rope = n(dims.kv_lora_rank), n(dims.qk_rope_head_dim) or 0
        nope, v = n(dims.qk_nope_head_dim), n(dims.v_head_dim)
        if nope is None or v is None:
            return dims
        q_rank = n(dims.q_lora_rank)
        q = hidden * q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        attn = q + hidden * (rank + rope) + rank * heads * (nope + v) + heads * v * hidden
        attn_how = "MLA projections"
    else:
        if kv is None or hd is None:
            return dims
        attn = hidden * heads * hd * 2 + hidden * kv * hd * 2
        attn_how = f"attention {attn}"
    experts = n(dims.experts)
    if experts:
        size = n(dims.moe_intermediate) or inter
        if size is None:
            return dims
        shared = (n(dims.shared_experts) or 0) * 3 * hidden * size + (3 * hidden * n(dims.shared_intermediate)
                                                                       if dims.shared_intermediate else 0)
        dense_layers = min(n(dims.first_dense_layers) or 0, layers)
        moe_layers = layers - dense_layers
        expert_params = moe_layers * experts * 3 * hidden * size
        mlp_other = moe_layers * (shared + hidden * experts) + dense_layers * 3 * hidden * (inter or size)
        mlp_how = f"{moe_layers} MoE layers · {experts} experts · 3·{hidden}·{size}" + (
            f" + {dense_layers} dense layers" if dense_layers else "") + (" + shared experts" if shared else "")
    else:
        if inter is None:
            return dims
        expert_params, mlp_other = 0, layers * 3 * hidden * inter
        mlp_how = f"gated MLP {3 * hidden * inter}"
    tied = tie_embeddings is True
    embed = (1 if tied else 2) * vocab * hidden
    total = embed + layers * attn + expert_params + mlp_other
    how = ("tied: counted once" if tied else "untied: counted twice" if tie_embeddings is False
           else "tie_word_embeddings not stated: counted twice")
    note = (f"{'vocab' if tied else '2·vocab'}·hidden + layers·({attn_how}) + {mlp_how} of the text model "
            f"(embeddings {how}; norms and biases left out)")
    parts = {"embeddings": embed, "attention": layers * attn, "experts": expert_params, "mlp": mlp_other}
    return dims._replace(params=Value.derived(total, note), param_parts=Value.derived(parts, note))


# --- what runs: attention implementation and RoPE placement ------------------------------------------
RUNTIME_DATA = "hf_runtime.json"  # data/, written by tools/gen_hf_runtime.py: every causal-LM type built at one release
# RoPE computed inside every attention layer before these releases; from them the model computes cos/sin
# once per forward and passes them to the layers (models/<type>/modeling_<type>.py at v4.47.1 vs
# v4.48.0: MistralAttention, Gemma2Attention, Phi3Attention call self.rotary_emb; Llama from v4.43.0).
ROPE_MOVED_TO_MODEL = {"llama": "4.43.0", "mistral": "4.48.0", "gemma2": "4.48.0", "phi3": "4.48.0"}
ATTN_KEYS = ("attn_implementation", "_attn_implementation")  # a config.json that asks for an implementation
CUSTOM_CODE_KEY = "auto_map"  # the config names classes in the model repository (trust_remote_code)
REMOTE_CODE_NOTE = ("the config's auto_map code runs only with trust_remote_code=True; without it transformers uses its own "
                    "class for this model_type (dynamic_module_utils.resolve_trust_remote_code)")
DEFAULT_CACHE = "DynamicCache"  # what generate() builds when generation_config names no cache_implementation


@lru_cache(maxsize=None)
def runtime_table() -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).parent / "data" / RUNTIME_DATA).read_text(encoding="utf-8"))


def _architecture(data: dict) -> str | None:
    """The class config.json names (``architectures[0]``), what ``from_pretrained`` would build."""
    arch = data.get("architectures")
    return arch[0] if isinstance(arch, list) and arch and isinstance(arch[0], str) else None


def runtime_from_tables(model, version: str):
    """:class:`~sits_doctor.facts.Runtime` of a model config at transformers ``version``, from the
    generated table (exact at its release, assumed for a newer target) and :data:`ROPE_MOVED_TO_MODEL`."""
    from sits_doctor.facts import TABLES_HOW, Runtime, Value
    from sits_doctor.versions import V

    text = model.text if model is not None else {}
    data = model.data if model is not None and isinstance(model.data, dict) else {}
    model_type = text.get("model_type") or data.get("model_type")
    table = runtime_table()
    known = table["transformers"]
    entry = table["models"].get(model_type) if isinstance(model_type, str) else None
    at_table = V(version) >= V(known)
    src = f"tools/gen_hf_runtime.py: {model_type} built with transformers {known}" + (
        "" if V(version) == V(known) else f" (assumed for {version})")
    # auto_map names repository code; without trust_remote_code=True transformers builds its own class when the
    # model_type has one (resolve_trust_remote_code: local code wins, src/transformers/dynamic_module_utils.py@5.25.0)
    remote = CUSTOM_CODE_KEY in data
    custom = remote and entry is None
    asked = next((data[k] for k in ATTN_KEYS if isinstance(data.get(k), str)), None)
    attention = supports = rope = None
    modules: tuple[str, ...] = ()
    if entry is not None and at_table and not custom:
        supports = Value.default(entry["supports_sdpa"], src)
        attention = Value.default(entry["attention"], src)
        rope = Value.default(entry["rope"], src)
        modules = tuple(entry["rotary_modules"])
    if asked is not None:
        written = next(_top_setting(model, k) for k in ATTN_KEYS if data.get(k) == asked)
        attention = Value.of(written) if written is not None else Value.derived(asked, "config.json")
    moved = ROPE_MOVED_TO_MODEL.get(model_type) if isinstance(model_type, str) else None
    if moved is not None and not at_table:
        placement = "attention" if V(version) < V(moved) else "model"
        rope = Value.default(placement, f"transformers models/{model_type}/modeling_{model_type}.py: RoPE built in each "
                                        f"attention layer before {moved}, once per forward from it")
    cache = model.generation.data.get("cache_implementation") if model is not None and model.generation else None
    return Runtime(
        attention=attention, supports_sdpa=supports, rope=rope, rotary_modules=modules,
        cache=Value.default(cache or DEFAULT_CACHE, "generation_config.json" if cache else "generate() default"),
        quantizer=None, model_class=_architecture(data), how=f"{TABLES_HOW} {version}", custom_code=custom,
        native_over_remote=remote and not custom,
    )
