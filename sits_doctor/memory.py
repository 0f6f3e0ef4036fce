"""Memory arithmetic of a served model, from its config alone: KV-cache bytes per token and the
bytes of the weights. Pure functions of :class:`~sits_doctor.facts.ModelDims`; every result is a
:class:`~sits_doctor.facts.Value` whose note shows the arithmetic, so a finding can print it.

Sources (the frameworks' own code; versions named where the rule changed):
- KV per token per layer per rank = 2 (K and V) · kv_heads_per_rank · head_size · dtype bytes,
  with ``kv_heads_per_rank = max(1, kv_heads // tp)`` (KV heads are replicated when TP exceeds
  them): vLLM ``vllm/v1/kv_cache_interface.py`` ``AttentionSpec.page_size_bytes`` (0.11–0.33) and
  ``ModelConfig.get_num_kv_heads``.
- MLA (DeepSeek V2/V3, Kimi K2): one latent of ``kv_lora_rank + qk_rope_head_dim`` per token and
  layer, not split by TP (``MLAAttentionSpec``; ``fp8_ds_mla`` packs 656 bytes).
- Pipeline parallelism: each stage holds its own layers (the largest stage is the one that binds).
- Sliding-window layers (``layer_types`` / ``sliding_window``) hold at most the window per
  request in vLLM's hybrid allocator (``SlidingWindowSpec``, 0.9+); the per-token figure counts
  the full-attention layers, and the note says how many sliding layers were left out. Llama 4's
  chunked-attention layers (``attention_chunk_size``) are left out the same way: vLLM keeps at
  most a chunk plus one step's tokens of them per request (``ChunkedLocalAttentionSpec``,
  vllm/v1/kv_cache_interface.py@v0.10.0).
"""

from __future__ import annotations

import math

GIB = 1024**3

# Bytes per element of a KV-cache dtype, as vLLM's STR_DTYPE_TO_TORCH_DTYPE maps them
# (vllm/utils/torch_utils.py, 0.33): fp8 variants 1 byte, the 16-bit types 2, fp32 4.
KV_DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4,
    "bfloat16": 2, "float16": 2, "half": 2, "fp16": 2, "bf16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "int8": 1, "int8_per_token_head": 1,
    "fp8_per_token_head": 1,
}
FP8_DS_MLA_BYTES = 656  # per token and layer (vllm/v1/kv_cache_interface.py MLAAttentionSpec, 0.13+)


def dtype_bytes(name: str | None, *, model_dtype: str | None = None) -> float | None:
    """Bytes per element of a KV dtype name; ``auto`` is the model's dtype (fp32 checkpoints are
    served in fp16 by vLLM's ``dtype=auto``, so 2 bytes)."""
    if name is None:
        return None
    key = str(name).lower()
    if key == "auto":
        if model_dtype is None:
            return None
        key = str(model_dtype).lower()
        if key in ("float32", "fp32", "float"):
            return 2.0
    return float(KV_DTYPE_BYTES[key]) if key in KV_DTYPE_BYTES else None


def layers_per_rank(layers: int, pp: int) -> int:
    """Layers of the largest pipeline stage (vLLM splits layers as evenly as it can)."""
    return math.ceil(layers / max(1, pp))


def kv_bytes_per_token(dims, kv_dtype: str | None, *, tp: int = 1, pp: int = 1, sliding_per_token: bool = False):
    """KV-cache bytes one token takes on one rank (a Value with the arithmetic), or None with
    the name of what is missing as the second element. ``sliding_per_token``: count
    sliding-window layers per token too (vLLM before its hybrid allocator's per-request
    accounting: see frameworks/vllm_memory.py)."""
    from sits_doctor.facts import Value

    if dims is None:
        return None, "the model config"
    model_dtype = dims.dtype.value if dims.dtype is not None else None
    dtype_note = ""
    if model_dtype is None and str(kv_dtype).lower() == "auto":
        model_dtype, dtype_note = "bfloat16", "; the config states no dtype: bf16 assumed"
    layers = _int(dims.layers)
    if layers is None:
        return None, "num_hidden_layers"
    full, sliding_note = _full_attention_layers(dims, layers, sliding_per_token=sliding_per_token)
    per_rank_layers = layers_per_rank(full, pp)
    stage = f" on the largest of {pp} pipeline stages" if pp > 1 else ""
    if dims.kv_lora_rank is not None:  # MLA: one latent per token and layer, on every TP rank
        rank, rope = _int(dims.kv_lora_rank), _int(dims.qk_rope_head_dim) or 0
        if str(kv_dtype).lower() == "fp8_ds_mla":
            per_layer, how = FP8_DS_MLA_BYTES, f"{FP8_DS_MLA_BYTES} B (fp8_ds_mla packing)"
        else:
            b = dtype_bytes(kv_dtype, model_dtype=model_dtype)
            if b is None:
                return None, f"the KV dtype ({kv_dtype})"
            per_layer = (rank + rope) * b
            how = f"(kv_lora_rank {rank} + qk_rope_head_dim {rope}) · {_b(b)}"
        total = per_layer * per_rank_layers
        return Value.derived(total, f"{_fmt(total)}/token/rank = {how} · {per_rank_layers} layers{stage} "
                                    f"(MLA latent, not split by tensor parallelism){sliding_note}{dtype_note}"), None
    kv_heads, head_dim = _int(dims.kv_heads), _int(dims.head_dim)
    if kv_heads is None or head_dim is None:
        return None, "num_key_value_heads / head_dim"
    b = dtype_bytes(kv_dtype, model_dtype=model_dtype)
    if b is None:
        return None, f"the KV dtype ({kv_dtype})"
    per_rank_heads = max(1, kv_heads // max(1, tp))
    total = 2 * per_rank_heads * head_dim * b * per_rank_layers
    heads_how = (f"max(1, {kv_heads} KV heads // TP {tp}) = {per_rank_heads}" if tp > 1 else f"{kv_heads} KV heads")
    return Value.derived(total, f"{_fmt(total)}/token/rank = 2 (K,V) · {heads_how} · head_dim {head_dim} · {_b(b)} · "
                                f"{per_rank_layers} layers{stage}{sliding_note}{dtype_note}"), None


def _full_attention_layers(dims, layers: int, *, sliding_per_token: bool = False) -> tuple[int, str]:
    """Layers that hold KV for every token of a request: not the sliding-window layers (unless
    ``sliding_per_token``) and never the linear-attention / Mamba layers of hybrid models, whose
    state is a fixed size per request (vLLM ``MambaSpec``)."""
    types = dims.layer_types.value if dims.layer_types is not None else None
    if not (isinstance(types, list) and len(types) == layers):
        return layers, ""
    linear = sum(1 for t in types if t in LINEAR_LAYER_TYPES)
    sliding = 0 if sliding_per_token else sum(1 for t in types if t == "sliding_attention")
    chunked = 0 if sliding_per_token or _int(dims.attention_chunk) is None else sum(
        1 for t in types if t == CHUNKED_LAYER_TYPE)
    notes = []
    if sliding:
        window = _int(dims.sliding_window)
        notes.append(f"{sliding} sliding-window layers (window {window}) hold at most the window per request and "
                     "are not counted per token")
    if chunked:
        notes.append(f"{chunked} chunked-attention layers (chunk {_int(dims.attention_chunk)}) hold at most a chunk "
                     "per request and are not counted per token")
    sliding += chunked
    if linear:
        notes.append(f"{linear} linear-attention layers keep a fixed-size state per request (not modelled) instead "
                     "of per-token KV")
    return layers - sliding - linear, "".join(f"; {n}" for n in notes)


LINEAR_LAYER_TYPES = ("linear_attention", "mamba", "mamba2")  # transformers layer_types of hybrid models
CHUNKED_LAYER_TYPE = "chunked_attention"  # Llama 4: attention within attention_chunk_size-token chunks


# --- weights ---------------------------------------------------------------------------------

# Bytes per parameter of the stored weights by quantization method (config.json
# ``quantization_config.quant_method``), including the usual group scales: int4 with one fp16
# scale (and zero) per 128 weights ≈ 0.5 + 4/128 bytes (AutoGPTQ / AutoAWQ default group size).
BYTES_PER_PARAM = {
    None: None,  # the model dtype
    "fp8": 1.0, "fbgemm_fp8": 1.0, "compressed-tensors": None, "modelopt": 1.0,
    "gptq": 0.5 + 4 / 128, "awq": 0.5 + 4 / 128, "int4": 0.5 + 4 / 128, "int8": 1.0, "bitsandbytes": 0.5 + 4 / 64,
    "mxfp4": 0.5 + 1 / 32, "nvfp4": 0.5 + 1 / 16, "modelopt_fp4": 0.5 + 1 / 16,
}
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1}


def weights_bytes(dims, *, params: int | None = None, params_note: str = "",
                  mxfp4_padding: tuple[int, int, str] | None = None):
    """Bytes of the weights on all ranks together (a Value), or (None, what is missing).

    Quantized checkpoints keep the embeddings and the output head in 16 bits (AutoGPTQ, AutoAWQ,
    llm-compressor, ModelOpt defaults); ``mxfp4`` (gpt-oss) quantizes only the MoE experts
    (its ``quantization_config.modules_to_not_convert`` keeps attention, router and embeddings in
    bf16). With only a total ``params`` (no breakdown), everything is counted at one rate.
    ``mxfp4_padding``: (intermediate multiple, hidden multiple, where from) when the serving
    kernel stores mxfp4 experts padded (vLLM's Marlin layout)."""
    from sits_doctor.facts import Value

    if dims is None:
        return None, "the model config"
    if dims.stored_bytes is not None:  # the checkpoint's own index says how many bytes it holds
        total = dims.stored_bytes.value
        return Value.derived(total, f"{total / GIB:.2f} GiB as stored ({dims.stored_bytes.prov})"), None
    parts = dims.param_parts.value if dims.param_parts is not None else None
    if params is None and dims.params is not None:
        params, params_note = int(dims.params.value), str(dims.params.prov)
    elif params is not None:
        parts = None
    if params is None:
        return None, "a parameter count"
    quant = dims.weight_scheme if dims.weight_scheme is not None else dims.quantization
    method = str(quant.value).lower() if quant is not None else None
    if method == "mixed precision":
        return None, "the weights' size (a mixed-precision checkpoint: each layer's format is listed per layer)"
    if method in ("unknown", "undeclared"):
        return None, f"the weights' size (the checkpoint is quantized, but its stored format is not known: {quant.prov})"
    dtype = str(dims.dtype.value).lower() if dims.dtype is not None else "bfloat16"
    base = DTYPE_BYTES.get(dtype, 2)
    rate = BYTES_PER_PARAM.get(method)
    if rate is None:
        total = params * base
        what = f"{dtype} ({_b(base)})" if method is None else f"{method}: taken as {dtype} ({_b(base)})"
    elif parts is None:
        total = params * rate
        what = f"{method} ≈ {rate:.3f} B/parameter incl. scales, all layers"
    else:
        stored = parts["experts"] if method == "mxfp4" else params - parts["embeddings"] - parts.get("vision", 0)
        kept = params - stored  # left in the model dtype
        quantized, pad_note = stored, ""
        if method == "mxfp4" and mxfp4_padding is not None:
            factor = _padding_factor(dims, *mxfp4_padding[:2])
            if factor > 1:
                quantized = stored * factor
                pad_note = f"; experts ×{factor:.4f} for {mxfp4_padding[2]}"
        total = quantized * rate + kept * base
        what = (f"{quantized / 1e9:.2f} B {'expert ' if method == 'mxfp4' else ''}parameters in {method} "
                f"(≈ {rate:.3f} B each incl. scales{pad_note}) + {kept / 1e9:.2f} B in {dtype}")
    if rate is not None and quant is not None and quant.prov.kind == "file":
        what += f"; format from {quant.prov}"
    return Value.derived(total, f"{total / GIB:.2f} GiB = {params / 1e9:.2f} B parameters: {what} ({params_note})"), None


def _padding_factor(dims, inter_multiple: int, hidden_multiple: int) -> float:
    """How much larger the expert matrices are once their intermediate and hidden sizes are
    rounded up to the kernel's multiples."""
    hidden = _int(dims.hidden)
    inter = _int(dims.moe_intermediate) or _int(dims.intermediate)
    if not hidden or not inter:
        return 1.0
    def up(n, m):
        return -(-n // m) * m
    return up(inter, inter_multiple) * up(hidden, hidden_multiple) / (inter * hidden)


def _int(v) -> int | None:
    if v is None:
        return None
    x = v.value if hasattr(v, "value") else v
    return int(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0 else None


def _b(b: float) -> str:
    return f"{b:g} B"


def _fmt(n: float) -> str:
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n:.0f} B"


def parse_size(text: str) -> float:
    """Bytes of a memory size as the command line writes it: ``79.19GiB``, ``81920MiB``, ``80GB``
    (a ValueError names what is wrong)."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(GiB|GB|MiB|MB|TiB)\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"{text!r}: expected a size such as 79.19GiB or 81920MiB")
    unit = {"gib": 2**30, "gb": 1e9, "mib": 2**20, "mb": 1e6, "tib": 2**40}[m.group(2).lower()]
    return float(m.group(1)) * unit
