"""causal_trim: run a transformers model's self-attention through ``kernels.attention.causal_attention``.

Hooks (transformers 5.24, through its own extension points — no monkey-patching):
  * ``modeling_utils.AttentionInterface.register("sits_causal_trim", attention_forward)``
  * ``masking_utils.AttentionMaskInterface.register("sits_causal_trim", mask_function)`` — without
    it, ``masking_utils._preprocess_mask_arguments`` hands a custom implementation
    ``attention_mask=None`` for every batch, padded or not (vllm-hf-facts §5 pitfall);
  * ``model.set_attn_implementation("sits_causal_trim")``; revert sets the previous name back.

Which batches take the kernel. ``mask_function`` returns ``None`` (no 4-D mask) exactly when the
attention is plain bottom-right causal: the causal mask function itself (no sliding window,
chunking, packed sequences or or/and overlays), no padding among the keys, and the queries are the
last keys (``q_offset + q_length == kv_offset + kv_length``: prefill, chunked prefill and decode
over a DynamicCache). ``attention_forward`` then calls the kernel with q and the *whole* cached
k/v — the kernel is bottom-right aligned, so q_len 1 over k_len n is decode and q_len 3 over
k_len n is a chunk. Everything else gets the materialised 4-D boolean mask from
``masking_utils.sdpa_mask`` (``allow_is_causal_skip=False``) and ``attention_forward`` hands that
call to transformers' own ``sdpa_attention_forward``, unchanged: left/right padded batches
(the attention function sees only the 4-D mask, so converting to varlen ``cu_seqlens`` would mean
re-deriving sequence bounds from it — not done), static caches (K/V are the full preallocated
buffer, so the queries are not the last keys), user-supplied 4-D masks. Calls with dropout > 0,
softcap / sliding_window / sinks kwargs, q_len > k_len, or tensors that need autograd (the kernel
has no backward) fall back the same way. ``STATS`` counts kernel calls and fallbacks per reason
(process-wide).

Refused at apply: model types other than llama / mistral / qwen2 / qwen3 (not verified), non-causal
configs, sliding-window layers, ``output_attentions``, attention softcapping, training mode,
head_dim > 256, dtypes other than fp16 / bf16 / fp32, a CPU model without ``TRITON_INTERPRET=1``,
models that cannot switch attention implementation at runtime.
"""

from __future__ import annotations

import copy

import os
from collections import Counter

import torch

from ._core import DEFAULT_RTOL, Patch, PatchRefused, UndoStack, apply_verified, model_device, model_dtype

NAME = "causal_trim"
IMPL = "sits_causal_trim"
FAMILIES = frozenset({"llama", "mistral", "qwen2", "qwen3"})
RTOL = DEFAULT_RTOL
STATS: Counter = Counter()  # "kernel", "fallback:<reason>"

_registered = {"refs": 0, "prev_attn": None, "prev_mask": None}


# --------------------------------------------------------------------------------------------
# the functions transformers calls
# --------------------------------------------------------------------------------------------
def _unfit(module, query, key, value, attention_mask, dropout, is_causal, kwargs) -> str | None:
    if attention_mask is not None:
        return "mask"
    if dropout:
        return "dropout"
    for kw in ("softcap", "sliding_window", "s_aux", "sinks"):
        if kwargs.get(kw) is not None:
            return kw
    if is_causal is False or not getattr(module, "is_causal", True):
        return "non_causal"
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        return "layout"
    if query.shape[2] > key.shape[2]:
        return "q_longer_than_k"
    if not (query.shape[-1] == key.shape[-1] == value.shape[-1] <= 256):
        return "head_dim"
    if query.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return "dtype"
    if torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad):
        return "autograd"
    return None


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      is_causal=None, **kwargs):
    """transformers' attention signature: q [B, Hq, Sq, D], k/v [B, Hk, Sk, D] (after the cache
    update) → (out [B, Sq, Hq, D] contiguous, None)."""
    reason = _unfit(module, query, key, value, attention_mask, dropout, is_causal, kwargs)
    if reason is not None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        STATS["fallback:" + reason] += 1
        causal = is_causal is not False and getattr(module, "is_causal", True)
        if attention_mask is None and causal and query.shape[2] != key.shape[2]:
            # our mask function skipped the mask for a plain bottom-right batch, but sdpa's
            # is_causal is top-left aligned: hand it the bottom-right mask explicitly
            q_len, k_len = query.shape[2], key.shape[2]
            attention_mask = torch.ones(q_len, k_len, dtype=torch.bool, device=query.device)
            attention_mask = attention_mask.tril(k_len - q_len)[None, None]
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)
    from sits_doctor.kernels.attention import causal_attention

    STATS["kernel"] += 1
    out = causal_attention(query, key, value, sm_scale=scaling)  # [B, Hq, Sq, D]
    return out.transpose(1, 2).contiguous(), None


def _pure_bottom_right(q_length, kv_length, q_offset, kv_offset, attention_mask) -> bool:
    from transformers.masking_utils import prepare_padding_mask

    if isinstance(q_offset, torch.Tensor) or isinstance(kv_offset, torch.Tensor):
        return False  # static caches: K/V are the preallocated buffer, not the last keys
    if q_offset + q_length != kv_offset + kv_length:
        return False
    padding = prepare_padding_mask(attention_mask, kv_length, kv_offset)
    if padding is None:
        return True
    if padding.shape[-1] > kv_length:
        padding = padding[:, kv_offset:kv_offset + kv_length]
    return bool(padding.all())


def mask_function(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                  attention_mask=None, local_size=None, allow_is_causal_skip=True, **kwargs):
    """``AttentionMaskInterface`` entry: None for plain bottom-right causal batches (the kernel),
    else ``sdpa_mask``'s materialised 4-D boolean mask (the sdpa fallback)."""
    from transformers.masking_utils import causal_mask_function, sdpa_mask

    if mask_function is None:
        mask_function = causal_mask_function
    if (allow_is_causal_skip and mask_function is causal_mask_function and local_size is None
            and _pure_bottom_right(q_length, kv_length, q_offset, kv_offset, attention_mask)):
        return None
    return sdpa_mask(batch_size, q_length, kv_length, q_offset, kv_offset, mask_function,
                     attention_mask, local_size=local_size, allow_is_causal_skip=False, **kwargs)


# --------------------------------------------------------------------------------------------
# apply / revert
# --------------------------------------------------------------------------------------------
def check(model) -> None:
    cfg = model.config
    mt = getattr(cfg, "model_type", None)
    if mt not in FAMILIES:
        raise PatchRefused(NAME, f"model_type {mt!r} is not one of the verified families "
                                 f"({', '.join(sorted(FAMILIES))})")
    if not getattr(cfg, "is_causal", True):
        raise PatchRefused(NAME, "config.is_causal is False: the kernel is causal only")
    layer_types = getattr(cfg, "layer_types", None)
    if layer_types and any(t != "full_attention" for t in layer_types):
        kinds = sorted(set(layer_types) - {"full_attention"})
        raise PatchRefused(NAME, f"layers of type {kinds} (sliding-window / chunked attention) "
                                 f"are not expressible by the causal kernel")
    if getattr(cfg, "sliding_window", None) is not None and (mt == "mistral" or not layer_types):
        raise PatchRefused(NAME, f"sliding_window={cfg.sliding_window}: sliding-window attention "
                                 f"is not expressible by the causal kernel")
    if getattr(cfg, "output_attentions", False):
        raise PatchRefused(NAME, "output_attentions=True: the kernel does not return attention weights")
    if getattr(cfg, "attn_logit_softcapping", None):
        raise PatchRefused(NAME, "attention logit softcapping is not supported by the kernel")
    if model.training:
        why = f" (attention_dropout={cfg.attention_dropout})" if getattr(cfg, "attention_dropout", 0) else ""
        raise PatchRefused(NAME, f"model is in training mode{why}: the kernel is forward-only, "
                                 f"without dropout; call model.eval()")
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    if head_dim > 256:
        raise PatchRefused(NAME, f"head_dim {head_dim} > 256")
    dt = model_dtype(model)
    if dt not in (torch.float16, torch.bfloat16, torch.float32):
        raise PatchRefused(NAME, f"dtype {dt} is not fp16 / bf16 / fp32")
    if model_device(model).type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise PatchRefused(NAME, "the model is on the CPU: Triton kernels run there only with "
                                 "TRITON_INTERPRET=1 (tests)")
    if not model._can_set_attn_implementation():
        raise PatchRefused(NAME, f"{type(model).__name__} cannot switch attention implementation "
                                 f"at runtime (not AttentionInterface-based)")


def _register() -> None:
    from transformers.masking_utils import AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    if _registered["refs"] == 0:
        _registered["prev_attn"] = AttentionInterface._global_mapping.get(IMPL)
        _registered["prev_mask"] = AttentionMaskInterface._global_mapping.get(IMPL)
        AttentionInterface.register(IMPL, attention_forward)
        AttentionMaskInterface.register(IMPL, mask_function)
    _registered["refs"] += 1


def _unregister() -> None:
    from transformers.masking_utils import AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    _registered["refs"] -= 1
    if _registered["refs"] == 0:
        for iface, prev in ((AttentionInterface, _registered["prev_attn"]),
                            (AttentionMaskInterface, _registered["prev_mask"])):
            if prev is None:
                iface._global_mapping.pop(IMPL, None)
            else:
                iface._global_mapping[IMPL] = prev


def install(model):
    undo = UndoStack()
    try:
        _register()
        undo.push(_unregister)
        # set_attn_implementation edits the config object in place, and models built from one
        # config share it: give this model (and its submodules) a private copy first
        shared, private = model.config, copy.deepcopy(model.config)
        holders = [m for m in model.modules() if getattr(m, "config", None) is shared]
        for m in holders:
            m.config = private
        undo.push(lambda: [setattr(m, "config", shared) for m in holders])
        previous = model.config._attn_implementation
        model.set_attn_implementation(IMPL)
        undo.push(lambda: model.set_attn_implementation(previous))
        if model.config._attn_implementation != IMPL:
            raise PatchRefused(NAME, f"set_attn_implementation({IMPL!r}) left "
                                     f"{model.config._attn_implementation!r}")
    except BaseException:
        undo()
        raise
    return undo, {"previous_attn_implementation": previous, "stats": STATS}


def apply(model, **kw) -> Patch:
    """Switch ``model`` to the causal_trim kernel; verified on a probe batch (see ``_core``)."""
    return apply_verified(model, NAME, check, install, rtol_table=RTOL, **kw)
