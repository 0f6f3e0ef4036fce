"""Live kernel patches on a tiny random-init Llama (fixtures/hf/tiny-random-llama, fp32, CPU).

No download: the model is ``LlamaForCausalLM(LlamaConfig(**config.json))`` under a fixed seed.
Kernels run under the Triton interpreter (conftest sets TRITON_INTERPRET=1), which is slow per
program, so the verification probe here is one short sequence (21 tokens: two query blocks, not a
block multiple) instead of the default [2, 37].

Tolerances (max |patched − unpatched| / max |unpatched| over the logits): causal_trim and
rope_hoist 1e-4 (fp32); act_calib 5e-2 (int8 per-token activations: it changes numerics).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.masking_utils import AttentionMaskInterface  # noqa: E402
from transformers.modeling_utils import AttentionInterface  # noqa: E402

from sits_doctor.fixes.kernel_patches import (  # noqa: E402
    PatchRefused, act_calib, applied, causal_trim, patch, rope_hoist, run_probe, unpatch,
)

CONFIG = Path(__file__).resolve().parents[2] / "fixtures" / "hf" / "tiny-random-llama" / "config.json"
EXACT = 1e-4
LOOSE = act_calib.RTOL[torch.float32]
ALL = ["causal_trim", "rope_hoist", "act_calib"]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = LlamaForCausalLM(LlamaConfig(**json.loads(CONFIG.read_text()))).eval()
    yield m
    for p in applied(m).values():
        p.revert()


@pytest.fixture(scope="module")
def probe():
    return torch.randint(0, 256, (1, 21), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def short_probe():
    """Enough for the prefill / chunk / decode split, and cheap under the interpreter."""
    return torch.randint(0, 256, (1, 9), generator=torch.Generator().manual_seed(4))


@pytest.fixture(scope="module")
def inputs():
    return torch.randint(0, 256, (2, 23), generator=torch.Generator().manual_seed(2))


def _snapshot(m):
    """Everything a patch may touch, to compare before / after."""
    mod = sys.modules[type(m.model.layers[0].self_attn).__module__]
    return {
        "attn": m.config._attn_implementation,
        "rope_fn": mod.apply_rotary_pos_emb,
        "rotary_forward": "forward" in m.model.rotary_emb.__dict__,
        "linear_forwards": sorted(n for n, x in m.named_modules() if "forward" in x.__dict__),
        "registry": "_sits_kernel_patches" in m.__dict__,
        "attn_iface": "sits_causal_trim" in AttentionInterface._global_mapping,
        "mask_iface": "sits_causal_trim" in AttentionMaskInterface._global_mapping,
    }


@torch.no_grad()
def _logits(m, ids):
    return m(input_ids=ids, use_cache=False).logits


def test_all_three_match_unpatched_and_unpatch_restores(model, probe, inputs):
    before = _snapshot(model)
    ref = _logits(model, inputs)

    exact = patch(model, ["causal_trim", "rope_hoist"], probe=probe)
    assert [p.error <= EXACT for p in exact.patches] == [True, True], [p.error for p in exact.patches]
    kernel_calls = causal_trim.STATS["kernel"]
    hoisted = exact["rope_hoist"].info["hoisted"]
    rope_calls = hoisted.calls
    got = _logits(model, inputs)
    assert causal_trim.STATS["kernel"] > kernel_calls and hoisted.calls > rope_calls  # the kernels ran
    assert _rel(got, ref) <= EXACT, _rel(got, ref)

    full = patch(model, ALL, probe=probe)  # the first two are already active: returned as they are
    assert full["causal_trim"] is exact["causal_trim"] and full["rope_hoist"] is exact["rope_hoist"]
    cal = full["act_calib"]
    assert cal.error is not None and cal.error <= LOOSE and cal.tolerance == LOOSE
    assert cal.info["mode"] == "dequant"
    assert all(c.batches == 0 for c in cal.info["calibrators"].values())  # reset after verification
    got = _logits(model, inputs)
    assert 0 < _rel(got, ref) <= LOOSE, _rel(got, ref)
    layers = [n for n, x in model.named_modules() if (".mlp." in n or ".self_attn." in n)
              and isinstance(x, torch.nn.Linear)]
    assert sorted(cal.info["calibrators"]) == sorted(layers) and len(layers) == 14
    # q/k/v and gate/up share one input: one calibrator (one quantization) per group
    assert len({id(c) for c in cal.info["calibrators"].values()}) == 8
    rows = act_calib.summary(cal)
    assert all(r["batches"] == 1 and r["running_absmax"] > 0 for r in rows), rows

    state, calls = _snapshot(model), causal_trim.STATS["kernel"]
    again = patch(model, ALL, probe=probe)  # patching twice is a no-op: same patches, no probe run
    assert [a is b for a, b in zip(again.patches, full.patches)] == [True, True, True]
    assert rope_hoist.apply(model) is full["rope_hoist"]
    assert causal_trim.STATS["kernel"] == calls and _snapshot(model) == state

    unpatch(full)
    assert _snapshot(model) == before
    assert torch.equal(_logits(model, inputs), ref)  # bit for bit
    unpatch(full)  # twice: nothing left to do
    assert _snapshot(model) == before


def test_verification_refusal_rolls_back(model, short_probe):
    probe = short_probe
    before = _snapshot(model)
    ref = run_probe(model, probe)
    # act_calib cannot meet an fp32-exact tolerance: refused with the measured error, and
    # strict mode also reverts causal_trim, applied earlier in the same call.
    with pytest.raises(PatchRefused) as info:
        patch(model, ["causal_trim", "act_calib"], probe=probe, rtol=1e-6)
    assert info.value.name == "act_calib" and info.value.error > 1e-6
    assert "differ from the unpatched model" in str(info.value)
    assert _snapshot(model) == before
    assert torch.equal(run_probe(model, probe), ref)


@pytest.mark.parametrize(
    "name, change, reason",
    [
        ("causal_trim", {"sliding_window": 8}, "sliding"),
        ("causal_trim", {"attn_logit_softcapping": 30.0}, "softcapping"),
        ("causal_trim", {"is_causal": False}, "is_causal is False"),
        ("causal_trim", {"model_type": "gpt2"}, "model_type"),
        # an explicit head_dim wins over hidden_size / heads (the fixture's is 16 either way)
        ("causal_trim", {"head_dim": 320}, "head_dim 320 > 256"),
        ("rope_hoist", {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}},
         "dynamic"),
        ("act_calib", {}, "training"),
    ],
)
def test_structural_refusal_leaves_model_untouched(model, name, change, reason):
    before = _snapshot(model)
    saved = {k: model.config.__dict__.get(k, None) for k in change}
    try:
        for k, v in change.items():
            setattr(model.config, k, v)
        if not change:
            model.train()
        with pytest.raises(PatchRefused, match=reason):
            patch(model, [name])
    finally:
        model.eval()
        for k, v in saved.items():
            if v is None and k in model.config.__dict__:
                delattr(model.config, k)
            elif v is not None:
                setattr(model.config, k, v)
    assert _snapshot(model) == before


@pytest.mark.parametrize("name", ["causal_trim", "rope_hoist", "act_calib"])
def test_cpu_model_refused_without_the_interpreter(model, name, monkeypatch):
    """Triton runs on the CPU only under TRITON_INTERPRET=1: without it, a CPU model is refused
    before anything is installed (with it, as in every other test here, the same model patches)."""
    before = _snapshot(model)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(PatchRefused, match="on the CPU"):
        patch(model, [name])
    assert _snapshot(model) == before


def test_generate_with_kv_cache_same_tokens(model, short_probe):
    probe = short_probe
    torch.manual_seed(3)
    prompt = torch.randint(3, 256, (1, 9))
    # left-padded batch: attention takes the kernel's padded path (bounds from the 2-D mask)
    padded = torch.cat([torch.tensor([[0, 0, 0] + torch.randint(3, 256, (6,)).tolist()]), prompt])
    mask = torch.ones_like(padded)
    mask[0, :3] = 0
    kw = dict(max_new_tokens=5, do_sample=False, pad_token_id=0)
    want = model.generate(prompt, **kw)
    want_pad = model.generate(padded, attention_mask=mask, **kw)

    ps = patch(model, ["causal_trim", "rope_hoist"], probe=probe)
    calls, padded_calls = causal_trim.STATS["kernel"], causal_trim.STATS["kernel:padded"]
    got = model.generate(prompt, **kw)
    assert causal_trim.STATS["kernel"] >= calls + 2 * 5  # prefill + decode steps, 2 layers
    got_pad = model.generate(padded, attention_mask=mask, **kw)
    assert causal_trim.STATS["kernel:padded"] >= padded_calls + 2 * 5
    unpatch(ps)
    assert torch.equal(got, want), (got, want)
    assert torch.equal(got_pad, want_pad), (got_pad, want_pad)


def _fresh(seed: int, config=None):
    torch.manual_seed(seed)
    return LlamaForCausalLM(config or LlamaConfig(**json.loads(CONFIG.read_text()))).eval()


def test_fallback_on_a_chunk_keeps_bottom_right_alignment(short_probe):
    """A chunk over a cache that must fall back to sdpa (here: inputs that need gradients) gets
    an explicit bottom-right mask: sdpa's own is_causal would be top-left aligned."""
    m = _fresh(3)
    ids = torch.randint(3, 256, (1, 12), generator=torch.Generator().manual_seed(5))

    def chunk_logits():
        with torch.no_grad():
            out = m(input_ids=ids[:, :9], use_cache=True)
        emb = m.model.embed_tokens(ids[:, 9:]).detach().requires_grad_()
        return m(inputs_embeds=emb, past_key_values=out.past_key_values, use_cache=True).logits.detach()

    ref = chunk_logits()
    ps = patch(m, ["causal_trim"], probe=short_probe)
    before = causal_trim.STATS["fallback:autograd"]
    got = chunk_logits()
    unpatch(ps)
    assert causal_trim.STATS["fallback:autograd"] > before
    assert _rel(got, ref) < EXACT


def test_a_model_sharing_the_config_object_is_not_switched(short_probe):
    config = LlamaConfig(**json.loads(CONFIG.read_text()))
    a, b = _fresh(0, config), _fresh(1, config)
    assert a.config is b.config
    ps = patch(a, ["causal_trim"], probe=short_probe)
    try:
        assert b.config._attn_implementation != causal_trim.IMPL
        assert a.config._attn_implementation == causal_trim.IMPL
    finally:
        unpatch(ps)
    assert a.config is config and b.config._attn_implementation == config._attn_implementation


def test_the_attention_registration_outlives_every_model_but_the_last(short_probe):
    """causal_trim's attention and mask functions are registered once for all patched models: the
    first unpatch leaves them for the model still patched, the last one removes them."""
    a, b = _fresh(0), _fresh(1)
    before = (causal_trim.IMPL in AttentionInterface._global_mapping,
              causal_trim.IMPL in AttentionMaskInterface._global_mapping)  # another test's model may hold it
    refs = causal_trim._registered["refs"]  # the holders before this test (the same reason)
    pa = patch(a, ["causal_trim"], probe=short_probe)
    pb = patch(b, ["causal_trim"], probe=short_probe)
    assert causal_trim._registered["refs"] == refs + 2
    unpatch(pa)
    assert causal_trim._registered["refs"] == refs + 1
    assert causal_trim.IMPL in AttentionInterface._global_mapping
    assert causal_trim.IMPL in AttentionMaskInterface._global_mapping
    with torch.no_grad():
        b(input_ids=short_probe)  # still runs through the registered functions
    unpatch(pb)
    assert causal_trim._registered["refs"] == refs
    assert (causal_trim.IMPL in AttentionInterface._global_mapping,
            causal_trim.IMPL in AttentionMaskInterface._global_mapping) == before


def test_act_calib_keeps_gradients_when_training_after_patching(short_probe):
    m, ref_model = _fresh(2), _fresh(2)
    ids = torch.randint(3, 256, (1, 10), generator=torch.Generator().manual_seed(6))
    ps = patch(m, ["act_calib"], probe=short_probe)
    try:
        for net in (m, ref_model):
            net.train()
            net(input_ids=ids, labels=ids).loss.backward()
        for (name, p), (_, p_ref) in zip(m.named_parameters(), ref_model.named_parameters()):
            assert p.grad is not None, name
            assert torch.allclose(p.grad, p_ref.grad, rtol=1e-4, atol=1e-6), name
    finally:
        m.eval()
        unpatch(ps)


def test_causal_trim_accepts_head_dim_256(model):
    """256 is the kernel's largest head dim: check() lets it through (257 and up are refused above)."""
    saved = model.config.__dict__.get("head_dim")
    try:
        model.config.head_dim = 256
        causal_trim.check(model)  # no PatchRefused
        model.config.head_dim = 257
        with pytest.raises(PatchRefused, match="head_dim 257 > 256"):
            causal_trim.check(model)
    finally:
        if saved is None:
            model.config.__dict__.pop("head_dim", None)
        else:
            model.config.head_dim = saved
