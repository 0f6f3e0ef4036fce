"""TensorRT-LLM's KV pool (sits_doctor/frameworks/trtllm_memory.py): the fraction of *free*
memory, the max_tokens minimum, the rounding to blocks, the window shrink and its messages, the
version cut-offs. Expected numbers are derived here from the formulas TRT-LLM uses, never
copied from the module's output."""

from __future__ import annotations

import math

import pytest

from sits_doctor.frameworks import trtllm_memory as tm

GIB = 2**30
KV = 512 * 1024  # Llama-2-7B fp16: 2 · 32 heads · 128 · 2 B · 32 layers


def _pool(**kw):
    """A pool with no activation terms (hidden/intermediate/vocab 0), so free memory is the GPU
    less the weights and the fixed overheads."""
    args = dict(version="1.2.0", backend=tm.TENSORRT, memory_bytes=80 * GIB, weights_bytes=20 * GIB,
                kv_bytes_per_token=KV, fraction=0.9, tokens_per_block=64, hidden=0, intermediate=0, vocab=0)
    args.update(kw)
    return tm.pool(**args)


# --- the fraction applies to free memory ------------------------------------------------------

@pytest.mark.parametrize("backend", tm.BACKENDS)
def test_fraction_applies_to_free_memory_not_total(backend):
    """More weights cost the pool fraction × Δ, not Δ (nor nothing, as in a share of the total)."""
    delta = 4 * GIB
    a, b = _pool(backend=backend), _pool(backend=backend, weights_bytes=20 * GIB + delta)
    expected = 0.9 * delta / KV
    assert abs((a.estimate - b.estimate) - expected) <= 64  # one block of rounding
    # and the same for more GPU memory: fraction × Δ more tokens
    c = _pool(backend=backend, memory_bytes=80 * GIB + delta)
    assert abs((c.estimate - a.estimate) - expected) <= 64


def test_fraction_of_free_is_not_vllm_budget():
    """0.9 × (total − weights − overheads) is not 0.9 × total − weights − overheads."""
    p = _pool()
    free = p.free_bytes[1]
    assert p.estimate == math.ceil(math.floor(0.9 * free / KV) / 64) * 64
    vllm_like = math.floor((0.9 * 80 * GIB - 20 * GIB - (80 * GIB - 20 * GIB - free)) / KV)
    assert p.estimate - vllm_like > 1000


def test_default_fraction_by_version():
    assert tm.default_fraction("0.7.1") == 0.85
    assert tm.default_fraction("0.8.0") == 0.9
    old, new = _pool(version="0.7.1", fraction=None), _pool(version="0.8.0", fraction=None)
    assert new.estimate > old.estimate
    assert any("0.85" in a for a in old.assumptions)


def test_the_log_of_grps_trtllm_scheduler_doc():
    """A published TensorRT-engine startup (github.com/NetEase-Media/grps_trtllm/blob/e53b627/docs/scheduler.md):
    available 1.42 GiB, default fraction 0.9, tokens_per_block 64 → 82 blocks, 5248 tokens, 1.28 GiB."""
    per_token = 256 * 1024  # a bytes/token the printed figures allow (1.28 GiB / 5248 rounds to it)
    tokens = tm.tokens_in_pool(1.42 * GIB, fraction=0.9, kv_bytes_per_token=per_token, tokens_per_block=64,
                               backend=tm.TENSORRT)
    assert tokens == 82 * 64 == 5248
    assert round(tokens * per_token / GIB, 2) == 1.28


# --- max_tokens --------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", tm.BACKENDS)
def test_max_tokens_minimum_wins(backend):
    free = _pool(backend=backend)
    capped = _pool(backend=backend, max_tokens=10_000)
    assert capped.low == capped.estimate == capped.high == tm._blocks(10_000, 64, backend) * 64
    assert _pool(backend=backend, max_tokens=10**9).estimate == free.estimate


def test_max_tokens_without_fraction_is_used_alone_before_1_0():
    """The single-pool C++ code: maxTokens given and no fraction → maxTokens, even past the memory."""
    huge = 10**7
    old = _pool(version="0.12.0", fraction=None, max_tokens=huge)
    assert old.estimate == huge  # already a multiple of 64
    new = _pool(version="1.0.0", fraction=None, max_tokens=huge)
    assert new.estimate < huge
    # with a fraction given, the minimum wins in every release
    assert _pool(version="0.12.0", fraction=0.9, max_tokens=huge).estimate < huge


def test_max_gpu_total_bytes_caps_pytorch_from_1_0():
    cap = 2 * GIB
    capped = _pool(backend=tm.PYTORCH, version="1.0.0", max_gpu_total_bytes=cap)
    assert capped.estimate == (math.floor(cap / KV) // 64) * 64
    assert capped.high == capped.estimate
    before = _pool(backend=tm.PYTORCH, version="0.21.0", max_gpu_total_bytes=cap)
    assert before.estimate > capped.estimate


# --- block rounding ----------------------------------------------------------------------------

def test_block_rounding_up_in_cpp_down_in_pytorch():
    assert tm.tokens_in_pool(GIB, fraction=0.9, kv_bytes_per_token=KV, tokens_per_block=64, backend=tm.TENSORRT,
                             max_tokens=1000) == 1024
    assert tm.tokens_in_pool(GIB, fraction=0.9, kv_bytes_per_token=KV, tokens_per_block=64, backend=tm.PYTORCH,
                             max_tokens=1000) == 960
    for backend in tm.BACKENDS:
        p = _pool(backend=backend, tokens_per_block=48)
        assert p.low % 48 == p.estimate % 48 == p.high % 48 == 0


def test_range_is_ordered_and_named():
    p = _pool(hidden=4096, intermediate=11008, vocab=32000, max_num_tokens=8192, max_batch_size=64)
    assert p.low < p.estimate < p.high
    assert any("estimates" in a for a in p.assumptions)
    assert any("not to the" in s for s in p.steps)


def test_tensor_parallel_splits_weights_and_mlp():
    one = _pool(hidden=8192, intermediate=28672, max_num_tokens=8192)
    two = _pool(hidden=8192, intermediate=28672, max_num_tokens=8192, tp=2)
    assert two.weights_bytes == one.weights_bytes / 2
    assert two.estimate > one.estimate


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError):
        _pool(backend="onnx")


# --- the attention-window shrink ---------------------------------------------------------------

def _fixed(tokens, backend=tm.TENSORRT):
    """A pool pinned to ``tokens`` at low, estimate and high (max_tokens well under the memory)."""
    return _pool(backend=backend, max_tokens=tokens)


def test_cpp_shrink_message_and_numbers():
    tpb, blocks = 64, 64
    p = _fixed(blocks * tpb)
    max_seq_len, max_input_len = 8192, 8100
    output = max_seq_len - max_input_len
    new = output + (blocks - math.ceil(output / tpb)) * tpb  # calculateMaxAttentionWindow
    ok, msg = tm.window_check(max_seq_len, p, "1.2.0", max_input_len=max_input_len)
    assert ok is False
    assert msg.startswith("maxAttentionWindowVec too large to fit at least one sequence in kvCache.")
    assert f"Old: ({max_seq_len}), New: ({new})" in msg
    assert f"maxSequenceLen is reduced to maxAttentionWindow: {new}" in msg
    assert f"maxInputLen is reduced to {new - 1}" in msg


def test_cpp_shrink_when_not_even_the_output_fits():
    p = _fixed(64 * 64)
    ok, msg = tm.window_check(40_000, p, "1.2.0", max_input_len=1024)
    assert ok is False and "New: (4096)" in msg


def test_cpp_shrink_matches_grps_trtllm_log():
    """82 blocks of 64; the log says 'they are reduced to 5185' and 'maxInputLen is reduced to 5184'
    (github.com/NetEase-Media/grps_trtllm/blob/e53b627/docs/scheduler.md) — what a one-token output
    budget (max_input_len = max_seq_len − 1) gives: 1 + (82 − 1) · 64."""
    p = _fixed(82 * 64)
    ok, msg = tm.window_check(8192, p, "0.12.0", max_input_len=8191)
    assert ok is False
    assert "maxAttentionWindow and maxSequenceLen are too large for at least one sequence to fit in kvCache. " \
           "they are reduced to 5185" in msg
    assert "maxInputLen is reduced to 5184" in msg


def test_fail_fast_from_1_0_on_the_tensorrt_path_only():
    p = _fixed(64 * 64)
    ok, msg = tm.window_check(8192, p, "1.0.0", max_input_len=1024, fail_fast=True)
    assert ok is False and msg.startswith("Attention window too large to fit even a single sequence in the KV cache.")
    assert "Old: (8192), New: (4096)" in msg
    _, older = tm.window_check(8192, p, "0.21.0", max_input_len=1024, fail_fast=True)
    assert older.startswith("maxAttentionWindow and maxSequenceLen")
    _, torch_msg = tm.window_check(8192, _fixed(64 * 64, tm.PYTORCH), "1.2.0", fail_fast=True)
    assert torch_msg.startswith("Attention window size 8192 exceeds upper bound")


def test_pytorch_shrink_message_by_version():
    p = _fixed(3200, tm.PYTORCH)  # 50 blocks of 64
    bound = (3200 // 64) * 64  # get_max_atten_window_upper_bound: whole blocks of the pool (beam 1, no sink)
    ok, msg = tm.window_check(8192, p, "1.1.0")
    assert ok is False
    assert msg.startswith(f"Attention window size 8192 exceeds upper bound {bound} for available blocks. "
                          f"Reducing to {bound}.")
    assert f"Adjusted max_seq_len to {bound}" in msg
    _, old = tm.window_check(8192, p, "0.20.0")
    assert old == ("maxAttentionWindow and maxSequenceLen are too large for at least one sequence to fit in kvCache. "
                   f"They are reduced to {bound}")


@pytest.mark.parametrize("backend", tm.BACKENDS)
def test_window_fits_straddles_or_not(backend):
    p = _pool(backend=backend, hidden=4096, intermediate=11008, vocab=32000, max_num_tokens=8192,
              max_batch_size=64, max_seq_len=4096)
    assert p.high - p.low > 2 * 64
    kw = {"max_input_len": None}
    assert tm.window_check(p.low, p, "1.2.0", **kw) == (True, None)
    assert tm.window_check(p.low + 64, p, "1.2.0", **kw) == (None, None)
    ok, msg = tm.window_check(p.high + 1, p, "1.2.0", **kw)
    assert ok is False and msg


def test_nothing_fits_when_the_model_fills_the_gpu():
    p = _pool(backend=tm.PYTORCH, weights_bytes=90 * GIB)
    assert p.estimate == p.high == 0
    assert tm.window_check(4096, p, "1.2.0") == (False, "Impossible to fit in any sequence in kvCache")
    q = _pool(weights_bytes=90 * GIB)
    ok, msg = tm.window_check(4096, q, "1.2.0")
    assert ok is False and "out of memory" in msg


def test_shrink_needs_one_sequence_not_max_batch_size():
    """The check is for one sequence: a pool of exactly max_seq_len tokens keeps the window, whatever
    max_batch_size the engine was built for."""
    p = _pool(max_tokens=8192, max_batch_size=256)
    assert tm.window_check(8192, p, "1.2.0", max_input_len=1024) == (True, None)
    assert tm.shrunk_window(8192 + 1, 8192, 64, tm.TENSORRT, 1024) is not None


def test_default_backend():
    assert tm.default_backend("0.21.0") == tm.TENSORRT
    assert tm.default_backend("1.0.0") == tm.PYTORCH
