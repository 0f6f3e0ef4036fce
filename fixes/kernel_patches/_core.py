"""Shared machinery of the live kernel patches: the Patch value, refusal, the probe, verification.

A patch is installed by its module's ``install(model, **options) -> (undo, info)`` after its
``check(model, **options)`` found nothing to refuse; :func:`apply_verified` then runs the probe
batch through the patched model and keeps the patch only when its logits match the unpatched
model's:

    max |patched - reference| <= atol + rtol * max |reference|        (max over the whole probe)

``Patch.error`` is the measured ``max |patched - reference| / max |reference|``. The probe is one
forward without a cache (prefill, q_len == k_len), then the same ids split as a prefill over all
but the last 4 tokens, a chunk of 3 tokens over that cache (q_len 3 < k_len: bottom-right
alignment) and one decode token (q_len 1); then padded batches (:func:`padded_probe`: left and
right padding without cache, left padding through prefill and one decode step, logits at padded
positions excluded); the logits of all are concatenated.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

REGISTRY_ATTR = "_sits_kernel_patches"  # model.__dict__ entry: {patch name: Patch}; removed when empty

# Relative tolerance of the logits check per model dtype, for patches that should not change
# numerics beyond reordering (causal_trim, rope_hoist). act_calib has its own, looser table.
DEFAULT_RTOL = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 2e-2}

PROBE_BATCH = 2
PROBE_LEN = 37  # not a multiple of the kernels' blocks


class PatchRefused(RuntimeError):
    """A patch does not fit the model (or failed its verification); the model is left as it was."""

    def __init__(self, name: str, reason: str, *, error: float | None = None):
        super().__init__(f"{name} refused: {reason}")
        self.name = name
        self.reason = reason
        self.error = error  # measured relative logits error, when verification was the cause


@dataclass(eq=False)
class Patch:
    """One applied patch on one model. ``revert()`` undoes it; a second call does nothing."""

    name: str
    model: Any
    _undo: Callable[[], None] = field(repr=False)
    info: dict = field(default_factory=dict)
    error: float | None = None  # measured relative logits error at verification (None: not verified)
    tolerance: float | None = None  # the rtol it was verified against
    active: bool = True

    def fallbacks(self) -> dict[str, int]:
        """Calls since this patch was applied that took transformers' own (unpatched) path
        instead of the kernel, per reason, e.g. ``{"sliding_window": 12}`` (the probe's calls
        during verification are not counted)."""
        from . import PATCHES

        fn = getattr(PATCHES.get(self.name), "fallbacks", None)
        return fn(self) if fn is not None else {}

    def revert(self) -> None:
        if not self.active:
            return
        self._undo()
        self.active = False
        reg = self.model.__dict__.get(REGISTRY_ATTR)
        if reg is not None and reg.get(self.name) is self:
            del reg[self.name]
            if not reg:
                del self.model.__dict__[REGISTRY_ATTR]


@dataclass(eq=False)
class PatchSet:
    """The patches one :func:`patch` call holds, in application order, and what it refused."""

    model: Any
    patches: list[Patch]
    refused: list[PatchRefused] = field(default_factory=list)

    def __getitem__(self, name: str) -> Patch:
        for p in self.patches:
            if p.name == name:
                return p
        raise KeyError(name)

    def __contains__(self, name: str) -> bool:
        return any(p.name == name for p in self.patches)

    def fallbacks(self) -> dict[str, dict[str, int]]:
        """{patch name: {reason: calls}} — see :meth:`Patch.fallbacks`."""
        return {p.name: p.fallbacks() for p in self.patches}

    def fallback_report(self) -> str:
        """One line per patch, e.g. ``causal_trim: sliding_window: 12 calls``."""
        lines = []
        for name, counts in self.fallbacks().items():
            what = ", ".join(f"{r}: {n} call{'s' if n != 1 else ''}" for r, n in counts.items())
            lines.append(f"{name}: {what or 'no fallbacks'}")
        return "\n".join(lines)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.patches]

    def revert(self) -> None:
        for p in reversed(self.patches):
            p.revert()


def applied(model) -> dict[str, Patch]:
    """The patches active on ``model`` (a copy of its registry)."""
    return dict(model.__dict__.get(REGISTRY_ATTR, {}))


def model_dtype(model) -> torch.dtype:
    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.float32


def model_device(model) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def make_probe(model, *, batch: int = PROBE_BATCH, length: int = PROBE_LEN, seed: int = 0) -> torch.Tensor:
    """Random token ids [batch, length] on the model's device (a fixed CPU generator)."""
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    if vocab <= 0:
        raise ValueError("model.config.vocab_size is missing: pass a probe batch")
    max_pos = getattr(model.config, "max_position_embeddings", None)
    if max_pos:
        length = min(length, int(max_pos))
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, length), generator=g).to(model_device(model))


def _logits(out) -> torch.Tensor:
    t = getattr(out, "logits", None)
    if t is None:
        t = getattr(out, "last_hidden_state", None)
    if t is None:
        t = out[0]
    return t


def _cache_kwarg(model) -> str:
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _returned_cache(out):
    for name in ("cache", "past_key_values"):
        c = getattr(out, name, None)
        if c is not None:
            return c
    return None


_PROBING = [0]  # > 0 while a verification probe runs: the patches' own call counters skip it


def probing() -> bool:
    """True while :func:`run_probe` runs (patches count only the user's calls)."""
    return _PROBING[0] > 0


def run_probe(model, ids: torch.Tensor, *, padded: bool = True) -> torch.Tensor:
    """See :func:`_run_probe`; the patches' per-patch fallback counters do not count these calls."""
    _PROBING[0] += 1
    try:
        return _run_probe(model, ids, padded=padded)
    finally:
        _PROBING[0] -= 1


@torch.no_grad()
def _run_probe(model, ids: torch.Tensor, *, padded: bool = True) -> torch.Tensor:
    """Logits (fp32, flattened to [rows, vocab]) of: a full forward without cache; then prefill
    ids[:, :-4], a 3-token chunk over that cache, one decode token; and, with ``padded``, the
    padded probe of :func:`padded_probe` — concatenated."""
    full = _logits(model(input_ids=ids, use_cache=False)).float()
    s = ids.shape[1]
    if s < 6:
        return _flat([full])
    split = s - 4
    out = model(input_ids=ids[:, :split], use_cache=True)
    cache = _returned_cache(out)
    if cache is None:  # a model without a cache: the full forward is the probe
        return _flat([full])
    kw = _cache_kwarg(model)
    out2 = model(input_ids=ids[:, split:split + 3], use_cache=True, **{kw: cache})
    out3 = model(input_ids=ids[:, split + 3:split + 4], use_cache=True, **{kw: _returned_cache(out2) or cache})
    parts = [full, _logits(out).float(), _logits(out2).float(), _logits(out3).float()]
    if padded and s >= 8:
        parts += padded_probe(model, ids)
    return _flat(parts)


def _flat(parts) -> torch.Tensor:
    return torch.cat([p.reshape(-1, p.shape[-1]) for p in parts])


@torch.no_grad()
def padded_probe(model, ids: torch.Tensor) -> list[torch.Tensor]:
    """Logits of padded batches built from ``ids`` (at least 2 rows; row 1 repeats row 0 when ids
    has one): row 0 left-padded by S//3 tokens, row 1 right-padded by S//4, one forward without
    cache; then the same row 0 left-padded (row 1 whole) as a prefill of S-1 tokens and one decode
    token. Logits at padded positions are set to 0 (what a model computes there is unspecified)."""
    b, s = ids.shape
    ids2 = ids if b >= 2 else ids.repeat(2, 1)
    mask = torch.ones(ids2.shape, dtype=torch.long, device=ids.device)
    mask[0, :s // 3] = 0
    mask[1, s - s // 4:] = 0
    full = _logits(model(input_ids=ids2, attention_mask=mask, use_cache=False)).float()
    left = torch.ones_like(mask)
    left[0, :s // 3] = 0
    out = model(input_ids=ids2[:, :-1], attention_mask=left[:, :-1], use_cache=True)
    cache = _returned_cache(out)
    parts = [torch.where(mask.bool()[..., None], full, 0.0),
             torch.where(left[:, :-1].bool()[..., None], _logits(out).float(), 0.0)]
    if cache is not None:
        out2 = model(input_ids=ids2[:, -1:], attention_mask=left, use_cache=True, **{_cache_kwarg(model): cache})
        parts.append(_logits(out2).float())
    return parts


def compare(got: torch.Tensor, ref: torch.Tensor, rtol: float, atol: float = 0.0) -> tuple[float, bool]:
    """(max|got-ref| / max|ref|, within atol + rtol * max|ref|)."""
    if got.shape != ref.shape:
        return math.inf, False
    diff = (got.double() - ref.double()).abs()
    scale = ref.double().abs().max().item() if ref.numel() else 0.0
    worst = diff.max().item() if diff.numel() else 0.0
    if math.isnan(worst) or not torch.isfinite(got).all():
        return math.inf, False
    rel = worst / scale if scale > 0 else (0.0 if worst == 0 else math.inf)
    return rel, worst <= atol + rtol * scale


def resolve_rtol(rtol, table: dict, dtype: torch.dtype) -> float:
    if rtol is None:
        return table.get(dtype, max(table.values()))
    if isinstance(rtol, dict):
        return rtol.get(dtype, table.get(dtype, max(table.values())))
    return float(rtol)


def apply_verified(
    model,
    name: str,
    check: Callable[..., None],
    install: Callable[..., tuple[Callable[[], None], dict]],
    *,
    rtol_table: dict = DEFAULT_RTOL,
    probe: torch.Tensor | None = None,
    reference: torch.Tensor | None = None,
    rtol: float | dict | None = None,
    atol: float = 0.0,
    verify: bool = True,
    after_verify: Callable[[Patch], None] | None = None,
    **options,
) -> Patch:
    """check → install → verify on the probe → keep (registered on the model) or undo and refuse.

    Idempotent: a patch already active on the model is returned as it is. ``reference`` is the
    unpatched model's :func:`run_probe` output on ``probe`` (computed here when not given).
    """
    reg = model.__dict__.get(REGISTRY_ATTR, {})
    if name in reg:
        return reg[name]
    check(model, **options)
    tol = resolve_rtol(rtol, rtol_table, model_dtype(model))
    ids = None
    if verify:
        ids = probe if probe is not None else make_probe(model)
        if reference is None:
            reference = run_probe(model, ids)
    undo, info = install(model, **options)
    patch = Patch(name=name, model=model, _undo=undo, info=info)
    if verify:
        try:
            got = run_probe(model, ids)
        except Exception as exc:  # the kernel or the hook failed on this model: refuse, untouched
            undo()
            raise PatchRefused(name, f"the patched model failed on the probe batch: "
                                     f"{type(exc).__name__}: {exc}") from exc
        err, ok = compare(got, reference, tol, atol)
        if not ok:
            undo()
            raise PatchRefused(
                name,
                f"logits on the probe batch differ from the unpatched model: max relative error "
                f"{err:.3g} > tolerance {tol:g} ({model_dtype(model)})",
                error=err,
            )
        patch.error, patch.tolerance = err, tol
    if after_verify is not None:
        after_verify(patch)
    model.__dict__.setdefault(REGISTRY_ATTR, {})[name] = patch
    return patch


class UndoStack:
    """Undo actions run last-in first-out; used by installers so a failure half-way leaves nothing."""

    def __init__(self):
        self._actions: list[Callable[[], None]] = []

    def push(self, fn: Callable[[], None]) -> None:
        self._actions.append(fn)

    def __call__(self) -> None:
        while self._actions:
            self._actions.pop()()
