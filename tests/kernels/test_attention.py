"""causal_trim against its float64 reference, under the Triton interpreter on the CPU.

Fresh random inputs of awkward shapes every run (lengths that are not block multiples, q_len ≠
k_len, GQA 1/4/8, varlen batches with empty and length-1 sequences); outputs are poisoned so an
unwritten element fails. Tolerances by ‖out − ref‖ / ‖ref‖ (METHOD.md): fp32 ≤ 1e-5, fp16/bf16
≤ 1e-2; every element must be finite.
"""

from __future__ import annotations

import math

import pytest
import torch
import triton
import triton.language as tl

from sits_doctor.kernels.attention import _exp2_fma, causal_attention, causal_attention_reference

TOL = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 2e-2}


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch):
    """Every float buffer the launcher allocates starts as NaN, so an unwritten element fails."""
    real_empty, real_empty_like = torch.empty, torch.empty_like

    def empty(*args, **kwargs):
        t = real_empty(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t

    def empty_like(*args, **kwargs):
        t = real_empty_like(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", empty)
    monkeypatch.setattr(torch, "empty_like", empty_like)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    finite = torch.isfinite(ref)
    assert torch.equal(torch.isfinite(out), finite), "non-finite values where the reference has none (or v.v.)"
    num = (out[finite] - ref[finite]).norm()
    den = ref[finite].norm().clamp_min(1e-30)
    return float(num / den)


def assert_close(out, ref, dtype, what):
    err = rel_err(out, ref)
    if err > TOL[dtype]:
        diff = (out.double() - ref.double()).abs().nan_to_num(0)
        worst = diff.argmax()
        raise AssertionError(
            f"{what}: relative error {err:.2e} > {TOL[dtype]:.0e}; worst at flat index {int(worst)}: "
            f"{out.flatten()[worst].item()} vs {ref.flatten()[worst].item()}"
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "b, hq, hk, sq, sk, d",
    [
        (1, 2, 2, 37, 37, 64),     # square, not a block multiple
        (2, 4, 1, 19, 53, 64),     # chunked prefill: q_len < k_len, GQA 4
        (1, 8, 1, 1, 45, 32),      # decode: one query over many keys, GQA 8
        (1, 3, 3, 40, 23, 16),     # q_len > k_len: the first rows see nothing
        (1, 2, 1, 17, 17, 80),     # head_dim not a power of two (padded, masked)
        (1, 2, 2, 9, 20, 256),     # the largest head_dim supported
    ],
)
def test_batched_matches_reference(b, hq, hk, sq, sk, d, dtype):
    torch.manual_seed(torch.seed() % 2**31)
    q = torch.randn(b, hq, sq, d, dtype=dtype)
    k = torch.randn(b, hk, sk, d, dtype=dtype)
    v = torch.randn(b, hk, sk, d, dtype=dtype)
    out, lse = causal_attention(q, k, v, return_lse=True)
    ref, ref_lse = causal_attention_reference(q, k, v)
    assert out.shape == q.shape and out.dtype == dtype
    assert_close(out, ref, dtype, "output")
    assert torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse))
    assert_close(lse, ref_lse, torch.float32 if dtype == torch.float32 else dtype, "lse")


def test_transposed_views_are_read_through_strides():
    """transformers hands [B, S, H, D] projections transposed to [B, H, S, D]: not contiguous."""
    b, s, h, d = 2, 29, 4, 32
    q = torch.randn(b, s, h, d).transpose(1, 2)
    k = torch.randn(b, s, 2, d).transpose(1, 2)
    v = torch.randn(b, s, 2, d).transpose(1, 2)
    assert not q.is_contiguous()
    ref, _ = causal_attention_reference(q, k, v)
    assert_close(causal_attention(q, k, v), ref, torch.float32, "output")


def test_sm_scale_is_used():
    q, k, v = (torch.randn(1, 2, 21, 16) for _ in range(3))
    ref, _ = causal_attention_reference(q, k, v, sm_scale=0.3)
    assert_close(causal_attention(q, k, v, sm_scale=0.3), ref, torch.float32, "output")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_varlen_packed_batch(dtype):
    """Sequences of lengths 0, 1, 33 and 18 (with 5, 1, 40, 18 keys) packed without padding."""
    q_lens, k_lens = [0, 1, 33, 18], [5, 1, 40, 18]
    hq, hk, d = 4, 2, 64
    cu_q = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32)
    cu_k = torch.tensor([0] + list(torch.tensor(k_lens).cumsum(0)), dtype=torch.int32)
    q = torch.randn(int(cu_q[-1]), hq, d, dtype=dtype)
    k = torch.randn(int(cu_k[-1]), hk, d, dtype=dtype)
    v = torch.randn(int(cu_k[-1]), hk, d, dtype=dtype)
    out, lse = causal_attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, return_lse=True)
    ref, ref_lse = causal_attention_reference(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert_close(out, ref, dtype, "output")
    assert_close(lse, ref_lse, torch.float32 if dtype == torch.float32 else dtype, "lse")


def test_varlen_equals_batched_on_equal_lengths():
    b, h, s, d = 3, 2, 24, 32
    q, k, v = (torch.randn(b, h, s, d) for _ in range(3))
    batched = causal_attention(q, k, v)
    pack = lambda t: t.transpose(1, 2).reshape(b * s, h, d)  # noqa: E731
    cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32)
    packed = causal_attention(pack(q), pack(k), pack(v), cu_seqlens_q=cu, cu_seqlens_k=cu)
    assert_close(packed, pack(batched), torch.float32, "varlen vs batched")


def test_every_output_element_is_written():
    """The buffers start as NaN (the poisoned_outputs fixture): no NaN may survive."""
    q, k, v = (torch.randn(1, 2, 45, 32) for _ in range(3))
    out, lse = causal_attention(q, k, v, return_lse=True)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()


def test_matches_torch_sdpa_bottom_right_on_the_cpu():
    """Against PyTorch's own bottom-right causal SDPA (torch.nn.attention.bias.causal_lower_right)."""
    from torch.nn.attention.bias import causal_lower_right

    q = torch.randn(1, 4, 13, 32)
    k = torch.randn(1, 4, 50, 32)
    v = torch.randn(1, 4, 50, 32)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(13, 50))
    assert_close(causal_attention(q, k, v), ref, torch.float32, "vs SDPA lower-right")


@pytest.mark.parametrize("bad", ["hq", "dtype", "dim", "cu"])
def test_bad_arguments_are_refused(bad):
    q, k, v = (torch.randn(1, 4, 8, 16) for _ in range(3))
    with pytest.raises((ValueError, TypeError)):
        if bad == "hq":
            causal_attention(q, torch.randn(1, 3, 8, 16), torch.randn(1, 3, 8, 16))
        elif bad == "dtype":
            causal_attention(q.half(), k, v)
        elif bad == "dim":
            causal_attention(q[0], k[0], v[0])
        else:
            causal_attention(q[0], k[0], v[0], cu_seqlens_q=torch.tensor([0, 4], dtype=torch.int32))


def test_reference_is_what_the_formula_says():
    """The reference itself, on a case small enough to write out: 1 query over 2 keys."""
    q = torch.tensor([[[[1.0, 0.0]]]])
    k = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]]]])
    v = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    out, lse = causal_attention_reference(q, k, v, sm_scale=1.0)
    w = torch.softmax(torch.tensor([1.0, 0.0]), 0)
    assert torch.allclose(out[0, 0, 0], w[0] * v[0, 0, 0] + w[1] * v[0, 0, 1])
    assert math.isclose(float(lse[0, 0, 0]), math.log(math.e + 1), rel_tol=1e-6)


@pytest.mark.parametrize("splits", [2, 3, 7])
def test_split_keys_are_merged_exactly(splits):
    """flash-decoding path: keys split over programs, merged by LSE; same result, LSE too."""
    q = torch.randn(2, 8, 3, 64)
    k = torch.randn(2, 2, 77, 64)
    v = torch.randn(2, 2, 77, 64)
    out, lse = causal_attention(q, k, v, return_lse=True, num_splits=splits)
    ref, ref_lse = causal_attention_reference(q, k, v)
    assert_close(out, ref, torch.float32, "output")
    assert_close(lse, ref_lse, torch.float32, "lse")


def test_split_keys_varlen_with_empty_and_short_sequences():
    q_lens, k_lens = [1, 0, 2, 1], [40, 3, 1, 65]  # the third sequence has rows that see nothing
    hq, hk, d = 4, 1, 32
    cu_q = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32)
    cu_k = torch.tensor([0] + list(torch.tensor(k_lens).cumsum(0)), dtype=torch.int32)
    q = torch.randn(int(cu_q[-1]), hq, d)
    k = torch.randn(int(cu_k[-1]), hk, d)
    v = torch.randn(int(cu_k[-1]), hk, d)
    out, lse = causal_attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, return_lse=True, num_splits=4)
    ref, ref_lse = causal_attention_reference(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert_close(out, ref, torch.float32, "output")
    assert torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse))
    assert_close(lse, ref_lse, torch.float32, "lse")


def test_bad_varlen_offsets_are_refused():
    q = torch.randn(10, 2, 16)
    k = torch.randn(12, 2, 16)
    ok_q = torch.tensor([0, 4, 10], dtype=torch.int32)
    with pytest.raises(ValueError):
        causal_attention(q, k, k, cu_seqlens_q=ok_q, cu_seqlens_k=torch.tensor([0, 7, 13], dtype=torch.int32))
    with pytest.raises(ValueError):
        causal_attention(q, k, k, cu_seqlens_q=torch.tensor([0, 6, 4], dtype=torch.int32),
                         cu_seqlens_k=torch.tensor([0, 5, 12], dtype=torch.int32))
    with pytest.raises(ValueError):
        causal_attention(q, k, k[:11], cu_seqlens_q=ok_q, cu_seqlens_k=torch.tensor([0, 5, 11], dtype=torch.int32))


# ---- the short-query path (_decode_fwd): all query heads of a kv head in one program, keys split,
#      splits merged by a second kernel (the default) or by the last split to arrive ("fused") -----

from sits_doctor.kernels import attention as attention_module  # noqa: E402


@pytest.mark.parametrize("mode", ["fused", "separate"])
@pytest.mark.parametrize(
    "b, hq, hk, sq, sk, d, splits",
    [
        (3, 8, 2, 1, 4097, 64, 5),   # decode, odd key length, batch 3, GQA 4
        (2, 8, 8, 1, 301, 32, 3),    # GQA 1
        (1, 16, 2, 1, 130, 64, 4),   # GQA 8
        (2, 16, 4, 5, 301, 32, 6),   # 5 queries over 301 keys (speculative decoding): rows 20
        (1, 4, 4, 3, 2, 16, 2),      # q_len > k_len: the first query sees nothing; a split is empty
        (3, 32, 8, 2, 77, 128, 1),   # one split: handed to the autotuned kernel
        (1, 4, 2, 1, 1270, 256, 40),  # D 256: the separate merge reads its 40 splits (all holding keys) in two chunks of 32
    ],
)
def test_decode_path_matches_reference(b, hq, hk, sq, sk, d, splits, mode):
    for dtype in (torch.float32, torch.bfloat16):
        q = torch.randn(b, hq, sq, d, dtype=dtype)
        k = torch.randn(b, hk, sk, d, dtype=dtype)
        v = torch.randn(b, hk, sk, d, dtype=dtype)
        out, lse = attention_module._attention(q, k, v, return_lse=True, num_splits=splits, decode={"mode": mode})
        ref, ref_lse = causal_attention_reference(q, k, v)
        assert_close(out, ref, dtype, f"output {dtype}")
        assert torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse))
        assert_close(lse, ref_lse, torch.float32, f"lse {dtype}")


@pytest.mark.parametrize("cols, warps", [(16, 1), (32, 2)])
def test_separate_merge_by_column_blocks_matches_reference(cols, warps):
    """decode={"merge_cols": n}: each row merged by D/n programs of n columns; the output and the
    LSE (written once, by the program of column 0) match the reference, for a row past the end of
    a varlen sequence too; a column count that does not divide the head block is refused."""
    q = torch.randn(3, 8, 2, 64)
    k = torch.randn(3, 4, 300, 64)
    v = torch.randn(3, 4, 300, 64)
    dec = {"mode": "separate", "merge_cols": cols, "merge_warps": warps}
    out, lse = attention_module._attention(q, k, v, return_lse=True, num_splits=5, decode=dec)
    ref, ref_lse = causal_attention_reference(q, k, v)
    assert_close(out, ref, torch.float32, "output")
    assert_close(lse, ref_lse, torch.float32, "lse")
    cu_q = torch.tensor([0, 1, 1, 3], dtype=torch.int32)  # an empty sequence between two
    cu_k = torch.tensor([0, 40, 43, 120], dtype=torch.int32)
    qv, kv, vv = torch.randn(3, 8, 64), torch.randn(120, 4, 64), torch.randn(120, 4, 64)
    out, lse = attention_module._attention(qv, kv, vv, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, return_lse=True,
                                           num_splits=3, decode=dec)
    ref, ref_lse = causal_attention_reference(qv, kv, vv, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert_close(out, ref, torch.float32, "varlen output")
    assert torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse))
    assert_close(lse, ref_lse, torch.float32, "varlen lse")
    with pytest.raises(ValueError, match="merge_cols"):
        attention_module._attention(q, k, v, num_splits=5, decode={"mode": "separate", "merge_cols": 48})


def test_merge_layout_splits_rows_only_while_few_programs():
    """The separate merge's default layout: whole rows on 4 warps, except on a GPU whose 32-column
    programs would number at most eight per multiprocessor (batch 8: 64 tiles × 4 rows × 4 column
    blocks = 1024 on 132 SMs); explicit options win; a bad column count is refused."""
    layout = attention_module._merge_layout
    assert layout(132, 32, 128, {}) == (32, 1)  # batch 1, Hk 8, 4 query rows: 128 programs
    assert layout(132, 256, 128, {}) == (32, 1)  # batch 8: 1024 programs
    assert layout(132, 264, 128, {}) == (32, 1)  # 1056 programs: exactly eight per SM
    assert layout(132, 265, 128, {}) == (128, 4)  # one more row and the whole-row merge
    assert layout(132, 512, 128, {}) == (128, 4)  # batch 16
    assert layout(None, 32, 128, {}) == (128, 4)  # the interpreter / no CUDA device
    assert layout(132, 32, 32, {}) == (32, 4)  # a row no wider than the split: nothing to split
    assert layout(132, 32, 64, {}) == (32, 1)
    assert layout(132, 32, 128, {"merge_cols": 64}) == (64, 4)
    assert layout(132, 32, 128, {"merge_cols": 1}) == (1, 4)  # one column a program: allowed
    assert layout(132, 512, 128, {"merge_warps": 2}) == (128, 2)
    for bad in (48, 0):
        with pytest.raises(ValueError, match="merge_cols"):
            layout(132, 32, 128, {"merge_cols": bad})


def test_sm_count_only_on_cuda_outside_the_interpreter(monkeypatch):
    """The merge layout reads the multiprocessor count of a CUDA device, and none under the CPU
    interpreter or on another device (whose programs are not spread over SMs)."""
    from types import SimpleNamespace

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: SimpleNamespace(multi_processor_count=132))
    cuda = torch.device("cuda", 0)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert attention_module._sm_count(cuda) is None
    monkeypatch.delenv("TRITON_INTERPRET")
    assert attention_module._sm_count(cuda) == 132
    assert attention_module._sm_count(torch.device("cpu")) is None


@pytest.mark.parametrize("mode", ["fused", "separate"])
def test_decode_path_varlen_merge_and_counters_at_zero(mode):
    q_lens, k_lens = [1, 0, 3, 1, 2], [40, 3, 1, 65, 129]  # an empty sequence; rows that see nothing
    hq, hk, d = 8, 2, 32
    cu_q = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32)
    cu_k = torch.tensor([0] + list(torch.tensor(k_lens).cumsum(0)), dtype=torch.int32)
    q = torch.randn(int(cu_q[-1]), hq, d)
    k = torch.randn(int(cu_k[-1]), hk, d)
    v = torch.randn(int(cu_k[-1]), hk, d)
    ref, ref_lse = causal_attention_reference(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    for _ in range(2):  # a second call must find the counters reset by the first
        out, lse = attention_module._attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, return_lse=True,
                                               num_splits=3, decode={"mode": mode})
        assert_close(out, ref, torch.float32, "output")
        assert torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse))
        assert_close(lse, ref_lse, torch.float32, "lse")
    assert all(int(c.abs().sum()) == 0 for c in attention_module._COUNTERS_KEPT)


def test_decode_is_the_default_for_few_rows_and_legacy_agrees():
    """Sq·GROUP ≤ 64 with splits takes the new path by default; the old split kernel agrees."""
    q = torch.randn(2, 16, 2, 64)
    k = torch.randn(2, 4, 90, 64)
    v = torch.randn(2, 4, 90, 64)
    new = causal_attention(q, k, v, num_splits=3)
    old = attention_module._attention(q, k, v, num_splits=3, decode={"mode": "legacy"})
    assert_close(new, old, torch.float32, "new vs legacy")


def test_decode_splits_fill_one_wave(monkeypatch):
    """Splits from the multiprocessor count and key length: about 2 programs per SM, ≥256 keys each,
    whole key blocks shared out so that no split is empty."""
    class Props:
        multi_processor_count = 132

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Props())
    dev = torch.device("cuda")
    assert attention_module._decode_splits(dev, 8, 8192, 64) == 32      # B=1, Hk=8: 256 programs
    assert attention_module._decode_splits(dev, 64, 8192, 64) == 4      # B=8: 256 programs
    assert attention_module._decode_splits(dev, 512, 8192, 64) == 1     # B=64: already 2 waves
    assert attention_module._decode_splits(dev, 8, 1000, 64) == 4       # ≥256 keys a split
    assert attention_module._decode_splits(torch.device("cpu"), 8, 8192, 64) == 1
    for tiles, keys in ((8, 4097), (24, 32768), (3, 777)):
        n = attention_module._decode_splits(dev, tiles, keys, 64)
        blocks = -(-keys // 64)
        per = -(-blocks // n)
        assert (n - 1) * per < blocks  # the last split has keys


def test_hopper_prefill_path_is_not_taken_on_the_cpu():
    q = torch.randn(1, 2, 16, 64)
    k = torch.randn(1, 2, 64, 64)
    assert not attention_module._use_prefill_tma(q, k, k, q, False, 16, 64, {"use": True})


@pytest.mark.parametrize("case", ["batched_gqa", "chunk_splits", "varlen", "padded"])
def test_lpt_program_order_computes_the_same_outputs(case):
    """``prefill={"order": "lpt"}`` only reorders the autotuned kernel's programs (heaviest row
    block of every head first): outputs and log-sum-exps are bit-identical to the default order,
    on GQA, split keys, packed and padded batches."""
    g = torch.Generator().manual_seed(21)
    kw = {}
    if case == "varlen":
        lens = [37, 5, 64]
        q = torch.randn(sum(lens), 6, 24, generator=g)
        k = torch.randn(sum(lens), 2, 24, generator=g)
        v = torch.randn(sum(lens), 2, 24, generator=g)
        cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)
        kw = dict(cu_seqlens_q=cu, cu_seqlens_k=cu)
    else:
        b, hq, hk, sq, sk = {"batched_gqa": (2, 6, 2, 45, 45), "chunk_splits": (2, 4, 2, 40, 70),
                             "padded": (3, 4, 2, 33, 33)}[case]
        q = torch.randn(b, hq, sq, 16, generator=g)
        k = torch.randn(b, hk, sk, 16, generator=g)
        v = torch.randn(b, hk, sk, 16, generator=g)
        if case == "chunk_splits":
            kw = dict(num_splits=3)
        if case == "padded":
            kw = dict(seq_bounds_q=torch.tensor([[5, 33], [0, 30], [0, 33]], dtype=torch.int32),
                      seq_bounds_k=torch.tensor([[5, 33], [0, 30], [0, 33]], dtype=torch.int32))
    base, base_lse = attention_module._attention(q, k, v, return_lse=True, **kw)
    got, got_lse = attention_module._attention(q, k, v, return_lse=True, prefill={"order": "lpt"}, **kw)
    assert torch.equal(got, base)
    assert torch.equal(got_lse, base_lse)
    if case == "batched_gqa":  # and both are right
        ref, _ = causal_attention_reference(q, k, v)
        assert (base - ref).abs().max() < 1e-5


def test_prune_drops_configs_whose_tiles_cannot_fit_shared_memory(monkeypatch):
    """The autotuner's early prune: a config whose Q tile and num_stages K/V tiles exceed the
    device's shared memory is dropped before it is compiled (it would only fail at load); what fits
    stays, including the configs the H200 chose (128×128 ×3 at D=128 bf16, 64×64 ×3 at D=256)."""
    from sits_doctor.kernels import attention as att

    monkeypatch.setattr(att, "_smem_limit", lambda: 227 * 1024)  # sm_90's per-block maximum
    cfgs = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=st)
            for bm, bn, w, st in ((128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3), (64, 32, 4, 4),
                                  (16, 64, 4, 3))]

    def kept(dtype, block_d, rows=4096):
        args = {"MAX_ROWS": rows, "k_ptr": torch.empty(1, dtype=dtype)}
        return [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_stages)
                for c in att._prune(cfgs, args, BLOCK_D=block_d)]

    assert kept(torch.bfloat16, 128) == [(128, 64, 3), (128, 128, 3), (64, 64, 3), (64, 32, 4), (16, 64, 3)]
    assert kept(torch.bfloat16, 256) == [(64, 64, 3), (64, 32, 4), (16, 64, 3)]
    assert kept(torch.float32, 128) == [(64, 64, 3), (64, 32, 4), (16, 64, 3)]
    assert kept(torch.float32, 128, rows=16) == [(16, 64, 3)]  # the row-block prune still applies
    # nothing fits: the smallest-index survivor of the row prune is kept rather than none
    assert kept(torch.float32, 1024) == [(128, 64, 3)]
    monkeypatch.setattr(att, "_smem_limit", lambda: None)  # off CUDA: no shared-memory prune
    assert len(kept(torch.float32, 256)) == 5


def test_prune_keeps_the_wide_head_configs_for_head_blocks_of_256_only(monkeypatch):
    """WIDE_HEAD_CONFIGS (8-warp, 128-row tiles that did not spill at D=256) are tried for head
    blocks of 256 and pruned below, so keys of narrower heads compile nothing more."""
    from sits_doctor.kernels import attention as att

    monkeypatch.setattr(att, "_smem_limit", lambda: 227 * 1024)
    cfgs = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=st)
            for bm, bn, w, st in ((64, 64, 4, 3), *att.WIDE_HEAD_CONFIGS)]

    def kept(block_d):
        args = {"MAX_ROWS": 4096, "k_ptr": torch.empty(1, dtype=torch.bfloat16)}
        return [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages)
                for c in att._prune(cfgs, args, BLOCK_D=block_d)]

    assert kept(256) == [(64, 64, 4, 3), (128, 32, 8, 3), (128, 64, 8, 2)]
    assert kept(128) == kept(64) == [(64, 64, 4, 3)]
    wide_only = [triton.Config({"BLOCK_M": 128, "BLOCK_N": 32}, num_warps=8, num_stages=3)]
    assert len(att._prune(wide_only, {"MAX_ROWS": 4096, "k_ptr": torch.empty(1)}, BLOCK_D=128)) == 1  # never none


@triton.jit
def _exp2_fma_kernel(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, _exp2_fma(tl.load(x_ptr + offs)))


def test_exp2_on_the_fma_pipe_is_within_its_stated_error():
    """_exp2_fma (the polynomial exp2 of the "split" variant) against float64 2**x on [-140, 0]:
    relative error below 7.5e-5 down to -125, and 2**-125 below that (the clamp), never 0 or NaN."""
    x = torch.cat([torch.linspace(-140.0, 0.0, 4093), torch.tensor([-125.0, -0.5, -1e-7])])
    x = torch.cat([x, torch.zeros(4096 + 4096 - x.numel())])[:8192]
    y = torch.empty_like(x)
    _exp2_fma_kernel[(1,)](x, y, N=8192)
    want = torch.exp2(x.double().clamp(min=-125.0))
    rel = ((y.double() - want) / want).abs()
    assert rel.max().item() < 7.5e-5, rel.max().item()
    assert torch.isfinite(y).all() and (y > 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("sq, sk, hq, hk", [(70, 70, 4, 2), (37, 101, 6, 3), (1, 83, 8, 2)])
def test_lazy_rescale_variant_matches_reference(sq, sk, hq, hk, dtype):
    """prefill={"rescale": "lazy"}: a row's running max moves only when a tile's exceeds it by more
    than 8, and the accumulator is rescaled only when some row moved. With keys whose scores grow
    along the sequence (the max keeps moving, by less and by more than 8) and with plain random
    ones, output and LSE match the float64 reference as the default kernel does."""
    from sits_doctor.kernels.attention import _attention

    g = torch.Generator().manual_seed(sq * 7 + sk)
    q = torch.randn(2, hq, sq, 32, generator=g)
    v = torch.randn(2, hk, sk, 32, generator=g)
    # key j scaled by 1 + grow·j: the score scale climbs tile after tile; at 10 a later tile's max
    # exceeds an earlier one's by hundreds (log2), so a stale max would overflow P: the threshold
    for grow in (0.0, 0.15, 10.0):
        k = torch.randn(2, hk, sk, 32, generator=g) * (1 + grow * torch.arange(sk))[None, None, :, None]
        qd, kd, vd = (t.to(dtype) for t in (q, k, v))
        # the reference of the rounded inputs: at grow 10 bf16's rounding of K alone moves scores
        # by more than their gaps, and a near one-hot softmax picks another key
        ref, ref_lse = causal_attention_reference(qd.float(), kd.float(), vd.float())
        got, lse = _attention(qd, kd, vd, return_lse=True, prefill={"rescale": "lazy"})
        assert_close(got, ref, dtype, f"output grow={grow}")
        assert_close(lse, ref_lse, torch.float32 if dtype == torch.float32 else dtype, f"lse grow={grow}")
    with pytest.raises(ValueError, match="rescale"):
        _attention(qd, kd, vd, prefill={"rescale": "never"})


@pytest.mark.parametrize("sq, sk, hq, hk", [(70, 70, 4, 2), (37, 101, 6, 3), (1, 83, 8, 2)])
def test_split_exp2_variant_matches_reference(sq, sk, hq, hk):
    """prefill={"exp2": "split"}: the unmasked tiles' exponentials half on the polynomial; the
    output stays within the bf16 tolerance of the float64 reference (shapes with full key tiles
    below the diagonal, a chunk with q < k and a decode row), and fp32 inputs ignore the option."""
    from sits_doctor.kernels.attention import _attention

    g = torch.Generator().manual_seed(sq * 1000 + sk)
    q = torch.randn(2, hq, sq, 32, generator=g)
    k = torch.randn(2, hk, sk, 32, generator=g)
    v = torch.randn(2, hk, sk, 32, generator=g)
    ref, _ = causal_attention_reference(q, k, v)
    qb, kb, vb = (t.to(torch.bfloat16) for t in (q, k, v))
    got = _attention(qb, kb, vb, prefill={"exp2": "split"})
    assert rel_err(got, ref) < TOL[torch.bfloat16]
    base = _attention(qb, kb, vb)
    # the variant changes the result (it is not the same code) by about the polynomial's error
    if sk > 16:
        assert 0 < (got.float() - base.float()).abs().max().item() < 2e-2
    exact = _attention(q, k, v, prefill={"exp2": "split"})
    assert torch.equal(exact, _attention(q, k, v))  # fp32: the option is ignored
    with pytest.raises(ValueError, match="exp2"):
        _attention(qb, kb, vb, prefill={"exp2": "poly"})
