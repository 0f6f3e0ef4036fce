"""The three live kernel patches on tiny random-init Mistral, Qwen2, Qwen3 and Gemma 3 models.

Issue 10 item 8: "cover Llama, Mistral, Qwen2/3 and one Gemma-family model (sliding window →
fallback, counted)". Llama is covered by test_patches.py (fixtures/hf/tiny-random-llama). Each
model here is built by transformers from a small config (2 layers, hidden 64, fp32, CPU, no
download) under a fixed seed; the kernels run under the Triton interpreter (conftest sets
TRITON_INTERPRET=1).

Per family: ``patch()`` verifies against the unpatched model (``_core``'s probe: prefill, chunk,
decode, left/right padding); then a padded batch (row 0 left-padded, row 1 right-padded) and
``generate(max_new_tokens=3)`` of a left-padded batch match the unpatched model — causal_trim +
rope_hoist within the library's fp32 tolerance (1e-4, the same tokens), then with act_calib on top
within act_calib's (5e-2) — and every attention call is accounted for: full-attention layers on
the kernel, sliding-window layers handed back to transformers' sdpa and counted per reason
(``Patch.fallbacks()``: ``{"sliding_window": n}``), with n what the layer types imply.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from sits_doctor.fixes.kernel_patches import (  # noqa: E402
    DEFAULT_RTOL, act_calib, applied, causal_trim, patch, rope_hoist, unpatch,
)

EXACT = DEFAULT_RTOL[torch.float32]  # 1e-4
LOOSE = act_calib.RTOL[torch.float32]  # 5e-2 (dequant: per-token int8 activations)
BASE = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=128,
            pad_token_id=0, bos_token_id=1, eos_token_id=2)
WINDOW = 4  # shorter than every sequence below: the sliding layers really slide
NEW = 3  # generate(max_new_tokens=NEW): NEW forwards (prefill + NEW - 1 decode steps)


def _build(family: str):
    t = transformers
    if family == "mistral":  # Mistral-7B-v0.2/v0.3: no sliding window
        return t.MistralForCausalLM(t.MistralConfig(**BASE, sliding_window=None))
    if family == "mistral_sliding":  # Mistral-7B-v0.1: every layer sliding-window
        return t.MistralForCausalLM(t.MistralConfig(**BASE, sliding_window=WINDOW))
    if family == "qwen2":  # q/k/v biases; use_sliding_window: layers from max_window_layers slide
        return t.Qwen2ForCausalLM(t.Qwen2Config(**BASE, use_sliding_window=True, sliding_window=WINDOW,
                                                max_window_layers=1))
    if family == "qwen3":  # q/k RMSNorm before RoPE
        return t.Qwen3ForCausalLM(t.Qwen3Config(**BASE))
    if family == "gemma3":  # sliding + full layers, per-layer-type RoPE tables, query_pre_attn_scalar
        return t.Gemma3ForCausalLM(t.Gemma3TextConfig(
            **BASE, sliding_window=WINDOW, query_pre_attn_scalar=16,
            layer_types=["sliding_attention", "full_attention"]))
    raise ValueError(family)


# family -> (model_type, sliding-window layer indices the structure implies)
FAMILIES = {
    "mistral": ("mistral", []),
    "qwen2": ("qwen2", [1]),
    "qwen3": ("qwen3", []),
    "gemma3": ("gemma3_text", [0]),
}


def _fresh(family: str):
    torch.manual_seed(0)
    return _build(family).eval()


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


@pytest.fixture(scope="module")
def probe():
    """Long enough for the probe's prefill / chunk / decode split and its padded batches, and
    longer than WINDOW; short for the interpreter."""
    return torch.randint(3, 256, (1, 9), generator=torch.Generator().manual_seed(1))


def _padded_batch():
    ids = torch.randint(3, 256, (2, 10), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # left padding
    mask[1, -2:] = 0  # right padding
    ids = ids.masked_fill(mask == 0, 0)
    return ids, mask


def _prompts():
    ids = torch.randint(3, 256, (2, 8), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    mask[0, :2] = 0  # left padding, as generate() wants it
    return ids.masked_fill(mask == 0, 0), mask


@torch.no_grad()
def _forward(m, ids, mask):
    logits = m(input_ids=ids, attention_mask=mask, use_cache=False).logits
    return torch.where(mask.bool()[..., None], logits, 0.0)  # padded positions are unspecified


@torch.no_grad()
def _generate(m, ids, mask):
    out = m.generate(ids, attention_mask=mask, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False,
                     pad_token_id=0, output_logits=True, return_dict_in_generate=True)
    return out.sequences, torch.stack(out.logits)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_patched_matches_unpatched_and_counts_fallbacks(family, probe):
    model_type, sliding = FAMILIES[family]
    m = _fresh(family)
    assert m.config.model_type == model_type
    n_layers = m.config.num_hidden_layers
    assert causal_trim.sliding_layers(m) == sliding
    ids, mask = _padded_batch()
    gids, gmask = _prompts()
    ref = _forward(m, ids, mask)
    ref_seq, ref_logits = _generate(m, gids, gmask)

    exact = patch(m, ["causal_trim", "rope_hoist"], probe=probe)
    try:
        assert [p.error <= EXACT for p in exact.patches] == [True, True], [p.error for p in exact.patches]
        assert exact.fallbacks() == {"causal_trim": {}, "rope_hoist": {}}  # probes not counted
        got = _forward(m, ids, mask)
        seq, logits = _generate(m, gids, gmask)
        assert _rel(got, ref) <= EXACT, _rel(got, ref)
        assert torch.equal(seq, ref_seq), (seq, ref_seq)
        assert _rel(logits, ref_logits) <= EXACT, _rel(logits, ref_logits)

        # 1 + NEW forwards; each calls every layer's attention once
        calls = dict(exact["causal_trim"].info["calls"])
        forwards = 1 + NEW
        full = n_layers - len(sliding)
        want = {"kernel": forwards * full, "kernel:padded": forwards * full}
        if sliding:
            want["fallback:sliding_window"] = forwards * len(sliding)
        assert {k: v for k, v in calls.items() if v} == want, calls
        fb = exact["causal_trim"].fallbacks()
        assert fb == ({"sliding_window": forwards * len(sliding)} if sliding else {})
        if sliding:
            assert f"causal_trim: sliding_window: {forwards * len(sliding)} calls" in exact.fallback_report()
        assert exact["rope_hoist"].fallbacks() == {}
        types = set(getattr(m.config, "layer_types", None) or []) if family == "gemma3" else {None}
        hoisted = exact["rope_hoist"].info["hoisted_by_type"]
        assert set(hoisted) == types and all(h.calls > 0 for h in hoisted.values())

        full_set = patch(m, ["causal_trim", "rope_hoist", "act_calib"], probe=probe)
        cal = full_set["act_calib"]
        assert cal.error is not None and cal.error <= LOOSE and cal.tolerance == LOOSE
        assert full_set["causal_trim"].fallbacks() == fb  # act_calib's verification probe: not counted
        got = _forward(m, ids, mask)
        assert _rel(got, ref) <= LOOSE, _rel(got, ref)
        seq, logits = _generate(m, gids, gmask)
        assert _rel(logits[0], ref_logits[0]) <= LOOSE  # prefill step
        same = (seq[:, gids.shape[1]:] == ref_seq[:, gids.shape[1]:]).all(0).cumprod(0)
        for step in range(1, NEW):  # decode steps, while the tokens fed back agree
            if same[step - 1]:
                assert _rel(logits[step], ref_logits[step]) <= LOOSE, step
        assert full_set.fallbacks()["act_calib"] == {}
        # the same calls again: the same counts again
        assert full_set["causal_trim"].fallbacks() == {k: 2 * v for k, v in fb.items()}
    finally:
        for p in reversed(list(applied(m).values())):
            p.revert()
    assert not applied(m) and m.config._attn_implementation == "sdpa"
    assert torch.equal(_forward(m, ids, mask), ref)  # unpatched again, bit for bit


def _causal_trim_matches_unpatched(m, probe):
    """Patch ``m`` with causal_trim (verified within EXACT); the padded batch's forward and a
    generate() of the left-padded prompts then equal the unpatched model's. Returns the PatchSet,
    for the caller to inspect and unpatch (unpatched here if an assertion fails)."""
    ids, mask = _padded_batch()
    gids, gmask = _prompts()
    ref = _forward(m, ids, mask)
    ref_seq, ref_logits = _generate(m, gids, gmask)
    ps = patch(m, ["causal_trim"], probe=probe)
    try:
        assert ps["causal_trim"].error <= EXACT
        got = _forward(m, ids, mask)
        seq, logits = _generate(m, gids, gmask)
        assert _rel(got, ref) <= EXACT and torch.equal(seq, ref_seq)
        assert _rel(logits, ref_logits) <= EXACT
    except BaseException:
        unpatch(ps)
        raise
    return ps


def test_sliding_window_everywhere_falls_back_and_is_counted(probe):
    """Mistral-7B-v0.1 style (sliding_window on every layer, shorter than the sequences): causal_trim
    applies, hands every call to transformers' sdpa path and counts it; the outputs are unchanged."""
    m = _fresh("mistral_sliding")
    assert causal_trim.sliding_layers(m) == [0, 1]
    ps = _causal_trim_matches_unpatched(m, probe)
    try:
        assert ps.fallbacks() == {"causal_trim": {"sliding_window": (1 + NEW) * 2}}
        assert ps.fallback_report() == f"causal_trim: sliding_window: {(1 + NEW) * 2} calls"
        assert not ps["causal_trim"].info["calls"]["kernel"]
    finally:
        unpatch(ps)


@pytest.mark.parametrize("window", [10, 64])
def test_sliding_layers_take_the_kernel_while_the_window_holds_every_key(window, probe):
    """Mistral-7B-v0.1 style, with a window the sequences reach (10) or never reach (64): a call
    with fewer keys than the window is plain causal attention (transformers' own condition for
    skipping the sliding mask) and takes the kernel; from ``window`` keys on, transformers' sdpa
    path, counted. Outputs equal the unpatched model's either way."""
    torch.manual_seed(0)
    m = transformers.MistralForCausalLM(transformers.MistralConfig(**BASE, sliding_window=window)).eval()
    # the padded batch has 10 keys; the prompts 8, then decode steps over 9 and 10 keys; the
    # probe's 9 keys put every verification call on the kernel
    ps = _causal_trim_matches_unpatched(m, probe)
    try:
        keys = [10, 8] + [8 + i for i in range(1, NEW)]  # the forward, generate's prefill, its decode steps
        inside = sum(k < window for k in keys)
        calls = {k: v for k, v in ps["causal_trim"].info["calls"].items() if v}
        want = {"kernel": 2 * inside, "kernel:padded": 2 * inside}
        if inside < len(keys):
            want["fallback:sliding_window"] = 2 * (len(keys) - inside)
        assert calls == {k: v for k, v in want.items() if v}, (calls, want)
        assert inside == (len(keys) - 2 if window == 10 else len(keys))
    finally:
        unpatch(ps)


def test_other_layer_types_and_windows_on_families_without_them_are_refused():
    """A sliding window only falls back where the family's attention reads it per layer; a Llama
    config claiming one, or layer types the kernel has no fallback for, are refused."""
    from sits_doctor.fixes.kernel_patches import PatchRefused

    m = _fresh("qwen3")
    m.config.layer_types = ["full_attention", "chunked_attention"]
    with pytest.raises(PatchRefused, match="chunked_attention"):
        causal_trim.check(m)
    m.config.layer_types = ["full_attention", "sliding_attention"]
    causal_trim.check(m)  # sliding layers: fall back per call, no refusal
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(**BASE)).eval()
    llama.config.sliding_window = 8
    with pytest.raises(PatchRefused, match="sliding"):
        causal_trim.check(llama)
    rope_hoist.check(_fresh("gemma3"))  # per-layer-type RoPE tables: accepted


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_switched_decode_steps_match_unpatched(family, probe, monkeypatch):
    """The step switch per family, with rope_hoist beside it: on "CUDA" (the interpreter standing
    in), with the table sending decode to sdpa, generate() of left-padded prompts runs every
    decode step under transformers' own "sdpa" (sliding-window layers included) and gives the
    unpatched model's tokens and logits; the prefill stays on the patch's paths."""
    m = _fresh(family)
    n_layers = m.config.num_hidden_layers
    gids, gmask = _prompts()
    ref_seq, ref_logits = _generate(m, gids, gmask)
    ps = patch(m, ["causal_trim", "rope_hoist"], probe=probe)
    monkeypatch.setattr(causal_trim, "_on_cuda", lambda t: t is not None)
    causal_trim.set_table({("decode", False): [(2, 16, "sdpa")], ("decode", True): [(2, 16, "sdpa")],
                           ("prefill", True): [(2, 16, "kernel")]})
    names = []
    attn = next(mod for mod in m.modules() if type(mod).__name__.endswith("Attention"))
    spy = attn.register_forward_pre_hook(lambda mod, a: names.append(mod.config._attn_implementation))
    try:
        calls = ps["causal_trim"].info["calls"]
        calls.clear()
        seq, logits = _generate(m, gids, gmask)
    finally:
        spy.remove()
        causal_trim.set_table(None)
        unpatch(ps)
    assert torch.equal(seq, ref_seq), (seq, ref_seq)
    assert _rel(logits, ref_logits) <= EXACT, _rel(logits, ref_logits)
    assert names == [causal_trim.IMPL] + ["sdpa"] * (NEW - 1), names
    assert calls["sdpa:decode"] == (NEW - 1) * n_layers, dict(calls)
