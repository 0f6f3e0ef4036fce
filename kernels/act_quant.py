"""act_calib: symmetric activation quantization to int8 or fp8-e4m3, per token or per tensor.

Formula (symmetric, no zero point; QMAX = 127 for int8, 448 for ``torch.float8_e4m3fn``)::

    absmax = max |x|                      over one row (per token) or the whole tensor (per tensor)
    scale  = max(absmax / QMAX, 2**-126)  fp32, correctly rounded
    v      = x / scale                    fp32, correctly rounded (IEEE division, not an approximation)
    int8:  q = clamp(round_half_to_even(v), -127, 127)
    fp8:   q = e4m3fn(clamp(v, -448, 448))   round-to-nearest-even, as ``tensor.to(torch.float8_e4m3fn)``
    x ≈ q * scale

Shapes: ``x`` is ``[..., K]`` (fp16, bf16 or fp32; the last dimension contiguous, leading dimensions
flattened to M rows). Per token: ``q`` has ``x``'s shape and ``scales`` is ``[..., 1]`` fp32, the
layout ``torch._scaled_mm`` takes for row-wise ``scale_a``. Per tensor: ``scales`` is ``[1]`` fp32.

Rounding and saturation rules
- int8 rounds half to even (``torch.round``; PTX ``cvt.rni``), after clamping to ±127. -128 is never
  written, so the range stays symmetric.
- fp8 clamps to ±448 *before* the cast: torch's cast does not saturate (values past 464 become NaN),
  while Triton on sm90 lowers the fp32→e4m3 cast to ``cvt.rn.satfinite.e4m3x2.f32`` (RNE, saturating;
  sm89 goes through an fp16 RTZ intermediate, i.e. rounds twice). Clamping first makes both agree.
  (Where the scale comes from the data's own absmax the clamp cannot bind and is skipped — see
  ``_quantize``; it is applied for static scales.)
- The Triton *interpreter* (TRITON_INTERPRET=1, Triton 3.6) does not round fp32→fp8e4nv correctly:
  it drops the carry out of the mantissa (31.6 → 16.0 instead of 32.0), rounds ties away from zero and
  does not saturate — about 2.5 % of N(0, 100²) samples come out wrong. So the kernel carries its own
  exact conversion (``_e4m3_bits``: exponent-dependent magic-number RNE, then bit assembly), used
  under the interpreter and anywhere below sm90; sm90+ uses the hardware cvt. Both give the bytes of
  ``.to(torch.float8_e4m3fn)`` for clamped fp32 values; the tests check the soft path bit for bit.
- absmax == 0 (an all-zero row): scale is the floor 2**-126 (FLT_MIN), so 0 / scale = 0 — no NaN, and
  the floor is far below any scale a real activation needs (it only matters for rows with
  absmax < QMAX·2**-126 ≈ 1.5e-36 int8 / 5.3e-36 fp8). -0.0 keeps its sign in fp8 (byte 0x80).
- Inputs must be finite; nothing checks it. What a NaN or inf gives is not specified and differs
  between the CPU interpreter and the GPU (the absmax may skip a NaN; an inf row may come out as
  zeros on one and NaN on the other): find non-finite activations before quantizing them.

Division: by default (``exact_div=False``) ``v = x * (1/scale)`` with ``1/scale`` correctly rounded
once per row, as vLLM's int8 kernels do; on the H200 this ran at 3.3-3.4 TB/s against 2.8-3.1 for
exact division (bench/results/kernels-h200-2026-11-29.md). ``exact_div=True`` uses ``tl.math.div_rn``
(Triton's plain ``/`` on fp32 is ``div.full.f32``, ~2 ulp), the correctly rounded quotient: it
matches the float64 reference bit for bit on the CPU interpreter and on the H200, where torch's
eager ``x / scale`` did not (16-5122 codes per case, 2026-11-29). The two modes differ in about 2e-4
of the codes on bf16 input. The references take the same flag, so both variants are tested exactly.

Per tensor, dynamic: two launches — a tiled absmax with ``atomic_max`` into one fp32 word, then the
quantize pass. A single launch would need every program to see the final maximum before it
quantizes, i.e. a grid-wide barrier, which Triton does not offer (programs are not guaranteed to be
co-resident, so a spin-wait can deadlock). The cost is a second read of x: 5 bytes per bf16
element instead of 3 — prefer per token where the GEMM accepts row scales. Per tensor, static: one
launch with the given scale; values past ``scale*QMAX`` clip (``RuntimeCalibrator.clip_count``).

Per token: ONE pass per row. When the row fits in one tile (K ≤ 16384) it is loaded once into
registers: absmax → scale → quantize → store q and the scale, so HBM sees 2 B read + 1 B written per
bf16 element (+4 B per row). Longer rows loop twice over K inside one program (the second read is
meant to hit L2: the first pass loads with ``evict_last``).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from .host_math import cdiv, pow2_at_least

QMAX = {torch.int8: 127.0, torch.float8_e4m3fn: 448.0}
SCALE_MIN = 2.0**-126  # FLT_MIN: the scale floor; makes absmax == 0 give q == 0, never NaN
_IN_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_MAX_ONE_TILE = 16384  # longest row kept whole in registers (per-token kernel)
_TILE_ELEMS = 4096  # elements per program for short rows (several rows per program)


# --------------------------------------------------------------------------------------------
# References: plain torch, float64 math
# --------------------------------------------------------------------------------------------


def _check_out_dtype(dtype):
    if dtype not in QMAX:
        raise ValueError(f"dtype must be torch.int8 or torch.float8_e4m3fn, got {dtype}")
    return QMAX[dtype]


def _scale_from_absmax64(absmax: torch.Tensor, qmax: float) -> torch.Tensor:
    """fp32 scale = max(RN32(absmax / qmax), 2**-126). absmax is fp32-representable, so the float64
    quotient rounded to fp32 equals the correctly rounded fp32 quotient (53 ≥ 2·24 + 2)."""
    return (absmax.double() / qmax).float().clamp_min(SCALE_MIN)


def _quantize64(x64: torch.Tensor, scale32: torch.Tensor, dtype, exact_div: bool) -> torch.Tensor:
    qmax = QMAX[dtype]
    if exact_div:
        v = (x64 / scale32.double()).float()  # = IEEE fp32 x / scale
    else:
        inv = (1.0 / scale32.double()).float()  # RN32(1 / scale), once per row
        v = (x64 * inv.double()).float()  # exact product in f64, one rounding to fp32
    v = v.double().clamp(-qmax, qmax)
    if dtype == torch.int8:
        return torch.round(v).to(torch.int8)  # torch.round: half to even
    return v.float().to(torch.float8_e4m3fn)  # exact fp32 value, RNE cast


def quantize_per_token_reference(x: torch.Tensor, dtype=torch.int8, *, exact_div: bool = False):
    """Per-token (row) symmetric quantization in float64. Returns (q, scales [..., 1] fp32).

    Assumptions: finite input; scale = max(RN32(absmax/QMAX), 2**-126) as the GEMM epilogue will see
    it (fp32); the quotient x/scale is rounded to fp32 once — the value an fp32 kernel holds — and
    then rounded half-to-even (int8) or cast RNE to e4m3fn after clamping to ±448 (fp8). Compared
    with an all-float64 quotient, int8 results differ only where that fp32 quotient lands exactly on
    k + 0.5 (the test suite checks this)."""
    qmax = _check_out_dtype(dtype)
    x64 = x.double()
    absmax = x64.abs().amax(dim=-1, keepdim=True) if x.shape[-1] else x64.new_zeros(*x.shape[:-1], 1)
    scale = _scale_from_absmax64(absmax, qmax)
    return _quantize64(x64, scale, dtype, exact_div), scale


def quantize_per_tensor_reference(x: torch.Tensor, dtype=torch.int8, scale=None, *,
                                  exact_div: bool = False):
    """Per-tensor symmetric quantization in float64. Returns (q, scale [1] fp32).

    ``scale=None``: dynamic, scale = max(RN32(absmax/QMAX), 2**-126) over the whole tensor.
    Otherwise static: the given scale (rounded to fp32, no floor), and values beyond scale*QMAX
    saturate to ±QMAX. Same quotient and rounding rules as the per-token reference."""
    qmax = _check_out_dtype(dtype)
    x64 = x.double()
    if scale is None:
        absmax = x64.abs().amax().reshape(1) if x.numel() else x64.new_zeros(1)
        s = _scale_from_absmax64(absmax, qmax)
    else:
        s = torch.as_tensor(scale, dtype=torch.float64).reshape(1).float()
    return _quantize64(x64, s.to(x.device), dtype, exact_div), s.to(x.device)


# --------------------------------------------------------------------------------------------
# Triton kernels
# --------------------------------------------------------------------------------------------


@triton.jit
def _e4m3_bits(v):
    """fp32 v with |v| ≤ 448 → int32 holding the e4m3fn byte, rounded to nearest even.

    Round |v| to a multiple of its e4m3 ulp 2**(e-3) (e = max(exponent, -6); below 2**-6 the ulp
    is the subnormal step 2**-9) by adding and subtracting 2**(e+20): the fp32 add rounds exactly
    there, RNE. The rounded value is an e4m3 number; assemble its byte from the fp32 bits."""
    bits = v.to(tl.int32, bitcast=True)
    sign = (bits >> 24) & 0x80
    e = tl.maximum(((bits >> 23) & 0xFF) - 127, -6)
    magic = ((e + 147) << 23).to(tl.float32, bitcast=True)  # 2**(e + 20)
    r = (tl.abs(v) + magic) - magic
    rb = r.to(tl.int32, bitcast=True)
    normal = (((rb >> 23) - 120) << 3) | ((rb >> 20) & 7)
    subnormal = (r * 512.0).to(tl.int32)
    return tl.where(r >= 0.015625, normal, subnormal) | sign


@triton.jit
def _quantize(v, QMAX: tl.constexpr, IS_FP8: tl.constexpr, FP8_SOFT: tl.constexpr,
              CLAMP: tl.constexpr):
    """Clamp fp32 v to ±QMAX and convert: int8 RNE, or e4m3fn RNE (soft bytes or hardware cvt).

    CLAMP=False is for scales taken from the data's own absmax: then |v| ≤ QMAX·(1 + 2**-22)
    (the scale and the quotient are each rounded once), which rounds to ±QMAX anyway — int8 at
    ±127.0000x, e4m3 at 448.000x (half an ulp below 480) — so the clamp is a no-op and costs two
    instructions per element."""
    if CLAMP:
        v = tl.minimum(tl.maximum(v, -QMAX), QMAX)
    if IS_FP8:
        if FP8_SOFT:
            out = _e4m3_bits(v).to(tl.uint8)
        else:
            out = v.to(tl.float8e4nv)
    else:
        # 1.5 * 2**23: adding it rounds |v| ≤ 2**22 to an integer, half to even, in any IEEE fp32
        # unit (the interpreter has no rint); the cast of the integral result is then exact.
        out = ((v + 12582912.0) - 12582912.0).to(tl.int8)
    return out


@triton.jit
def _scale_of(absmax, QMAX: tl.constexpr):
    return tl.maximum(tl.math.div_rn(absmax, QMAX), 1.1754943508222875e-38)


@triton.jit
def _divide(x, scale, EXACT_DIV: tl.constexpr):
    # The launchers pass enable_fp_fusion=False: with it on, x * inv followed by the int8
    # magic-number add contracts into one FFMA on sm90 (a different rounding from the interpreter
    # and the reference). Nothing else here wants an FMA.
    if EXACT_DIV:
        v = tl.math.div_rn(x, scale)
    else:
        v = x * tl.math.div_rn(tl.full(scale.shape, 1.0, tl.float32), scale)
    return v


@triton.jit
def _per_token_kernel(
    q_ptr, stride_qm,
    s_ptr, stride_sm,
    x_ptr, stride_xm,
    M, K,
    QMAX: tl.constexpr, IS_FP8: tl.constexpr, FP8_SOFT: tl.constexpr, EXACT_DIV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, ONE_TILE: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    cols = tl.arange(0, BLOCK_K)
    x_rows = x_ptr + rows[:, None] * stride_xm
    q_rows = q_ptr + rows[:, None] * stride_qm
    if ONE_TILE:
        mask = row_ok[:, None] & (cols[None, :] < K)
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0,
                    eviction_policy="evict_first").to(tl.float32)
        scale = _scale_of(tl.max(tl.abs(x), axis=1), QMAX)
        q = _quantize(_divide(x, scale[:, None], EXACT_DIV), QMAX, IS_FP8, FP8_SOFT, False)
        tl.store(q_rows + cols[None, :], q, mask=mask)
    else:
        absmax = tl.zeros([BLOCK_M], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            c = k0 + cols
            mask = row_ok[:, None] & (c[None, :] < K)
            x = tl.load(x_rows + c[None, :], mask=mask, other=0.0,
                        eviction_policy="evict_last").to(tl.float32)
            absmax = tl.maximum(absmax, tl.max(tl.abs(x), axis=1))
        scale = _scale_of(absmax, QMAX)
        for k0 in range(0, K, BLOCK_K):
            c = k0 + cols
            mask = row_ok[:, None] & (c[None, :] < K)
            x = tl.load(x_rows + c[None, :], mask=mask, other=0.0,
                        eviction_policy="evict_first").to(tl.float32)
            q = _quantize(_divide(x, scale[:, None], EXACT_DIV), QMAX, IS_FP8, FP8_SOFT, False)
            tl.store(q_rows + c[None, :], q, mask=mask)
    tl.store(s_ptr + rows * stride_sm, scale, mask=row_ok)


@triton.jit
def _absmax_kernel(
    amax_ptr,
    x_ptr, stride_xm,
    M, K,
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0).to(tl.int64)
    pid_k = tl.program_id(1).to(tl.int64)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    mask = (rows[:, None] < M) & (cols[None, :] < K)
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0,
                eviction_policy="evict_last").to(tl.float32)
    tl.atomic_max(amax_ptr, tl.max(tl.max(tl.abs(x), axis=1), axis=0))  # ≥ 0: int order == fp order


@triton.jit
def _per_tensor_kernel(
    q_ptr, stride_qm,
    s_ptr,
    x_ptr, stride_xm,
    amax_ptr,
    M, K,
    QMAX: tl.constexpr, IS_FP8: tl.constexpr, FP8_SOFT: tl.constexpr, EXACT_DIV: tl.constexpr,
    DYNAMIC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0).to(tl.int64)
    pid_k = tl.program_id(1).to(tl.int64)
    if DYNAMIC:
        scale = _scale_of(tl.load(amax_ptr), QMAX)
        tl.store(s_ptr, scale, mask=(pid_m == 0) & (pid_k == 0))
    else:
        scale = tl.load(s_ptr)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    mask = (rows[:, None] < M) & (cols[None, :] < K)
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0,
                eviction_policy="evict_first").to(tl.float32)
    q = _quantize(_divide(x, scale, EXACT_DIV), QMAX, IS_FP8, FP8_SOFT, not DYNAMIC)
    tl.store(q_ptr + rows[:, None] * stride_qm + cols[None, :], q, mask=mask)


# --------------------------------------------------------------------------------------------
# Launchers
# --------------------------------------------------------------------------------------------


def _as_rows(x: torch.Tensor) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _IN_DTYPES:
        raise ValueError(f"x must be float16, bfloat16 or float32, got {x.dtype}")
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension (the hidden size K)")
    if x.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("x is on the CPU: run with TRITON_INTERPRET=1 or move x to the GPU")
    if x.shape[-1] > 0 and x.stride(-1) != 1:
        x = x.contiguous()
    if x.dim() == 2:
        return x
    return x.reshape(-1, x.shape[-1])  # a view where the strides allow it, else a copy


def _fp8_soft(device: torch.device) -> bool:
    """Exact software e4m3 rounding unless the hardware cvt is RNE-exact (sm90+)."""
    if device.type != "cuda" or os.environ.get("TRITON_INTERPRET") == "1":
        return True
    return torch.cuda.get_device_capability(device) < (9, 0)


def _check_out(out, q_shape, s_shape, dtype, device):
    if out is None:
        return (torch.empty(q_shape, dtype=dtype, device=device),
                torch.empty(s_shape, dtype=torch.float32, device=device))
    q, s = out
    for t, shape, dt, name in ((q, q_shape, dtype, "q"), (s, s_shape, torch.float32, "scales")):
        if tuple(t.shape) != tuple(shape) or t.dtype != dt or t.device != device:
            raise ValueError(f"out {name} must be {tuple(shape)} {dt} on {device}, "
                             f"got {tuple(t.shape)} {t.dtype} on {t.device}")
        if not t.is_contiguous():
            raise ValueError(f"out {name} must be contiguous")
    return q, s


def _q_arg(q: torch.Tensor, soft: bool) -> torch.Tensor:
    return q.view(torch.uint8) if (q.dtype == torch.float8_e4m3fn and soft) else q


def _per_token_launch_params(M, K, block_m=None, block_k=None, num_warps=None):
    if block_k is None:
        block_k = pow2_at_least(K) if K <= _MAX_ONE_TILE else 4096
    if block_m is None:
        block_m = max(1, min(pow2_at_least(M), _TILE_ELEMS // block_k))
    if num_warps is None:
        num_warps = max(1, min(16, block_m * block_k // 512))
    return block_m, block_k, num_warps


def quantize_per_token(x: torch.Tensor, dtype=torch.int8, *, exact_div: bool = False, out=None,
                       block_m: int | None = None, block_k: int | None = None,
                       num_warps: int | None = None):
    """Dynamic per-token quantization of ``x [..., K]`` → (q like x, scales [..., 1] fp32).

    ``out=(q, scales)`` writes into preallocated contiguous tensors. ``block_m`` (rows per
    program), ``block_k`` (row tile; < K forces the two-loop path) and ``num_warps`` override the
    launch heuristics (for tuning and tests)."""
    qmax = _check_out_dtype(dtype)
    x2 = _as_rows(x)
    M, K = x2.shape
    q, s = _check_out(out, tuple(x.shape), tuple(x.shape[:-1]) + (1,), dtype, x.device)
    if M == 0:
        return q, s
    if K == 0:
        raise ValueError("x has an empty last dimension: nothing to take the absmax of")
    for name, val in (("block_m", block_m), ("block_k", block_k)):
        if val is not None and (val < 1 or val & (val - 1)):
            raise ValueError(f"{name} must be a power of two, got {val}")
    block_m, block_k, num_warps = _per_token_launch_params(M, K, block_m, block_k, num_warps)
    soft = _fp8_soft(x.device)
    grid = (cdiv(M, block_m),)
    _per_token_kernel[grid](
        _q_arg(q, soft), K,
        s, 1,
        x2, x2.stride(0),
        M, K,
        QMAX=qmax, IS_FP8=dtype == torch.float8_e4m3fn, FP8_SOFT=soft, EXACT_DIV=exact_div,
        BLOCK_M=block_m, BLOCK_K=block_k, ONE_TILE=block_k >= K,
        num_warps=num_warps, enable_fp_fusion=False,
    )
    return q, s


def quantize_per_tensor(x: torch.Tensor, dtype=torch.int8, scale=None, *, exact_div: bool = False,
                        out=None):
    """Per-tensor quantization of ``x [..., K]`` → (q like x, scale [1] fp32).

    ``scale=None``: dynamic (absmax launch + quantize launch). Otherwise static: a positive
    Python number or a one-element tensor (used as given; values beyond scale*QMAX saturate)."""
    qmax = _check_out_dtype(dtype)
    x2 = _as_rows(x)
    M, K = x2.shape
    q, s = _check_out(out, tuple(x.shape), (1,), dtype, x.device)
    if scale is not None:
        if isinstance(scale, torch.Tensor):
            if scale.numel() != 1 or not scale.is_floating_point():
                raise ValueError("a static scale tensor must be one floating-point element")
            if scale.device.type == "cpu" and not (0.0 < float(scale) < float("inf")):
                raise ValueError(f"a static scale must be positive and finite, got {float(scale)}")
            s.copy_(scale.reshape(1))
        else:
            scale = float(scale)
            if not (scale > 0.0 and scale != float("inf")):
                raise ValueError(f"a static scale must be positive and finite, got {scale}")
            s.fill_(scale)
    if x2.numel() == 0:
        if scale is None:
            s.fill_(SCALE_MIN)
        return q, s
    soft = _fp8_soft(x.device)
    block_k = min(pow2_at_least(K), 1024)
    block_m = max(1, min(pow2_at_least(M), _TILE_ELEMS // block_k))
    num_warps = max(1, min(8, block_m * block_k // 512))
    grid = (cdiv(M, block_m), cdiv(K, block_k))
    amax = s  # unused by the static kernel (DYNAMIC=False never reads it)
    if scale is None:
        amax = torch.zeros(1, dtype=torch.float32, device=x.device)
        _absmax_kernel[grid](amax, x2, x2.stride(0), M, K,
                             BLOCK_M=block_m, BLOCK_K=block_k, num_warps=num_warps)
    _per_tensor_kernel[grid](
        _q_arg(q, soft), K,
        s,
        x2, x2.stride(0),
        amax,
        M, K,
        QMAX=qmax, IS_FP8=dtype == torch.float8_e4m3fn, FP8_SOFT=soft, EXACT_DIV=exact_div,
        DYNAMIC=scale is None, BLOCK_M=block_m, BLOCK_K=block_k,
        num_warps=num_warps, enable_fp_fusion=False,
    )
    return q, s


# --------------------------------------------------------------------------------------------
# Runtime calibration for static-scale deployments (torch ops; not the hot path)
# --------------------------------------------------------------------------------------------


class RuntimeCalibrator:
    """Running absmax of one activation for a static per-tensor scale, with an outlier guard.

    Rule, per ``observe(x)`` with batch absmax ``b`` = max |x| over the finite elements of x
    (non-finite values are ignored) and running estimate ``r``:

    - no estimate yet, or ``r == 0``: ``r ← b`` (nothing to compare against);
    - ``b > guard · r``: an outlier batch. ``outliers += 1`` and b is clipped to ``guard · r``
      before it enters the average, so ``r ← r + momentum · (guard · r − r)`` — one extreme batch
      (a BOS token's 10⁵× massive activation) moves r by at most a factor 1 + momentum·(guard − 1),
      while a real shift that keeps recurring is still followed geometrically;
    - otherwise: ``r ← r + momentum · (b − r)`` (exponential moving average).

    ``max_seen`` keeps the unguarded maximum, for reporting. State stays on the device of the
    first batch as fp32 0-d tensors and is updated with ``torch.where``, so ``observe`` never
    synchronizes with the host (it can sit inside a captured CUDA graph after the first call).
    """

    def __init__(self, momentum: float = 0.1, guard: float = 8.0):
        if not 0.0 < momentum <= 1.0:
            raise ValueError(f"momentum must be in (0, 1], got {momentum}")
        if not guard > 1.0:
            raise ValueError(f"guard must be > 1, got {guard}")
        self.momentum = float(momentum)
        self.guard = float(guard)
        self.running_absmax: torch.Tensor | None = None
        self.max_seen: torch.Tensor | None = None
        self._outliers: torch.Tensor | None = None
        self.batches = 0

    @torch.no_grad()
    def observe(self, x: torch.Tensor) -> torch.Tensor:
        """Fold one batch into the running absmax; returns the batch absmax (fp32 0-d)."""
        xf = x.detach()
        a = xf.abs().float()
        b = torch.where(torch.isfinite(a), a, torch.zeros_like(a)).amax() if a.numel() else \
            a.new_zeros(())
        if self.running_absmax is None:
            self.running_absmax = b.clone()
            self.max_seen = b.clone()
            self._outliers = torch.zeros((), dtype=torch.int64, device=b.device)
        else:
            b = b.to(self.running_absmax.device)
            r = self.running_absmax
            cap = r * self.guard
            outlier = (r > 0) & (b > cap)
            b_eff = torch.where(outlier, cap, b)
            ema = r + self.momentum * (b_eff - r)
            self.running_absmax = torch.where(r > 0, ema, b)
            self._outliers = self._outliers + outlier.to(torch.int64)
            self.max_seen = torch.maximum(self.max_seen, b)
        self.batches += 1
        return b

    @property
    def outliers(self) -> int:
        return 0 if self._outliers is None else int(self._outliers.item())

    def scale(self, dtype=torch.int8) -> torch.Tensor:
        """Static scale [1] fp32 for ``quantize_per_tensor(x, dtype, scale=...)``, by the same rule
        as the dynamic kernels: max(r / QMAX, 2**-126)."""
        qmax = _check_out_dtype(dtype)
        if self.running_absmax is None:
            raise RuntimeError("RuntimeCalibrator.scale() before any observe()")
        return (self.running_absmax.float() / qmax).clamp_min(SCALE_MIN).reshape(1)

    @staticmethod
    @torch.no_grad()
    def clip_count(x: torch.Tensor, static_scale, dtype=torch.int8) -> int:
        """How many elements of x a static scale would clip: |x| > static_scale · QMAX, exactly.

        The threshold is formed in float64 (exact: a 24-bit scale times a ≤9-bit QMAX) and rounded
        *down* to fp32; for fp32-representable |x|, ``|x| > t`` and ``|x| > RD32(t)`` agree."""
        import numpy as np

        qmax = _check_out_dtype(dtype)
        s = float(static_scale.reshape(-1)[0]) if isinstance(static_scale, torch.Tensor) \
            else float(static_scale)
        if not s > 0.0:
            raise ValueError(f"static_scale must be positive, got {s}")
        t = s * qmax
        t32 = np.float32(t)
        if float(t32) > t:
            t32 = np.nextafter(t32, np.float32(-np.inf))
        return int((x.detach().abs().float() > float(t32)).sum().item())


# --------------------------------------------------------------------------------------------
# Benchmark cases (timed by bench/, on the GPU)
# --------------------------------------------------------------------------------------------


def torch_per_token(x: torch.Tensor, dtype=torch.int8):
    """The peer: per-token quantization written as plain torch ops (same rules as ours)."""
    qmax = QMAX[dtype]
    scale = (x.abs().amax(dim=-1, keepdim=True).float() / qmax).clamp_min(SCALE_MIN)
    v = (x / scale).clamp(-qmax, qmax)
    if dtype == torch.int8:
        v = v.round()
    return v.to(dtype), scale


def _lazy_compiled(fn):
    compiled = None

    def call(*args):
        nonlocal compiled
        if compiled is None:
            compiled = torch.compile(fn)
        return compiled(*args)

    return call


def bench_cases(device):
    """[(name, ours, peers, bytes_moved)] for per-token int8 and fp8 on x [8192, 4096] bf16.
    ``peers`` is [(label, callable)]: torch eager and torch.compile of the same function
    (``torch_per_token``; compiled lazily on its first call, i.e. during warm-up). bytes_moved
    is the minimum HBM traffic: read x (2 B/elem), write q (1 B/elem), one fp32 scale per row."""
    M, K = 8192, 4096
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(M, K, device=device, dtype=torch.bfloat16, generator=gen)
    nbytes = M * K * (2 + 1) + M * 4
    compiled = _lazy_compiled(torch_per_token)
    cases = []
    for dtype, tag in ((torch.int8, "int8"), (torch.float8_e4m3fn, "fp8e4m3")):
        ours = (lambda d=dtype: quantize_per_token(x, d))
        peers = [("torch eager", lambda d=dtype: torch_per_token(x, d)),
                 ("torch.compile", lambda d=dtype: compiled(x, d))]
        cases.append((f"per-token {tag} quant {M}x{K} bf16", ours, peers, nbytes))
    return cases


def bench_variants(device):
    """[(name, ours, bytes_moved)]: launch-parameter variants of the per-token kernel on the same
    shape, so one GPU run can pick the Hopper configuration (see bench/act_quant_notes.md)."""
    M, K = 8192, 4096
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(M, K, device=device, dtype=torch.bfloat16, generator=gen)
    nbytes = M * K * 3 + M * 4
    out = []
    for dtype, tag in ((torch.int8, "int8"), (torch.float8_e4m3fn, "fp8e4m3")):
        for block_m in (1, 2):
            for warps in (4, 8, 16):
                for exact in (True, False):
                    name = f"per_token_{tag} bm={block_m} w={warps} {'div_rn' if exact else 'recip'}"
                    fn = (lambda d=dtype, bm=block_m, w=warps, e=exact:
                          quantize_per_token(x, d, block_m=bm, num_warps=w, exact_div=e))
                    out.append((name, fn, nbytes))
    return out


def device_selfcheck(device, shapes=((257, 4109), (8192, 4096))) -> list[tuple[str, bool, str]]:
    """Correctness on the device before timing: ours against the float64 reference, bit for bit,
    on an awkward shape and the bench shape, int8 and fp8, both division modes.

    The eager peer (``torch_per_token``) is not a correctness check: on the H200 it differed from
    our exact-division kernel in 16-5122 codes per case on 2026-11-29, and our kernel matched the
    float64 reference in every one. How many codes the peer differs from the reference by is
    reported in the ``exact_div=True`` line's detail, for the record."""
    gen = torch.Generator(device=device).manual_seed(1)
    results = []
    for M, K in shapes:
        x = torch.randn(M, K, device=device, dtype=torch.bfloat16, generator=gen)
        x[0].zero_()
        x[min(1, M - 1), 3] = 1e4
        for dtype in (torch.int8, torch.float8_e4m3fn):
            for exact in (True, False):
                q, s = quantize_per_token(x, dtype, exact_div=exact)
                rq, rs = quantize_per_token_reference(x, dtype, exact_div=exact)
                bad = int((q.view(torch.uint8) != rq.view(torch.uint8)).sum())
                ok = bad == 0 and torch.equal(s, rs)
                detail = f"{bad} bytes differ from the float64 reference"
                if exact:
                    pq, _ = torch_per_token(x, dtype)
                    peer = int((pq.view(torch.uint8) != rq.view(torch.uint8)).sum())
                    detail += f" (torch eager peer: {peer})"
                results.append((f"{M}x{K} {dtype} exact_div={exact}", ok, detail))
    return results
