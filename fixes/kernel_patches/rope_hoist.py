"""rope_hoist: one cos/sin cache per model, and ``apply_rope_`` rotating q and k in place.

Hooks (transformers 5.24; llama / mistral / qwen2 / qwen3 / gemma3_text share this code path;
Gemma 3's rotary module holds one table per layer type, ``<type>_inv_freq``, and is called as
``rotary_emb(x, position_ids, layer_type)``: one hoisted cache per layer type,
``info["hoisted_by_type"]``):
  * ``<Family>RotaryEmbedding.forward`` of the model's one rotary module (``model.model.rotary_emb``),
    overridden on the *instance* (an entry in its ``__dict__``; revert deletes it). Instead of
    computing cos/sin [B, S, D] on every forward it returns ``(position_ids, hoisted)``, which
    the decoder layers pass on untouched as ``position_embeddings`` to every attention module.
  * ``modeling_<family>.apply_rotary_pos_emb``, the module global the attention forward calls
    (``query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)``):
    replaced by a dispatcher that runs ``apply_rope_(q, k, cache, position_ids)`` in place when
    ``sin`` is a hoisted cache and calls the original function otherwise, so other models of the
    same family in the process are unaffected. The global is shared, hence reference-counted:
    the original comes back when the last patched model is reverted.

The cache is ``build_rope_cache`` from the config's ``rope_parameters`` (rope_theta, rope_type and
its scaling keys, partial_rotary_factor) and head_dim, for ``max_position_embeddings`` positions,
on the rotary module's device; it is rebuilt larger when a forward's positions go past it. The
bound check reads the positions' maximum (one host sync) on multi-token forwards only; a
one-token forward (a decode step) advances the last bound by one without a sync — generate()
never moves a position further — and syncs again when that bound reaches the table's end. A
caller that jumps a single-token position past the table without any longer call in between is
not protected. (Issue 10's 0.93x at generate b1 was measured with one sync per step.)
Before installing, the cache is checked against the
model's own rotary module (its ``inv_freq`` and ``attention_scaling``), so a rope type the builder
reads differently is refused rather than verified by luck.

Calls of fewer than ``min_tokens`` tokens on CUDA (``rope_hoist_dispatch.json``, measured on the
H200: decode, where a Triton launch's host time exceeds transformers' few small ops) take the
original math with cos/sin gathered once per forward from the same cache. Falls back per call to
the original math the same way when autograd needs the inputs (``apply_rope_`` is in place, inference only) or q/k are not [B, H, S, D].
Per-call fallbacks to transformers' math are counted per reason (``fallbacks(patch)``:
``autograd``, ``layout``), without the verification probes.
Refused: other model types, ``dynamic`` / ``longrope`` rope types (their frequencies depend on the
current length, which a cache built once does not follow), a rotary dim different from the
model's, training mode, a CPU model without ``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from pathlib import Path

from collections import Counter

import torch

from ._core import DEFAULT_RTOL, Patch, PatchRefused, UndoStack, apply_verified, model_device, probing

NAME = "rope_hoist"
FAMILIES = frozenset({"llama", "mistral", "qwen2", "qwen3", "gemma3_text"})
LENGTH_DEPENDENT = frozenset({"dynamic", "longrope"})
RTOL = DEFAULT_RTOL
SYMBOL = "apply_rotary_pos_emb"

DISPATCH_FILE = Path(__file__).with_name("rope_hoist_dispatch.json")


def load_min_tokens(path: Path = DISPATCH_FILE) -> int:
    """Tokens per call (B·S) from which the kernel is used on CUDA; fewer take the torch math.
    From the committed H200 measurement (kernel vs transformers' apply_rotary_pos_emb, host time
    included); 0 (always the kernel) without it."""
    if not path.exists():
        return 0
    return int(json.loads(path.read_text()).get("min_tokens", 0))


_globals: dict[str, dict] = {}  # modeling module name -> {"orig": fn, "refs": n}


class Hoisted:
    """What the patched rotary module returns in place of ``sin``: the model's cache."""

    def __init__(self, cache, build):
        self.cache = cache
        self._build = build  # max_len -> RopeCache
        self.calls = 0
        self.fallbacks = 0
        self.checked = None  # the call layout apply_rope_ last validated
        self.min_tokens = load_min_tokens()  # below this many tokens a call takes the torch math
        self.small = 0
        self._cs = (None, None, None)
        self.bound = None  # an upper bound of the positions seen since the last multi-token call
        self.syncs = 0
        self.reasons: Counter = Counter()  # calls that took transformers' math, per reason

    def ensure(self, max_pos: int) -> None:
        if max_pos >= self.cache.max_len:
            n = self.cache.max_len
            while n <= max_pos:
                n *= 2
            self.cache = self._build(n)

    def cos_sin_cached(self, position_ids: torch.Tensor, dtype: torch.dtype):
        """:meth:`cos_sin`, computed once per position_ids tensor (once per forward)."""
        pid, dt, cs = self._cs
        if pid is not position_ids or dt != dtype:
            cs = self.cos_sin(position_ids, dtype)
            self._cs = (position_ids, dtype, cs)
        return cs

    def cos_sin(self, position_ids: torch.Tensor, dtype: torch.dtype):
        """transformers' (cos, sin) [B, S, D] for the fallback path."""
        c = self.cache.cos[position_ids.long()]
        s = self.cache.sin[position_ids.long()]
        return torch.cat((c, c), -1).to(dtype), torch.cat((s, s), -1).to(dtype)


def _dispatcher(orig):
    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        if not isinstance(sin, Hoisted):
            return orig(q, k, cos, sin, unsqueeze_dim)
        position_ids, hoisted = cos, sin
        needs_grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad)
        if (q.dim() == 4 and q.shape[0] * q.shape[2] < hoisted.min_tokens and q.is_cuda) and not needs_grad:
            # few tokens (decode): one Triton launch costs more host time than transformers' own
            # elementwise ops (measured table); cos/sin are gathered once per forward from the table
            hoisted.small += 1
            c, s = hoisted.cos_sin_cached(position_ids, q.dtype)
            return orig(q, k, c, s, unsqueeze_dim)
        fits = unsqueeze_dim == 1 and q.dim() == 4 and k.dim() == 4
        if fits and not needs_grad:
            from sits_doctor.kernels.rope import apply_rope_, apply_rope_unchecked_

            hoisted.calls += 1
            layout = (q.dtype, k.dtype, q.device, position_ids.dtype, q.shape[0] == position_ids.shape[0]
                      or position_ids.shape[0] == 1, q.shape[2] == position_ids.shape[1] == k.shape[2])
            if layout == hoisted.checked:  # checked once for this layout: the lean launcher
                return apply_rope_unchecked_(q, k, hoisted.cache, position_ids)
            out = apply_rope_(q, k, hoisted.cache, position_ids)
            hoisted.checked = layout
            return out
        hoisted.fallbacks += 1
        if not probing():
            hoisted.reasons["autograd" if needs_grad else "layout"] += 1
        c, s = hoisted.cos_sin(position_ids, q.dtype)
        return orig(q, k, c, s, unsqueeze_dim)

    apply_rotary_pos_emb.__wrapped__ = orig
    apply_rotary_pos_emb.__sits_patch__ = NAME
    return apply_rotary_pos_emb


def _install_global(module_name: str) -> None:
    mod = sys.modules[module_name]
    entry = _globals.get(module_name)
    if entry is None:
        entry = _globals[module_name] = {"orig": getattr(mod, SYMBOL), "refs": 0}
        setattr(mod, SYMBOL, _dispatcher(entry["orig"]))
    entry["refs"] += 1


def _release_global(module_name: str) -> None:
    entry = _globals[module_name]
    entry["refs"] -= 1
    if entry["refs"] == 0:
        setattr(sys.modules[module_name], SYMBOL, entry["orig"])
        del _globals[module_name]


def _rotary_module(model):
    base = getattr(model, "base_model", model)
    rot = getattr(base, "rotary_emb", None)
    found = [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]
    if rot is None or len(found) != 1 or found[0] is not rot:
        return None
    return rot


def _attention_modules(model):
    return [m for m in model.modules() if type(m).__name__.endswith("Attention")
            and SYMBOL in inspect.unwrap(type(m).forward).__code__.co_names]


def _rope_params(cfg) -> dict:
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict) and rp:
        return dict(rp)
    p = dict(getattr(cfg, "rope_scaling", None) or {})  # v4-style configs
    p.setdefault("rope_theta", getattr(cfg, "rope_theta", 10000.0))
    return p


def check(model) -> None:
    cfg = model.config
    mt = getattr(cfg, "model_type", None)
    if mt not in FAMILIES:
        raise PatchRefused(NAME, f"model_type {mt!r} is not one of the families sharing "
                                 f"{SYMBOL} ({', '.join(sorted(FAMILIES))})")
    if model.training:
        raise PatchRefused(NAME, "model is in training mode: apply_rope_ is in place, inference only")
    rot = _rotary_module(model)
    if rot is None:
        raise PatchRefused(NAME, "no single <Family>RotaryEmbedding at model.base_model.rotary_emb")
    for p in _param_sets(cfg, rot).values():
        kind = p.get("rope_type", p.get("type", "default"))
        if kind in LENGTH_DEPENDENT:
            raise PatchRefused(NAME, f"rope_type {kind!r} changes its frequencies with the current "
                                     f"length; a cache built once would not follow it")
    attn = _attention_modules(model)
    if not attn:
        raise PatchRefused(NAME, f"no attention module calls the module-level {SYMBOL}")
    if len({type(m).__module__ for m in attn}) != 1:
        raise PatchRefused(NAME, "attention modules come from more than one modeling module")
    if model_device(model).type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise PatchRefused(NAME, "the model is on the CPU: Triton kernels run there only with "
                                 "TRITON_INTERPRET=1 (tests)")


def _layer_types(rot) -> list | None:
    """The layer types of a rotary module holding one frequency table per layer type (Gemma 3:
    ``<type>_inv_freq`` / ``<type>_attention_scaling``, ``forward(x, position_ids, layer_type)``);
    None for the one-table modules."""
    types = getattr(rot, "layer_types", None)
    if types and all(hasattr(rot, f"{t}_inv_freq") for t in types):
        return list(types)
    return None


def _param_sets(cfg, rot) -> dict:
    """{layer type (None: one table): rope parameters}."""
    types = _layer_types(rot)
    if types is None:
        return {None: _rope_params(cfg)}
    rp = getattr(cfg, "rope_parameters", None) or {}
    return {t: dict(rp.get(t) or {}) for t in types}


def _builder(cfg, device, p=None):
    from sits_doctor.kernels.rope import build_rope_cache

    p = _rope_params(cfg) if p is None else p
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads

    def build(max_len: int):
        return build_rope_cache(
            head_dim, max_len,
            base=float(p.get("rope_theta", 10000.0)),
            rope_scaling=p,
            partial_rotary_factor=float(getattr(cfg, "partial_rotary_factor", None) or 1.0),
            device=device,
            max_position_embeddings=getattr(cfg, "max_position_embeddings", None),
        )

    return build


def _from_inv_freq(inv_freq: torch.Tensor, scaling: float):
    """cos/sin tables [max_len, rotary_dim // 2] from the rotary module's inv_freq, in fp32 as
    transformers computes them (position × inv_freq, then cos/sin, times attention_scaling)."""
    from sits_doctor.kernels.rope import RopeCache

    freq = inv_freq.detach().float()

    def build(max_len: int):
        angles = torch.arange(max_len, device=freq.device, dtype=torch.float32)[:, None] * freq[None, :]
        return RopeCache(angles.cos() * scaling, angles.sin() * scaling, 2 * freq.numel(), scaling)

    return build


def _hoist(cfg, rot, layer_type, params, max_len) -> Hoisted:
    """One Hoisted cache from the rotary module's table for ``layer_type`` (None: its only one)."""
    if layer_type is None:
        inv_freq = rot.inv_freq
        scaling = float(getattr(rot, "attention_scaling", 1.0))
    else:
        inv_freq = getattr(rot, f"{layer_type}_inv_freq")
        scaling = float(getattr(rot, f"{layer_type}_attention_scaling", 1.0))
    what = "" if layer_type is None else f" ({layer_type})"
    try:  # the cache builder must agree with the model (a rope type it does not know is refused);
        # rows 0 and 1 are enough to compare (dynamic, whose table depends on length, is refused)
        cache = _builder(cfg, inv_freq.device, params)(2)
    except ValueError as exc:
        raise PatchRefused(NAME, f"build_rope_cache{what}: {exc}") from exc
    if cache.rotary_dim != 2 * inv_freq.numel():
        raise PatchRefused(NAME, f"cache rotary_dim {cache.rotary_dim} != the model's "
                                 f"{2 * inv_freq.numel()}{what}")
    # Position 1: angle == inv_freq. A model cast with .to(bf16/fp16) holds inv_freq rounded to
    # that dtype; compare at that resolution and leave the rest to the logits verification.
    eps = max(torch.finfo(inv_freq.dtype).eps, 1e-6) if inv_freq.is_floating_point() else 1e-6
    model_cos1 = torch.cos(inv_freq.float()) * scaling
    if abs(cache.attention_scaling - scaling) > 1e-6 * max(1.0, abs(scaling)) or \
            not torch.allclose(cache.cos[1], model_cos1.to(cache.cos.device), rtol=2 * eps, atol=2 * eps):
        raise PatchRefused(NAME, "build_rope_cache disagrees with the model's rotary embedding "
                                 f"(rope_type {params.get('rope_type', 'default')!r}){what}")
    # The tables themselves come from the model's own inv_freq, which is what transformers rotates
    # with (rounded to bf16/fp16 when the model was cast): identical angles at every length.
    build = _from_inv_freq(inv_freq, scaling)
    hoisted = Hoisted(build(max_len), build)
    hoisted.min_tokens = 0  # verification checks the kernel at every size; apply() restores the table
    return hoisted


def install(model):
    cfg = model.config
    rot = _rotary_module(model)
    max_len = int(getattr(cfg, "max_position_embeddings", None) or 2048)
    by_type = {t: _hoist(cfg, rot, t, p, max_len) for t, p in _param_sets(cfg, rot).items()}
    per_type = None not in by_type
    first = next(iter(by_type.values()))
    inv_freq = rot.inv_freq if not per_type else getattr(rot, f"{next(iter(by_type))}_inv_freq")
    module_name = type(_attention_modules(model)[0]).__module__

    def forward(x, position_ids=None, *args, **kwargs):
        if position_ids is None or position_ids.dim() != 2:
            return type(rot).forward(rot, x, position_ids, *args, **kwargs)
        if per_type:
            layer_type = args[0] if args else kwargs.get("layer_type")
            hoisted = by_type.get(layer_type)
            if hoisted is None:
                return type(rot).forward(rot, x, position_ids, *args, **kwargs)
        else:
            hoisted = first
        if position_ids.numel():
            # Decode steps (one position per row) advance by at most one position in generate():
            # the bound follows without asking the GPU; any multi-token call, or a bound about to
            # leave the table, reads the true maximum (one host sync).
            if position_ids.shape[1] == 1 and hoisted.bound is not None \
                    and hoisted.bound + 1 < hoisted.cache.max_len:
                hoisted.bound += 1
            else:
                hoisted.syncs += 1
                hoisted.bound = int(position_ids.max())
                hoisted.ensure(hoisted.bound)
        return position_ids, hoisted

    undo = UndoStack()
    try:
        _install_global(module_name)
        undo.push(lambda: _release_global(module_name))
        rot.__dict__["forward"] = forward
        undo.push(lambda: rot.__dict__.pop("forward", None))
    except BaseException:
        undo()
        raise
    return undo, {"modeling_module": module_name, "hoisted": first, "hoisted_by_type": by_type,
                  "model_inv_freq_dtype": inv_freq.dtype,
                  "rope_type": {t: p.get("rope_type", "default") for t, p in _param_sets(cfg, rot).items()}
                  if per_type else _rope_params(cfg).get("rope_type", "default")}


def reset_counts(patch: Patch) -> None:
    for h in patch.info["hoisted_by_type"].values():
        h.reasons.clear()


def fallbacks(patch: Patch) -> dict[str, int]:
    """Calls that took transformers' own rotary math instead of the kernel, per reason
    (``autograd``: inputs need gradients; ``layout``: q/k not [B, H, S, D]) — since applied."""
    out: Counter = Counter()
    for h in patch.info["hoisted_by_type"].values():
        out.update(h.reasons)
    return dict(sorted(out.items()))


def apply(model, **kw) -> Patch:
    """Hoist the model's RoPE into one cache + in-place kernel; verified on a probe batch."""
    def after_verify(patch: Patch) -> None:
        for h in patch.info["hoisted_by_type"].values():
            h.min_tokens = load_min_tokens()
            h.reasons.clear()  # count the user's calls, not the probe's

    return apply_verified(model, NAME, check, install, rtol_table=RTOL, after_verify=after_verify, **kw)
