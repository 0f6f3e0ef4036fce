"""act_calib, fused: RMSNorm then per-token int8 / fp8-e4m3 quantization in one pass.

Formula (per row of K elements; all arithmetic in fp32, the reference in float64)::

    z      = x + residual          only with ``residual``; rounded to x's dtype and written out
                                   as the new residual (vLLM's ``fused_add_rms_norm`` contract,
                                   https://github.com/vllm-project/vllm/blob/main/csrc/layernorm_kernels.cu)
    rstd   = 1 / sqrt(mean(z**2) + eps)
    y      = z * rstd * weight
    absmax = max |y|
    scale  = max(absmax / QMAX, 2**-126)                 fp32, as kernels/act_quant.py
    q      = quantize(y / scale)                         int8 RNE / e4m3fn RNE, as act_quant.py

Shapes: ``x`` is ``[..., K]`` (fp16, bf16 or fp32; last dimension contiguous, any row stride),
``weight`` is ``[K]`` (any float dtype, read as fp32), ``residual`` has x's shape and dtype.
Returns ``q`` (x's shape, int8 or float8_e4m3fn), ``scales`` ``[..., 1]`` fp32 (the row-wise
``scale_a`` layout of ``torch._scaled_mm``) and, with a residual, the new residual (x's dtype).

The quantization step is act_quant's: the jit helpers ``_scale_of``, ``_divide`` and ``_quantize``
are imported from there, so the scale floor, the ``exact_div`` choice (default: multiply by one
correctly rounded per-row factor, here RN(rstd / scale)), int8 round-half-even and the exact soft
e4m3 conversion used under the interpreter and below sm90 are the same code. What differs from act_quant is that
the value being quantized, y, is itself a computed fp32 number: its rounding (the sum of squares
is reduced in Triton's order) cannot be reproduced bit for bit by a float64 reference, so the
tests accept a byte that is one quantization step away from the reference exactly where the
reference's quotient lies within a relative 2e-5 of a rounding boundary, and scales within a
relative 1e-5 (see tests/kernels/test_norm_quant.py).

Residual add: ``z = RN_dtype(x + residual)`` — the sum of two values of x's dtype, computed in
fp32 and rounded once more to that dtype. For bf16 and fp16 that is the correctly rounded sum
(fp32 has at least 2p + 2 bits for p = 8 and 11, so the double rounding is innocuous), the value
``x + residual`` gives in torch. The norm then reads the rounded z, as a model that keeps its
residual stream in bf16 does. ``residual_out`` may be ``residual`` itself (in place, as in vLLM):
every program reads its rows before it writes them.

Note the norm is kept in fp32 up to the quantizer: Hugging Face's ``LlamaRMSNorm`` rounds
``z * rstd`` to the model dtype before multiplying by the weight
(https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama/modeling_llama.py),
and vLLM's ``rms_norm`` / ``fused_add_rms_norm`` do the same (``(scalar_t)(x * s_variance) *
weight``, layernorm_kernels.cu above); the fused kernel skips that rounding (one rounding fewer,
not a different function).

HBM traffic per element of a bf16 row: read 2 B, write 1 B (+ 4 B per row and the weight once
from L2), 3 B/elem, against 4 + 3 = 7 B/elem for a norm kernel followed by the standalone
quantizer. With a residual: read 4 B, write 3 B (7 B/elem) against 8 + 3 = 11 B/elem.

Rows of up to 16384 elements are held whole in registers (one read of x). Longer rows take two
passes inside one program (sum of squares and max |z·w|, then quantize), the second meant to hit
L2.

Order of operations in fp32 (any order is within the tests' tolerance of the float64 reference;
this one is the cheapest): ``u = z * w``; two independent reductions give ``sum(z**2)`` and
``max |u|`` (Triton's interpreter runs a combined ``tl.reduce`` element by element in Python,
sequentially, so the two plain reductions keep the CPU tests fast and their sums pairwise);
``absmax = max|u| * rstd`` (rstd > 0, so this is max |y| up to fp32 rounding);
``v = u * RN(rstd / scale)`` — one multiply per element — or, with ``exact_div``,
``div_rn(u * rstd, scale)``. On the H200 this took 8192x4096 bf16 int8 from 35.9 to 33.5 µs
against the y = z * rstd * w formulation (bench/results/norm-quant-h200-2026-12-01.md).

Inputs must be finite with a sum of squares below fp32's maximum; eps > 0 (an all-zero row with
eps = 0 gives NaN, as the reference does); nothing checks either.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from .host_math import cdiv, pow2_at_least

try:  # an installed sits-doctor, else the checkout
    from sits_doctor.kernels.act_quant import (
        QMAX,
        SCALE_MIN,
        _as_rows,
        _check_out,
        _check_out_dtype,
        _divide,
        _fp8_soft,
        _q_arg,
        _quantize,
        _quantize64,
        _scale_from_absmax64,
        _scale_of,
        quantize_per_token,
    )
except ImportError:  # pragma: no cover
    from kernels.act_quant import (  # type: ignore[no-redef]
        QMAX,
        SCALE_MIN,
        _as_rows,
        _check_out,
        _check_out_dtype,
        _divide,
        _fp8_soft,
        _q_arg,
        _quantize,
        _quantize64,
        _scale_from_absmax64,
        _scale_of,
        quantize_per_token,
    )

_MAX_ONE_TILE = 16384  # longest row kept whole in registers
_TILE_ELEMS = 4096  # elements per row block for short rows (several rows per program)


# --------------------------------------------------------------------------------------------
# Reference: plain torch, float64 math
# --------------------------------------------------------------------------------------------


def _norm64(x: torch.Tensor, weight: torch.Tensor, eps: float, residual=None):
    """(y in float64, new residual in x's dtype or None): the RMSNorm half of the reference."""
    z = x
    if residual is not None:
        z = (x.double() + residual.double()).to(x.dtype)  # one rounding to x's dtype
    z64 = z.double()
    var = z64.square().mean(dim=-1, keepdim=True)
    y = z64 * torch.rsqrt(var + float(eps)) * weight.double()
    return y, (z if residual is not None else None)


def norm_quant_reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
                         dtype=torch.int8, *, residual=None, exact_div: bool = False):
    """RMSNorm in float64, then act_quant's per-token quantization rules on the float64 y.

    Returns (q, scales [..., 1] fp32) or, with ``residual``, (q, scales, new residual).
    Assumptions: finite inputs; eps taken exactly (the kernel uses RN32(eps), a relative 3e-8
    away); scale = max(RN32(absmax64 / QMAX), 2**-126); the quotient y / scale rounded to fp32
    once, then int8 round-half-even or e4m3fn RNE (act_quant's ``_quantize64``)."""
    qmax = _check_out_dtype(dtype)
    y, res = _norm64(x, weight, eps, residual)
    if x.shape[-1]:
        absmax = y.abs().amax(dim=-1, keepdim=True)
    else:
        absmax = y.new_zeros(*x.shape[:-1], 1)
    scale = _scale_from_absmax64(absmax, qmax)
    q = _quantize64(y, scale, dtype, exact_div)
    return (q, scale) if residual is None else (q, scale, res)


# --------------------------------------------------------------------------------------------
# Triton kernel
# --------------------------------------------------------------------------------------------


@triton.jit
def _rne_bf16(v):
    """fp32 → the nearest bf16 value (ties to even), still as fp32: add 0x7FFF plus the lowest kept
    bit, then clear the 16 dropped bits. The Triton 3.6-3.9 interpreter's fp32→bf16 cast
    truncates (1.6836 → 1.6797; its 'rtne' mode rounds ties up and drops the carry), so the soft
    launch rounds first and the cast that follows is exact."""
    bits = v.to(tl.int32, bitcast=True)
    bits = (bits + (0x7FFF + ((bits >> 16) & 1))) & -65536
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _load_z(x_ptr, r_ptr, ro_ptr, offs_x, offs_r, offs_ro, mask, HAS_RESIDUAL: tl.constexpr,
            SOFT: tl.constexpr, EVICT: tl.constexpr):
    """x (+ residual, rounded to x's dtype and stored as the new residual) as fp32."""
    x = tl.load(x_ptr + offs_x, mask=mask, other=0.0, eviction_policy=EVICT)
    if HAS_RESIDUAL:
        r = tl.load(r_ptr + offs_r, mask=mask, other=0.0, eviction_policy=EVICT)
        z = x.to(tl.float32) + r.to(tl.float32)
        if SOFT and ro_ptr.dtype.element_ty == tl.bfloat16:
            z = _rne_bf16(z)
        x = z.to(ro_ptr.dtype.element_ty)
        tl.store(ro_ptr + offs_ro, x, mask=mask)
    return x.to(tl.float32)


@triton.jit
def _rstd_of(sumsq, K, eps):
    var = tl.math.div_rn(sumsq, K.to(tl.float32))
    return tl.math.div_rn(tl.full(var.shape, 1.0, tl.float32), tl.sqrt_rn(var + eps))


@triton.jit
def _quotient(u, rstd, scale, EXACT_DIV: tl.constexpr):
    """y / scale with y = u * rstd: exactly (div_rn of the rounded y), or as u times one per-row
    factor RN(rstd / scale) — one multiply per element instead of three. The divisor is kept at
    or above rstd * 2**-126 so the factor stays finite (≤ 2**126): on an all-zero row (scale at
    its 2**-126 floor, rstd = 1/sqrt(eps)) it would otherwise be inf, and 0 * inf NaN; as it is
    the row quantizes to 0, as in act_quant. That bound binds only on rows whose scale sits at
    the floor (max |z * w| < QMAX * 2**-126)."""
    if EXACT_DIV:
        v = _divide(u * rstd[:, None], scale[:, None], True)
    else:
        c = tl.math.div_rn(rstd, tl.maximum(scale, rstd * 1.1754943508222875e-38))
        v = u * c[:, None]
    return v


@triton.jit
def _round_to(v, dt: tl.constexpr, SOFT: tl.constexpr):
    """fp32 → dt → fp32 (round to nearest even; see _rne_bf16 for the interpreter's bf16 cast)."""
    if SOFT and dt == tl.bfloat16:
        v = _rne_bf16(v)
    return v.to(dt).to(tl.float32)


@triton.jit
def _store_y(y_ptr, offs, z, rstd, w, mask, SOFT: tl.constexpr):
    """The normalised row in the model's dtype, as transformers' LlamaRMSNorm computes it:
    ``weight * (z * rstd).to(dtype)``, the product rounded to dtype once more."""
    dt: tl.constexpr = y_ptr.dtype.element_ty
    y = _round_to(_round_to(z * rstd[:, None], dt, SOFT) * w[None, :], dt, SOFT)
    tl.store(y_ptr + offs, y.to(dt), mask=mask)


@triton.jit
def _norm_quant_kernel(
    q_ptr, stride_qm,
    s_ptr, stride_sm,
    ro_ptr, stride_rom,
    x_ptr, stride_xm,
    r_ptr, stride_rm,
    w_ptr,
    y_ptr, stride_ym,
    M, K, eps,
    QMAX: tl.constexpr, IS_FP8: tl.constexpr, FP8_SOFT: tl.constexpr, EXACT_DIV: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, ONE_TILE: tl.constexpr, HAS_Y: tl.constexpr,
):
    # Per row: u = z * w; two independent reductions give sum(z**2) and max|u|; since rstd > 0,
    # max|y| = rstd * max|u| (to an fp32 rounding), so the scale and the quotient
    # v = u * RN(rstd / scale) need no second reduction over y and one multiply per element.
    # Grid: one program per BLOCK_M rows, or fewer (persistent) programs striding over row
    # blocks; with one tile per row the weight is loaded once per program.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    n_blocks = tl.cdiv(M, BLOCK_M)
    cols = tl.arange(0, BLOCK_K)
    if ONE_TILE:
        col_ok = cols < K
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
        for mb in range(pid, n_blocks, nprog):
            rows = (mb * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
            row_ok = rows < M
            mask = row_ok[:, None] & col_ok[None, :]
            z = _load_z(x_ptr, r_ptr, ro_ptr, rows[:, None] * stride_xm + cols[None, :],
                        rows[:, None] * stride_rm + cols[None, :],
                        rows[:, None] * stride_rom + cols[None, :], mask, HAS_RESIDUAL,
                        FP8_SOFT, "evict_first")
            u = z * w[None, :]
            sumsq = tl.sum(z * z, axis=1)
            umax = tl.max(tl.abs(u), axis=1)
            rstd = _rstd_of(sumsq, K, eps)
            scale = _scale_of(umax * rstd, QMAX)
            q = _quantize(_quotient(u, rstd, scale, EXACT_DIV), QMAX, IS_FP8, FP8_SOFT, False)
            tl.store(q_ptr + rows[:, None] * stride_qm + cols[None, :], q, mask=mask)
            tl.store(s_ptr + rows * stride_sm, scale, mask=row_ok)
            if HAS_Y:
                _store_y(y_ptr, rows[:, None] * stride_ym + cols[None, :], z, rstd, w, mask, FP8_SOFT)
    else:
        for mb in range(pid, n_blocks, nprog):
            rows = (mb * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
            row_ok = rows < M
            # pass 1: (residual add and store,) sum of squares and max |z * w|
            sumsq = tl.zeros([BLOCK_M], dtype=tl.float32)
            umax = tl.zeros([BLOCK_M], dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                c = k0 + cols
                mask = row_ok[:, None] & (c[None, :] < K)
                z = _load_z(x_ptr, r_ptr, ro_ptr, rows[:, None] * stride_xm + c[None, :],
                            rows[:, None] * stride_rm + c[None, :],
                            rows[:, None] * stride_rom + c[None, :], mask, HAS_RESIDUAL,
                            FP8_SOFT, "evict_last")
                w = tl.load(w_ptr + c, mask=c < K, other=0.0).to(tl.float32)
                sumsq += tl.sum(z * z, axis=1)
                umax = tl.maximum(umax, tl.max(tl.abs(z * w[None, :]), axis=1))
            rstd = _rstd_of(sumsq, K, eps)
            scale = _scale_of(umax * rstd, QMAX)
            if HAS_RESIDUAL:
                tl.debug_barrier()  # the new residual, written above, is what pass 2 reads
                zp = ro_ptr
                stride_zm = stride_rom
            else:
                zp = x_ptr
                stride_zm = stride_xm
            # pass 2: quantize (the row is read again, from L2 where it stayed)
            for k0 in range(0, K, BLOCK_K):
                c = k0 + cols
                mask = row_ok[:, None] & (c[None, :] < K)
                z = tl.load(zp + rows[:, None] * stride_zm + c[None, :], mask=mask, other=0.0,
                            eviction_policy="evict_first").to(tl.float32)
                w = tl.load(w_ptr + c, mask=c < K, other=0.0).to(tl.float32)
                q = _quantize(_quotient(z * w[None, :], rstd, scale, EXACT_DIV), QMAX, IS_FP8,
                              FP8_SOFT, False)
                tl.store(q_ptr + rows[:, None] * stride_qm + c[None, :], q, mask=mask)
                if HAS_Y:
                    _store_y(y_ptr, rows[:, None] * stride_ym + c[None, :], z, rstd, w, mask, FP8_SOFT)
            tl.store(s_ptr + rows * stride_sm, scale, mask=row_ok)


# --------------------------------------------------------------------------------------------
# Launcher
# --------------------------------------------------------------------------------------------


_SOFT: dict = {}


def _soft(device: torch.device) -> bool:
    """act_quant's ``_fp8_soft``, remembered per device and interpreter setting (it is asked on
    every launch, and the launch's host time matters at decode sizes)."""
    key = (device, os.environ.get("TRITON_INTERPRET"))
    if key not in _SOFT:
        _SOFT[key] = _fp8_soft(device)
    return _SOFT[key]


def _launch_params(M, K, block_m=None, block_k=None, num_warps=None, has_res=False):
    if block_k is None:
        block_k = pow2_at_least(K) if K <= _MAX_ONE_TILE else 4096
    if block_m is None:
        block_m = max(1, min(pow2_at_least(M), _TILE_ELEMS // block_k))
        # Not yet the default: two rows a program (block_m=2, 4 warps) timed 30.4 µs against
        # 33.5 at 8192x4096 bf16 int8 without a residual on the H200 (launch variants in
        # bench/results/norm-quant-h200-2026-12-01.md; with a residual one row was best), but
        # that launch has not been checked against the reference on the GPU yet.
    if num_warps is None:
        # 4 warps for a 4096-element row (32 elements a thread): on the H200 that beat 8 and 16
        # at M = 8192 (bench/results/norm-quant-h200-2026-12-01.md, launch variants)
        num_warps = max(1, min(16, block_m * block_k // 1024))
    return block_m, block_k, num_warps


_CONST_NAMES = ("QMAX", "IS_FP8", "FP8_SOFT", "EXACT_DIV", "HAS_RESIDUAL", "BLOCK_M", "BLOCK_K",
                "ONE_TILE", "HAS_Y")
_COMPILED: dict = {}  # specialization key -> the CompiledKernel Triton returned for it
# On by default since two runs on the H200 with Triton 3.6 (2026-12-02, 13:27 and 13:41 UTC,
# bench/results/norm-quant-h200-2026-12-02-fastlaunch.md and -variants.md) passed all 28
# self-checks on each case's second launch, which takes this path, and cut the launcher's host
# time from 45 to 37 µs and from 86 to 69 µs a call. The CPU interpreter never takes it.
# `python bench/norm_quant.py --jit-launch` times the JIT path instead.
_FAST = {"on": True, "constexprs_in_args": True}


def _spec(v):
    """What Triton specializes a launch on, per argument: a tensor's dtype and 16-byte
    alignment; an int's ==1, divisibility by 16 and width; a float's type."""
    if isinstance(v, torch.Tensor):
        return (v.dtype, v.data_ptr() % 16 == 0)
    if isinstance(v, int):
        return (v == 1, v % 16 == 0, -2**31 <= v < 2**31)
    return type(v)


def _launch(grid_n, args, consts, num_warps, device):
    """Launch the kernel; on the GPU with ``_FAST["on"]``, repeat launches skip Triton's JIT
    dispatch.

    ``JITFunction.__getitem__(grid)(...)`` binds the arguments, computes the specialization key
    and looks the kernel up on every call; on the H200 machine lent here that host path took
    60-110 µs a launch against 2-35 µs of GPU time (bench/results/norm-quant-h200-2026-12-01.md,
    host-time table), so at decode sizes the launch, not the kernel, set the time. The first
    launch of each specialization goes through the JIT and keeps the ``CompiledKernel`` it
    returns; later ones with the same key call that kernel's own launcher, which takes every
    parameter in signature order (constexprs included, as ``JITFunction.run`` passes them in
    Triton 3.6 and 3.9). If that call is refused (a Triton whose launcher wants another argument
    list), the fast path switches itself off and the JIT path is used from then on."""
    key = None
    if device.type == "cuda" and _FAST["on"]:
        key = (device.index, num_warps, consts, tuple(_spec(a) for a in args))
        kernel = _COMPILED.get(key)
        if kernel is not None:
            try:
                if _FAST["constexprs_in_args"]:
                    kernel[(grid_n, 1, 1)](*args, *consts)
                else:
                    kernel[(grid_n, 1, 1)](*args)
                return
            except TypeError:
                if _FAST["constexprs_in_args"]:
                    _FAST["constexprs_in_args"] = False
                    try:
                        kernel[(grid_n, 1, 1)](*args)
                        return
                    except TypeError:
                        pass
                _FAST["on"] = False
    kernel = _norm_quant_kernel[(grid_n,)](*args, **dict(zip(_CONST_NAMES, consts)),
                                           num_warps=num_warps, enable_fp_fusion=False)
    if key is not None and hasattr(kernel, "function"):
        _COMPILED[key] = kernel


def _check_like(t: torch.Tensor, x: torch.Tensor, name: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.shape != x.shape or t.dtype != x.dtype or t.device != x.device:
        raise ValueError(f"{name} must be {tuple(x.shape)} {x.dtype} on {x.device} like x, "
                         f"got {tuple(t.shape)} {t.dtype} on {t.device}")
    return _as_rows(t)


def rms_norm_quant(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, dtype=torch.int8, *,
                   residual: torch.Tensor | None = None, residual_out: torch.Tensor | None = None,
                   exact_div: bool = False, out=None, y_out: torch.Tensor | None = None,
                   block_m: int | None = None, block_k: int | None = None,
                   num_warps: int | None = None, persistent: int | None = None):
    """Fused ``[residual add +] RMSNorm + per-token quantization`` of ``x [..., K]``.

    Returns (q, scales [..., 1] fp32), or (q, scales, new_residual) when ``residual`` is given.
    ``residual_out`` receives the new residual (default: a new tensor; ``residual`` itself for an
    in-place update). ``out=(q, scales)`` writes into preallocated contiguous tensors.
    ``y_out`` (x's shape and dtype) also receives the normalised activation in x's dtype as
    transformers' ``LlamaRMSNorm`` returns it, ``weight * (z * rstd).to(dtype)`` (for callers that
    still need it beside the quantized one: 2 more bytes written per element, no more read).
    ``block_m``, ``block_k`` (< K forces the three-pass path), ``num_warps`` and ``persistent``
    (programs per SM, looping over row blocks; None: one program per row block) override the
    launch heuristics, for tuning and tests."""
    qmax = _check_out_dtype(dtype)
    x2 = _as_rows(x)
    M, K = x2.shape
    if not isinstance(weight, torch.Tensor) or weight.dim() != 1 or weight.shape[0] != K:
        raise ValueError(f"weight must be a 1-d tensor of {K} elements (x's last dimension)")
    if not weight.is_floating_point() or weight.device != x.device:
        raise ValueError("weight must be a floating-point tensor on x's device")
    w = weight.contiguous()
    if residual is None and residual_out is not None:
        raise ValueError("residual_out given without residual")
    r2 = ro2 = None
    if residual is not None:
        r2 = _check_like(residual, x, "residual")
        if residual_out is None:
            residual_out = torch.empty_like(x, memory_format=torch.contiguous_format)
        ro2 = _check_like(residual_out, x, "residual_out")
        if ro2.data_ptr() != residual_out.data_ptr() or (ro2.numel() > 1 and ro2.stride(-1) != 1):
            raise ValueError("residual_out must be writable in place as [M, K] rows (last "
                             "dimension contiguous, leading dimensions flattenable)")
    q, s = _check_out(out, tuple(x.shape), tuple(x.shape[:-1]) + (1,), dtype, x.device)
    y2 = None
    if y_out is not None:
        y2 = _check_like(y_out, x, "y_out")
        if y2.data_ptr() != y_out.data_ptr() or (y2.numel() > 1 and y2.stride(-1) != 1):
            raise ValueError("y_out must be writable in place as [M, K] rows")
    if M == 0:
        return (q, s) if residual is None else (q, s, residual_out)
    if K == 0:
        raise ValueError("x has an empty last dimension: nothing to normalize")
    for name, val in (("block_m", block_m), ("block_k", block_k)):
        if val is not None and (val < 1 or val & (val - 1)):
            raise ValueError(f"{name} must be a power of two, got {val}")
    block_m, block_k, num_warps = _launch_params(M, K, block_m, block_k, num_warps,
                                                 residual is not None)
    n_blocks = cdiv(M, block_m)
    grid_n = n_blocks
    if persistent:
        sms = (torch.cuda.get_device_properties(x.device).multi_processor_count
               if x.device.type == "cuda" else 4)
        grid_n = max(1, min(n_blocks, sms * int(persistent)))
    soft = _soft(x.device)
    has_res = residual is not None
    args = (_q_arg(q, soft), K,
            s, 1,
            ro2 if has_res else x2, ro2.stride(0) if has_res else 0,
            x2, x2.stride(0),
            r2 if has_res else x2, r2.stride(0) if has_res else 0,
            w,
            y2 if y2 is not None else x2, y2.stride(0) if y2 is not None else 0,
            M, K, float(eps))
    consts = (qmax, dtype == torch.float8_e4m3fn, soft, exact_div, has_res, block_m, block_k,
              block_k >= K, y2 is not None)
    _launch(grid_n, args, consts, num_warps, x.device)
    return (q, s) if residual is None else (q, s, residual_out)


# --------------------------------------------------------------------------------------------
# Peers, written as plain torch ops (timed by bench/norm_quant.py)
# --------------------------------------------------------------------------------------------


def llama_rms_norm(x, weight, eps):
    """transformers' ``LlamaRMSNorm.forward`` (5.x), the function ``y_out`` follows: fp32 norm,
    rounded to x's dtype, then times the weight in that dtype."""
    v = x.float()
    v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps)
    return weight.to(x.dtype) * v.to(x.dtype)


def torch_rms_norm(x, weight, eps, residual=None):
    """RMSNorm as a model's unfused path computes it: fp32 math, output rounded to x's dtype."""
    if residual is not None:
        x = x + residual
    xf = x.float()
    y = (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
    return y if residual is None else (y, x)


def torch_norm_quant(x, weight, eps, dtype=torch.int8, residual=None):
    """The whole fused expression in torch ops (ours' rules, reciprocal division), for
    torch.compile to fuse as it can."""
    qmax = QMAX[dtype]
    if residual is not None:
        x = x + residual
    xf = x.float()
    y = xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps) * weight.float()
    scale = (y.abs().amax(-1, keepdim=True) / qmax).clamp_min(SCALE_MIN)
    v = (y * (1.0 / scale)).clamp(-qmax, qmax)
    if dtype == torch.int8:
        v = v.round()
    q = v.to(dtype)
    return (q, scale) if residual is None else (q, scale, x)


def unfused_pair(norm_fn, x, weight, eps, dtype=torch.int8, residual=None):
    """``norm_fn`` (torch_rms_norm, compiled by the caller) then act_quant's per-token kernel."""
    if residual is None:
        return quantize_per_token(norm_fn(x, weight, eps), dtype)
    y, res = norm_fn(x, weight, eps, residual)
    q, s = quantize_per_token(y, dtype)
    return q, s, res


# --------------------------------------------------------------------------------------------
# Comparison with the reference (used by the tests and by bench/norm_quant.py on the GPU)
# --------------------------------------------------------------------------------------------

TIE_RTOL = 2e-5  # relative distance from a rounding boundary within which one step is accepted
SCALE_RTOL = 1e-5  # relative tolerance of the fp32 scales against the float64 reference


def compare_with_reference(got, x, weight, eps, dtype=torch.int8, *, residual=None,
                           exact_div: bool = False, tie_rtol: float = TIE_RTOL,
                           scale_rtol: float = SCALE_RTOL) -> dict:
    """Judge a kernel result ``got`` = (q, scales[, new residual]) against the float64 reference.

    A quantized element passes when it equals the reference code, or when it is the neighbouring
    code and the reference's quotient is within ``tie_rtol`` (relative) of the boundary between
    the two: it must lie between the codes of the reference quotient scaled by (1 - tie_rtol)
    and (1 + tie_rtol). That bracket is one code wide, so a wrong norm, weight or scale still
    fails. Scales pass within ``scale_rtol`` relative; the new residual must match exactly.

    Returns {'ok', 'n', 'differ' (≠ reference), 'outside' (outside the bracket), 'first_bad',
    'scale_rel' (max relative scale error), 'residual_differ', 'nonfinite'}."""
    qmax = _check_out_dtype(dtype)
    q, s = got[0], got[1]
    y, res = _norm64(x, weight, eps, residual)
    absmax = y.abs().amax(dim=-1, keepdim=True)
    scale = _scale_from_absmax64(absmax, qmax)
    ref = _quantize64(y, scale, dtype, exact_div).float()
    lo = _quantize64(y * (1.0 - tie_rtol), scale, dtype, exact_div).float()
    hi = _quantize64(y * (1.0 + tie_rtol), scale, dtype, exact_div).float()
    lo, hi = torch.minimum(lo, hi), torch.maximum(lo, hi)
    qf = q.float()
    outside = (qf < lo) | (qf > hi) | qf.isnan()
    first_bad = None
    if outside.any():
        idx = tuple(int(i) for i in outside.nonzero()[0])
        first_bad = (idx, float(qf[idx]), float(ref[idx]))
    s64, rs64 = s.double(), scale.double()
    scale_rel = float(((s64 - rs64).abs() / rs64).max()) if s.numel() else 0.0
    nonfinite = int((~torch.isfinite(s)).sum())
    residual_differ = 0
    if residual is not None:
        residual_differ = int((got[2] != res).sum())
    n_out = int(outside.sum())
    return {
        "ok": n_out == 0 and nonfinite == 0 and scale_rel <= scale_rtol and residual_differ == 0
        and tuple(s.shape) == tuple(scale.shape),
        "n": q.numel(), "differ": int((qf != ref).sum()), "outside": n_out,
        "first_bad": first_bad, "scale_rel": scale_rel, "residual_differ": residual_differ,
        "nonfinite": nonfinite,
    }
