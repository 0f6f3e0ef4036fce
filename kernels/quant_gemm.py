"""Quantized GEMMs for act_calib: W8A8 products with the per-token × per-channel scales in the epilogue.

Formula (A: activations quantized per row, scale ``sa [M]``; W: weights quantized per output
channel, scale ``sw [N]``; both symmetric, no zero point — kernels/act_quant.py)::

    Y[m, n] = (sum_k A_q[m, k] · W_q[n, k]) · sa[m] · sw[n]  (+ bias[n])

accumulated exactly in int32 (int8) or in fp32 (fp8-e4m3), scaled in fp32, stored once in the
output dtype. Shapes: ``a_q [M, K]`` int8 / e4m3 (rows contiguous), ``w_q [N, K]`` (the nn.Linear
layout, rows contiguous: both operands K-major, which Hopper's int8 wgmma requires), ``sa [M, 1]``
and ``sw [1, N]`` fp32 — the layouts ``torch._scaled_mm`` takes for row-wise scaling.

Three ways to run it (``act_calib`` picks per mode from its measured table):
  * :func:`w8a8_gemm` — the Triton kernel below: grouped tile order for L2 reuse, autotuned tiles,
    the scales (and bias) applied to the accumulator before the one store;
  * ``torch._int_mm`` (cuBLASLt int8) + :func:`scale_rows_cols`, a second pass that reads the int32
    product and writes the scaled output (6 bytes per output element for bf16);
  * ``torch._scaled_mm`` (fp8 only), whose row-wise epilogue does the same in one kernel.

And one epilogue for gated MLPs: :func:`silu_mul_quant` reads the gate|up product ``Y [M, 2N]``
(float, or int32 with its scales), forms ``h = silu(gate) · up`` in fp32 and quantizes ``h`` per
token (or with a static scale) for the down projection — the bf16 ``h`` is never written.
Rounding of that quantization: act_quant's rules (scale = max(absmax/QMAX, 2**-126), x·(1/scale),
int8 round-half-even, e4m3 RNE with the clamp first).

Sources: SmoothQuant's W8A8 with per-token/per-channel scales applied after the integer GEMM
(mit-han-lab/smoothquant, arXiv 2211.10438 §3); torchao's ``Float8DynamicActivationFloat8WeightConfig``
(PerRow) running ``torch._scaled_mm`` with row-wise scales (pytorch/ao torchao/quantization);
the grouped program order of Triton's matmul tutorial (triton-lang/triton
python/tutorials/03-matrix-multiplication.py).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from .act_quant import QMAX, _divide, _fp8_soft, _quantize, _scale_of
from .host_math import cdiv, pow2_at_least

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


def w8a8_reference(a_q, w_q, sa, sw, bias=None, out_dtype=torch.bfloat16):
    """float64 reference of Y = (A_q · W_qᵀ) · sa · sw (+ bias), returned in ``out_dtype``."""
    y = (a_q.double() @ w_q.double().t()) * sa.double().reshape(-1, 1) * sw.double().reshape(1, -1)
    if bias is not None:
        y = y + bias.double()
    return y.to(out_dtype)


def _gemm_configs():
    if _INTERPRET:
        return [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32, "GROUP_M": 2}, num_warps=1,
                              num_stages=1)]
    out = []
    for bm, bn, bk, warps, stages in (
        (128, 256, 128, 8, 3), (128, 128, 128, 8, 4), (128, 128, 64, 4, 4), (256, 128, 128, 8, 3),
        (64, 128, 128, 4, 4), (64, 64, 128, 4, 4), (32, 128, 128, 4, 4), (16, 128, 256, 4, 3),
    ):
        out.append(triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                                 num_warps=warps, num_stages=stages))
    return out


def _prune_gemm(configs, named_args, **kwargs):
    m = named_args["M"]
    kept = [c for c in configs if c.kwargs["BLOCK_M"] <= max(16, pow2_at_least(m))]
    return kept or configs[-1:]


@triton.autotune(configs=_gemm_configs(), key=["M_BUCKET", "N", "K", "IS_FP8"],
                 prune_configs_by={"early_config_prune": _prune_gemm}, warmup=5, rep=20)
@triton.jit
def _w8a8_kernel(
    c_ptr, stride_cm, stride_cn,
    a_ptr, stride_am, stride_ak,
    w_ptr, stride_wn, stride_wk,
    sa_ptr, sw_ptr, bias_ptr,
    M, N, K, M_BUCKET,
    HAS_BIAS: tl.constexpr, IS_FP8: tl.constexpr, WIDEN: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    # grouped order: GROUP_M row blocks share each column block while it is in L2
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_n
    first_m = (pid // in_group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % size_m
    pid_n = (pid % in_group) // size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
    w_ptrs = w_ptr + offs_n[None, :].to(tl.int64) * stride_wn + offs_k[:, None] * stride_wk  # [BK, BN]
    if IS_FP8:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.int32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = offs_k < K - k0
        # fp8 operands arrive as their bytes (uint8): a masked load's fill is then an integer 0,
        # which Triton 3.6 cannot convert to e4m3; the bitcast is free
        a = tl.load(a_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0)
        w = tl.load(w_ptrs, mask=n_ok[None, :] & k_ok[:, None], other=0)
        if IS_FP8 and not WIDEN:
            a = a.to(tl.float8e4nv, bitcast=True)
            w = w.to(tl.float8e4nv, bitcast=True)
        if WIDEN:  # the CPU interpreter: products in fp32 (exact for int8 while K·127² < 2**24)
            part = tl.dot(a.to(tl.float32), w.to(tl.float32), input_precision="ieee")
            if IS_FP8:
                acc += part
            else:
                acc += part.to(tl.int32)
        elif IS_FP8:
            acc = tl.dot(a, w, acc)
        else:
            acc = tl.dot(a, w, acc, out_dtype=tl.int32)
        a_ptrs += BLOCK_K * stride_ak
        w_ptrs += BLOCK_K * stride_wk
    sa = tl.load(sa_ptr + offs_m, mask=m_ok, other=0.0)
    sw = tl.load(sw_ptr + offs_n, mask=n_ok, other=0.0)
    y = acc.to(tl.float32) * sa[:, None] * sw[None, :]
    if HAS_BIAS:
        y += tl.load(bias_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    c = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c, y.to(c_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def _check_operands(a_q, w_q, sa, sw):
    if a_q.dim() != 2 or w_q.dim() != 2 or a_q.shape[1] != w_q.shape[1]:
        raise ValueError(f"a_q [M, K] and w_q [N, K] expected, got {tuple(a_q.shape)} and {tuple(w_q.shape)}")
    if a_q.dtype != w_q.dtype or a_q.dtype not in (torch.int8, torch.float8_e4m3fn):
        raise TypeError(f"a_q and w_q must both be int8 or both float8_e4m3fn, got {a_q.dtype}, {w_q.dtype}")
    M, N = a_q.shape[0], w_q.shape[0]
    if sa.numel() != M or sw.numel() != N or sa.dtype != torch.float32 or sw.dtype != torch.float32:
        raise ValueError("sa must hold M and sw N fp32 scales")
    return M, N


def w8a8_gemm(a_q, w_q, sa, sw, bias=None, out_dtype=torch.bfloat16, out=None):
    """Y [M, N] = (a_q · w_qᵀ) · sa · sw (+ bias) in ``out_dtype``, one Triton kernel."""
    M, N = _check_operands(a_q, w_q, sa, sw)
    K = a_q.shape[1]
    if a_q.stride(1) != 1 or w_q.stride(1) != 1:
        raise ValueError("a_q and w_q rows must be contiguous (K-major)")
    if out is None:
        out = torch.empty((M, N), dtype=out_dtype, device=a_q.device)
    if M == 0 or N == 0:
        return out
    is_fp8 = a_q.dtype == torch.float8_e4m3fn
    a_arg, w_arg = a_q, w_q
    if is_fp8:  # the interpreter reads e4m3 through torch's own conversion; the GPU its bytes
        a_arg, w_arg = (a_q.float(), w_q.float()) if _INTERPRET else (a_q.view(torch.uint8), w_q.view(torch.uint8))
    sa_c, sw_c = sa.reshape(-1).contiguous(), sw.reshape(-1).contiguous()
    has_bias = bias is not None
    grid = lambda meta: (cdiv(M, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    _w8a8_kernel[grid](
        out, out.stride(0), out.stride(1),
        a_arg, a_arg.stride(0), a_arg.stride(1),
        w_arg, w_arg.stride(0), w_arg.stride(1),
        sa_c, sw_c, bias if has_bias else sa_c,
        M, N, K, pow2_at_least(max(1, M)),
        HAS_BIAS=has_bias, IS_FP8=is_fp8, WIDEN=_INTERPRET,
    )
    return out


@triton.jit
def _scale_kernel(
    y_ptr, stride_ym, stride_yn,
    acc_ptr, stride_am, stride_an,
    sa_ptr, sw_ptr, bias_ptr,
    M, N,
    HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    r_ok = rows < M
    c_ok = cols < N
    mask = r_ok[:, None] & c_ok[None, :]
    acc = tl.load(acc_ptr + rows[:, None].to(tl.int64) * stride_am + cols[None, :] * stride_an, mask=mask, other=0)
    sa = tl.load(sa_ptr + rows, mask=r_ok, other=0.0)
    sw = tl.load(sw_ptr + cols, mask=c_ok, other=0.0)
    y = acc.to(tl.float32) * sa[:, None] * sw[None, :]
    if HAS_BIAS:
        y += tl.load(bias_ptr + cols, mask=c_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + rows[:, None].to(tl.int64) * stride_ym + cols[None, :] * stride_yn,
             y.to(y_ptr.dtype.element_ty), mask=mask)


def scale_rows_cols(acc, sa, sw, bias=None, out_dtype=torch.bfloat16):
    """Y = acc · sa[m] · sw[n] (+ bias[n]) for an int32 or fp32 product ``acc [M, N]``; one pass."""
    M, N = acc.shape
    y = torch.empty((M, N), dtype=out_dtype, device=acc.device)
    if M == 0 or N == 0:
        return y
    bm, bn = (16, 32) if _INTERPRET else (32, 256)
    sa_c, sw_c = sa.reshape(-1).contiguous(), sw.reshape(-1).contiguous()
    _scale_kernel[(cdiv(M, bm), cdiv(N, bn))](
        y, y.stride(0), y.stride(1), acc, acc.stride(0), acc.stride(1), sa_c, sw_c,
        bias if bias is not None else sa_c, M, N,
        HAS_BIAS=bias is not None, BLOCK_M=bm, BLOCK_N=bn, num_warps=1 if _INTERPRET else 8,
    )
    return y


def int_mm_gemm(a_q, w_q, sa, sw, bias=None, out_dtype=torch.bfloat16):
    """``torch._int_mm`` (cuBLASLt int8 → int32) then :func:`scale_rows_cols`."""
    _check_operands(a_q, w_q, sa, sw)
    return scale_rows_cols(torch._int_mm(a_q, w_q.t()), sa, sw, bias, out_dtype)


def scaled_mm_gemm(a_q, w_q, sa, sw, bias=None, out_dtype=torch.bfloat16):
    """``torch._scaled_mm`` with row-wise scales (fp8 e4m3; CUDA, compute capability ≥ 8.9)."""
    _check_operands(a_q, w_q, sa, sw)
    return torch._scaled_mm(a_q, w_q.t(), scale_a=sa.reshape(-1, 1), scale_b=sw.reshape(1, -1),
                            bias=bias, out_dtype=out_dtype)


# --------------------------------------------------------------------------------------------
# silu(gate) · up, quantized for the down projection
# --------------------------------------------------------------------------------------------
def silu_mul_quant_reference(y, n, dtype=torch.int8, sa=None, sw=None, static_scale=None):
    """float64 reference: h = silu(g)·u from y [M, 2N] (dequantized with sa/sw when int32), then
    act_quant's per-token (or static) rule → (q [M, N], scales [M, 1] fp32)."""
    from .act_quant import quantize_per_tensor_reference, quantize_per_token_reference

    yd = y.double()
    if sa is not None:
        yd = yd * sa.double().reshape(-1, 1) * sw.double().reshape(1, -1)
    g, u = yd[:, :n], yd[:, n:2 * n]
    h = (g / (1.0 + torch.exp(-g)) * u).float()
    if static_scale is not None:
        q, s = quantize_per_tensor_reference(h, dtype, scale=static_scale)
        return q, s.reshape(1, 1).expand(h.shape[0], 1)
    return quantize_per_token_reference(h, dtype)


@triton.jit
def _silu_mul(y_rows, sa, sw_ptr, c, c_ok, mask, N, DEQUANT: tl.constexpr):
    g = tl.load(y_rows + c[None, :], mask=mask, other=0).to(tl.float32)
    u = tl.load(y_rows + (c + N)[None, :], mask=mask, other=0).to(tl.float32)
    if DEQUANT:
        g = g * sa[:, None] * tl.load(sw_ptr + c, mask=c_ok, other=0.0)[None, :]
        u = u * sa[:, None] * tl.load(sw_ptr + c + N, mask=c_ok, other=0.0)[None, :]
    return g / (1.0 + tl.exp(-g)) * u


@triton.jit
def _silu_mul_quant_kernel(
    q_ptr, stride_qm, s_ptr,
    y_ptr, stride_ym,
    sa_ptr, sw_ptr, static_ptr,
    M, N,
    QMAX: tl.constexpr, IS_FP8: tl.constexpr, FP8_SOFT: tl.constexpr, DEQUANT: tl.constexpr,
    STATIC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ONE_TILE: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    r_ok = rows < M
    cols = tl.arange(0, BLOCK_N)
    y_rows = y_ptr + rows[:, None] * stride_ym
    q_rows = q_ptr + rows[:, None] * stride_qm
    sa = tl.zeros([BLOCK_M], dtype=tl.float32)
    if DEQUANT:
        sa = tl.load(sa_ptr + rows, mask=r_ok, other=0.0)
    if ONE_TILE:
        c_ok = cols < N
        mask = r_ok[:, None] & c_ok[None, :]
        h = _silu_mul(y_rows, sa, sw_ptr, cols, c_ok, mask, N, DEQUANT)
        if STATIC:
            scale = tl.zeros([BLOCK_M], dtype=tl.float32) + tl.load(static_ptr)
        else:
            scale = _scale_of(tl.max(tl.abs(h), axis=1), QMAX)
        q = _quantize(_divide(h, scale[:, None], False), QMAX, IS_FP8, FP8_SOFT, STATIC)
        tl.store(q_rows + cols[None, :], q, mask=mask)
    else:
        if STATIC:
            scale = tl.zeros([BLOCK_M], dtype=tl.float32) + tl.load(static_ptr)
        else:
            absmax = tl.zeros([BLOCK_M], dtype=tl.float32)
            for n0 in range(0, N, BLOCK_N):
                c = n0 + cols
                c_ok = c < N
                h = _silu_mul(y_rows, sa, sw_ptr, c, c_ok, r_ok[:, None] & c_ok[None, :], N, DEQUANT)
                absmax = tl.maximum(absmax, tl.max(tl.abs(h), axis=1))
            scale = _scale_of(absmax, QMAX)
        for n0 in range(0, N, BLOCK_N):
            c = n0 + cols
            c_ok = c < N
            mask = r_ok[:, None] & c_ok[None, :]
            h = _silu_mul(y_rows, sa, sw_ptr, c, c_ok, mask, N, DEQUANT)
            q = _quantize(_divide(h, scale[:, None], False), QMAX, IS_FP8, FP8_SOFT, STATIC)
            tl.store(q_rows + c[None, :], q, mask=mask)
    tl.store(s_ptr + rows, scale, mask=r_ok)


_ONE_TILE_MAX = 16384


def silu_mul_quant(y, n: int, dtype=torch.int8, *, sa=None, sw=None, static_scale=None, block_n=None):
    """h = silu(y[:, :n]) · y[:, n:2n], quantized → (q [M, n] ``dtype``, scales [M, 1] fp32).

    ``y``: [M, 2n] float (bf16/fp16/fp32) or int32 with ``sa [M]`` and ``sw [2n]`` (dequantized on
    load). ``static_scale``: a one-element fp32 tensor (values past scale·QMAX saturate), else
    per token. ``block_n`` < n forces the two-pass path (tests)."""
    if y.dim() != 2 or y.shape[1] < 2 * n or y.stride(1) != 1:
        raise ValueError(f"y must be [M, >= 2n] with contiguous rows, got {tuple(y.shape)} for n={n}")
    dequant = y.dtype == torch.int32
    if dequant and (sa is None or sw is None):
        raise ValueError("an int32 product needs its sa and sw scales")
    qmax = QMAX[dtype]
    M = y.shape[0]
    q = torch.empty((M, n), dtype=dtype, device=y.device)
    s = torch.empty((M, 1), dtype=torch.float32, device=y.device)
    if M == 0:
        return q, s
    soft = _fp8_soft(y.device)
    if block_n is None:
        block_n = pow2_at_least(n) if n <= _ONE_TILE_MAX else 4096
    one_tile = block_n >= n
    warps = 1 if _INTERPRET else max(4, min(16, block_n // 1024))
    dummy = s
    st = static_scale.reshape(1).to(device=y.device, dtype=torch.float32) if static_scale is not None else dummy
    _silu_mul_quant_kernel[(M,)](
        q.view(torch.uint8) if (dtype == torch.float8_e4m3fn and soft) else q, q.stride(0), s,
        y, y.stride(0),
        sa.reshape(-1).contiguous() if dequant else dummy, sw.reshape(-1).contiguous() if dequant else dummy, st,
        M, n,
        QMAX=qmax, IS_FP8=dtype == torch.float8_e4m3fn, FP8_SOFT=soft, DEQUANT=dequant,
        STATIC=static_scale is not None, BLOCK_M=1, BLOCK_N=block_n, ONE_TILE=one_tile,
        num_warps=warps, enable_fp_fusion=False,
    )
    return q, s
