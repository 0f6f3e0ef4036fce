"""Quantized products (kernels/quant_gemm.py) and act_calib's W8A8 groups (CPU, Triton interpreter).

The W8A8 GEMM and the scaling epilogue against a float64 product of the same quantized operands;
silu·mul+quant against its float64 reference code for code (per token, static, one tile and two
passes, from a float or an int32 product); and on a tiny Llama: one quantization per shared input,
the row-count dispatch, static scales, and the model restored bit for bit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sits_doctor.kernels import quant_gemm as qg
from sits_doctor.kernels.act_quant import quantize_per_token

FP8 = torch.float8_e4m3fn
CONFIG = Path(__file__).resolve().parents[2] / "fixtures" / "hf" / "tiny-random-llama" / "config.json"


def _operands(m, n, k, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    a, w = torch.randn(m, k, generator=g), torch.randn(n, k, generator=g) * 0.1
    aq, sa = quantize_per_token(a, dtype)
    wq, sw = quantize_per_token(w, dtype)
    return aq, sa, wq, sw.reshape(1, -1), torch.randn(n, generator=g)


@pytest.mark.parametrize("dtype", [torch.int8, FP8])
@pytest.mark.parametrize("m, n, k", [(37, 50, 96), (1, 24, 64), (64, 48, 160)])
def test_w8a8_gemm_matches_float64(dtype, m, n, k):
    aq, sa, wq, sw, bias = _operands(m, n, k, dtype, m + n + k)
    for b in (None, bias):
        got = qg.w8a8_gemm(aq, wq, sa, sw, b, torch.float32)
        ref = qg.w8a8_reference(aq.float(), wq.float(), sa, sw, b, torch.float64)
        err = ((got.double() - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-6, f"{dtype} {m}x{n}x{k} bias={b is not None}: {err}"


def test_scale_epilogue_and_int_mm_path():
    aq, sa, wq, sw, bias = _operands(33, 40, 64, torch.int8, 5)
    acc = aq.int() @ wq.int().t()
    ref = qg.w8a8_reference(aq.float(), wq.float(), sa, sw, bias, torch.float64)
    got = qg.scale_rows_cols(acc, sa, sw, bias, torch.float32)
    assert ((got.double() - ref).abs().max() / ref.abs().max()).item() < 1e-6
    got_bf16 = qg.scale_rows_cols(acc, sa, sw, None, torch.bfloat16)
    ref_bf16 = qg.w8a8_reference(aq.float(), wq.float(), sa, sw, None, torch.float64)
    assert ((got_bf16.double() - ref_bf16).abs() <= ref_bf16.abs() * 2 ** -7 + 1e-6).all()  # one bf16 ulp


def test_w8a8_refuses_mixed_operands():
    aq, sa, wq, sw, _ = _operands(4, 8, 32, torch.int8, 1)
    with pytest.raises(TypeError):
        qg.w8a8_gemm(aq, wq.float().to(FP8), sa, sw)
    with pytest.raises(ValueError):
        qg.w8a8_gemm(aq, wq[:, :16], sa, sw)


@pytest.mark.parametrize("dtype", [torch.int8, FP8])
@pytest.mark.parametrize("block_n", [None, 16])
@pytest.mark.parametrize("static", [False, True])
def test_silu_mul_quant_codes_match_reference(dtype, block_n, static):
    g = torch.Generator().manual_seed(11)
    n = 45
    y = torch.randn(21, 2 * n, generator=g) * 4
    st = torch.tensor([0.02]) if static else None
    q, s = qg.silu_mul_quant(y, n, dtype, static_scale=st, block_n=block_n)
    rq, rs = qg.silu_mul_quant_reference(y, n, dtype, static_scale=st)
    assert torch.equal(q.view(torch.uint8) if dtype == FP8 else q, rq.view(torch.uint8) if dtype == FP8 else rq)
    assert torch.allclose(s, rs.float(), rtol=1e-6, atol=0)
    if static:  # the static scale saturates: codes at ±QMAX exist, never beyond
        assert q.float().abs().max() == {torch.int8: 127.0, FP8: 448.0}[dtype]


def test_silu_mul_quant_from_int32_product():
    aq, sa, wq, sw, _ = _operands(19, 2 * 30, 64, torch.int8, 3)
    acc = aq.int() @ wq.int().t()
    q, s = qg.silu_mul_quant(acc, 30, torch.int8, sa=sa, sw=sw)
    rq, rs = qg.silu_mul_quant_reference(acc, 30, torch.int8, sa=sa, sw=sw)
    assert (q.int() - rq.int()).abs().max() <= 1 and (q != rq).float().mean() < 0.01
    assert torch.allclose(s, rs.float(), rtol=1e-5)
    with pytest.raises(ValueError, match="sa and sw"):
        qg.silu_mul_quant(acc, 30, torch.int8)


# --------------------------------------------------------------------------------------------
# act_calib on a tiny Llama
# --------------------------------------------------------------------------------------------
transformers = pytest.importorskip("transformers")

from sits_doctor.fixes.kernel_patches import act_calib, patch, unpatch  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(5)
    return LlamaForCausalLM(LlamaConfig(**json.loads(CONFIG.read_text()))).eval()


@pytest.fixture(scope="module")
def probe():
    return torch.randint(3, 256, (1, 9), generator=torch.Generator().manual_seed(4))


def test_int8_groups_quantize_once_and_restore_bit_for_bit(tiny, probe, monkeypatch):
    ids = torch.randint(3, 256, (2, 13), generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        ref = tiny(input_ids=ids).logits
    weights = {n: p.detach().clone() for n, p in tiny.named_parameters()}
    # the norms keep their own forward here, so every group quantizes its own input
    ps = patch(tiny, ["act_calib"], probe=probe, options={"act_calib": {"mode": "int8", "fuse_norm": False}})
    p = ps["act_calib"]
    assert p.info["mode"] == "int8" and p.error <= act_calib.RTOL_BY_MODE["int8"]
    assert len(p.info["fused_mlps"]) == 2 and p.info["fused_norms"] == []
    assert sorted(len(g) for g in p.info["groups"]) == [1, 1, 1, 1, 2, 2, 3, 3]  # o, down; gate|up; q|k|v
    calls = []
    real = qg.silu_mul_quant
    monkeypatch.setattr(qg, "silu_mul_quant", lambda *a, **k: calls.append("smq") or real(*a, **k))
    import sits_doctor.kernels.act_quant as aq

    real_q = aq.quantize_per_token
    monkeypatch.setattr(aq, "quantize_per_token", lambda *a, **k: calls.append("q") or real_q(*a, **k))
    with torch.no_grad():
        got = tiny(input_ids=ids).logits
    # per layer: q/k/v input, o_proj input, gate/up input quantized once each; h by silu_mul_quant
    assert calls.count("q") == 3 * 2 and calls.count("smq") == 2, calls
    assert 0 < ((got - ref).abs().max() / ref.abs().max()).item() <= act_calib.RTOL_BY_MODE["int8"]
    assert all(c.batches == 1 for c in p.info["calibrators"].values())
    # static scales from that batch: per-tensor quantization, no per-token calls
    scales = act_calib.freeze_static(p)
    assert len(scales) == 8 and all(v > 0 for v in scales.values())
    calls.clear()
    with torch.no_grad():
        got_static = tiny(input_ids=ids).logits
    assert calls.count("q") == 0 and not torch.equal(got_static, got)
    assert ((got_static - ref).abs().max() / ref.abs().max()).item() <= act_calib.RTOL_BY_MODE["int8"]
    act_calib.thaw(p)
    unpatch(ps)
    for n, prm in tiny.named_parameters():
        assert torch.equal(prm, weights[n]), n
    with torch.no_grad():
        assert torch.equal(tiny(input_ids=ids).logits, ref)


def test_min_rows_routes_small_batches_to_bf16(tiny, probe):
    ps = patch(tiny, ["act_calib"], probe=probe, options={"act_calib": {"mode": "int8", "min_rows": 8}})
    p = ps["act_calib"]
    try:
        st = p.info["_state"]
        with torch.no_grad():
            tiny(input_ids=torch.randint(3, 256, (1, 5)))  # 5 rows < 8: the grouped bf16 product
            # per layer: q|k|v, o, and the MLP as one unit
            assert sum(st["bf16"].values()) == 6 and sum(st["fast"].values()) == 0
            tiny(input_ids=torch.randint(3, 256, (1, 9)))
            assert sum(st["fast"].values()) == 6  # q/k/v and o per layer; the fused MLP once
    finally:
        unpatch(ps)
