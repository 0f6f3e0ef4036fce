"""act_calib's ``fuse_norm``: the decoder layers' RMSNorms quantize for the projections that read them.

CPU, Triton interpreter (conftest sets TRITON_INTERPRET=1), tiny random fp32 models built by
transformers from small configs, no download. What is checked: where the fusion applies (Llama-style
norms feeding q|k|v and gate|up; not Gemma's ``1 + weight`` norm, not the dequant mode), that the
fused model computes what the unfused act_calib computes, that every fused quantization is used by
the group it was made for and counted, that anything else (static scales, fewer rows than
``min_rows``, a norm output changed in place before the projection reads it, inputs that need
gradients, empty inputs, a norm whose readers are not one target group) takes the unfused path,
and that revert restores the norms.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from sits_doctor.fixes.kernel_patches import act_calib, patch, unpatch  # noqa: E402

CONFIG = Path(__file__).resolve().parents[2] / "fixtures" / "hf" / "tiny-random-llama" / "config.json"
BASE = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=128,
            pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**json.loads(CONFIG.read_text()))).eval()


def _ids(seed=1, shape=(2, 7)):
    return torch.randint(3, 256, shape, generator=torch.Generator().manual_seed(seed))


def _rel(a, b):
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def _logits(m, ids):
    with torch.no_grad():
        return m(input_ids=ids).logits


PROBE = torch.randint(3, 256, (1, 9), generator=torch.Generator().manual_seed(9))  # short: the interpreter


def _run(m, fuse, **opts):
    """act_calib int8 on ``m``; ``fuse`` None leaves ``fuse_norm`` at its default."""
    opts = {"mode": "int8", **opts, **({} if fuse is None else {"fuse_norm": fuse})}
    ps = patch(m, ["act_calib"], probe=PROBE, options={"act_calib": opts})
    return ps, ps["act_calib"]


def test_fused_norms_compute_what_unfused_act_calib_computes_and_are_counted():
    m = _llama()
    ids = _ids()
    n_layers = m.config.num_hidden_layers
    ps, p = _run(m, False)
    want = _logits(m, ids)
    assert p.info["fused_norms"] == []
    unpatch(ps)
    ps, p = _run(m, None)  # the default fuses
    try:
        assert p.error is not None and p.error <= p.tolerance
        assert p.info["fused_norms"] == [f"model.layers.{i}.{n}" for i in range(n_layers)
                                         for n in ("input_layernorm", "post_attention_layernorm")]
        got = _logits(m, ids)
        # the same quantized products; the activation is quantized from the fp32 norm instead of
        # its rounding to the model dtype (fp32 here: a few ulps)
        assert _rel(got, want) < 1e-5, _rel(got, want)
        fused = p.info["_state"]["fused_norm"]
        assert sum(fused.values()) == 2 * n_layers  # one forward: each norm's quantization used once
        assert set(fused) == {f"model.layers.{i}.{g}" for i in range(n_layers)
                              for g in ("self_attn.q_proj", "mlp.gate_proj")}
        # generate: prefill and decode steps (min_rows 0 on the CPU: every call quantized)
        seq = m.generate(ids, max_new_tokens=2, min_new_tokens=2, do_sample=False, pad_token_id=0)
        assert sum(fused.values()) == 2 * n_layers * (1 + 2)
    finally:
        unpatch(ps)
    norm = m.model.layers[0].input_layernorm
    assert "forward" not in norm.__dict__  # reverted
    ps, p = _run(m, False)
    try:
        assert torch.equal(seq, m.generate(ids, max_new_tokens=2, min_new_tokens=2, do_sample=False,
                                           pad_token_id=0))
    finally:
        unpatch(ps)


def test_static_scales_few_rows_and_changed_outputs_take_the_unfused_path():
    m = _llama()
    ids = _ids()
    ps, p = _run(m, True)
    try:
        fused = p.info["_state"]["fused_norm"]
        groups = {g.names[0]: g for g in p.info["_groups"]}
        qkv = groups["model.layers.0.self_attn.q_proj"]
        # fewer rows than min_rows: the norm's own forward, the group's own quantization
        for g in groups.values():
            g.min_rows = 10 ** 6
        before = sum(fused.values())
        _logits(m, ids)
        assert sum(fused.values()) == before
        for g in groups.values():
            g.min_rows = 0
        _logits(m, ids)  # every group quantizes (and calibrates) once
        n0 = fused[qkv.names[0]]
        # a norm output changed in place before the projection reads it: quantized afresh
        layer = m.model.layers[0]
        x = torch.randn(1, 5, m.config.hidden_size, generator=torch.Generator().manual_seed(3))
        with torch.no_grad():
            y = layer.input_layernorm(x)
            assert qkv.pre is not None and qkv.pre[0] is y
            y.mul_(2)
            got = layer.self_attn.q_proj(y)
            assert qkv.pre is None  # the stale pair is dropped, not kept for a later call
            again = layer.self_attn.q_proj(y.clone())
        assert torch.equal(got, again)
        assert fused[qkv.names[0]] == n0
        # static scales: per-tensor quantization, which the fused (per-token) kernel does not do
        act_calib.freeze_static(p)
        before = sum(fused.values())
        static_fused = _logits(m, ids)
        assert sum(fused.values()) == before
        # the same scales without the norms' fused forward: the same logits, bit for bit
        norms = [m.get_submodule(n) for n in p.info["fused_norms"]]
        forwards = [n.__dict__.pop("forward") for n in norms]
        try:
            assert torch.equal(static_fused, _logits(m, ids))
        finally:
            for n, f in zip(norms, forwards):
                n.__dict__["forward"] = f
    finally:
        unpatch(ps)


def test_inputs_needing_gradients_and_empty_inputs_take_the_norms_own_forward():
    m = _llama()
    ps, p = _run(m, None)
    try:
        qkv = {g.names[0]: g for g in p.info["_groups"]}["model.layers.0.self_attn.q_proj"]
        norm = m.model.layers[0].input_layernorm
        x = torch.randn(1, 5, m.config.hidden_size, generator=torch.Generator().manual_seed(4))
        xg = x.clone().requires_grad_()

        def fused(t, grad):
            qkv.pre = None
            with torch.set_grad_enabled(grad):
                y = norm(t)
            return qkv.pre is not None and qkv.pre[0] is y

        assert fused(x, grad=True)  # autograd on, but nothing to differentiate
        assert fused(xg, grad=False)  # a leaf that wants gradients, under no_grad
        assert not fused(xg, grad=True)
        assert norm(xg).requires_grad  # the own forward keeps the graph
        assert not fused(x[:, :0], grad=False)
    finally:
        unpatch(ps)


def test_a_norm_whose_readers_are_not_one_target_group_keeps_its_forward():
    m = _llama()
    ids = _ids()
    post = [f"model.layers.{i}.post_attention_layernorm" for i in range(m.config.num_hidden_layers)]
    # only the MLP projections are targets: q/k/v read the input_layernorm unquantized
    # q and k are targets, v is not: the q|k group is not everything the input_layernorm feeds
    for targets in (act_calib.MLP_TARGETS, r"(^|\.)(self_attn\.(q|k)_proj|mlp\.(gate|up|down)_proj)$"):
        ps, p = _run(m, None, targets=targets)
        try:
            assert p.info["fused_norms"] == post
            _logits(m, ids)
            assert set(p.info["_state"]["fused_norm"]) == {f"model.layers.{i}.mlp.gate_proj"
                                                           for i in range(m.config.num_hidden_layers)}
        finally:
            unpatch(ps)


@pytest.mark.parametrize("family, applies", [("qwen3", True), ("mistral", True), ("gemma3", False)])
def test_where_the_fusion_applies(family, applies):
    t = transformers
    torch.manual_seed(0)
    if family == "qwen3":  # q/k RMSNorm inside the attention; the layer norms still feed q|k|v
        m = t.Qwen3ForCausalLM(t.Qwen3Config(**BASE))
    elif family == "mistral":
        m = t.MistralForCausalLM(t.MistralConfig(**BASE, sliding_window=None))
    else:  # Gemma 3: norms scale by 1 + weight, and post_attention_layernorm reads the attention output
        m = t.Gemma3ForCausalLM(t.Gemma3TextConfig(**BASE, sliding_window=4, query_pre_attn_scalar=16,
                                                   layer_types=["sliding_attention", "full_attention"]))
    m.eval()
    ids = _ids(2, (1, 9))
    ps, p = _run(m, False)
    want = _logits(m, ids)
    unpatch(ps)
    ps, p = _run(m, True)
    try:
        assert bool(p.info["fused_norms"]) is applies
        got = _logits(m, ids)
        assert _rel(got, want) < 1e-5
        assert (sum(p.info["_state"]["fused_norm"].values()) > 0) is applies
    finally:
        unpatch(ps)


def test_dequant_mode_and_a_changed_norm_formula_are_left_alone():
    m = _llama()
    ps = patch(m, ["act_calib"], options={"act_calib": {"mode": "dequant", "fuse_norm": True}})
    try:
        assert ps["act_calib"].info["fused_norms"] == []
    finally:
        unpatch(ps)
    norm = m.model.layers[0].input_layernorm
    assert act_calib._is_llama_rms_norm(norm, m.config.hidden_size)
    assert not act_calib._is_llama_rms_norm(norm, m.config.hidden_size + 1)
    with torch.no_grad():
        norm.weight.add_(1.0)
    assert act_calib._is_llama_rms_norm(norm, m.config.hidden_size)  # still the formula, other weight
    norm.__dict__["forward"] = lambda x: norm.weight * x  # not an RMSNorm any more
    try:
        assert not act_calib._is_llama_rms_norm(norm, m.config.hidden_size)
    finally:
        del norm.__dict__["forward"]
