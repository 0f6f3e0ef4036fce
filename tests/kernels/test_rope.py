"""rope_hoist against its float64 reference under the Triton interpreter, and the cache and the
reference against transformers' own RoPE code.

Fresh random inputs each run (seed printed on failure through the case id), awkward shapes (odd
head counts, GQA 32/8 and 7/1, seq 1 and 37, head_dim 64/80/96/128, partial rotary 0.5/0.25),
non-contiguous q/k (transposed, slices of a fused qkv buffer, views inside a NaN-poisoned
buffer). Every element of q and k must be finite and match the reference; dims past rotary_dim
and all memory outside the views must be bit-for-bit unchanged.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import pytest
import torch

from sits_doctor.kernels.rope import RopeCache, apply_rope_, bench_cases, build_rope_cache, rope_reference

# (rtol, atol): fp32 from fp32 math; halves are one rounding of the output away from float64
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (1e-2, 1e-2)}


def assert_close(out: torch.Tensor, ref: torch.Tensor, what: str) -> None:
    rtol, atol = TOL[out.dtype]
    o, r = out.double(), ref.double()
    assert torch.isfinite(o).all(), f"{what}: {int((~torch.isfinite(o)).sum())} non-finite elements"
    diff = (o - r).abs()
    bad = diff > atol + rtol * r.abs()
    rel = float((o - r).norm() / r.norm().clamp_min(1e-30))
    if bad.any() or rel > rtol:
        worst = int(diff.flatten().argmax())
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), out.shape))
        raise AssertionError(
            f"{what} ({out.dtype}): {int(bad.sum())} elements out of tolerance, norm-relative error "
            f"{rel:.2e}; worst at {idx}: {o[idx].item()!r} vs reference {r[idx].item()!r}"
        )


# ------------------------------------------------------------------------------------------
# kernel vs reference
# ------------------------------------------------------------------------------------------
def _make(layout: str, B, Hq, Hk, S, D, dtype, gen):
    """q [B,Hq,S,D], k [B,Hk,S,D] views plus the storage they live in and a mask of the storage
    elements that belong to neither view (must come back unchanged)."""
    if layout == "contiguous":
        q = torch.randn(B, Hq, S, D, generator=gen).to(dtype)
        k = torch.randn(B, Hk, S, D, generator=gen).to(dtype)
        return q, k, []
    if layout == "transposed":  # what transformers hands over: proj(x).view(B, S, H, D).transpose(1, 2)
        q = torch.randn(B, S, Hq, D, generator=gen).to(dtype).transpose(1, 2)
        k = torch.randn(B, S, Hk, D, generator=gen).to(dtype).transpose(1, 2)
        return q, k, []
    if layout == "fused_qkv":  # q, k, v as head slices of one [B, S, Hq + 2 Hk, D] buffer
        buf = torch.randn(B, S, Hq + 2 * Hk, D, generator=gen).to(dtype)
        q = buf[:, :, :Hq].transpose(1, 2)
        k = buf[:, :, Hq:Hq + Hk].transpose(1, 2)
        outside = torch.ones_like(buf, dtype=torch.bool)
        outside[:, :, :Hq + Hk] = False
        return q, k, [(buf, outside, buf.clone())]
    if layout == "poisoned":  # views inside NaN-filled storage padded on every axis
        extras = []
        views = []
        for H in (Hq, Hk):
            store = torch.full((B + 1, H + 2, S + 3, D + 5), float("nan"), dtype=dtype)
            view = store[1:, 1:H + 1, 2:S + 2, 3:D + 3]
            view.copy_(torch.randn(B, H, S, D, generator=gen).to(dtype))
            outside = torch.ones_like(store, dtype=torch.bool)
            outside[1:, 1:H + 1, 2:S + 2, 3:D + 3] = False
            extras.append((store, outside, store.clone()))
            views.append(view)
        return views[0], views[1], extras
    raise AssertionError(layout)


# B, Hq, Hk, S, D, partial, dtype, interleaved, layout, batch-broadcast positions, rope type
CASES = [
    (1, 32, 8, 37, 128, 1.0, torch.bfloat16, False, "transposed", False, "default"),
    (2, 7, 1, 1, 64, 1.0, torch.float32, False, "contiguous", False, "llama3"),
    (2, 7, 1, 13, 80, 0.5, torch.float16, True, "fused_qkv", True, "default"),
    (1, 5, 5, 37, 96, 0.25, torch.float32, False, "poisoned", False, "yarn"),
    (3, 6, 2, 9, 128, 0.5, torch.float32, True, "transposed", False, "linear"),
    (1, 32, 8, 11, 64, 1.0, torch.float16, True, "contiguous", False, "default"),
    (2, 3, 1, 5, 96, 1.0, torch.bfloat16, False, "poisoned", True, "longrope"),
    (1, 80, 8, 3, 128, 1.0, torch.float32, False, "contiguous", False, "default"),  # 2 head tiles
    (2, 9, 3, 7, 80, 0.25, torch.bfloat16, True, "poisoned", False, "dynamic"),
]

_SCALING = {
    "default": None,
    "linear": {"rope_type": "linear", "factor": 2.0},
    "dynamic": {"type": "dynamic", "factor": 2.0},  # v4 'type' alias
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 32},
    "longrope": None,  # factors sized per rotary_dim below
}


def _cache(kind, D, partial, max_len):
    scaling = _SCALING[kind]
    if kind == "longrope":
        n = int(D * partial) // 2
        scaling = {"rope_type": "longrope", "original_max_position_embeddings": 32,
                   "short_factor": [1.0 + 0.05 * i for i in range(n)],
                   "long_factor": [1.0 + 0.5 * i for i in range(n)]}
    return build_rope_cache(D, max_len, base=10000.0, rope_scaling=scaling, partial_rotary_factor=partial,
                            max_position_embeddings=48)


def _id(case):
    B, Hq, Hk, S, D, prf, dt, il, layout, bc, kind = case
    style = "gptj" if il else "neox"
    return f"B{B}-H{Hq}/{Hk}-S{S}-D{D}-r{prf}-{str(dt)[6:]}-{style}-{layout}-{kind}{'-pos1S' if bc else ''}"


@pytest.mark.parametrize("flip", [False, True], ids=["as-listed", "other-layout"])
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_kernel_matches_reference(case, flip):
    B, Hq, Hk, S, D, prf, dtype, interleaved, layout, broadcast_pos, kind = case
    interleaved ^= flip  # every shape in both the rotate-half and the interleaved layout
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    max_len = 64
    cache = _cache(kind, D, prf, max_len)
    q, k, extras = _make(layout, B, Hq, Hk, S, D, dtype, gen)
    pos = torch.randint(0, max_len, (1 if broadcast_pos else B, S), generator=gen)
    if S > 2:
        pos[:, 1] = pos[:, 0]  # a repeated position
        pos[:, -1] = max_len - 1  # the last cache row
    if layout == "contiguous":
        pos = pos.to(torch.int32)
    ref_q, ref_k = rope_reference(q, k, cache, pos, interleaved=interleaved)
    q_in, k_in = q.clone(), k.clone()

    out_q, out_k = apply_rope_(q, k, cache, pos, interleaved=interleaved)

    assert out_q is q and out_k is k
    assert_close(q, ref_q, "q")
    assert_close(k, ref_k, "k")
    r = cache.rotary_dim
    assert torch.equal(q[..., r:], q_in[..., r:]), "q dims past rotary_dim changed"
    assert torch.equal(k[..., r:], k_in[..., r:]), "k dims past rotary_dim changed"
    for store, outside, before in extras:
        same = store[outside].view(torch.int16 if store.element_size() == 2 else torch.int32)
        assert torch.equal(same, before[outside].view(same.dtype)), "memory outside the q/k views was written"


def test_reference_matches_transformers_apply_rotary_pos_emb():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    cache = build_rope_cache(64, 40, base=500000.0)
    q = torch.randn(2, 6, 9, 64, generator=gen, dtype=torch.float64)
    k = torch.randn(2, 2, 9, 64, generator=gen, dtype=torch.float64)
    pos = torch.randint(0, 40, (2, 9), generator=gen)
    cos = torch.cat((cache.cos, cache.cos), -1).double()[pos]  # [B, S, D] as LlamaRotaryEmbedding returns
    sin = torch.cat((cache.sin, cache.sin), -1).double()[pos]
    hq, hk = apply_rotary_pos_emb(q, k, cos, sin)
    rq, rk = rope_reference(q, k, cache, pos)
    torch.testing.assert_close(rq, hq, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(rk, hk, rtol=1e-12, atol=1e-12)

    # partial rotary the way GPT-NeoX / Phi do it: rotate the first rotary_dim dims, pass the rest
    pc = build_rope_cache(64, 40, partial_rotary_factor=0.25)
    r = pc.rotary_dim
    cos = torch.cat((pc.cos, pc.cos), -1).double()[pos]
    sin = torch.cat((pc.sin, pc.sin), -1).double()[pos]
    hq, hk = apply_rotary_pos_emb(q[..., :r], k[..., :r], cos, sin)
    rq, rk = rope_reference(q, k, pc, pos)
    torch.testing.assert_close(rq, torch.cat((hq, q[..., r:]), -1), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(rk, torch.cat((hk, k[..., r:]), -1), rtol=1e-12, atol=1e-12)


def test_interleaved_reference_matches_transformers_gptj():
    from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj_apply

    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    cache = build_rope_cache(32, 20, partial_rotary_factor=0.5)
    r = cache.rotary_dim
    x = torch.randn(2, 5, 3, 32, generator=gen, dtype=torch.float64)  # GPT-J layout [B, S, H, D]
    pos = torch.randint(0, 20, (2, 5), generator=gen)
    sin, cos = cache.sin.double()[pos], cache.cos.double()[pos]  # [B, S, r/2]
    want = torch.cat((gptj_apply(x[..., :r], sin, cos), x[..., r:]), -1)
    got, _ = rope_reference(x.transpose(1, 2), x.transpose(1, 2)[:, :1], cache, pos, interleaved=True)
    torch.testing.assert_close(got.transpose(1, 2), want, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------
# cache vs transformers' rotary embedding modules (init functions + dynamic/longrope updates)
# ------------------------------------------------------------------------------------------
HD, MPE, LEN = 16, 32, 64  # head_dim, config max_position_embeddings, cache length (> MPE)

ROPE_CONFIGS = {
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 2.0},
    "dynamic": {"rope_type": "dynamic", "factor": 3.0},
    "yarn": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 16},
    "yarn-mscale": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8, "mscale": 0.707,
                    "mscale_all_dim": 1.0, "beta_fast": 16, "beta_slow": 2},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 16},
    "longrope-long": {"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 16},
    "longrope-short": {"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": LEN},
}


@pytest.mark.parametrize("partial", [1.0, 0.5])
@pytest.mark.parametrize("name", list(ROPE_CONFIGS))
def test_cache_matches_transformers(name, partial):
    from transformers import GPTNeoXConfig, LlamaConfig
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    params = dict(ROPE_CONFIGS[name], rope_theta=10000.0)
    n = int(HD * partial) // 2
    if params["rope_type"] == "longrope":
        params["short_factor"] = [1.0 + 0.1 * i for i in range(n)]
        params["long_factor"] = [1.5 + 0.3 * i for i in range(n)]
    if partial != 1.0:
        params["partial_rotary_factor"] = partial
    if params["rope_type"] == "default" and partial != 1.0:  # Llama's default ignores partial rotary
        cfg = GPTNeoXConfig(hidden_size=4 * HD, num_attention_heads=4, max_position_embeddings=MPE,
                            rope_parameters=dict(params))
        emb = GPTNeoXRotaryEmbedding(cfg)
    else:
        cfg = LlamaConfig(hidden_size=4 * HD, num_attention_heads=4, head_dim=HD, max_position_embeddings=MPE,
                          rope_parameters=dict(params))
        emb = LlamaRotaryEmbedding(cfg)
    # one forward over positions 0..LEN-1 (this is what triggers dynamic growth / the longrope switch)
    cos, sin = emb(torch.zeros(1), torch.arange(LEN)[None])

    cache = build_rope_cache(HD, LEN, rope_scaling=dict(params), max_position_embeddings=MPE)
    assert isinstance(cache, RopeCache) and cache.rotary_dim == 2 * n
    assert cache.cos.shape == (LEN, n) and cache.cos.dtype == torch.float32
    assert cache.attention_scaling == pytest.approx(emb.attention_scaling, rel=1e-12)
    want_cos, want_sin = cos[0], sin[0]
    torch.testing.assert_close(want_cos[:, :n], want_cos[:, n:])  # transformers' cat((f, f))
    torch.testing.assert_close(cache.cos, want_cos[:, :n], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(cache.sin, want_sin[:, :n], rtol=1e-6, atol=1e-6)


def test_dynamic_within_original_length_is_unscaled():
    plain = build_rope_cache(HD, MPE, base=10000.0)
    dyn = build_rope_cache(HD, MPE, rope_scaling={"rope_type": "dynamic", "factor": 4.0},
                           max_position_embeddings=MPE)
    assert torch.equal(plain.cos, dyn.cos) and torch.equal(plain.sin, dyn.sin)


# ------------------------------------------------------------------------------------------
# launcher validation, edge cases, bench wiring
# ------------------------------------------------------------------------------------------
def test_launcher_refuses_bad_input():
    cache = build_rope_cache(64, 16)
    q, k = torch.randn(1, 4, 8, 64), torch.randn(1, 2, 8, 64)
    pos = torch.arange(8)[None]
    with pytest.raises(ValueError, match="cache covers"):
        apply_rope_(q, k, cache, pos + 9)
    with pytest.raises(ValueError, match="position_ids"):
        apply_rope_(q, k, cache, torch.arange(7)[None])
    with pytest.raises(TypeError, match="integer"):
        apply_rope_(q, k, cache, pos.float())
    with pytest.raises(TypeError, match="share"):
        apply_rope_(q, k.half(), cache, pos)
    with pytest.raises(TypeError, match="share"):
        apply_rope_(q.double(), k.double(), cache, pos)
    with pytest.raises(ValueError, match="does not match"):
        apply_rope_(q, torch.randn(1, 2, 8, 32), cache, pos)
    with pytest.raises(ValueError, match="rotary_dim"):
        apply_rope_(q[..., :32], k[..., :32], cache, pos)
    with pytest.raises(ValueError, match="overlapping"):
        apply_rope_(q, torch.randn(1, 1, 8, 64).expand(1, 2, 8, 64), cache, pos)
    with pytest.raises(ValueError, match="alias"):
        apply_rope_(q, q, cache, pos)
    with pytest.raises(RuntimeError, match="no_grad"):
        apply_rope_(q.requires_grad_(), k, cache, pos)
    with pytest.raises(ValueError, match="not supported"):
        build_rope_cache(64, 16, rope_scaling={"rope_type": "su"})
    with pytest.raises(ValueError, match="even"):
        build_rope_cache(10, 16, partial_rotary_factor=0.5)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        build_rope_cache(64, 16, rope_scaling={"rope_type": "dynamic", "factor": 2.0})


def test_empty_sequence_is_a_no_op():
    cache = build_rope_cache(64, 16)
    q, k = torch.randn(2, 4, 0, 64), torch.randn(2, 2, 0, 64)
    assert apply_rope_(q, k, cache, torch.zeros(2, 0, dtype=torch.long)) == (q, k)


def test_bench_cases_ours_equals_peer():
    cases = bench_cases("cpu", dtype=torch.float32, shape=(1, 4, 2, 6, 32))
    assert len(cases) == 4
    for name, ours, peer, nbytes in cases:
        assert nbytes == 2 * (4 + 2) * 6 * 32 * 4
        want_q, want_k = peer()  # out of place: run before ours rotates the buffers
        got_q, got_k = ours()
        torch.testing.assert_close(got_q, want_q, rtol=1e-5, atol=1e-5, msg=name)
        torch.testing.assert_close(got_k, want_k, rtol=1e-5, atol=1e-5, msg=name)
