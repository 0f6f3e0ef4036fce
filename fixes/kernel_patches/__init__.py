"""Live kernel patches for transformers models: ``patch(model, names) -> PatchSet``, ``unpatch``.

    from sits_doctor.fixes.kernel_patches import patch, unpatch
    ps = patch(model, ["causal_trim", "rope_hoist", "act_calib"])   # verified, or PatchRefused
    ...
    ps.fallbacks()        # {"causal_trim": {"sliding_window": 12}, ...}: calls handed back to
                          # transformers' own path, per reason (ps.fallback_report(): as text)
    unpatch(ps)                                                     # the model as it was

Patches (one module each, ``apply(model, **options) -> Patch``, ``Patch.revert()``):
  * ``causal_trim`` — attention through ``kernels.attention`` via AttentionInterface +
    AttentionMaskInterface; padded batches through the kernel's per-sequence bounds (read from the
    2-D padding mask); each call routed to the kernel or sdpa by a table measured on the H200;
  * ``rope_hoist`` — one cos/sin cache and in-place ``kernels.rope.apply_rope_``;
  * ``act_calib`` — W8A8 projections (``kernels.quant_gemm``): activations quantized per token
    once per shared input (q/k/v, gate/up), int8 / fp8 products with the scales in the epilogue,
    a ``RuntimeCalibrator`` per input and optional static scales; changes numerics (looser tolerance).

Families: llama, mistral, qwen2, qwen3, gemma3_text (all three patches; causal_trim runs a
sliding-window layer's calls on the kernel while its keys are fewer than the window, and hands the
rest to transformers' sdpa, counted); tests/kernels/test_patch_families.py.
End-to-end speed on the H200: bench/results/e2e-patches-h200-2026-12-02.md (every column in one
run; generate token by token against an unpatched twin) and e2e-generate-h200-2026-12-02.md
(kernels and syncs per decode step); bench/e2e_patches.py.

Every patch is reversible and idempotent, refuses models it does not fit with
:class:`PatchRefused` (a reason, and the measured error when verification failed), and is kept
only when the patched model's logits on a probe batch match the unpatched model's (see
``_core``). Known limits: a ``copy.deepcopy`` of a patched model shares its patches (unpatch
before copying); act_calib's int8/fp8 modes quantize the weights once when applied (re-apply after
loading new weights). Requires torch, triton and transformers (the ``kernels`` and ``hf`` extras); importing
this package imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

from . import act_calib, causal_trim, rope_hoist
from ._core import DEFAULT_RTOL, Patch, PatchRefused, PatchSet, applied, make_probe, run_probe

PATCHES = {"causal_trim": causal_trim, "rope_hoist": rope_hoist, "act_calib": act_calib}

__all__ = ["PATCHES", "DEFAULT_RTOL", "Patch", "PatchRefused", "PatchSet", "applied", "make_probe",
           "patch", "run_probe", "unpatch"]


def patch(
    model,
    names: str | Iterable[str],
    *,
    probe: torch.Tensor | None = None,
    rtol: float | Mapping | None = None,
    atol: float = 0.0,
    strict: bool = True,
    options: Mapping[str, Mapping] | None = None,
) -> PatchSet:
    """Apply ``names`` in order, each verified against the model as it was before this call.

    ``probe``: token ids [B, S] on the model's device (default: :func:`make_probe`, random ids).
    ``rtol``: one relative tolerance for every patch, or {dtype: rtol}; default: each patch's
    own table (fp32 1e-4, fp16/bf16 2e-2; act_calib by mode: dequant 5e-2, int8 1e-1, fp8 1.5e-1).
    ``strict``: a refusal reverts the patches this call applied and re-raises; otherwise it is
    recorded in ``PatchSet.refused`` and the others are kept. ``options``: per-patch keyword
    arguments, e.g. ``{"act_calib": {"mode": "int8"}}``. Patches already active on the model are
    returned as they are (no re-verification): patching twice is a no-op.
    """
    names = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in names if n not in PATCHES]
    if unknown:
        raise ValueError(f"unknown patch(es) {unknown}; known: {sorted(PATCHES)}")
    options = dict(options or {})
    active = applied(model)
    out, new, refused = [], [], []
    for name in names:  # structural refusals first: cheap, and before any probe run
        if name not in active:
            try:
                PATCHES[name].check(model, **dict(options.get(name, {})))
            except PatchRefused as exc:
                if strict:
                    raise
                refused.append(exc)
    names = [n for n in names if n in active or all(r.name != n for r in refused)]
    reference = ids = None
    if any(n not in active for n in names):
        ids = probe if probe is not None else make_probe(model)
        reference = run_probe(model, ids)
    for name in names:
        if name in active:
            out.append(active[name])
            continue
        try:
            p = PATCHES[name].apply(model, probe=ids, reference=reference, rtol=rtol, atol=atol,
                                    **dict(options.get(name, {})))
        except PatchRefused as exc:
            if strict:
                for q in reversed(new):
                    q.revert()
                raise
            refused.append(exc)
            continue
        new.append(p)
        out.append(p)
        active[name] = p
    for p in new:  # later patches' probes ran through the earlier ones: count the user's calls only
        reset = getattr(PATCHES[p.name], "reset_counts", None)
        if reset is not None:
            reset(p)
    return PatchSet(model=model, patches=out, refused=refused)


def unpatch(patches: PatchSet | Patch) -> None:
    """Revert a PatchSet (last applied first) or one Patch; reverting twice does nothing."""
    patches.revert()
