"""causal_trim's padded-batch path and its per-call dispatch (CPU, Triton interpreter).

The kernel's bounds mode (``seq_bounds_q/k``) against the float64 reference per sequence on
awkward shapes (head_dim 24, GQA groups 2 and 3, lengths that are no block multiple), left and
right padding, prefill / chunk / decode and the split-K decode path; the mask function's reading
of the 2-D padding mask; the dispatch table's choices; and a patch whose bounds are wrong being
refused by the padded verification probe.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sits_doctor.kernels.attention import _attention, causal_attention, causal_attention_reference

transformers = pytest.importorskip("transformers")

from sits_doctor.fixes.kernel_patches import PatchRefused, causal_trim, patch, unpatch  # noqa: E402

CONFIG = Path(__file__).resolve().parents[2] / "fixtures" / "hf" / "tiny-random-llama" / "config.json"


def _bounds(key_runs, sq, sk):
    """[B, 2] key runs → (q bounds, k bounds) with the queries the last sq keys."""
    kb = torch.tensor(key_runs)
    off = sk - sq
    qb = torch.stack([(kb[:, 0] - off).clamp(0, sq), (kb[:, 1] - off).clamp(0, sq)], 1)
    return qb, kb


def _check(out, q, k, v, qb, kb, what):
    for b in range(q.shape[0]):
        qs, qe = qb[b].tolist()
        ks, ke = kb[b].tolist()
        if qe > qs:
            ref, _ = causal_attention_reference(q[b:b + 1, :, qs:qe], k[b:b + 1, :, ks:ke], v[b:b + 1, :, ks:ke])
            err = (out[b:b + 1, :, qs:qe].double() - ref.double()).abs().max().item()
            assert err < 2e-5, f"{what}: sequence {b} rows [{qs}, {qe}) off by {err}"
        # rows outside the bounds are zero (never written over the zeroed output)
        assert out[b, :, :qs].abs().sum() == 0 and out[b, :, qe:].abs().sum() == 0, f"{what}: padding rows written"


@pytest.mark.parametrize("hq, hk, d", [(4, 2, 16), (6, 2, 24)])
@pytest.mark.parametrize("sq, sk", [(19, 19), (3, 26), (1, 23)])
def test_bounds_match_reference_left_and_right_padding(hq, hk, d, sq, sk):
    g = torch.Generator().manual_seed(sq * 100 + sk + d)
    q = torch.randn(4, hq, sq, d, generator=g)
    k = torch.randn(4, hk, sk, d, generator=g)
    v = torch.randn(4, hk, sk, d, generator=g)
    # left padded by 5, right padded by 4 (the last query is padding when sq < 5), whole, empty
    qb, kb = _bounds([[5, sk], [0, sk - 4], [0, sk], [sk, sk]], sq, sk)
    out = causal_attention(q, k, v, seq_bounds_q=qb, seq_bounds_k=kb)
    _check(out, q, k, v, qb, kb, f"bounds sq={sq} sk={sk}")


def test_bounds_split_decode_path_and_strided_out():
    """Split-K decode (the GPU's decode kernel, forced here) and an ``out`` that is the transpose
    of a [B, Sq, Hq, D] buffer (what the patch passes)."""
    g = torch.Generator().manual_seed(7)
    q = torch.randn(3, 4, 2, 16, generator=g)
    k = torch.randn(3, 2, 45, 16, generator=g)
    v = torch.randn(3, 2, 45, 16, generator=g)
    qb, kb = _bounds([[9, 45], [0, 44], [0, 45]], 2, 45)
    out = _attention(q, k, v, seq_bounds_q=qb, seq_bounds_k=kb, num_splits=3)
    _check(out, q, k, v, qb, kb, "split decode")
    buf = torch.zeros(3, 2, 4, 16)
    causal_attention(q, k, v, seq_bounds_q=qb, seq_bounds_k=kb, out=buf.transpose(1, 2))
    _check(buf.transpose(1, 2), q, k, v, qb, kb, "strided out")


def test_bounds_validation():
    q = torch.randn(2, 2, 4, 16)
    with pytest.raises(ValueError, match="seq_bounds_q"):
        causal_attention(q, q, q, seq_bounds_q=torch.zeros(3, 2, dtype=torch.int32),
                         seq_bounds_k=torch.zeros(2, 2, dtype=torch.int32))
    with pytest.raises(ValueError, match="batched layout"):
        causal_attention(q[0].transpose(0, 1), q[0].transpose(0, 1), q[0].transpose(0, 1),
                         cu_seqlens_q=torch.tensor([0, 4]), cu_seqlens_k=torch.tensor([0, 4]),
                         seq_bounds_q=torch.zeros(1, 2, dtype=torch.int32))


def _mask(rows):
    return torch.tensor(rows, dtype=torch.bool)


def test_padding_runs_reads_the_2d_mask():
    kind, b = causal_trim.padding_runs(_mask([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0]]), q_length=5)
    assert kind == "runs"
    assert b[0].tolist() == [[2, 5], [0, 3]] and b[1].tolist() == [[2, 5], [0, 3]]
    kind, b = causal_trim.padding_runs(_mask([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]), q_length=1)  # decode
    assert kind == "runs" and b[0].tolist() == [[0, 1], [0, 1]] and b[1].tolist() == [[2, 5], [0, 5]]
    kind, b = causal_trim.padding_runs(_mask([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]), q_length=1)
    assert b[0].tolist() == [[0, 0], [0, 1]]  # the right-padded row's decode query is padding
    assert causal_trim.padding_runs(_mask([[1, 1], [1, 1]]), 2) == ("none", None)
    # right padding followed by generated tokens: not one run, materialised mask
    assert causal_trim.padding_runs(_mask([[1, 0, 1], [1, 1, 1]]), 1) == ("other", None)


def test_mask_function_answers_and_mask4d_matches_sdpa_mask():
    from transformers.masking_utils import causal_mask_function, sdpa_mask

    pad = _mask([[0, 1, 1, 1], [1, 1, 1, 1]])
    got = causal_trim.mask_function(2, 4, 4, 0, 0, attention_mask=pad)
    assert isinstance(got, causal_trim.PaddedCausal) and tuple(got.shape) == (2, 1, 4, 4)
    want = sdpa_mask(2, 4, 4, 0, 0, causal_mask_function, pad, allow_is_causal_skip=False)
    assert torch.equal(got.mask4d(), want)
    assert causal_trim.mask_function(2, 4, 4, 0, 0, attention_mask=torch.ones(2, 4, dtype=torch.bool)) is None
    other = causal_trim.mask_function(2, 1, 4, 3, 0, attention_mask=_mask([[1, 0, 1, 1], [1, 1, 1, 1]]))
    assert isinstance(other, torch.Tensor) and other.shape == (2, 1, 1, 4)


def test_dispatch_table_choices(monkeypatch):
    rows = {("prefill", True): [(2, 512, "sdpa"), (2, 2048, "kernel"), (8, 512, "kernel")],
            ("decode", False): [(1, 4096, "sdpa")]}
    causal_trim.set_table(rows)
    try:
        assert causal_trim.choose("prefill", True, 2, 600) == "sdpa"  # nearest k of batch 2: 512
        assert causal_trim.choose("prefill", True, 2, 1800) == "kernel"
        assert causal_trim.choose("prefill", True, 6, 100) == "kernel"  # nearest batch: 8
        assert causal_trim.choose("decode", False, 64, 100000) == "sdpa"
        assert causal_trim.choose("chunk", False, 1, 8192) == "sdpa"  # not measured: unpatched path
    finally:
        causal_trim.set_table(None)
    # the committed H200 table: cuDNN sdpa wins unpadded prefill and decode, the bounds path the
    # padded batch-8 prefill at 2048 and chunked prefill
    assert causal_trim.choose("prefill", False, 1, 4096) == "sdpa"
    assert causal_trim.choose("decode", False, 1, 8192) == "sdpa"
    assert causal_trim.choose("prefill", True, 8, 2048) == "kernel"
    assert causal_trim.choose("chunk", False, 1, 8192) == "kernel"
    data = json.loads(causal_trim.DISPATCH_FILE.read_text())
    assert data["device"] == "NVIDIA H200" and len(data["entries"]) >= 20


def _tiny(seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**json.loads(CONFIG.read_text()))).eval()


def test_attention_forward_padded_kernel_equals_sdpa_on_real_rows():
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    m = _tiny()
    attn = m.model.layers[0].self_attn
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, 11, 16, generator=g)
    k = torch.randn(2, 2, 11, 16, generator=g)
    v = torch.randn(2, 2, 11, 16, generator=g)
    pad = _mask([[0, 0, 0] + [1] * 8, [1] * 9 + [0, 0]])
    marker = causal_trim.mask_function(2, 11, 11, 0, 0, attention_mask=pad)
    attn.__dict__[causal_trim._POLICY_ATTR] = "kernel"
    try:
        got, _ = causal_trim.attention_forward(attn, q, k, v, marker, scaling=0.25)
    finally:
        attn.__dict__.pop(causal_trim._POLICY_ATTR)
    want, _ = sdpa_attention_forward(attn, q, k, v, marker.mask4d(), scaling=0.25)
    real = pad  # query rows are the keys here (prefill)
    err = (got[real] - want[real]).abs().max().item()
    assert err < 1e-5, err
    assert got[~real].abs().sum() == 0


def test_verification_refuses_wrong_padded_bounds(monkeypatch):
    """The padded probe is what catches a varlen path that reads the wrong keys."""
    m = _tiny(1)
    probe = torch.randint(3, 256, (1, 12), generator=torch.Generator().manual_seed(9))
    real = causal_trim.padding_runs

    def off_by_one(padding, q_length):
        kind, b = real(padding, q_length)
        if kind == "runs":
            b = (b[0], (b[1] + torch.tensor([1, 0], dtype=torch.int32)).clamp(max=padding.shape[1]))
        return kind, b

    monkeypatch.setattr(causal_trim, "padding_runs", off_by_one)
    with pytest.raises(PatchRefused, match="differ from the unpatched model"):
        patch(m, ["causal_trim"], probe=probe)
    monkeypatch.setattr(causal_trim, "padding_runs", real)
    ps = patch(m, ["causal_trim"], probe=probe)
    assert ps["causal_trim"].error < 1e-4
    unpatch(ps)


def test_rope_hoist_decode_steps_do_not_sync():
    """One position-bound read (host sync) per multi-token forward; decode steps advance the bound
    on the host, until it would leave the table."""
    m = _tiny(2)
    probe = torch.randint(3, 256, (1, 9), generator=torch.Generator().manual_seed(4))
    ps = patch(m, ["rope_hoist"], probe=probe)
    try:
        h = ps["rope_hoist"].info["hoisted"]
        before = h.syncs
        prompt = torch.randint(3, 256, (1, 7), generator=torch.Generator().manual_seed(6))
        m.generate(prompt, max_new_tokens=4, do_sample=False, pad_token_id=0)
        assert h.syncs == before + 1 and h.bound == 7 + 4 - 2  # prefill synced; 3 decode steps did not
        h.bound = h.cache.max_len - 1  # at the table's end: the next decode step reads the positions
        with torch.no_grad():
            m(input_ids=prompt[:, :1])
        assert h.syncs == before + 2 and h.bound == 0
    finally:
        unpatch(ps)


@pytest.mark.parametrize("switch", [True, False])
def test_decode_routed_to_sdpa_skips_the_padding_runs(monkeypatch, switch):
    """A decode step that the table sends to sdpa whether padded or not gets transformers' own
    mask, without the padding runs being looked for (their host sync and launches); tokens equal
    the unpatched model's. One padded decode entry on the kernel: every step reads the runs again.
    With the step switch (the default) such a step runs under transformers' own "sdpa" name, mask
    and layers alike; without it (a call the switch cannot read) the mask function builds
    transformers' mask and every layer's call goes to sdpa."""
    m = _tiny(3)
    n_layers = m.config.num_hidden_layers
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, 256, (2, 9), generator=g)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[0, :4] = 0  # row 0 left-padded by 4
    kw = dict(attention_mask=mask, max_new_tokens=5, min_new_tokens=5, do_sample=False, pad_token_id=0)
    want = m.generate(ids * mask, **kw)
    ps = patch(m, ["causal_trim"], probe=torch.randint(3, 256, (1, 12), generator=g))
    real = causal_trim.padding_runs
    seen = []
    monkeypatch.setattr(causal_trim, "padding_runs", lambda p, q: seen.append(q) or real(p, q))
    monkeypatch.setattr(causal_trim, "_on_cuda", lambda t: t is not None)  # as on the GPU
    import transformers.masking_utils as mu

    built, events = [], []
    real_sdpa_mask = mu.sdpa_mask
    monkeypatch.setattr(mu, "sdpa_mask", lambda *a, **k: built.append(1) or events.append("mask")
                        or real_sdpa_mask(*a, **k))
    attn0 = m.model.layers[0].self_attn
    hook = attn0.register_forward_pre_hook(lambda *a: events.append("layer 0 " + attn0.config._attn_implementation))
    if not switch:
        ps["causal_trim"].info["step_switch"]()
    ours = "layer 0 " + causal_trim.IMPL
    try:
        for decode_padded, runs_read in (("sdpa", [9]), ("kernel", [9, 1, 1, 1, 1])):
            causal_trim.set_table({("decode", True): [(2, 16, decode_padded)],
                                   ("decode", False): [(2, 16, "sdpa")], ("prefill", True): [(2, 16, "kernel")]})
            seen.clear()
            ps["causal_trim"].info["calls"].clear()
            got = m.generate(ids * mask, **kw)
            assert torch.equal(got, want), decode_padded
            assert seen == runs_read, decode_padded  # the prefill, then each decode step or none
            if switch:  # transformers' own steps: its registered sdpa_mask, not the module's name
                step = ["layer 0 sdpa"] if decode_padded == "sdpa" else [ours]
                assert built == [] and events == [ours] + step * 4, events
                assert m.config._attn_implementation == causal_trim.IMPL  # set back after each step
            else:  # one mask per forward, not per layer (an unpadded step's mask is None: built once too)
                assert len(built) == (4 if decode_padded == "sdpa" else 0), (decode_padded, len(built))
                if decode_padded == "sdpa":  # built in the mask function, before the step's first layer
                    assert events == [ours] + ["mask", ours] * 4, events
            built.clear()
            events.clear()
            calls = ps["causal_trim"].info["calls"]
            on_kernel = 4 * n_layers if decode_padded == "kernel" else 0
            assert calls["sdpa:decode"] == 4 * n_layers - on_kernel
            assert calls["kernel:padded"] == n_layers + on_kernel  # the padded prefill on the kernel
            assert not any(k.startswith("fallback") for k in calls)
        # the kernel policy (what verification runs) never takes the shortcut
        cfg = m.config
        assert not causal_trim.decode_routes_to_sdpa(cfg, 2, 12)  # the padded entry is on the kernel
        causal_trim.set_table({("decode", True): [(2, 16, "sdpa")], ("decode", False): [(2, 16, "sdpa")]})
        assert causal_trim.decode_routes_to_sdpa(cfg, 2, 12)
        causal_trim.set_dispatch(ps["causal_trim"], "kernel")
        assert not causal_trim.decode_routes_to_sdpa(cfg, 2, 12)
        causal_trim.set_dispatch(ps["causal_trim"], "sdpa")
        assert causal_trim.decode_routes_to_sdpa(cfg, 2, 12)
        assert not causal_trim.decode_routes_to_sdpa(None, 2, 12)
    finally:
        hook.remove()
        causal_trim.set_table(None)
        unpatch(ps)
    assert not causal_trim.decode_routes_to_sdpa(cfg, 2, 12)  # reverted: the config is forgotten


def test_step_switch_runs_routed_decode_steps_as_transformers_sdpa(monkeypatch):
    """The step switch reads one forward's arguments: a one-token step over a dynamic cache on CUDA
    that the policy sends to sdpa runs under transformers' "sdpa" name (every layer sees it, the
    layers counted as sdpa:decode), whichever name the cache keyword has (``cache`` in 5.24,
    ``past_key_values`` in 5.17); a static cache, two tokens, a CPU tensor or the kernel policy
    keep the patch's name. After the step, returned or raised, the name is the patch's again;
    unpatching removes the hooks and restores the name the model had."""
    from transformers import DynamicCache, StaticCache

    import copy

    m = _tiny(7)
    n_layers = m.config.num_hidden_layers

    class VisionAttention(torch.nn.Module):  # an attention module of another tower, on its own config
        pass

    other = VisionAttention()
    other.config = copy.deepcopy(m.config)
    other.config._attn_implementation_internal = "eager"
    m.tower = other  # never called; its config must be left alone
    base_hooks = (len(m.model._forward_pre_hooks), len(m.model._forward_hooks))
    ps = patch(m, ["causal_trim"], probe=torch.randint(3, 256, (1, 12), generator=torch.Generator().manual_seed(7)))
    monkeypatch.setattr(causal_trim, "_on_cuda", lambda t: t is not None and t.device.type == "cpu")  # as on the GPU
    causal_trim.set_table({("decode", False): [(1, 16, "sdpa")], ("decode", True): [(1, 16, "sdpa")]})
    attn0 = m.model.layers[0].self_attn
    seen = []
    spy = attn0.register_forward_pre_hook(lambda *a: seen.append(attn0.config._attn_implementation))
    calls = ps["causal_trim"].info["calls"]
    ids = torch.randint(3, 256, (1, 8), generator=torch.Generator().manual_seed(8))

    def step(cache_kw="cache", cache=None, n=1, ids_=None):
        cache = cache if cache is not None else DynamicCache(config=m.config)
        with torch.no_grad():
            m.model(input_ids=ids[:, :5], cache=cache, use_cache=True)  # the prompt (5 tokens)
            seen.clear()
            calls.clear()
            m.model(input_ids=ids_ if ids_ is not None else ids[:, 5:5 + n], **{cache_kw: cache}, use_cache=True)
        assert m.config._attn_implementation == causal_trim.IMPL  # set back after the step
        return seen[-1], calls["sdpa:decode"]

    try:
        assert step()[0] == "sdpa"  # a batch-1 step is switched, as a padded batch is
        assert other.config._attn_implementation == "eager"
        calls.clear()
        assert step("past_key_values")[0] == "sdpa"
        static = StaticCache(config=m.config, max_cache_len=16)
        assert step(cache=static) == (causal_trim.IMPL, 0)  # static: get_seq_length would sync
        assert step(n=2)[0] == causal_trim.IMPL  # a chunk, not a decode step
        assert step(ids_=ids[:, 5:6].to("meta"))[0] == causal_trim.IMPL  # not on CUDA (the spy's
        # "CPU is CUDA" does not hold for meta): the checks cannot pass, the name stays
    except NotImplementedError:  # a meta tensor cannot run the layers; the switch has decided by then
        assert seen and seen[-1] == causal_trim.IMPL
    try:
        # a 1-D input (no sequence axis) is not read as a step: the hook leaves it to the model
        pre = next(h for h in m.model._forward_pre_hooks.values() if h.__name__ == "pre_hook")
        post = next(h for h in m.model._forward_hooks.values() if h.__name__ == "restore")
        pre(m.model, (), {"input_ids": torch.tensor([5]), "cache": DynamicCache(config=m.config)})
        assert m.config._attn_implementation == causal_trim.IMPL
        post(m.model, (), None)
        # the table is read at the step's batch and key length (batch 4: sdpa; batch 1: kernel)
        causal_trim.set_table({("decode", False): [(1, 16, "kernel"), (4, 16, "sdpa")],
                               ("decode", True): [(1, 16, "kernel"), (4, 16, "sdpa")]})

        class Cache(DynamicCache):  # a dynamic cache holding n positions
            def __init__(self, n=5):
                super().__init__()
                self.n = n

            def get_seq_length(self, layer_idx=0):
                return self.n

        for batch, want in ((4, "sdpa"), (1, causal_trim.IMPL)):
            pre(m.model, (), {"input_ids": torch.ones(batch, 1, dtype=torch.long), "cache": Cache()})
            assert m.config._attn_implementation == want, batch
            post(m.model, (), None)
        # ... and at the key length the step will have, cached positions + 1 (keys 8: sdpa, 16:
        # kernel; their log-scale midpoint is 11.3: 10 cached -> 11 keys, 11 cached -> 12 keys)
        causal_trim.set_table({("decode", False): [(1, 8, "sdpa"), (1, 16, "kernel")],
                               ("decode", True): [(1, 8, "sdpa"), (1, 16, "kernel")]})
        for cached, want in ((10, "sdpa"), (11, causal_trim.IMPL)):
            pre(m.model, (), {"input_ids": torch.ones(1, 1, dtype=torch.long), "cache": Cache(cached)})
            assert m.config._attn_implementation == want, cached
            post(m.model, (), None)
        causal_trim.set_table({("decode", False): [(1, 16, "sdpa")], ("decode", True): [(1, 16, "sdpa")]})
        causal_trim.set_dispatch(ps["causal_trim"], "kernel")  # what verification runs
        assert step() == (causal_trim.IMPL, 0)
        causal_trim.set_dispatch(ps["causal_trim"], "table")
        def explode(module, args, kwargs):  # in the decode step only (the prompt runs first)
            if kwargs.get("hidden_states", args[0] if args else None).shape[1] == 1:
                raise RuntimeError("boom")

        boom = m.model.layers[1].register_forward_pre_hook(explode, with_kwargs=True)
        with pytest.raises(RuntimeError, match="boom"):
            step()
        boom.remove()
        assert seen[-1] == "sdpa" and m.config._attn_implementation == causal_trim.IMPL  # raised: set back
    finally:
        spy.remove()
        causal_trim.set_table(None)
        unpatch(ps)
    assert (len(m.model._forward_pre_hooks), len(m.model._forward_hooks)) == base_hooks
    assert m.config._attn_implementation == ps["causal_trim"].info["previous_attn_implementation"]


def test_step_switch_gives_way_to_a_forward_beside_it(monkeypatch):
    """A forward that starts while a switched step is in flight (here from inside it, as another
    thread's could) runs under the patch's name and sets it back for the switched step's remaining
    layers, which then take the per-call paths: both calls give the unpatched model's logits."""
    from transformers import DynamicCache

    m = _tiny(9)
    g = torch.Generator().manual_seed(9)
    ids, other_ids = torch.randint(3, 256, (1, 6), generator=g), torch.randint(3, 256, (1, 7), generator=g)

    def decode_step():
        cache = DynamicCache(config=m.config)
        with torch.no_grad():
            m(input_ids=ids[:, :5], cache=cache, use_cache=True)
            return m(input_ids=ids[:, 5:], cache=cache, use_cache=True).logits

    want_step = decode_step()
    with torch.no_grad():
        want_other = m(input_ids=other_ids).logits
    ps = patch(m, ["causal_trim"], probe=torch.randint(3, 256, (1, 12), generator=g))
    monkeypatch.setattr(causal_trim, "_on_cuda", lambda t: t is not None)  # as on the GPU
    causal_trim.set_table({("decode", False): [(1, 16, "sdpa")], ("decode", True): [(1, 16, "sdpa")]})
    names, other = [], []
    layers = m.model.layers

    def beside(module, args):
        if args[0].shape[1] == 1 and not other:  # layer 1 of the decode step: a prefill starts
            with torch.no_grad():
                other.append(m(input_ids=other_ids).logits)

    spies = [layers[i].self_attn.register_forward_pre_hook(
        lambda mod, a, i=i: names.append((i, a[0].shape[1] if a else None, mod.config._attn_implementation)))
        for i in range(len(layers))]
    hook = layers[1].register_forward_pre_hook(beside)
    try:
        got = decode_step()
    finally:
        hook.remove()
        for h in spies:
            h.remove()
        causal_trim.set_table(None)
        unpatch(ps)
    torch.testing.assert_close(got, want_step, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(other[0], want_other, rtol=1e-4, atol=1e-5)
    ours = causal_trim.IMPL
    step = [n for n in names if n[0] == 0 and n[2] == "sdpa"]
    assert len(step) == 1  # the decode step started switched ...
    after = names[names.index(step[0]) + 1:]
    assert after and all(n[2] == ours for n in after), names  # ... then the prefill beside it and its own rest ran as ours


def test_step_switch_waits_while_another_forward_is_in_flight(monkeypatch):
    """Two threads on one patched model: a padded prefill (its mask the patch's own object) is
    between its layers when the other thread runs a forward and then a decode step the policy
    would switch. The decode step must not switch the model's name under the prefill's remaining
    layers (they would hand that mask to transformers' sdpa); all give the unpatched logits."""
    import threading

    from transformers import DynamicCache

    m = _tiny(10)
    g = torch.Generator().manual_seed(10)
    pad_ids = torch.randint(3, 256, (2, 9), generator=g)
    pad_mask = torch.ones(2, 9, dtype=torch.long)
    pad_mask[0, :3] = 0
    ids = torch.randint(3, 256, (1, 6), generator=g)

    def prompt_cache():
        cache = DynamicCache(config=m.config)
        with torch.no_grad():
            m(input_ids=ids[:, :5], cache=cache, use_cache=True)
        return cache

    with torch.no_grad():
        want_pad = m(input_ids=pad_ids * pad_mask, attention_mask=pad_mask).logits
        want_step = m(input_ids=ids[:, 5:], cache=prompt_cache(), use_cache=True).logits
        want_first = m(input_ids=ids[:, :5]).logits
    ps = patch(m, ["causal_trim"], probe=torch.randint(3, 256, (1, 12), generator=g))
    monkeypatch.setattr(causal_trim, "_on_cuda", lambda t: t is not None)  # as on the GPU
    causal_trim.set_table({("decode", False): [(1, 16, "sdpa")], ("decode", True): [(1, 16, "sdpa")],
                           ("prefill", True): [(2, 16, "kernel")]})
    cache = prompt_cache()
    a_mid, b_in, a_done = threading.Event(), threading.Event(), threading.Event()
    out, errors = {}, []
    a_thread = []

    def a_layer1(module, args):  # the prefill, between layers 0 and 1: let the decode step start
        if threading.current_thread() is a_thread[0] and not a_mid.is_set():
            a_mid.set()
            b_in.wait(30)

    def b_layer0(module, args):  # the decode step, inside its forward: hold it until the prefill ends
        if (threading.current_thread() is not a_thread[0] and a_mid.is_set() and not b_in.is_set()
                and args and args[0].shape[1] == 1):
            b_in.set()
            a_done.wait(30)

    def run_a():
        try:
            with torch.no_grad():
                out["pad"] = m(input_ids=pad_ids * pad_mask, attention_mask=pad_mask).logits
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            a_done.set()

    def run_b():
        a_mid.wait(30)
        try:
            with torch.no_grad():
                # a whole forward first, begun and ended while the prefill is in flight: the count
                # of forwards in flight must come back to one, not zero, for the step after it
                out["first"] = m(input_ids=ids[:, :5]).logits
                out["step"] = m(input_ids=ids[:, 5:], cache=cache, use_cache=True).logits
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    hooks = [m.model.layers[1].register_forward_pre_hook(a_layer1),
             m.model.layers[0].register_forward_pre_hook(b_layer0)]
    try:
        ta, tb = threading.Thread(target=run_a), threading.Thread(target=run_b)
        a_thread.append(ta)
        ta.start()
        tb.start()
        ta.join(120)
        tb.join(120)
    finally:
        for h in hooks:
            h.remove()
        causal_trim.set_table(None)
        unpatch(ps)
    assert not errors, errors
    assert a_mid.is_set() and b_in.is_set()  # the two forwards did overlap
    torch.testing.assert_close(out["pad"][1], want_pad[1], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out["pad"][0, 3:], want_pad[0, 3:], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out["step"], want_step, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out["first"], want_first, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("switch", [True, False])
def test_unpadded_decode_to_sdpa_skips_the_checks(monkeypatch, switch):
    """Batch-1 generate on CUDA: every decode call the table sends to sdpa goes straight to
    transformers' own function (no ``_unfit`` / ``route``, once per layer per token), tokens equal
    the unpatched model's; with the decode entry on the kernel, or the "kernel" policy, or a kwarg
    the kernel cannot take, the checks run as before. With the step switch's hooks installed the
    steps sent to sdpa are switched whole (counted, none through the lean call); without them each
    call is the lean one."""
    m = _tiny(6)
    n_layers = m.config.num_hidden_layers
    ids = torch.randint(3, 256, (1, 7), generator=torch.Generator().manual_seed(6))
    kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4, do_sample=False,
              pad_token_id=0)
    want = m.generate(ids, **kw)
    ps = patch(m, ["causal_trim"], probe=torch.randint(3, 256, (1, 12), generator=torch.Generator().manual_seed(2)))
    checked = []
    real_unfit = causal_trim._unfit
    monkeypatch.setattr(causal_trim, "_unfit", lambda *a: checked.append(a[1].shape[2]) or real_unfit(*a))
    monkeypatch.setattr(causal_trim, "_on_cuda", lambda t: t is not None)  # as on the GPU
    lean, real_lean = [], causal_trim._sdpa_decode
    monkeypatch.setattr(causal_trim, "_sdpa_decode", lambda *a: lean.append(1) or real_lean(*a))
    calls = ps["causal_trim"].info["calls"]
    if not switch:
        ps["causal_trim"].info["step_switch"]()
    try:
        for decode, policy, n_checked in (("sdpa", "table", 0), ("kernel", "table", 3), ("sdpa", "kernel", 3)):
            lean.clear()
            causal_trim.set_table({("decode", False): [(1, 16, decode)], ("decode", True): [(1, 16, decode)],
                                   ("prefill", False): [(1, 16, "kernel")]})
            causal_trim.set_dispatch(ps["causal_trim"], policy)
            checked.clear()
            calls.clear()
            got = m.generate(ids, **kw)
            assert torch.equal(got, want), (decode, policy)
            decode_checks = [q for q in checked if q == 1]
            assert len(decode_checks) == n_checked * n_layers, (decode, policy, checked)
            on_sdpa = 3 * n_layers if n_checked == 0 else 0
            assert calls["sdpa:decode"] == on_sdpa, (decode, policy, dict(calls))
            # switched steps never reach this patch's function; without the switch each call is
            # the lean one (transformers' own call, without its Python)
            assert len(lean) == (0 if switch else on_sdpa)
            assert calls["kernel"] == n_layers + 3 * n_layers - on_sdpa  # the prefill on the kernel
        # one layer's call with a sliding window: the checks run and name the reason
        causal_trim.set_dispatch(ps["causal_trim"], "table")
        causal_trim.set_table({("decode", False): [(1, 16, "sdpa")]})
        attn = m.model.layers[0].self_attn
        q, k = torch.randn(1, 4, 1, 16), torch.randn(1, 2, 9, 16)
        calls.clear()
        causal_trim.attention_forward(attn, q, k, k, None, sliding_window=4)
        assert dict(calls) == {"fallback:sliding_window": 1}
        causal_trim.attention_forward(attn, q, k, k, None, sliding_window=None)  # present but unset (Mistral)
        causal_trim.attention_forward(attn, q, k, k, None)
        assert calls["sdpa:decode"] == 2 and len(calls) == 2
        # the checks did not run for those two: off CUDA route() would have taken the kernel
        monkeypatch.setattr(causal_trim, "_on_cuda", lambda t: False)  # the CPU as it is
        causal_trim.attention_forward(attn, q, k, k, None)
        assert calls["kernel"] == 1
    finally:
        causal_trim.set_table(None)
        unpatch(ps)


@pytest.mark.parametrize("hq, hk, d", [(4, 4, 16), (4, 2, 16), (8, 2, 24), (6, 3, 64)])
def test_sdpa_decode_is_transformers_own_call(hq, hk, d):
    """The unpadded decode fast path makes the call transformers' sdpa_attention_forward makes:
    bit-identical outputs (and layout) for GQA groups 1-4 and several head dims."""
    from types import SimpleNamespace

    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    g = torch.Generator().manual_seed(hq * 100 + d)
    module = SimpleNamespace(num_key_value_groups=hq // hk, is_causal=True)
    q = torch.randn(3, hq, 1, d, generator=g)
    k, v = torch.randn(3, hk, 29, d, generator=g), torch.randn(3, hk, 29, d, generator=g)
    want, _ = sdpa_attention_forward(module, q, k, v, None, scaling=0.3)
    got, none = causal_trim._sdpa_decode(module, q, k, v, 0.3)
    assert none is None and torch.equal(got, want) and got.stride() == want.stride()


def test_sdpa_decode_takes_transformers_path_only_past_head_dim_256(monkeypatch):
    """With GQA, head dims up to 256 are the lean call (transformers passes enable_gqa there); past
    256 transformers repeats K/V instead, so the call is handed to it."""
    from types import SimpleNamespace

    handed = []
    monkeypatch.setattr(causal_trim, "_sdpa_forward", lambda: lambda *a, **kw: handed.append(1) or (None, None))
    module = SimpleNamespace(num_key_value_groups=2, is_causal=True)
    for d, want in ((256, []), (264, [1])):
        handed.clear()
        q, k = torch.randn(1, 4, 1, d), torch.randn(1, 2, 5, d)
        causal_trim._sdpa_decode(module, q, k, k, 0.1)
        assert handed == want, d


def test_route_on_cuda_reads_the_table_by_phase_batch_and_keys(monkeypatch):
    """route(): the module's policy when it is not "table"; off CUDA the kernel; on CUDA the table's
    entry for the call's phase (from q and k lengths), padding, batch and key length."""
    from types import SimpleNamespace

    module = SimpleNamespace(is_causal=True)
    causal_trim.set_table({("prefill", False): [(2, 64, "kernel")], ("chunk", False): [(2, 64, "sdpa")],
                           ("decode", False): [(2, 64, "kernel")], ("decode", True): [(2, 64, "sdpa")],
                           ("prefill", True): [(8, 64, "kernel"), (2, 64, "sdpa")]})
    try:
        q = lambda b, n: torch.empty(b, 4, n, 16)  # noqa: E731
        k = lambda b, n: torch.empty(b, 2, n, 16)  # noqa: E731
        assert causal_trim.route(module, q(2, 1), k(2, 64), False) == "kernel"  # off CUDA
        monkeypatch.setattr(causal_trim, "_on_cuda", lambda t: t is not None)
        assert causal_trim.route(module, q(2, 64), k(2, 64), False) == "kernel"  # prefill
        assert causal_trim.route(module, q(2, 3), k(2, 64), False) == "sdpa"  # chunk
        assert causal_trim.route(module, q(2, 1), k(2, 64), False) == "kernel"  # decode
        assert causal_trim.route(module, q(2, 1), k(2, 64), True) == "sdpa"  # decode, padded
        assert causal_trim.route(module, q(8, 64), k(8, 64), True) == "kernel"  # batch 8's entry
        assert causal_trim.route(module, q(2, 64), k(2, 64), True) == "sdpa"  # batch 2's entry
        causal_trim.set_table({("decode", False): [(1, 64, "kernel"), (2, 64, "sdpa")]})
        assert causal_trim.route(module, q(1, 1), k(1, 64), False) == "kernel"  # batch 1 is its own entry
        assert causal_trim.route(module, q(2, 1), k(2, 64), False) == "sdpa"
        module.__dict__[causal_trim._POLICY_ATTR] = "sdpa"
        assert causal_trim.route(module, q(2, 64), k(2, 64), False) == "sdpa"
    finally:
        causal_trim.set_table(None)


def test_routed_decode_takes_the_lean_call_only_without_a_mask(monkeypatch):
    """A routed decode step (the mask function sent it to sdpa): with no mask to apply (sdpa_mask
    skipped it) and nothing the lean call leaves out, the lean call; a real mask, a softcap, asked-for
    attention weights, dropout or a position bias go to transformers' own function. Same values."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    m = _tiny(7)
    attn = m.model.layers[0].self_attn
    g = torch.Generator().manual_seed(4)
    q, k = torch.randn(2, 4, 1, 16, generator=g), torch.randn(2, 2, 9, 16, generator=g)
    lean, full = [], []
    real_lean = causal_trim._sdpa_decode
    monkeypatch.setattr(causal_trim, "_sdpa_decode", lambda *a: lean.append(1) or real_lean(*a))
    monkeypatch.setattr(causal_trim, "_sdpa_forward", lambda: lambda *a, **kw: full.append(sorted(kw)) or
                        sdpa_attention_forward(*a, **kw))
    monkeypatch.setattr(causal_trim, "_on_cuda", lambda t: t is not None)  # as on the GPU
    routed = lambda mask: causal_trim.PaddedCausal(None, None, (2, 1, 1, 9), lambda: mask, routed=True)  # noqa: E731
    want, _ = sdpa_attention_forward(attn, q, k, k, None, scaling=0.25)
    got, _ = causal_trim.attention_forward(attn, q, k, k, routed(None), scaling=0.25)
    assert torch.equal(got, want) and len(lean) == 1 and full == []
    mask = torch.ones(2, 1, 1, 9, dtype=torch.bool)
    mask[0, ..., :3] = False
    got, _ = causal_trim.attention_forward(attn, q, k, k, routed(mask), scaling=0.25)
    assert torch.equal(got, sdpa_attention_forward(attn, q, k, k, mask, scaling=0.25)[0]) and len(lean) == 1
    for extra in ({"output_attentions": True}, {"position_bias": torch.zeros(2, 4, 1, 9)}, {"dropout": 0.1}):
        causal_trim.attention_forward(attn, q, k, k, routed(None), scaling=0.25, **extra)
    assert len(lean) == 1 and len(full) == 4
    assert not causal_trim._lean_decode_ok(q, 0.0, {"softcap": 30.0})
    assert not causal_trim._lean_decode_ok(q, 0.0, {"sinks": torch.zeros(4)})
    assert not causal_trim._lean_decode_ok(torch.randn(2, 4, 3, 16), 0.0, {})  # not a decode call
    assert causal_trim._lean_decode_ok(q, 0.0, {"sliding_window": 4096})  # the mask carries the window


def test_mask_function_reads_the_padding_of_the_keys_it_is_asked_about():
    """A 2-D padding mask longer than the keys (keys from an offset: transformers pads a short mask
    but does not cut a long one) is read from kv_offset on: the runs are those of the asked keys."""
    mask = torch.ones(2, 12, dtype=torch.bool)
    mask[0, 3:5] = False  # padding at keys 3 and 4, i.e. the first two of keys [3, 12)
    mask[1, :3] = False  # padding only before the offset: none among the asked keys
    got = causal_trim.mask_function(2, 9, 9, q_offset=3, kv_offset=3, attention_mask=mask)
    assert isinstance(got, causal_trim.PaddedCausal)
    assert got.bounds_k.tolist() == [[2, 9], [0, 9]] and got.bounds_q.tolist() == [[2, 9], [0, 9]]


def test_routed_mask_is_built_once_even_when_none():
    """sdpa_mask answers None when it can skip the mask (no padding at decode); the next layer of the
    same forward must not build it again (a host sync each time on the GPU)."""
    builds = []
    marker = causal_trim.PaddedCausal(None, None, (1, 1, 1, 9), lambda: builds.append(1))
    assert marker.ndim == 4 and marker.shape == (1, 1, 1, 9)  # describes the mask without building it
    assert builds == []
    assert marker.mask4d() is None and marker.mask4d() is None
    assert builds == [1]


@torch.no_grad()
def _prefill_chunk_decode(m, ids):
    """Logits of a prefill of all but the last 4 tokens, a 3-token chunk over that cache (q < k:
    bottom-right) and one decode token."""
    from transformers import DynamicCache

    cache = DynamicCache(config=m.config)
    outs = [m(input_ids=ids[:, :-4], past_key_values=cache, use_cache=True).logits]
    outs.append(m(input_ids=ids[:, -4:-1], past_key_values=cache, use_cache=True).logits)
    outs.append(m(input_ids=ids[:, -1:], past_key_values=cache, use_cache=True).logits)
    return torch.cat(outs, 1)


def test_sdpa_policy_counts_each_phase_and_keeps_chunks_bottom_right(monkeypatch):
    """Routed to sdpa (the policy every unmeasured GPU shape takes), a prefill, a chunk and a decode
    step are counted per phase, and the chunk gets the bottom-right mask it needs (sdpa's own
    is_causal is top-left aligned) while the prefill and the decode step get none: logits equal
    the unpatched model's."""
    m = _tiny(4)
    ids = torch.randint(3, 256, (1, 14), generator=torch.Generator().manual_seed(8))
    want = _prefill_chunk_decode(m, ids)
    ps = patch(m, ["causal_trim"], probe=torch.randint(3, 256, (1, 12), generator=torch.Generator().manual_seed(9)))
    real, masks = causal_trim._sdpa_forward(), []
    monkeypatch.setattr(causal_trim, "_sdpa_forward", lambda: lambda mod, q, k, v, mask, **kw: masks.append(
        (q.shape[2], None if mask is None else tuple(mask.shape))) or real(mod, q, k, v, mask, **kw))
    try:
        causal_trim.set_dispatch(ps["causal_trim"], "sdpa")
        before = dict(causal_trim.STATS)
        got = _prefill_chunk_decode(m, ids)
        n_layers = m.config.num_hidden_layers
        assert masks == [(10, None)] * n_layers + [(3, (1, 1, 3, 13))] * n_layers + [(1, None)] * n_layers
        assert (got - want).abs().max() < 1e-5
        n = m.config.num_hidden_layers
        calls = {k: v for k, v in ps["causal_trim"].info["calls"].items() if v}
        assert calls == {"sdpa:prefill": n, "sdpa:chunk": n, "sdpa:decode": n}, calls
        # the process-wide counters moved by the same amounts
        assert {k: causal_trim.STATS[k] - before.get(k, 0) for k in calls} == calls
    finally:
        unpatch(ps)
    assert causal_trim.phase_of(1, 9) == "decode" and causal_trim.phase_of(9, 9) == "prefill"
    assert causal_trim.phase_of(3, 9) == "chunk"


def test_unfit_names_each_reason_a_call_cannot_take_the_kernel():
    """Every reason ``_unfit`` gives, one call each (the fallback counters report these names)."""
    from types import SimpleNamespace

    causal, acausal = SimpleNamespace(is_causal=True), SimpleNamespace(is_causal=False)
    q, k = torch.randn(1, 2, 4, 16), torch.randn(1, 1, 9, 16)

    def why(module=causal, query=q, key=k, value=k, mask=None, dropout=0.0, is_causal=None, **kw):
        return causal_trim._unfit(module, query, key, value, mask, dropout, is_causal, kw)

    assert why() is None
    assert why(sliding_window=9) == "sliding_window" and why(sliding_window=10) is None  # 9 keys
    assert why(softcap=30.0) == "softcap" and why(sinks=torch.zeros(2)) == "sinks"
    assert why(mask=torch.ones(1, 1, 4, 9, dtype=torch.bool)) == "mask"
    assert why(dropout=0.1) == "dropout"
    assert why(module=acausal) == "non_causal" and why(is_causal=False) == "non_causal"
    assert why(query=q[0]) == "layout"
    assert why(query=torch.randn(1, 2, 10, 16)) == "q_longer_than_k"
    assert why(query=torch.randn(1, 2, 4, 8)) == "head_dim"
    wide = torch.randn(1, 1, 9, 256)  # the kernel's largest head dim fits; one more does not
    assert why(query=torch.randn(1, 2, 4, 256), key=wide, value=wide) is None
    wider = torch.randn(1, 1, 9, 257)
    assert why(query=torch.randn(1, 2, 4, 257), key=wider, value=wider) == "head_dim"
    assert why(query=q.to(torch.float64), key=k.to(torch.float64), value=k.to(torch.float64)) == "dtype"
    with torch.enable_grad():
        assert why(query=q.clone().requires_grad_()) == "autograd"
