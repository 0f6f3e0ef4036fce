"""causal_trim: causal attention forward that only visits key blocks at or below the diagonal.

For one sequence with ``Lq`` queries and ``Lk`` keys (usually ``Lk >= Lq``: the queries are the
last ``Lq`` positions, as in chunked prefill and decode), query ``i`` sees key ``j`` iff

    j <= i + (Lk - Lq)                        (bottom-right alignment, FlashAttention >= 2.1)

    O[i] = sum_j softmax_j(s * q_i . k_j) v_j,     s = sm_scale (default 1/sqrt(D))
    LSE[i] = log sum_j exp(s * q_i . k_j)          (natural log; -inf for a row that sees no key)

A row that sees no key (only possible when Lq > Lk) gets O = 0.

Shapes: batched q [B, Hq, Sq, D], k and v [B, Hk, Sk, D] (transformers' layout, any strides);
or variable-length packed q [Tq, Hq, D], k and v [Tk, Hk, D] with ``cu_seqlens_q/k`` (int32
[N+1], sequence n is rows cu[n]:cu[n+1]), so a padded batch needs no padding. GQA: query head h
reads key/value head h // (Hq // Hk). fp16 / bf16 in, fp32 accumulation, output in the input dtype.

The kernel walks the query block's keys in two loops: the blocks entirely at or below the
diagonal for every row of the block (no mask at all), then the few blocks that straddle the
diagonal or the end of the keys (masked). Blocks above the diagonal are never loaded: causal
attention does about half the work of full attention, and so does this kernel. Programs are
issued longest-first (the last query blocks see the most keys).
"""

from __future__ import annotations

import math
import os
from functools import lru_cache

import torch
import triton
import triton.language as tl

from .host_math import cdiv, pow2_at_least

LOG2E = 1.4426950408889634


def causal_attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    sm_scale: float | None = None,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain-torch float64 reference: returns (O in q's dtype, LSE float32).

    Assumes the layouts of :func:`causal_attention`; materialises the full score matrix per
    sequence and head, so it is only for tests.
    """
    d = q.shape[-1]
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(d)
    if cu_seqlens_q is None:
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
        for b in range(q.shape[0]):
            o, l = _reference_one(q[b].transpose(0, 1), k[b].transpose(0, 1), v[b].transpose(0, 1), scale)
            out[b] = o.transpose(0, 1).to(q.dtype)
            lse[b] = l.transpose(0, 1).float()
        return out, lse
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
    for n in range(cu_seqlens_q.numel() - 1):
        qs, qe = int(cu_seqlens_q[n]), int(cu_seqlens_q[n + 1])
        ks, ke = int(cu_seqlens_k[n]), int(cu_seqlens_k[n + 1])
        o, l = _reference_one(q[qs:qe], k[ks:ke], v[ks:ke], scale)
        out[qs:qe] = o.to(q.dtype)
        lse[qs:qe] = l.float()
    return out, lse


def _reference_one(q, k, v, scale):
    """q [Lq, Hq, D], k/v [Lk, Hk, D] → (O [Lq, Hq, D] float64, LSE [Lq, Hq] float64)."""
    lq, hq, _ = q.shape
    lk, hk, _ = k.shape
    group = hq // hk
    qd = q.double().transpose(0, 1)  # [Hq, Lq, D]
    kd = k.double().transpose(0, 1).repeat_interleave(group, 0)
    vd = v.double().transpose(0, 1).repeat_interleave(group, 0)
    scores = scale * qd @ kd.transpose(1, 2)  # [Hq, Lq, Lk]
    i = torch.arange(lq, device=q.device)[:, None]
    j = torch.arange(lk, device=q.device)[None, :]
    visible = j <= i + (lk - lq)
    scores = scores.masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # -inf where no key is visible
    probs = torch.where(visible.any(-1)[None, :, None], torch.softmax(scores, dim=-1), torch.zeros_like(scores))
    probs = torch.nan_to_num(probs, nan=0.0)
    return (probs @ vd).transpose(0, 1), lse.transpose(0, 1)


def _configs():
    if os.environ.get("TRITON_INTERPRET") == "1":  # the CPU interpreter: one small config
        return [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}, num_warps=1, num_stages=1)]
    out = []
    for bm, bn, warps, stages in (
        (128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3),
        (128, 32, 4, 4), (64, 32, 4, 4), (128, 128, 8, 2), (64, 128, 4, 3), (128, 64, 8, 4),
        (16, 64, 4, 3), (16, 128, 4, 3), (32, 64, 4, 3), (32, 128, 4, 3),  # decode, short chunks
        *WIDE_HEAD_CONFIGS,
    ):
        out.append(triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=warps, num_stages=stages))
    return out


# Tried only for head blocks of 256 (pruned below that, so other keys compile nothing more): the
# configs the H200 had for D=256 spill registers in sm_90 AOT (Triton 3.9; 64×64 / 4 warps, the one
# it chose on 2026-12-02 at 0.68× cuDNN: 38 LDL/STL), these 8-warp 128-row tiles spill none (128×32)
# or 6 (128×64). With them the autotuner chose 128×64 and D=256 rose to 0.78× cuDNN on the H200
# (bench/results/kernels-h200-2026-12-02-run3.md).
WIDE_HEAD_CONFIGS = ((128, 32, 8, 3), (128, 64, 8, 2))


def _prune(configs, named_args, **kwargs):
    """Drop row blocks much larger than the rows there are (decode, short chunks), and configs whose
    tiles cannot fit the device's shared memory: those would be compiled in full and only then
    refused (OutOfResources), seconds each on a fresh machine (fp32 inputs, D=256)."""
    rows = named_args["MAX_ROWS"]
    kept = [c for c in configs if c.kwargs["BLOCK_M"] <= max(16, pow2_at_least(rows))]
    block_d, elem = kwargs.get("BLOCK_D", named_args.get("BLOCK_D")), named_args["k_ptr"].element_size()
    if block_d is not None and block_d < 256:
        kept = [c for c in kept if (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages)
                not in WIDE_HEAD_CONFIGS] or kept
    limit = _smem_limit() if block_d else None
    if limit:
        kept = [c for c in kept if _smem_floor(c, block_d, elem) <= limit] or kept[:1]
    return kept or configs[:1]


def _smem_floor(config, block_d: int, elem: int) -> int:
    """Shared memory a config needs at least: num_stages buffers of the K and V tiles and the Q
    tile (what Triton 3.9 allocated for 128×64, 3 stages, D=128 bf16 on sm_90: 128 KB exactly)."""
    bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    return (config.num_stages * 2 * bn + bm) * block_d * elem


@lru_cache(maxsize=1)
def _smem_limit() -> int | None:
    """Shared memory per block the CUDA device allows (None off CUDA or in the interpreter); asked
    once, of the current device: one GPU kind per process."""
    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        return None
    props = triton.runtime.driver.active.utils.get_device_properties(torch.cuda.current_device())
    return int(props["max_shared_mem"])


@triton.jit
def _full_tile(base, cols, stride_n, stride_d, offs_d, mask_d, EVEN_D: tl.constexpr, DOT_IN_FP32: tl.constexpr):
    """A K or V tile of key rows ``cols``, all of them in range: with ``EVEN_D`` no mask at all
    (full tiles the compiler can pipeline and vectorise), else the head dimension masked."""
    ptrs = base + cols[:, None] * stride_n + offs_d[None, :] * stride_d
    if EVEN_D:
        t = tl.load(ptrs)
    else:
        t = tl.load(ptrs, mask=mask_d[None, :], other=0.0)
    if DOT_IN_FP32:
        t = t.to(tl.float32)
    return t


@triton.jit
def _exp2_fma(x):
    """2**x for finite x <= 0 without the special-function unit, and without float-to-int
    conversions (F2I and FRND run at its quarter rate too): round(x) by the 1.5·2**23 trick, so
    r = round(x) and its integer are adds and a bit cast; 2**(x - r) on [-0.5, 0.5] from a
    degree-3 polynomial (relative error below 7.5e-5, fitted here by reweighted least squares; a
    bf16 P is rounded to 2**-9 anyway); times 2**r added into the exponent bits. x is clamped at
    -125, so the smallest result is about 2**-125 rather than 0, and never subnormal."""
    x = tl.maximum(x, -125.0)
    j = x + 12582912.0  # 1.5 * 2**23: round-to-nearest puts round(x) in the low mantissa bits
    r = j - 12582912.0
    f = x - r
    p = 0.0551716685295105 * f + 0.2426111400127411
    p = p * f + 0.6932609677314758
    p = p * f + 0.9999280571937561
    n = j.to(tl.int32, bitcast=True) - 0x4B400000  # round(x): the bits of j less those of 1.5 * 2**23
    bits = p.to(tl.int32, bitcast=True) + (n << 23)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _exp2_tile(x, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EXP_SPLIT: tl.constexpr):
    """exp2 of a [BLOCK_M, BLOCK_N] tile of finite values <= 0: all on the special-function unit
    (MUFU.EX2), or with EXP_SPLIT every other column on the FMA pipe (_exp2_fma), so that the two
    units share the softmax's exponentials. FlashAttention-4 emulates part of its exponentials with
    a cubic polynomial on Blackwell, where the exponential unit is the forward pass's bottleneck
    (https://www.together.ai/blog/flashattention-4,
    https://modal.com/blog/reverse-engineer-flash-attention-4); here an opt-in variant,
    ``prefill={"exp2": "split"}``, timed on the H200 on 2026-12-02 at 0.87-0.97× the default
    (bench/results/kernels-h200-2026-12-02-run2.md)."""
    if EXP_SPLIT:
        a, b = tl.split(tl.reshape(x, (BLOCK_M, BLOCK_N // 2, 2)))
        return tl.reshape(tl.join(tl.math.exp2(a), _exp2_fma(b)), (BLOCK_M, BLOCK_N))
    return tl.math.exp2(x)


@triton.jit
def _attend_keys(q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, offs_n, offs_d, mask_d,
                 pos, shift, len_k, lo, hi, n_full, qk_scale, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr,
                 BLOCK_N: tl.constexpr, EVEN_D: tl.constexpr, DOT_IN_FP32: tl.constexpr,
                 DOT_PRECISION: tl.constexpr, EXP_SPLIT: tl.constexpr = False, LAZY_RESCALE: tl.constexpr = False):
    """Online softmax of one row tile over keys [lo, hi): blocks below ``n_full`` are visible to
    every row (no mask), the rest are masked bottom-right (query position i sees keys j <= i +
    shift). Returns the normalised output tile (a row that saw no key is 0) and its base-2 LSE
    (-inf for such a row). Shared by the prefill and the split-K decode kernels."""
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    for start_n in range(lo, tl.minimum(hi, n_full), BLOCK_N):
        cols = start_n + offs_n
        k = _full_tile(k_base, cols, stride_kn, stride_kd, offs_d, mask_d, EVEN_D, DOT_IN_FP32)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        if LAZY_RESCALE:
            # keep a row's running max until the tile's exceeds it by more than 8 (p <= 2**8,
            # exact in fp32 and bf16's range), and rescale the accumulator only when some row of
            # the block moved it: after the first tiles most iterations skip the [BLOCK_M, D]
            # multiply (FlashAttention-4's conditional rescaling, described in
            # https://modal.com/blog/reverse-engineer-flash-attention-4)
            m_new = tl.where(m_new > m_i + 8.0, m_new, m_i)
        p = _exp2_tile(s * qk_scale - m_new[:, None], BLOCK_M, BLOCK_N, EXP_SPLIT)  # unmasked: finite
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _full_tile(v_base, cols, stride_vn, stride_vd, offs_d, mask_d, EVEN_D, DOT_IN_FP32)
        if LAZY_RESCALE:
            if tl.min(alpha, 0) < 1.0:
                acc = acc * alpha[:, None]
            acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new

    for start_n in range(tl.maximum(lo, n_full), hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < len_k
        k = tl.load(k_base + cols[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                    mask=col_ok[:, None] & mask_d[None, :], other=0.0)
        if DOT_IN_FP32:
            k = k.to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
        visible = (cols[None, :] <= pos[:, None] + shift) & col_ok[None, :]
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that see nothing yet
        p = tl.math.exp2(s - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                    mask=col_ok[:, None] & mask_d[None, :], other=0.0)
        if DOT_IN_FP32:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new

    # normalise: a row that saw no key is 0 with LSE = -inf
    seen = l_i > 0.0
    acc = acc / tl.where(seen, l_i, 1.0)[:, None]
    lse2 = tl.where(seen, m_i + tl.math.log2(tl.where(seen, l_i, 1.0)), float("-inf"))  # base 2
    return acc, lse2


@triton.autotune(
    configs=_configs(),
    key=["HEAD_DIM", "MAX_ROWS_BUCKET", "MAX_SEQLEN_K_BUCKET", "GROUP", "VARLEN", "NUM_SPLITS", "EXP_SPLIT",
         "LAZY_RESCALE"],
    prune_configs_by={"early_config_prune": _prune},
)
@triton.jit
def _causal_trim_fwd(
    out_ptr, stride_os, stride_ob, stride_oh, stride_om, stride_od,
    lse_ptr, stride_ls, stride_lb, stride_lh, stride_lm,
    q_ptr, stride_qb, stride_qh, stride_qm, stride_qd,
    k_ptr, stride_kb, stride_kh, stride_kn, stride_kd,
    v_ptr, stride_vb, stride_vh, stride_vn, stride_vd,
    cu_q_ptr, cu_k_ptr,
    num_kv_heads, seqlen_q, seqlen_k, qk_scale, MAX_ROWS, NUM_SPLITS,
    MAX_ROWS_BUCKET, MAX_SEQLEN_K_BUCKET,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, GROUP: tl.constexpr,
    VARLEN: tl.constexpr, WRITE_LSE: tl.constexpr, PARTIAL: tl.constexpr, DOT_IN_FP32: tl.constexpr,
    EVEN_D: tl.constexpr, DOT_PRECISION: tl.constexpr, LPT: tl.constexpr, EXP_SPLIT: tl.constexpr,
    LAZY_RESCALE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # ---- this program: (sequence, kv head, row block, key split); heavy row blocks first ------
    # Rows pack the GROUP query heads that share a kv head: row r is query position r // GROUP of
    # query head kv_head * GROUP + r % GROUP, so K and V are read once per kv head.
    # Order: by default (grid (row blocks, B·Hk, splits)) each head's heaviest row block first,
    # head after head. LPT (grid (row blocks · B·Hk, 1, splits)): the heaviest row block of every
    # head first, then the next heaviest, so the last wave holds the lightest blocks
    # (longest-processing-time first across the whole launch).
    if LPT:
        n_bh = tl.num_programs(0) // tl.cdiv(MAX_ROWS, BLOCK_M)
        pid = tl.program_id(0).to(tl.int64)
        pid_m = tl.cdiv(MAX_ROWS, BLOCK_M) - 1 - pid // n_bh
        pid_bh = pid % n_bh
    else:
        pid_m = tl.cdiv(MAX_ROWS, BLOCK_M) - 1 - tl.program_id(0).to(tl.int64)
        pid_bh = tl.program_id(1).to(tl.int64)
    split = tl.program_id(2).to(tl.int64)
    batch = pid_bh // num_kv_heads
    kv_head = pid_bh % num_kv_heads
    if VARLEN == 1:  # packed rows, cu_seqlens
        q_start = tl.load(cu_q_ptr + batch).to(tl.int64)
        len_q = tl.load(cu_q_ptr + batch + 1).to(tl.int64) - q_start
        k_start = tl.load(cu_k_ptr + batch).to(tl.int64)
        len_k = tl.load(cu_k_ptr + batch + 1).to(tl.int64) - k_start
    elif VARLEN == 2:  # a padded batch: [start, end) of each sequence's rows
        q_start = tl.load(cu_q_ptr + 2 * batch).to(tl.int64)
        len_q = tl.load(cu_q_ptr + 2 * batch + 1).to(tl.int64) - q_start
        k_start = tl.load(cu_k_ptr + 2 * batch).to(tl.int64)
        len_k = tl.load(cu_k_ptr + 2 * batch + 1).to(tl.int64) - k_start
    else:
        q_start = 0
        len_q = seqlen_q
        k_start = 0
        len_k = seqlen_k
    r0 = pid_m * BLOCK_M
    if r0 >= len_q * GROUP:
        return
    shift = len_k - len_q  # bottom-right: query position i sees keys j <= i + shift

    rows = r0 + tl.arange(0, BLOCK_M)
    pos = rows // GROUP
    head = kv_head * GROUP + rows % GROUP
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < HEAD_DIM
    row_ok = pos < len_q

    q_rows = q_ptr + batch * stride_qb + head * stride_qh + (q_start + pos) * stride_qm
    k_base = k_ptr + batch * stride_kb + kv_head * stride_kh + k_start * stride_kn
    v_base = v_ptr + batch * stride_vb + kv_head * stride_vh + k_start * stride_vn

    q = tl.load(q_rows[:, None] + offs_d[None, :] * stride_qd, mask=row_ok[:, None] & mask_d[None, :], other=0.0)
    if DOT_IN_FP32:  # the CPU interpreter's bf16 dot is wrong; it is only a test vehicle
        q = q.to(tl.float32)

    # ---- key range of the block: [0, n_full) is visible to every row (no mask),
    #      [n_full, n_end) straddles the diagonal; this split takes its share of [0, n_end) ------
    first_pos = r0 // GROUP
    last_pos = tl.minimum(len_q - 1, (r0 + BLOCK_M - 1) // GROUP)
    n_end = tl.maximum(0, tl.minimum(len_k, last_pos + 1 + shift))
    n_full = tl.maximum(0, (first_pos + shift + 1) // BLOCK_N * BLOCK_N)
    n_full = tl.minimum(n_full, n_end // BLOCK_N * BLOCK_N)
    per_split = tl.cdiv(tl.cdiv(n_end, BLOCK_N), NUM_SPLITS) * BLOCK_N
    lo = split * per_split
    hi = tl.minimum(n_end, lo + per_split)

    acc, lse2 = _attend_keys(q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, offs_n, offs_d, mask_d,
                             pos, shift, len_k, lo, hi, n_full, qk_scale, BLOCK_M, BLOCK_D, BLOCK_N, EVEN_D,
                             DOT_IN_FP32, DOT_PRECISION, EXP_SPLIT, LAZY_RESCALE)
    o_rows = out_ptr + split * stride_os + batch * stride_ob + head * stride_oh + (q_start + pos) * stride_om
    tl.store(o_rows[:, None] + offs_d[None, :] * stride_od, acc.to(out_ptr.dtype.element_ty),
             mask=row_ok[:, None] & mask_d[None, :])
    if PARTIAL or WRITE_LSE:
        l_rows = lse_ptr + split * stride_ls + batch * stride_lb + head * stride_lh + (q_start + pos) * stride_lm
        tl.store(l_rows, lse2 if PARTIAL else lse2 * 0.6931471805599453, mask=row_ok)


@triton.jit
def _combine_splits(
    out_ptr, stride_ob, stride_oh, stride_om, stride_od,
    lse_ptr, stride_lb, stride_lh, stride_lm,
    part_ptr, stride_ps, stride_pb, stride_ph, stride_pm, stride_pd,
    plse_ptr, stride_qs, stride_qb, stride_qh, stride_qm,
    num_heads, NUM_SPLITS,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, WRITE_LSE: tl.constexpr,
):
    """One program per (batch, head, query position): merge the splits' partial outputs."""
    row = tl.program_id(0).to(tl.int64)
    pid_bh = tl.program_id(1).to(tl.int64)
    batch = pid_bh // num_heads
    head = pid_bh % num_heads
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < HEAD_DIM
    base_l = plse_ptr + batch * stride_qb + head * stride_qh + row * stride_qm
    base_o = part_ptr + batch * stride_pb + head * stride_ph + row * stride_pm
    m = float("-inf")
    for s in range(0, NUM_SPLITS):
        m = tl.maximum(m, tl.load(base_l + s * stride_qs))
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    total = 0.0
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for s in range(0, NUM_SPLITS):
        w = tl.math.exp2(tl.load(base_l + s * stride_qs) - m_safe)
        total += w
        acc += w * tl.load(base_o + s * stride_ps + offs_d * stride_pd, mask=mask_d, other=0.0)
    seen = total > 0.0
    acc = acc / tl.where(seen, total, 1.0)
    o = out_ptr + batch * stride_ob + head * stride_oh + row * stride_om
    tl.store(o + offs_d * stride_od, acc.to(out_ptr.dtype.element_ty), mask=mask_d)
    if WRITE_LSE:
        lse = tl.where(seen, (m_safe + tl.math.log2(tl.where(seen, total, 1.0))) * 0.6931471805599453,
                       float("-inf"))
        tl.store(lse_ptr + batch * stride_lb + head * stride_lh + row * stride_lm, lse)


@triton.jit
def _write_merged(out_ptr, stride_ob, stride_oh, stride_om, stride_od, lse_ptr, stride_lb, stride_lh, stride_lm,
                  acc, total, m, batch, head, row, d, ok, lse_ok, WRITE_LSE: tl.constexpr):
    """The merges' epilogue: O = acc / total at (batch, head, row, d) where ``ok``, and the natural
    LSE where ``lse_ok`` (a row no split saw: O 0, LSE -inf). ``m`` and the LSE sums are base 2."""
    seen = total > 0.0
    acc = acc / tl.where(seen, total, 1.0)
    row_off = batch * stride_ob + head * stride_oh + row * stride_om
    tl.store(out_ptr + row_off + d * stride_od, acc.to(out_ptr.dtype.element_ty), mask=ok)
    if WRITE_LSE:
        lse = tl.where(seen, (m + tl.math.log2(tl.where(seen, total, 1.0))) * 0.6931471805599453, float("-inf"))
        tl.store(lse_ptr + batch * stride_lb + head * stride_lh + row * stride_lm, lse, mask=lse_ok)


@triton.jit
def _merge_tile(
    out_ptr, stride_ob, stride_oh, stride_om, stride_od,
    lse_ptr, stride_lb, stride_lh, stride_lm,
    part_ptr, plse_ptr, tile, batch, kv_head, q_start, len_q, NUM_SPLITS, col0,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, GROUP: tl.constexpr, ROWS: tl.constexpr,
    NCOLS: tl.constexpr, SPLIT_CHUNK: tl.constexpr, WRITE_LSE: tl.constexpr,
):
    """Merge columns [col0, col0 + NCOLS) of one tile's split partials into O (and LSE).

    A tile's partials are part [tile, split, ROWS·BLOCK_D] (row r's O at columns r·BLOCK_D + d,
    normalised) and plse [tile, split, ROWS] (base-2 LSE). Every column is merged on its own with
    an online max over chunks of SPLIT_CHUNK splits, so each chunk is one wide contiguous load."""
    c = col0 + tl.arange(0, NCOLS)
    r = c // BLOCK_D
    d = c % BLOCK_D
    pos = r // GROUP
    ok = (pos < len_q) & (d < HEAD_DIM)
    pl = plse_ptr + tile * NUM_SPLITS * ROWS
    pp = part_ptr + tile * NUM_SPLITS * (ROWS * BLOCK_D)
    m = tl.full([NCOLS], float("-inf"), dtype=tl.float32)
    total = tl.zeros([NCOLS], dtype=tl.float32)
    acc = tl.zeros([NCOLS], dtype=tl.float32)
    for s0 in range(0, NUM_SPLITS, SPLIT_CHUNK):
        sc = s0 + tl.arange(0, SPLIT_CHUNK)
        mask = (sc < NUM_SPLITS)[:, None] & ok[None, :]
        l = tl.load(pl + sc[:, None] * ROWS + r[None, :], mask=mask, other=float("-inf"), cache_modifier=".cg")
        p = tl.load(pp + sc[:, None] * (ROWS * BLOCK_D) + c[None, :], mask=mask, other=0.0, cache_modifier=".cg")
        m_new = tl.maximum(m, tl.max(l, 0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # no split saw the row yet
        alpha = tl.math.exp2(m - m_safe)
        w = tl.math.exp2(l - m_safe[None, :])
        acc = acc * alpha + tl.sum(w * p, 0)
        total = total * alpha + tl.sum(w, 0)
        m = m_new
    _write_merged(out_ptr, stride_ob, stride_oh, stride_om, stride_od, lse_ptr, stride_lb, stride_lh, stride_lm,
                  acc, total, m, batch, kv_head * GROUP + r % GROUP, q_start + pos, d, ok, ok & (d == 0), WRITE_LSE)


@triton.jit
def _merge_row(
    out_ptr, stride_ob, stride_oh, stride_om, stride_od,
    lse_ptr, stride_lb, stride_lh, stride_lm,
    part_ptr, plse_ptr, tile, batch, kv_head, q_start, len_q, NUM_SPLITS, r, c0,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, GROUP: tl.constexpr, ROWS: tl.constexpr,
    SPLIT_CHUNK: tl.constexpr, WRITE_LSE: tl.constexpr, NCOLS: tl.constexpr,
):
    """Merge row ``r`` of one tile's split partials (the layout of :func:`_merge_tile`): the row's
    LSEs are one [SPLIT_CHUNK] vector and their weights one exponential per split, where
    :func:`_merge_tile` (columns of several rows) loads and exponentiates one per (split, column).
    On the H200 that per-column form made the batch-1 merge 6.7 µs against cuDNN's 4.0 µs (ncu,
    2026-12-02: 188k instructions and 220 registers against 80k and 32). Columns [c0, c0 + NCOLS)
    of the row (the whole row by default); the program of column 0 writes the LSE."""
    d = c0 + tl.arange(0, NCOLS)
    pos = r // GROUP
    row_ok = pos < len_q
    n_live = tl.where(row_ok, NUM_SPLITS, 0)  # a row past the sequence's end reads nothing
    ok = d < tl.where(row_ok, HEAD_DIM, 0)
    pl = plse_ptr + tile * NUM_SPLITS * ROWS + r
    pp = part_ptr + tile * NUM_SPLITS * (ROWS * BLOCK_D) + r * BLOCK_D
    m = float("-inf")
    total = 0.0
    acc = tl.zeros([NCOLS], dtype=tl.float32)
    for s0 in range(0, NUM_SPLITS, SPLIT_CHUNK):
        sc = s0 + tl.arange(0, SPLIT_CHUNK)
        live = sc < n_live
        l = tl.load(pl + sc * ROWS, mask=live, other=float("-inf"), cache_modifier=".cg")
        p = tl.load(pp + sc[:, None] * (ROWS * BLOCK_D) + d[None, :], mask=live[:, None] & ok[None, :],
                    other=0.0, cache_modifier=".cg")
        m_new = tl.maximum(m, tl.max(l, 0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # no split saw the row yet
        alpha = tl.math.exp2(m - m_safe)
        w = tl.math.exp2(l - m_safe)
        acc = acc * alpha + tl.sum(w[:, None] * p, 0)
        total = total * alpha + tl.sum(w, 0)
        m = m_new
    _write_merged(out_ptr, stride_ob, stride_oh, stride_om, stride_od, lse_ptr, stride_lb, stride_lh, stride_lm,
                  acc, total, m, batch, kv_head * GROUP + r % GROUP, q_start + pos, d, ok, row_ok & (c0 == 0), WRITE_LSE)


@triton.jit
def _decode_fwd(
    out_ptr, stride_ob, stride_oh, stride_om, stride_od,
    lse_ptr, stride_lb, stride_lh, stride_lm,
    q_ptr, stride_qb, stride_qh, stride_qm, stride_qd,
    k_ptr, stride_kb, stride_kh, stride_kn, stride_kd,
    v_ptr, stride_vb, stride_vh, stride_vn, stride_vd,
    part_ptr, plse_ptr, count_ptr, cu_q_ptr, cu_k_ptr,
    num_kv_heads, seqlen_q, seqlen_k, qk_scale, NUM_SPLITS,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, GROUP: tl.constexpr, ROWS: tl.constexpr,
    VARLEN: tl.constexpr, WRITE_LSE: tl.constexpr, FUSED_MERGE: tl.constexpr,
    MERGE_COLS: tl.constexpr, SPLIT_CHUNK: tl.constexpr, LAUNCH_DEPENDENTS: tl.constexpr,
    DOT_IN_FP32: tl.constexpr, EVEN_D: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Few query rows (decode, short chunks: Sq·GROUP ≤ BLOCK_M ≤ 64) over many keys.

    One program per (key split, sequence·kv head): its rows are all the query heads of the kv head
    at all Sq positions (row r: position r // GROUP, head kv_head·GROUP + r % GROUP), so every K/V
    tile is read once per kv head. Each split writes its partial (O normalised, base-2 LSE) to
    part/plse for _merge_splits; with FUSED_MERGE the split that arrives last at the tile's counter
    merges them in this launch instead and sets the counter back to 0 (one launch in all).
    LAUNCH_DEPENDENTS lets a merge kernel launched with programmatic dependent launch start early.
    """
    split = tl.program_id(0)
    pid_bh = tl.program_id(1).to(tl.int64)
    batch = pid_bh // num_kv_heads
    kv_head = pid_bh % num_kv_heads
    if LAUNCH_DEPENDENTS:  # programmatic dependent launch: the merge kernel may start to wait now
        tl.extra.cuda.gdc_launch_dependents()
    if VARLEN == 1:  # packed rows, cu_seqlens
        q_start = tl.load(cu_q_ptr + batch).to(tl.int64)
        len_q = tl.load(cu_q_ptr + batch + 1).to(tl.int64) - q_start
        k_start = tl.load(cu_k_ptr + batch).to(tl.int64)
        len_k = tl.load(cu_k_ptr + batch + 1).to(tl.int64) - k_start
    elif VARLEN == 2:  # a padded batch: [start, end) of each sequence's rows
        q_start = tl.load(cu_q_ptr + 2 * batch).to(tl.int64)
        len_q = tl.load(cu_q_ptr + 2 * batch + 1).to(tl.int64) - q_start
        k_start = tl.load(cu_k_ptr + 2 * batch).to(tl.int64)
        len_k = tl.load(cu_k_ptr + 2 * batch + 1).to(tl.int64) - k_start
    else:
        q_start = 0
        len_q = seqlen_q
        k_start = 0
        len_k = seqlen_k
    if len_q == 0:  # an empty sequence: every split of the tile leaves, nothing to merge
        return
    shift = len_k - len_q

    rows = tl.arange(0, BLOCK_M)
    pos = rows // GROUP
    head = kv_head * GROUP + rows % GROUP
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < HEAD_DIM
    row_ok = pos < len_q

    q_rows = q_ptr + batch * stride_qb + head * stride_qh + (q_start + pos) * stride_qm
    k_base = k_ptr + batch * stride_kb + kv_head * stride_kh + k_start * stride_kn
    v_base = v_ptr + batch * stride_vb + kv_head * stride_vh + k_start * stride_vn
    q = tl.load(q_rows[:, None] + offs_d[None, :] * stride_qd, mask=row_ok[:, None] & mask_d[None, :], other=0.0)
    if DOT_IN_FP32:
        q = q.to(tl.float32)

    # keys [0, n_full) are visible to every row; [n_full, n_end) need the mask; this split takes
    # an equal share of whole key blocks of [0, n_end)
    n_end = tl.maximum(0, tl.minimum(len_k, len_q + shift))
    n_full = tl.maximum(0, (shift + 1) // BLOCK_N * BLOCK_N)
    n_full = tl.minimum(n_full, n_end // BLOCK_N * BLOCK_N)
    per_split = tl.cdiv(tl.cdiv(n_end, BLOCK_N), NUM_SPLITS) * BLOCK_N
    lo = split * per_split
    hi = tl.minimum(n_end, lo + per_split)

    acc, lse2 = _attend_keys(q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, offs_n, offs_d, mask_d,
                             pos, shift, len_k, lo, hi, n_full, qk_scale, BLOCK_M, BLOCK_D, BLOCK_N, EVEN_D,
                             DOT_IN_FP32, DOT_PRECISION)
    keep = row_ok & (rows < ROWS)
    base = pid_bh * NUM_SPLITS + split
    tl.store(part_ptr + (base * ROWS + rows[:, None]) * BLOCK_D + offs_d[None, :], acc,
             mask=keep[:, None] & mask_d[None, :])
    tl.store(plse_ptr + base * ROWS + rows, lse2, mask=keep)
    if FUSED_MERGE:
        # every thread's partial stores happen before the barrier; the counter's acq_rel atomic
        # (one thread, gpu scope) then publishes them, as CUTLASS's semaphore does
        tl.debug_barrier()
        ticket = tl.atomic_add(count_ptr + pid_bh, 1, sem="acq_rel", scope="gpu")
        if ticket == NUM_SPLITS - 1:
            tl.atomic_xchg(count_ptr + pid_bh, 0, sem="relaxed", scope="gpu")  # ready for the next call
            for col0 in range(0, ROWS * BLOCK_D, MERGE_COLS):
                _merge_tile(out_ptr, stride_ob, stride_oh, stride_om, stride_od,
                            lse_ptr, stride_lb, stride_lh, stride_lm,
                            part_ptr, plse_ptr, pid_bh, batch, kv_head, q_start, len_q, NUM_SPLITS, col0,
                            HEAD_DIM, BLOCK_D, GROUP, ROWS, MERGE_COLS, SPLIT_CHUNK, WRITE_LSE)

@triton.jit
def _merge_splits(
    out_ptr, stride_ob, stride_oh, stride_om, stride_od,
    lse_ptr, stride_lb, stride_lh, stride_lm,
    part_ptr, plse_ptr, cu_q_ptr, num_kv_heads, seqlen_q, NUM_SPLITS,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, GROUP: tl.constexpr, ROWS: tl.constexpr,
    SPLIT_CHUNK: tl.constexpr, WRITE_LSE: tl.constexpr, VARLEN: tl.constexpr, WAIT_PRIMARY: tl.constexpr,
    NCOLS: tl.constexpr,
):
    """The separate merge: one program per (sequence·kv head, query row of the tile, NCOLS columns)."""
    if WAIT_PRIMARY:  # launched with programmatic dependent launch: wait for _decode_fwd's writes
        tl.extra.cuda.gdc_wait()
    tile = tl.program_id(0).to(tl.int64)
    row = tl.program_id(1)
    batch = tile // num_kv_heads
    kv_head = tile % num_kv_heads
    if VARLEN == 1:
        q_start = tl.load(cu_q_ptr + batch).to(tl.int64)
        len_q = tl.load(cu_q_ptr + batch + 1).to(tl.int64) - q_start
    elif VARLEN == 2:
        q_start = tl.load(cu_q_ptr + 2 * batch).to(tl.int64)
        len_q = tl.load(cu_q_ptr + 2 * batch + 1).to(tl.int64) - q_start
    else:
        q_start = 0
        len_q = seqlen_q
    _merge_row(out_ptr, stride_ob, stride_oh, stride_om, stride_od,
               lse_ptr, stride_lb, stride_lh, stride_lm,
               part_ptr, plse_ptr, tile, batch, kv_head, q_start, len_q, NUM_SPLITS, row,
               tl.program_id(2) * NCOLS, HEAD_DIM, BLOCK_D, GROUP, ROWS, SPLIT_CHUNK, WRITE_LSE, NCOLS)


@triton.jit
def _prefill_tma_fwd(
    q_desc, k_desc, v_desc, o_desc,
    lse_ptr, stride_lb, stride_lh, stride_lm,
    num_q_heads, seqlen_q, seqlen_k, qk_scale,
    HEAD_DIM: tl.constexpr, GROUP: tl.constexpr, WRITE_LSE: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Hopper variant for many query rows (prefill chunks): Q, K, V and O move through tensor-memory
    -accelerator descriptors over [B·H, S, D] (a box past S reads zeros and stores nothing), and the
    unmasked key loop may be warp-specialised (producer warps issue the copies). One program per
    (query block, batch·query head), heaviest blocks first; key ranges as in _causal_trim_fwd."""
    pid_m = tl.cdiv(seqlen_q, BLOCK_M) - 1 - tl.program_id(0)
    pid_bh = tl.program_id(1)
    batch = pid_bh // num_q_heads
    head = pid_bh % num_q_heads
    kv_bh = batch * (num_q_heads // GROUP) + head // GROUP
    shift = seqlen_k - seqlen_q
    m0 = pid_m * BLOCK_M
    pos = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    q = q_desc.load([pid_bh, m0, 0]).reshape(BLOCK_M, HEAD_DIM)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    last_pos = tl.minimum(seqlen_q - 1, m0 + BLOCK_M - 1)
    n_end = tl.maximum(0, tl.minimum(seqlen_k, last_pos + 1 + shift))
    n_full = tl.maximum(0, (m0 + shift + 1) // BLOCK_N * BLOCK_N)
    n_full = tl.minimum(n_full, n_end // BLOCK_N * BLOCK_N)

    for start_n in tl.range(0, n_full, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k = k_desc.load([kv_bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        s = tl.dot(q, tl.trans(k))
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        p = tl.math.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([kv_bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    for start_n in range(n_full, n_end, BLOCK_N):
        cols = start_n + offs_n
        k = k_desc.load([kv_bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        visible = (cols[None, :] <= pos[:, None] + shift) & (cols < seqlen_k)[None, :]
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([kv_bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    seen = l_i > 0.0
    acc = acc / tl.where(seen, l_i, 1.0)[:, None]
    o_desc.store([pid_bh, m0, 0], acc.to(q.dtype).reshape(1, BLOCK_M, HEAD_DIM))
    if WRITE_LSE:
        lse2 = tl.where(seen, m_i + tl.math.log2(tl.where(seen, l_i, 1.0)), float("-inf"))
        tl.store(lse_ptr + batch * stride_lb + head * stride_lh + pos * stride_lm, lse2 * 0.6931471805599453,
                 mask=pos < seqlen_q)


def _bucket(n: int) -> int:
    """Autotuning key for a length: its power-of-two bucket (one tuning per bucket)."""
    return pow2_at_least(max(1, n))


def causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    sm_scale: float | None = None,
    return_lse: bool = False,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    max_seqlen_q: int | None = None,
    max_seqlen_k: int | None = None,
    num_splits: int | None = None,
    seq_bounds_q: torch.Tensor | None = None,
    seq_bounds_k: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
):
    """Bottom-right causal attention; see the module docstring for shapes.

    Padded batches (batched layout only): ``seq_bounds_q`` / ``seq_bounds_k`` (int [B, 2], on the
    device) give each sequence's rows as ``[start, end)`` of the query / key dimension; rows outside
    are neither read nor written, and the bottom-right rule applies to the rows inside (query
    ``start_q + i`` sees keys ``start_k .. start_k + i + (len_k - len_q)``). A left-padded prompt of
    length n in a batch padded to S has bounds ``[S - n, S)`` for both. The output's rows outside
    the bounds are zero (when ``out`` is not given). ``out``: a tensor of q's shape and dtype to
    write into, any strides (e.g. the transpose of a [B, Sq, Hq, D] buffer); with bounds, the caller
    zeroes it.

    Returns O (a new contiguous tensor, q's layout and dtype), and LSE (float32, q's shape
    without D) when ``return_lse``. ``num_splits`` splits each row block's keys over several
    programs merged by a second kernel (flash-decoding); by default it is chosen for short query
    blocks over long key ranges, where one program per kv head would leave the GPU idle.

    Few query rows per kv head (Sq · Hq/Hk ≤ 64: decode, speculative decoding, short chunks) over
    keys worth splitting take :func:`_decode_fwd`: all the query heads of a kv head in one program,
    the keys split so that about two programs run on every multiprocessor (from the SM count and
    the key length), the splits merged by :func:`_merge_splits`, launched on Hopper with
    programmatic dependent launch so it waits on the GPU instead of behind the first kernel.
    """
    return _attention(q, k, v, sm_scale=sm_scale, return_lse=return_lse, cu_seqlens_q=cu_seqlens_q,
                      cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                      num_splits=num_splits, seq_bounds_q=seq_bounds_q, seq_bounds_k=seq_bounds_k, out=out)


def _bounds_arg(b: torch.Tensor | None, batch: int, device, name: str) -> torch.Tensor:
    if b is None or b.shape != (batch, 2):
        raise ValueError(f"{name} must be an integer tensor [B={batch}, 2] of [start, end) rows")
    if b.is_floating_point() or b.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor, got {b.dtype}")
    return b.to(device=device, dtype=torch.int32).contiguous()


def _attention(q, k, v, *, sm_scale=None, return_lse=False, cu_seqlens_q=None, cu_seqlens_k=None,
               max_seqlen_q=None, max_seqlen_k=None, num_splits=None, decode: dict | None = None,
               prefill: dict | None = None, seq_bounds_q=None, seq_bounds_k=None, out=None):
    """:func:`causal_attention`, with the benchmark's overrides. ``decode``: ``mode`` ("pdl",
    "separate", "fused", or "legacy" for the autotuned kernel), ``splits``, ``programs_per_sm``,
    ``block_n``, ``num_warps``, ``num_stages``, ``merge_cols`` / ``merge_warps`` (the separate
    merge's columns per program and warps; default: see ``_merge_layout``). ``prefill``: ``use`` (True takes the Hopper
    descriptor kernel, which is never the default), ``block_m``, ``block_n``, ``num_warps``,
    ``num_stages``, ``warp_specialize`` (sets ``tl.range(..., warp_specialize=)`` on the
    unmasked loop; on sm_90 Triton 3.6 and 3.9 compile it at 8 warps with no warp-specialised
    region in the TTGIR, i.e. it changes nothing, and at 4 warps Triton's Hopper pass fails, as in
    https://github.com/triton-lang/triton/issues/9728); ``order`` ("lpt": the autotuned kernel's programs
    ordered heaviest row block of every head first; slower on the H200 in every case timed on
    2026-12-02, so not the default); ``exp2`` ("split": every other column of the unmasked
    softmax tiles exponentiated on the FMA pipe, see ``_exp2_tile``; fp16/bf16 only; 0.87-0.97×
    the default on the H200, 2026-12-02: it reached the 255-register cap); ``rescale`` ("lazy": a row's running max kept until a tile's exceeds it by
    more than 8, the accumulator rescaled only when some row of the block moved; 0.94-1.00× the
    default on the H200, 2026-12-02, bench/results/kernels-h200-2026-12-02-run3.md)."""
    varlen = cu_seqlens_q is not None
    if varlen != (cu_seqlens_k is not None):
        raise ValueError("pass both cu_seqlens_q and cu_seqlens_k, or neither")
    paired = seq_bounds_q is not None or seq_bounds_k is not None
    if paired and varlen:
        raise ValueError("seq_bounds_* are for the batched layout; cu_seqlens_* for packed rows")
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"unsupported dtype {q.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError("q, k and v must share a dtype")
    if not (q.device == k.device == v.device):
        raise ValueError("q, k and v must be on one device")
    if varlen:
        if out is not None:
            raise ValueError("out is supported for the batched layout only")
        if q.dim() != 3 or k.dim() != 3 or v.dim() != 3:
            raise ValueError("varlen q/k/v must be [T, H, D]")
        tq, hq, d = q.shape
        _, hk, _ = k.shape
        n_seq = cu_seqlens_q.numel() - 1
        if cu_seqlens_k.numel() - 1 != n_seq:
            raise ValueError("cu_seqlens_q and cu_seqlens_k describe different numbers of sequences")
        if v.shape != k.shape:
            raise ValueError(f"v {tuple(v.shape)} must match k {tuple(k.shape)}")
        cu_q = cu_seqlens_q.to(device=q.device, dtype=torch.int32).contiguous()
        cu_k = cu_seqlens_k.to(device=q.device, dtype=torch.int32).contiguous()
        if cu_seqlens_q.device.type == "cpu" and cu_seqlens_k.device.type == "cpu":  # no device sync
            for name, cu, rows in (("q", cu_seqlens_q, tq), ("k", cu_seqlens_k, k.shape[0])):
                if n_seq and (int(cu[0]) != 0 or bool((cu[1:] < cu[:-1]).any()) or int(cu[-1]) > rows):
                    raise ValueError(f"cu_seqlens_{name} must start at 0, never decrease and end "
                                     f"at most at {rows} (the rows of {name})")
        # a max_seqlen smaller than a real sequence leaves its last rows unwritten: give the true
        # maximum (or leave it out, which costs one device sync to compute it)
        if max_seqlen_q is None:
            max_seqlen_q = int((cu_q[1:] - cu_q[:-1]).max()) if n_seq else 0
        if max_seqlen_k is None:
            max_seqlen_k = int((cu_k[1:] - cu_k[:-1]).max()) if n_seq else 0
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
        lse = torch.empty((tq, hq), dtype=torch.float32, device=q.device)
        # [T, H, D] read as batch 0 with rows offset by cu_seqlens: (batch, head, row, dim) strides
        q_strides = (0, q.stride(1), q.stride(0), q.stride(2))
        k_strides = (0, k.stride(1), k.stride(0), k.stride(2))
        v_strides = (0, v.stride(1), v.stride(0), v.stride(2))
        o_strides = (0, out.stride(1), out.stride(0), out.stride(2))
        l_strides = (0, lse.stride(1), lse.stride(0))
        seqlen_q = seqlen_k = 0
        batch = n_seq
    else:
        if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
            raise ValueError("q/k/v must be [B, H, S, D]")
        batch, hq, seqlen_q, d = q.shape
        _, hk, seqlen_k, _ = k.shape
        if k.shape[0] != batch or v.shape != k.shape:
            raise ValueError("k and v must be [B, Hk, Sk, D] with q's batch")
        if paired:
            cu_q = _bounds_arg(seq_bounds_q, batch, q.device, "seq_bounds_q")
            cu_k = _bounds_arg(seq_bounds_k, batch, q.device, "seq_bounds_k")
        else:
            cu_q = cu_k = torch.empty(1, dtype=torch.int32, device=q.device)
        max_seqlen_q, max_seqlen_k = seqlen_q, seqlen_k  # upper bounds when paired: no device sync
        if out is None:
            out = (torch.zeros if paired else torch.empty)(q.shape, dtype=q.dtype, device=q.device)
        elif out.shape != q.shape or out.dtype != q.dtype or out.device != q.device:
            raise ValueError(f"out must have q's shape {tuple(q.shape)}, dtype and device")
        lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
        if paired and return_lse:
            lse.fill_(float("-inf"))
        q_strides, k_strides, v_strides = q.stride(), k.stride(), v.stride()
        o_strides, l_strides = out.stride(), lse.stride()
    if k.shape[-1] != d or v.shape[-1] != d:
        raise ValueError("q, k and v must share the head dimension")
    if hq % hk:
        raise ValueError(f"query heads ({hq}) must be a multiple of key/value heads ({hk})")
    if d > 256:
        raise ValueError(f"head_dim {d} > 256 is not supported")
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(d)
    if batch == 0 or max_seqlen_q == 0:
        return (out, lse.fill_(float("-inf"))) if return_lse else out
    group = hq // hk
    max_rows = max_seqlen_q * group
    block_d = max(16, pow2_at_least(d))
    common = dict(HEAD_DIM=d, BLOCK_D=block_d, GROUP=group, VARLEN=1 if varlen else (2 if paired else 0),
                  EVEN_D=block_d == d,
                  # fp32 inputs get fp32 products (not TF32): a float32 model must match itself
                  DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
                  DOT_IN_FP32=q.dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1")
    decode = decode or {}
    if max_rows <= DECODE_MAX_ROWS and decode.get("mode") != "legacy":
        bn = _decode_config(block_d, q.element_size(), decode)["BLOCK_N"]
        splits = num_splits or decode.get("splits") or _decode_splits(
            q.device, batch * hk, max_seqlen_k, bn, decode.get("programs_per_sm", 2))
        if splits > 1:
            _launch_decode(out, o_strides, lse, l_strides, q, q_strides, k, k_strides, v, v_strides, cu_q, cu_k,
                           batch, hk, seqlen_q, seqlen_k, max_rows, splits, scale, return_lse, decode, common)
            return (out, lse) if return_lse else out
        # enough tiles for one program each (batch 64 with 8 kv heads): the autotuned kernel below,
        # which measured at least as fast as _decode_fwd with one split on the H200
        num_splits = 1
    if num_splits in (None, 1) and _use_prefill_tma(q, k, v, out, varlen or paired, seqlen_q, seqlen_k, prefill or {}):
        _launch_prefill_tma(out, lse, l_strides, q, k, v, scale, return_lse, group, prefill or {})
        return (out, lse) if return_lse else out
    splits = num_splits or _default_splits(q.device, max_rows, max_seqlen_k, batch * hk)
    if paired:  # the split merge below writes every row; padded rows must stay untouched
        splits = 1

    lpt = (prefill or {}).get("order") == "lpt"
    common["LPT"] = lpt
    exp2 = (prefill or {}).get("exp2", "sfu")
    if exp2 not in ("sfu", "split"):
        raise ValueError(f"prefill exp2 must be 'sfu' or 'split', got {exp2!r}")
    # the polynomial's 7.5e-5 is below a 16-bit P's rounding, not below fp32's
    common["EXP_SPLIT"] = exp2 == "split" and q.dtype != torch.float32
    rescale = (prefill or {}).get("rescale", "always")
    if rescale not in ("always", "lazy"):
        raise ValueError(f"prefill rescale must be 'always' or 'lazy', got {rescale!r}")
    common["LAZY_RESCALE"] = rescale == "lazy"

    def grid(meta):
        if lpt:
            return (cdiv(max_rows, meta["BLOCK_M"]) * batch * hk, 1, splits)
        return (cdiv(max_rows, meta["BLOCK_M"]), batch * hk, splits)

    if splits == 1:
        _causal_trim_fwd[grid](
            out, 0, *o_strides, lse, 0, *l_strides,
            q, *q_strides, k, *k_strides, v, *v_strides, cu_q, cu_k,
            hk, seqlen_q, seqlen_k, scale * LOG2E, max_rows, 1,
            _bucket(max_rows), _bucket(max_seqlen_k),
            WRITE_LSE=return_lse, PARTIAL=False, **common,
        )
        return (out, lse) if return_lse else out

    # flash-decoding: partial results per split, then one merge
    rows_total = q.shape[0] if varlen else seqlen_q
    nb = 1 if varlen else batch
    part = torch.empty((splits, nb, hq, rows_total, d), dtype=torch.float32, device=q.device)
    plse = torch.empty((splits, nb, hq, rows_total), dtype=torch.float32, device=q.device)
    p_strides = (part.stride(0), 0 if varlen else part.stride(1), part.stride(2), part.stride(3), part.stride(4))
    pl_strides = (plse.stride(0), 0 if varlen else plse.stride(1), plse.stride(2), plse.stride(3))
    _causal_trim_fwd[grid](
        part, *p_strides, plse, *pl_strides,
        q, *q_strides, k, *k_strides, v, *v_strides, cu_q, cu_k,
        hk, seqlen_q, seqlen_k, scale * LOG2E, max_rows, splits,
        _bucket(max_rows), _bucket(max_seqlen_k),
        WRITE_LSE=True, PARTIAL=True, **common,
    )
    _combine_splits[(rows_total, nb * hq)](
        out, *o_strides, lse, *l_strides, part, *p_strides, plse, *pl_strides,
        hq, splits, HEAD_DIM=d, BLOCK_D=block_d, WRITE_LSE=return_lse,
    )
    return (out, lse) if return_lse else out


DECODE_MAX_ROWS = 64  # query rows per kv head (Sq · Hq/Hk) up to which _decode_fwd is used
_COUNTERS: dict = {}  # (device, stream) -> int32 tile counters of the fused merge, kept at 0 between calls
_COUNTERS_KEPT: list = []  # every counter buffer ever handed out: a captured CUDA graph may still use it


def _split_counters(device: torch.device, n: int) -> torch.Tensor:
    """Zeroed int32 counters for the fused merge, one per tile; each launch leaves them at 0 again.

    One buffer per stream, so launches that may overlap (two streams) never share a counter.
    Buffers are never freed: a CUDA graph captured with one replays its address.
    """
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (str(device), stream)
    buf = _COUNTERS.get(key)
    if buf is None or buf.numel() < n:
        buf = torch.zeros(max(4096, pow2_at_least(n)), dtype=torch.int32, device=device)
        _COUNTERS[key] = buf
        _COUNTERS_KEPT.append(buf)
    return buf


def _decode_config(block_d: int, elem_size: int, decode: dict) -> dict:
    """Key block, warps and pipeline depth of _decode_fwd: 64 keys, 4 warps, 3 stages, shrunk until
    the K and V stages fit in 160 KB of shared memory (measured best or tied on the H200 among
    32/64/128 keys and 2-4 stages; bench/results/attention-decode-h200-2026-12-01.md)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return {"BLOCK_N": 16, "num_warps": 1, "num_stages": 1}
    bn, stages = decode.get("block_n", 64), decode.get("num_stages", 3)
    while stages * bn * block_d * elem_size * 2 > 160 * 1024 and (stages > 2 or bn > 16):
        if stages > 2:
            stages -= 1
        else:
            bn //= 2
    return {"BLOCK_N": bn, "num_warps": decode.get("num_warps", 4), "num_stages": stages}


def _decode_splits(device: torch.device, tiles: int, max_seqlen_k: int, block_n: int, programs_per_sm: int = 2) -> int:
    """Key splits per tile so that tiles × splits fills about one wave (programs_per_sm programs on
    every multiprocessor), each split at least 256 keys, and whole key blocks shared out evenly."""
    if device.type != "cuda" or max_seqlen_k < 512:
        return 1
    slots = torch.cuda.get_device_properties(device).multi_processor_count * programs_per_sm
    want = min(slots // max(1, tiles), cdiv(max_seqlen_k, 256), 64)
    if want <= 1:
        return 1
    blocks = cdiv(max_seqlen_k, block_n)
    return cdiv(blocks, cdiv(blocks, want))  # no split left empty


def _launch_decode(out, o_strides, lse, l_strides, q, q_strides, k, k_strides, v, v_strides, cu_q, cu_k,
                   batch, hk, seqlen_q, seqlen_k, max_rows, splits, scale, return_lse, decode, common):
    """_decode_fwd over (splits, tiles), then the merge. Default merge: a second kernel launched
    with programmatic dependent launch on Hopper (it is resident and waiting when the splits end),
    a plain second launch elsewhere. ``mode="fused"`` (the last split merges, one launch) is kept as
    an option: on the H200 it measured slower at batch 1 (bench/results/attention-decode-h200-2026-12-01.md)."""
    tiles = batch * hk
    cfg = _decode_config(common["BLOCK_D"], q.element_size(), decode)
    mode = decode.get("mode") or ("pdl" if _has_pdl(q.device) else "separate")
    rows = pow2_at_least(max_rows)
    d, block_d = common["HEAD_DIM"], common["BLOCK_D"]
    kind = {"fused": 2, "separate": 1, "pdl": 1}[mode]
    # the merge takes MERGE_COLS columns (rows × D) at a time, SPLIT_CHUNK splits per load: about
    # 8192 fp32 values in flight (64 registers a thread at 4 warps)
    cols = min(rows * block_d, 2048) if kind == 2 else block_d
    chunk = max(1, min(pow2_at_least(splits), 8192 // cols))
    part = torch.empty((tiles, splits, rows, block_d), dtype=torch.float32, device=q.device)
    plse = torch.empty((tiles, splits, rows), dtype=torch.float32, device=q.device)
    counters = _split_counters(q.device, tiles) if kind == 2 else cu_q
    pdl = mode == "pdl"
    _decode_fwd[(splits, tiles)](
        out, *o_strides, lse, *l_strides,
        q, *q_strides, k, *k_strides, v, *v_strides,
        part, plse, counters, cu_q, cu_k,
        hk, seqlen_q, seqlen_k, scale * LOG2E, splits,
        ROWS=rows, WRITE_LSE=return_lse, FUSED_MERGE=kind == 2, MERGE_COLS=cols, SPLIT_CHUNK=chunk,
        LAUNCH_DEPENDENTS=pdl, BLOCK_M=max(16, rows), **common, **cfg,
    )
    if kind == 1:
        extra = {"launch_pdl": True} if pdl else {}
        ncols, warps = _merge_layout(_sm_count(q.device), tiles * max_rows, block_d, decode)
        _merge_splits[(tiles, max_rows, block_d // ncols)](
            out, *o_strides, lse, *l_strides, part, plse, cu_q, hk, seqlen_q, splits,
            HEAD_DIM=d, BLOCK_D=block_d, GROUP=common["GROUP"], ROWS=rows,
            SPLIT_CHUNK=chunk, WRITE_LSE=return_lse, VARLEN=common["VARLEN"], WAIT_PRIMARY=pdl,
            NCOLS=ncols, num_warps=warps, **extra,
        )


def _sm_count(device: torch.device) -> int | None:
    """The GPU's multiprocessor count; None off CUDA and under the CPU interpreter."""
    if device.type != "cuda" or os.environ.get("TRITON_INTERPRET") == "1":
        return None
    return torch.cuda.get_device_properties(device).multi_processor_count


MERGE_SPLIT_COLS = 32  # columns per program of the separate merge when its rows are few (see _merge_layout)


def _merge_layout(sms: int | None, row_programs: int, block_d: int, decode: dict) -> tuple[int, int]:
    """(columns per program, warps) of the separate merge over ``row_programs`` (tile, query row)
    pairs. ``decode={"merge_cols": n, "merge_warps": w}`` sets them (n a power of two dividing
    BLOCK_D; w default 4). Otherwise a whole row on 4 warps, unless the GPU has ``sms``
    multiprocessors and rows split into 32-column programs still number at most eight per
    multiprocessor: then 32 columns on one warp. On the H200 (Hq 32, Hk 8, D 128, CUDA graphs) that
    took batch 1 from 12.4 to 10.9 µs (SDPA 11.2) and batch 8 from 66.9 to 65.9 µs (SDPA 65.6),
    and tied at batch 16, past the limit (bench/results/decode-h200-2026-12-02-run2.log,
    decode-sweep-h200-2026-12-02.log). ``sms`` None (the CPU interpreter, other devices): the
    whole row."""
    if "merge_cols" in decode or "merge_warps" in decode:
        ncols, warps = min(block_d, decode.get("merge_cols", block_d)), decode.get("merge_warps", 4)
    elif sms and block_d > MERGE_SPLIT_COLS and row_programs * (block_d // MERGE_SPLIT_COLS) <= 8 * sms:
        ncols, warps = MERGE_SPLIT_COLS, 1
    else:
        ncols, warps = block_d, 4
    if ncols < 1 or block_d % ncols or ncols & (ncols - 1):
        raise ValueError(f"merge_cols must be a power of two dividing {block_d}, got {ncols}")
    return ncols, warps


def _has_pdl(device: torch.device) -> bool:
    """Programmatic dependent launch: compute capability 9.0 or newer, not the CPU interpreter."""
    if device.type != "cuda" or os.environ.get("TRITON_INTERPRET") == "1":
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9


def _use_prefill_tma(q, k, v, out, varlen, seqlen_q, seqlen_k, prefill) -> bool:
    """The Hopper descriptor path, on request only (``prefill={"use": True}``): sm_90, fp16/bf16,
    D 64 or 128, batched, [B, H] mergeable into one 16-byte-aligned dimension for every tensor.
    Not the default: on the H200 (2026-12-01) its best configuration ran chunked prefill (q 512
    over k 8192) at 460 TFLOP/s against 470 for the autotuned _causal_trim_fwd, with or without
    warp specialisation (bench/results/attention-decode-h200-2026-12-01.md)."""
    if not prefill.get("use") or varlen or os.environ.get("TRITON_INTERPRET") == "1" or q.device.type != "cuda":
        return False
    if q.dtype not in (torch.float16, torch.bfloat16) or q.shape[-1] not in (64, 128):
        return False
    if torch.cuda.get_device_capability(q.device)[0] != 9:
        return False
    for t in (q, k, v, out):
        if t.stride(3) != 1 or t.stride(0) != t.shape[1] * t.stride(1) or t.data_ptr() % 16:
            return False
        if (t.stride(1) * t.element_size()) % 16 or (t.stride(2) * t.element_size()) % 16:
            return False
    return True


def _launch_prefill_tma(out, lse, l_strides, q, k, v, scale, return_lse, group, prefill):
    from triton.tools.tensor_descriptor import TensorDescriptor

    b, hq, sq, d = q.shape
    hk, sk = k.shape[1], k.shape[2]
    bm, bn = prefill.get("block_m", 128), prefill.get("block_n", 128 if d <= 64 else 64)

    def desc(t, h, s, rows):
        return TensorDescriptor(t, [b * h, s, d], [t.stride(1), t.stride(2), 1], [1, rows, d])

    _prefill_tma_fwd[(cdiv(sq, bm), b * hq)](
        desc(q, hq, sq, bm), desc(k, hk, sk, bn), desc(v, hk, sk, bn), desc(out, hq, sq, bm),
        lse, *l_strides, hq, sq, sk, scale * LOG2E,
        HEAD_DIM=d, GROUP=group, WRITE_LSE=return_lse, WARP_SPECIALIZE=prefill.get("warp_specialize", False),
        BLOCK_M=bm, BLOCK_N=bn, num_warps=prefill.get("num_warps", 8), num_stages=prefill.get("num_stages", 3),
    )


def _default_splits(device: torch.device, max_rows: int, max_seqlen_k: int, programs_per_block: int) -> int:
    """Split the keys when few short row blocks would leave most multiprocessors idle."""
    if device.type != "cuda" or max_rows > 64 or max_seqlen_k < 1024:
        return 1
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    programs = cdiv(max_rows, 16) * programs_per_block
    if programs >= sms:
        return 1
    return max(1, min(cdiv(2 * sms, programs), cdiv(max_seqlen_k, 512), 64))
