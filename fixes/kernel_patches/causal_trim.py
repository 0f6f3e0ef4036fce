"""causal_trim: run a transformers model's self-attention through ``kernels.attention.causal_attention``.

Hooks (transformers 5.17-5.24, through its own extension points — no monkey-patching):
  * ``modeling_utils.AttentionInterface.register("sits_causal_trim", attention_forward)``
  * ``masking_utils.AttentionMaskInterface.register("sits_causal_trim", mask_function)`` — without
    it, ``masking_utils._preprocess_mask_arguments`` hands a custom implementation
    ``attention_mask=None`` for every batch, padded or not (vllm-hf-facts §5 pitfall);
  * ``model.set_attn_implementation("sits_causal_trim")``; revert sets the previous name back.

What the mask function answers (once per forward, from the 2-D padding mask before any 4-D
expansion). Only for the causal mask function itself (or a sliding window holding every key; no
chunking, packed sequences or or/and overlays) with the queries the last keys (``q_offset + q_length == kv_offset +
kv_length``: prefill, chunked prefill and decode over a DynamicCache):
  * no padding among the keys → ``None`` (plain bottom-right causal);
  * padding, with every row's valid keys one contiguous run ``[start, end)`` (left padding, right
    padding of a prompt, left padding during generation) → a :class:`PaddedCausal`: per-sequence
    row bounds for the kernel's padded-batch path (``seq_bounds_q/k``), and the 4-D mask built only
    if a call hands it to sdpa. One host sync per forward decides this (transformers' own sdpa mask
    syncs once too, for its is_causal skip);
  * anything else (right padding followed by generated tokens, static caches, user 4-D masks)
    → ``masking_utils.sdpa_mask``'s materialised boolean mask (``allow_is_causal_skip=False``), for
    transformers' own ``sdpa_attention_forward``, unchanged.
  * except a decode step (q_length 1, CUDA) that the model's policy sends to sdpa whatever the
    padding (``decode_routes_to_sdpa``: "table" with the padded and the unpadded entry both on
    sdpa, or "sdpa"): no padding runs are looked for; a ``PaddedCausal`` marked ``routed`` holds
    ``sdpa_mask``'s answer to transformers' own arguments, built in the mask function as the
    unpatched model builds it — exactly the unpatched model's mask, without the extra host sync
    and ~15 small launches per step (measured on the H200: generate of a padded batch of 8
    launched 1686 kernels per step patched against 1657 unpatched before this, 1657 after).
    Every attention call of such a step goes straight to ``sdpa_attention_forward`` and is
    counted as ``sdpa:decode``.

Which path each call takes (``attention_forward``). Calls the kernel cannot express go to sdpa and
are counted as ``fallback:<reason>``: a materialised mask, dropout > 0, softcap / sliding_window /
sinks kwargs, q_len > k_len, tensors that need autograd. The rest are routed by the dispatch policy
of the model (``apply(model, dispatch=...)``): ``"table"`` (default) looks the call's shape up in
``causal_trim_dispatch.json`` — kernel vs sdpa times measured on the H200 for each phase (prefill
q == k, chunk 1 < q < k, decode q == 1), padded or not, batch and key length — and takes the kernel
only where it measured faster, sdpa otherwise (nearest measured batch and key length, in log scale;
a shape with no measurement takes sdpa, i.e. what the unpatched model does). On a device other than
CUDA (the CPU interpreter in tests) ``"table"`` takes the kernel. ``"kernel"`` and ``"sdpa"`` force
one path. Verification always runs with ``"kernel"``, so the kernel is what is checked against the
unpatched model, on an unpadded and a left/right padded probe (see ``_core``), before the policy
is switched to the one asked for. ``STATS`` counts ``kernel``, ``kernel:padded``, ``sdpa:<phase>``
and ``fallback:<reason>`` (process-wide).

A decode step the policy sends to sdpa whatever the padding is, before any of it runs, switched to
transformers' own ``"sdpa"`` (a forward pre-hook on the model's base reads the step's token count,
batch and dynamic cache; a forward hook sets the name back after the step): mask and layers are
then the unpatched model's own code, with two hook calls per step on top (see
``_install_step_switch``), where the per-call route below would hand a padded batch's mask to
transformers' full sdpa function 32+ times a step. Steps the switch cannot read (arguments given
positionally, a static cache) take the per-call paths below. On the H200 (2026-12-02) the switch
on every decode step read 0.991 (batch 1) and 1.010 (padded batch of 8) of the unpatched model's
generate (run 7); with batch-1 steps left to the per-call paths, batch 1 read 0.980 (run 8), and
in both runs where batch 1 took the per-call paths (runs 6 and 8) causal_trim cost 2.1-2.5% inside
"both" against 0.3% with the switch (bench/results/e2e-patches-h200-2026-12-02.md).

Decode calls sent to sdpa cost no more host time than the unpatched model's, since there are 32+
per generated token. An unpadded one on CUDA (no mask: every batch-1 step) with no dropout and no
window/softcap/sink kwarg skips ``_unfit`` and ``route``. Without a mask to apply (that one, or a
routed step whose ``sdpa_mask`` skipped the mask) it makes the ``scaled_dot_product_attention``
call transformers' ``sdpa_attention_forward`` makes for it (:func:`_sdpa_decode`), without that
function's Python. ``python bench/attention_forward_overhead.py`` (a tiny layer's call on a 2-core
x86 CPU, transformers 5.24, noise about ±1 µs): 1.7-2.4 µs per call less than transformers' own
call without a mask; about equal to it (-0.2 to +1.0 µs) for a routed step with a padding mask;
2.4-3.4 µs more through every check.

Sliding-window layers (Mistral with ``sliding_window``, Qwen2/3 with ``use_sliding_window``, the
``sliding_attention`` layers of Gemma 3) are expressible by the causal kernel only while every key
is inside the window of every query: fewer keys than the window (``kv_length < sliding_window``,
transformers' own condition for skipping the sliding mask, ``masking_utils._ignore_causal_mask_sdpa``
in 5.24; its overlay ``kv_idx > q_idx - sliding_window`` then keeps every causal key). Such calls
are routed like a full layer's (mask function and attention alike). Once the keys reach the window,
the mask is transformers' own ``sdpa_mask`` (is_causal skip included) and the call goes to
transformers' sdpa path, counted as ``fallback:sliding_window``; the full-attention layers of the
same model take the kernel. (The mask function reads a ``local_size`` as a sliding window only for
the configs of models it patched: ``check`` refused every other layer type, such as chunked
attention, whose mask is not causal however few the keys.) Per patch, ``patch.info["calls"]`` counts the same keys for this model
only, without the verification probes; ``fallbacks(patch)`` / ``Patch.fallbacks()`` give
``{reason: calls}``, e.g. ``{"sliding_window": 12}``.

Refused at apply: model types other than llama / mistral / qwen2 / qwen3 / gemma3_text (not
verified), non-causal configs, layer types other than full / sliding attention, a
``sliding_window`` on a family whose attention has no sliding-window path (llama), ``output_attentions``,
attention softcapping (sdpa cannot express it either: Gemma 2), training mode,
head_dim > 256, dtypes other than fp16 / bf16 / fp32, a CPU model without ``TRITON_INTERPRET=1``,
models that cannot switch attention implementation at runtime.
"""

from __future__ import annotations

import copy
import json
import math
import os
import threading
from collections import Counter
from functools import lru_cache
from pathlib import Path

import torch

from ._core import (_PROBING, DEFAULT_RTOL, Patch, PatchRefused, UndoStack, apply_verified, model_device,
                    model_dtype)

NAME = "causal_trim"
IMPL = "sits_causal_trim"
FAMILIES = frozenset({"llama", "mistral", "qwen2", "qwen3", "gemma3_text"})
# families whose attention modules read a per-layer ``sliding_window`` (None on full layers) and
# whose models build a sliding-window mask for those layers: their sliding layers fall back once
# the keys reach the window (counted as ``fallback:sliding_window``), their full layers take the kernel
SLIDING_FAMILIES = frozenset({"mistral", "qwen2", "qwen3", "gemma3_text"})
RTOL = DEFAULT_RTOL
STATS: Counter = Counter()  # "kernel", "kernel:padded", "sdpa:<phase>", "fallback:<reason>"
POLICIES = ("table", "kernel", "sdpa")
DISPATCH_FILE = Path(__file__).with_name("causal_trim_dispatch.json")
_POLICY_ATTR = "_sits_causal_trim_dispatch"  # on each attention module while patched
_STATS_ATTR = "_sits_causal_trim_stats"  # on each attention module: the patch's own Counter

_registered = {"refs": 0, "prev_attn": None, "prev_mask": None}
_CONFIG_POLICY: dict[int, str] = {}  # id(patched model's private config) -> its dispatch policy


# --------------------------------------------------------------------------------------------
# the dispatch table
# --------------------------------------------------------------------------------------------
def load_table(path: Path = DISPATCH_FILE) -> dict:
    """{(phase, padded): [(batch, k_len, path), ...]} from the committed measurements."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    margin = float(data.get("margin", 0.0))
    out: dict = {}
    for e in data.get("entries", []):
        faster = e["kernel_us"] < e["sdpa_us"] * (1.0 - margin)
        out.setdefault((e["phase"], bool(e["padded"])), []).append(
            (int(e["batch"]), int(e["k_len"]), "kernel" if faster else "sdpa"))
    return out


_TABLE = {"rows": None}


def _table() -> dict:
    if _TABLE["rows"] is None:
        _TABLE["rows"] = load_table()
    return _TABLE["rows"]


def set_table(rows: dict | None) -> None:
    """Replace the dispatch table (``load_table`` output; None reloads the committed file)."""
    _TABLE["rows"] = rows
    choose.cache_clear()


def phase_of(q_len: int, k_len: int) -> str:
    return "decode" if q_len == 1 else ("prefill" if q_len == k_len else "chunk")


@lru_cache(maxsize=4096)
def choose(phase: str, padded: bool, batch: int, k_len: int) -> str:
    """'kernel' or 'sdpa' for one call shape, from the table (nearest batch, then key length)."""
    rows = _table().get((phase, padded))
    if not rows:
        return "sdpa"
    lb = math.log2(max(1, batch))
    best_b = min({b for b, _, _ in rows}, key=lambda b: abs(math.log2(b) - lb))
    lk = math.log2(max(1, k_len))
    _, _, path = min((r for r in rows if r[0] == best_b), key=lambda r: abs(math.log2(max(1, r[1])) - lk))
    return path


# --------------------------------------------------------------------------------------------
# the functions transformers calls
# --------------------------------------------------------------------------------------------
class PaddedCausal:
    """``mask_function``'s answer for a padded batch whose valid keys are one run per row.

    ``bounds_q`` / ``bounds_k``: int32 [B, 2] ``[start, end)`` rows of each sequence in the query
    and key dimension (the kernel's ``seq_bounds_q/k``). ``mask4d()`` builds (once) the boolean
    [B, 1, q_len, kv_len] mask transformers' sdpa path would have had. ``shape`` / ``ndim`` describe
    that mask without building it."""

    def __init__(self, bounds_q, bounds_k, shape, build, *, routed: bool = False):
        self.routed = routed  # True: the mask function already sent every call of this forward to sdpa
        self.bounds_q = bounds_q
        self.bounds_k = bounds_k
        self.shape = torch.Size(shape)
        self.ndim = 4
        self._build = build
        self._mask = None
        self._built = False

    def mask4d(self) -> torch.Tensor | None:
        """The mask, built on the first call; None stays None (sdpa_mask's is_causal skip) and is
        not built again by the next layer."""
        if not self._built:
            self._mask = self._build()
            self._built = True
        return self._mask

    def __repr__(self) -> str:
        return f"PaddedCausal(shape={tuple(self.shape)})"


def padding_runs(padding: torch.Tensor, q_length: int):
    """From a [B, kv_len] bool padding mask (True = a real token): ``("none", None)`` when nothing
    is padded, ``("runs", (bounds_q, bounds_k))`` when each row's real tokens are one run, else
    ``("other", None)``. The queries are the last ``q_length`` keys. One host sync."""
    B, kv = padding.shape
    idx = torch.arange(kv, device=padding.device)
    n = padding.sum(-1)
    first = torch.where(padding, idx, kv).amin(-1)
    last = torch.where(padding, idx + 1, 0).amax(-1)
    full, runs = torch.stack([(n == kv).all(), ((last - first == n) | (n == 0)).all()]).tolist()
    if full:
        return "none", None
    if not runs:
        return "other", None
    ks = torch.where(n > 0, first, 0)
    ke = torch.where(n > 0, last, 0)
    off = kv - q_length  # query i is key off + i
    qs = (ks - off).clamp(0, q_length)
    qe = (ke - off).clamp(0, q_length)
    return "runs", (torch.stack([qs, qe], 1).to(torch.int32), torch.stack([ks, ke], 1).to(torch.int32))


def _unfit(module, query, key, value, attention_mask, dropout, is_causal, kwargs) -> str | None:
    window = kwargs.get("sliding_window")
    if window is not None and not key.shape[-2] < window:  # fewer keys than the window: causal
        return "sliding_window"
    for kw in ("softcap", "s_aux", "sinks"):
        if kwargs.get(kw) is not None:
            return kw
    if attention_mask is not None:
        return "mask"
    if dropout:
        return "dropout"
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


def route(module, query, key, padded: bool) -> str:
    """The path of one fitting call: the module's policy, the table for "table" on CUDA."""
    policy = module.__dict__.get(_POLICY_ATTR, "table")
    if policy != "table":
        return policy
    if not _on_cuda(query):
        return "kernel"
    return choose(phase_of(query.shape[2], key.shape[2]), padded, query.shape[0], key.shape[2])


def _count(module, key: str) -> None:
    STATS[key] += 1
    if not _PROBING[0]:  # probing(), inline: this runs once per attention call
        own = module.__dict__.get(_STATS_ATTR)
        if own is not None:
            own[key] += 1


_UNFIT_KWARGS = frozenset({"sliding_window", "softcap", "s_aux", "sinks"})  # kwargs that may send a call to sdpa


def _sdpa_extras(kwargs) -> bool:
    """kwargs that send transformers' sdpa path down another branch than :func:`_sdpa_decode`'s
    call: a position bias, or attention weights asked for."""
    return kwargs.get("position_bias") is not None or bool(kwargs.get("output_attentions"))


def _lean_decode_ok(query, dropout, kwargs) -> bool:
    """A maskless decode call that transformers' sdpa path turns into exactly :func:`_sdpa_decode`'s
    call: on CUDA, one query, no dropout, none of :func:`_sdpa_extras`, and nothing that changes
    the attention (softcap, sinks)."""
    return (query.shape[2] == 1 and not dropout and _on_cuda(query) and not _sdpa_extras(kwargs)
            and kwargs.get("softcap") is None and kwargs.get("s_aux") is None and kwargs.get("sinks") is None)


def _sdpa_decode(module, query, key, value, scaling):
    """The call transformers' ``sdpa_attention_forward`` makes for one unpadded decode step on CUDA
    (no mask, one query, no dropout, no position bias: ``is_causal`` False, GQA through
    ``enable_gqa`` for head dims up to 256; the same in transformers 5.17 and 5.24), made without
    its Python around it, so a patched model's decode step costs no more host time than the
    unpatched one's (32+ calls per generated token)."""
    groups = getattr(module, "num_key_value_groups", 1)
    if groups > 1 and not key.shape[-1] == value.shape[-1] <= 256:  # transformers repeats K/V then
        return _sdpa_forward()(module, query, key, value, None, dropout=0.0, scaling=scaling)
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=None, dropout_p=0.0, scale=scaling, is_causal=False,
        **({"enable_gqa": True} if groups > 1 else {}))
    return out.transpose(1, 2).contiguous(), None


@lru_cache(maxsize=1)
def _sdpa_forward():
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      is_causal=None, **kwargs):
    """transformers' attention signature: q [B, Hq, Sq, D], k/v [B, Hk, Sk, D] (after the cache
    update) → (out [B, Sq, Hq, D] contiguous, None)."""
    if type(attention_mask) is PaddedCausal and attention_mask.routed:
        # a decode step the mask function already sent to sdpa: transformers' own call, with as
        # little host time as possible on top (32+ calls per generated token); counted as
        # sdpa:decode whatever the call would otherwise have fallen back for. No mask to apply
        # (sdpa_mask skipped it: no padding) is the lean call (_sdpa_decode) on CUDA.
        _count(module, "sdpa:decode")
        mask = attention_mask.mask4d()
        if mask is None and _lean_decode_ok(query, dropout, kwargs):
            return _sdpa_decode(module, query, key, value, scaling)
        return _sdpa_forward()(module, query, key, value, mask, dropout=dropout,
                               scaling=scaling, is_causal=is_causal, **kwargs)
    if (attention_mask is None and query.shape[2] == 1 and not dropout and _on_cuda(query)
            and (_UNFIT_KWARGS.isdisjoint(kwargs) or all(kwargs.get(k) is None for k in _UNFIT_KWARGS))):
        # an unpadded decode step (batch 1 never has a mask here): once per layer per token, so the
        # policy is looked up inline; a call the policy sends to sdpa is transformers' own call
        policy = module.__dict__.get(_POLICY_ATTR, "table")
        if policy == "sdpa" or (policy == "table" and choose("decode", False, query.shape[0], key.shape[2]) == "sdpa"):
            _count(module, "sdpa:decode")
            if not _sdpa_extras(kwargs):  # the gate above checked the rest of _lean_decode_ok
                return _sdpa_decode(module, query, key, value, scaling)
            return _sdpa_forward()(module, query, key, value, None, dropout=dropout, scaling=scaling,
                                   is_causal=is_causal, **kwargs)
    padded = isinstance(attention_mask, PaddedCausal)
    reason = _unfit(module, query, key, value, None if padded else attention_mask, dropout, is_causal, kwargs)
    path = "sdpa" if reason is not None else route(module, query, key, padded)
    if path == "kernel":
        from sits_doctor.kernels.attention import causal_attention

        B, Hq, Sq, D = query.shape
        buf = (torch.zeros if padded else torch.empty)((B, Sq, Hq, D), dtype=query.dtype, device=query.device)
        causal_attention(query, key, value, sm_scale=scaling, out=buf.transpose(1, 2),
                         seq_bounds_q=attention_mask.bounds_q if padded else None,
                         seq_bounds_k=attention_mask.bounds_k if padded else None)
        _count(module, "kernel")
        if padded:
            _count(module, "kernel:padded")
        return buf, None

    sdpa_attention_forward = _sdpa_forward()
    if reason is not None:
        _count(module, "fallback:" + reason)
    else:
        _count(module, "sdpa:" + phase_of(query.shape[2], key.shape[2]))
    if padded:
        attention_mask = attention_mask.mask4d()
    causal = is_causal is not False and getattr(module, "is_causal", True)
    if attention_mask is None and causal and query.shape[2] != key.shape[2] and query.shape[2] > 1:
        # our mask function skipped the mask for a plain bottom-right chunk, but sdpa's is_causal
        # is top-left aligned: hand it the bottom-right mask explicitly
        q_len, k_len = query.shape[2], key.shape[2]
        attention_mask = torch.ones(q_len, k_len, dtype=torch.bool, device=query.device)
        attention_mask = attention_mask.tril(k_len - q_len)[None, None]
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                  scaling=scaling, is_causal=is_causal, **kwargs)


def _on_cuda(t) -> bool:
    """A CUDA tensor: where "table" reads the dispatch table (off it, the kernel, see :func:`route`)
    and where decode calls sent to sdpa may skip the checks."""
    return t is not None and t.is_cuda


def decode_routes_to_sdpa(config, batch: int, kv_length: int) -> bool:
    """True when the model owning ``config`` sends every decode call of this shape to sdpa,
    whether the batch turns out padded or not: policy "sdpa", or "table" with both measured
    entries (padded and unpadded) on sdpa. False for "kernel" (verification) and unknown configs.
    (The caller asks only for CUDA tensors: off CUDA, "table" takes the kernel, see :func:`route`.)"""
    policy = _CONFIG_POLICY.get(id(config)) if config is not None else None
    if policy == "sdpa":
        return True
    if policy != "table":
        return False
    return choose("decode", True, batch, kv_length) == "sdpa" and choose("decode", False, batch, kv_length) == "sdpa"


def mask_function(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                  attention_mask=None, local_size=None, allow_is_causal_skip=True, **kwargs):
    """``AttentionMaskInterface`` entry: None (no padding), a :class:`PaddedCausal` (padding in
    one run per row), else ``sdpa_mask``'s materialised 4-D boolean mask."""
    from transformers.masking_utils import causal_mask_function, prepare_padding_mask, sdpa_mask

    if mask_function is None:
        mask_function = causal_mask_function

    def materialise():
        # A sliding-window layer whose keys reach the window falls back (its attention call carries
        # ``sliding_window``): it gets exactly transformers' own sdpa mask, is_causal skip included. Every other mask
        # handed out here is materialised, so that the attention call sees it and falls back.
        skip = allow_is_causal_skip if local_size is not None else False
        return sdpa_mask(batch_size, q_length, kv_length, q_offset, kv_offset, mask_function,
                         attention_mask, local_size=local_size, allow_is_causal_skip=skip, **kwargs)

    config = kwargs.get("config")
    # a sliding window (the only local_size a patched model's config can ask for, see check())
    # holding every key: the causal mask (transformers' own condition for skipping it)
    window_holds_all = (local_size is not None and isinstance(kv_length, int) and kv_length < local_size
                        and config is not None and id(config) in _CONFIG_POLICY)
    plain = (allow_is_causal_skip
             and ((mask_function is causal_mask_function and local_size is None) or window_holds_all)
             and not isinstance(q_offset, torch.Tensor) and not isinstance(kv_offset, torch.Tensor)
             and q_offset + q_length == kv_offset + kv_length)
    if not plain:
        return materialise()
    if q_length == 1 and _on_cuda(attention_mask) and decode_routes_to_sdpa(config, batch_size, kv_length):
        # A decode step whose every call the policy sends to sdpa, padded or not: transformers' own
        # mask (is_causal skip included) — the unpatched model's work, without finding the padding
        # runs first (one host sync and ~15 small launches per step). Built here, where the
        # unpatched model builds it: its is_causal-skip test reads the padding mask on the host (a
        # sync), which at the first layer's call would also wait for that layer's queued kernels.
        routed = PaddedCausal(None, None, (batch_size, 1, q_length, kv_length), lambda: sdpa_mask(
            batch_size, q_length, kv_length, q_offset, kv_offset, mask_function, attention_mask,
            local_size=local_size, allow_is_causal_skip=allow_is_causal_skip, **kwargs), routed=True)
        routed.mask4d()
        return routed
    padding = prepare_padding_mask(attention_mask, kv_length, kv_offset)
    if padding is None:
        return None
    if padding.shape[-1] > kv_length:
        padding = padding[:, kv_offset:kv_offset + kv_length]
    kind, bounds = padding_runs(padding.to(torch.bool), q_length)
    if kind == "none":
        return None
    if kind == "runs":
        return PaddedCausal(bounds[0], bounds[1], (batch_size, 1, q_length, kv_length), materialise)
    return materialise()


# --------------------------------------------------------------------------------------------
# apply / revert
# --------------------------------------------------------------------------------------------
def check(model, *, dispatch: str = "table") -> None:
    if dispatch not in POLICIES:
        raise ValueError(f"dispatch must be one of {POLICIES}, got {dispatch!r}")
    cfg = model.config
    mt = getattr(cfg, "model_type", None)
    if mt not in FAMILIES:
        raise PatchRefused(NAME, f"model_type {mt!r} is not one of the verified families "
                                 f"({', '.join(sorted(FAMILIES))})")
    if not getattr(cfg, "is_causal", True):
        raise PatchRefused(NAME, "config.is_causal is False: the kernel is causal only")
    layer_types = getattr(cfg, "layer_types", None)
    allowed = {"full_attention", "sliding_attention"} if mt in SLIDING_FAMILIES else {"full_attention"}
    if layer_types and any(t not in allowed for t in layer_types):
        kinds = sorted(set(layer_types) - allowed)
        raise PatchRefused(NAME, f"layers of type {kinds} (sliding-window / chunked attention) "
                                 f"are not expressible by the causal kernel for {mt!r}")
    if getattr(cfg, "sliding_window", None) is not None and not layer_types and mt not in SLIDING_FAMILIES:
        # the family's attention does not read the window: config and modeling disagree
        raise PatchRefused(NAME, f"sliding_window={cfg.sliding_window} on {mt!r}, whose attention "
                                 f"has no sliding-window path: sliding-window attention is not "
                                 f"expressible by the causal kernel")
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


def _attention_modules(model):
    return [m for m in model.modules() if type(m).__name__.endswith("Attention")]


def _set_policy(model, policy: str) -> None:
    for m in _attention_modules(model):
        m.__dict__[_POLICY_ATTR] = policy
    _CONFIG_POLICY[id(model.config)] = policy


def install(model, *, dispatch: str = "table"):
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
        _set_policy(model, "kernel")  # verification checks the kernel itself
        undo.push(lambda: [m.__dict__.pop(_POLICY_ATTR, None) for m in _attention_modules(model)])
        undo.push(lambda: _CONFIG_POLICY.pop(id(private), None))
        own = Counter()
        for m in _attention_modules(model):
            m.__dict__[_STATS_ATTR] = own
        undo.push(lambda: [m.__dict__.pop(_STATS_ATTR, None) for m in _attention_modules(model)])
        switch = _install_step_switch(model, own)
        undo.push(switch)
    except BaseException:
        undo()
        raise
    return undo, {"previous_attn_implementation": previous, "stats": STATS, "dispatch": dispatch,
                  "calls": own, "sliding_layers": sliding_layers(model), "step_switch": switch}


def _install_step_switch(model, own: Counter):
    """A forward pre-hook on the model's base (the module that builds the masks) that picks the
    attention implementation of each step before any of it runs: transformers' own ``"sdpa"`` for a
    decode step the policy sends to sdpa whatever the padding (:func:`decode_routes_to_sdpa`), this
    patch's otherwise. Such a step then is the unpatched model's step, mask and every layer's call,
    with one hook call on top instead of 32+ calls through :func:`attention_forward`. It applies to
    one-token steps over a dynamic cache on CUDA, given as keywords (what ``generate`` and the
    ``*ForCausalLM`` classes pass), batch 1 included; any other call keeps this patch's
    implementation, whose own per-call paths handle it. The layers' calls are counted as
    ``sdpa:decode`` here. After the step (returned or raised) the name is this patch's again.
    Returns the undo."""
    from transformers.cache_utils import DynamicCache

    base = getattr(model, "base_model", model)
    modules = _attention_modules(model)
    # The name is written into the configs' instance dicts, where it lives (transformers
    # 5.17-5.24): the config's __setattr__ runs its attribute map and strict-dataclass validators,
    # dozens of Python calls twice a step (counted with cProfile on a tiny Llama: the switch added
    # 68 calls a step that way, against 1670 for the whole unpatched step)
    stores = list({id(c): c.__dict__ for c in [model.config] + [getattr(m, "config", None) for m in modules]
                   if c is not None and getattr(c, "_attn_implementation_internal", None) == IMPL}.values())

    def name_all(impl: str) -> None:
        for d in stores:
            d["_attn_implementation_internal"] = impl

    n_layers = len(modules)
    config = model.config

    def mode(kwargs) -> str:
        x = kwargs.get("input_ids")
        if x is None:
            x = kwargs.get("inputs_embeds")
        past = kwargs.get("cache")  # transformers 5.24; past_key_values in 5.17
        if past is None:
            past = kwargs.get("past_key_values")
        # a dynamic cache only: a static one's get_seq_length syncs (and its is_compileable walks
        # every layer, each step)
        if (x is None or x.dim() < 2 or x.shape[1] != 1 or not isinstance(past, DynamicCache)
                or not _on_cuda(x)):
            return IMPL
        return "sdpa" if decode_routes_to_sdpa(config, x.shape[0], past.get_seq_length() + 1) else IMPL

    # The name is per model, not per thread: a step runs as "sdpa" only while it is the model's
    # one forward in flight. A forward that starts beside it (another thread, or a call made
    # from inside it) sets the patch's name back first; the switched step's remaining layers
    # then take the per-call paths, which read transformers' mask it was given as a mask.
    lock, in_flight = threading.Lock(), [0]

    def pre_hook(module, args, kwargs):
        with lock:
            in_flight[0] += 1
            impl = mode(kwargs) if in_flight[0] == 1 else IMPL
            name_all(impl)
        if impl == "sdpa":
            STATS["sdpa:decode"] += n_layers
            if not _PROBING[0]:
                own["sdpa:decode"] += n_layers

    def restore(*_):  # after the step, raised or not: outside a forward the name is this patch's
        with lock:
            in_flight[0] = max(0, in_flight[0] - 1)
            name_all(IMPL)

    handles = [base.register_forward_pre_hook(pre_hook, with_kwargs=True),
               base.register_forward_hook(restore, always_call=True)]

    def undo():
        for h in handles:
            h.remove()
        name_all(IMPL)
    return undo


def sliding_layers(model) -> list[int]:
    """Indices of the decoder layers whose attention is sliding-window (they fall back once their
    keys reach the window)."""
    cfg = model.config
    layer_types = getattr(cfg, "layer_types", None)
    n = int(getattr(cfg, "num_hidden_layers", 0) or 0)
    if layer_types:
        return [i for i, t in enumerate(layer_types) if t == "sliding_attention"]
    if getattr(cfg, "model_type", None) == "mistral" and getattr(cfg, "sliding_window", None) is not None:
        return list(range(n))
    return []


def reset_counts(patch: Patch) -> None:
    """Zero this patch's own call counters (``STATS``, process-wide, is left alone)."""
    patch.info["calls"].clear()


def fallbacks(patch: Patch) -> dict[str, int]:
    """This patch's calls that fell back to transformers' sdpa path, per reason (since it was
    applied; verification calls not included), e.g. ``{"sliding_window": 12}``."""
    own = patch.info["calls"]
    return {k.split(":", 1)[1]: v for k, v in sorted(own.items()) if k.startswith("fallback:")}


def set_dispatch(patch: Patch, dispatch: str) -> None:
    """Switch a causal_trim patch's routing policy ("table", "kernel", "sdpa")."""
    if dispatch not in POLICIES:
        raise ValueError(f"dispatch must be one of {POLICIES}, got {dispatch!r}")
    _set_policy(patch.model, dispatch)
    patch.info["dispatch"] = dispatch


def apply(model, *, dispatch: str = "table", **kw) -> Patch:
    """Switch ``model`` to the causal_trim kernel; verified on probe batches with every call on the
    kernel (see ``_core``), then routed by ``dispatch`` ("table": the measured faster path)."""
    def after_verify(p: Patch) -> None:
        set_dispatch(p, dispatch)
        p.info["calls"].clear()  # count the user's calls, not the probe's

    return apply_verified(model, NAME, check, install, rtol_table=RTOL,
                          after_verify=after_verify, dispatch=dispatch, **kw)
