"""TensorRT-LLM's KV-cache pool, as each backend sizes it: the one home of TRT-LLM's
memory-accounting facts.

The whole NVIDIA/TensorRT-LLM history (2.5 GB) could not be brought here, so no tag was checked
out: the sources below are stored copies of single files — the NVIDIA repository's own at the
commit named, or a fork's copy of the same path — with the release each fact belongs to taken
from the change log, the pull request that made the change and the version-bump commits.
Functions are named where a line anchor could not be checked at the tag.

TensorRT engine path (``trtllm-build`` engines run by the C++ executor: Triton's
tensorrtllm_backend, ``ModelRunnerCpp``, ``gptManagerBenchmark``, the LLM API with
``backend: tensorrt``)
- The pool is a fraction of the memory that is *free* once the engine is loaded (weights and
  the execution context, whose activation memory TensorRT sizes at build time from
  ``max_num_tokens``) and the runtime and decoder buffers are allocated, plus what the CUDA
  memory pool holds free: ``maxTokens = fraction · (freeMem + memoryPoolFree) / bytesPerToken``
  (``KVCacheManager::calculateMaxNumBlocks``,
  https://github.com/NVIDIA/TensorRT-LLM/blob/b35ac1b64368513d215c57d2ed01d62d910df8da/cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp
  and, in newer code, ``calculateFreeMemBytes`` then ``calculateMaxNumBlocks`` per window
  size). The log line ``Memory usage when calculating max tokens in paged kv cache: total: X
  GiB, available: Y GiB`` prints that free memory. Unlike vLLM's utilization, the fraction
  never applies to the total.
- The default fraction is 0.85 up to 0.7.1 (``kDefaultGpuMemFraction = 0.85f``,
  https://github.com/NVIDIA/TensorRT-LLM/blob/v0.7.1/cpp/include/tensorrt_llm/batch_manager/kvCacheConfig.h#L47,
  read in the release branch mirrored at
  https://github.com/octoml/TensorRT-LLM-release/blob/80bc07510ac4ddf13c0d76ad295cdb2b75614618/cpp/include/tensorrt_llm/batch_manager/kvCacheConfig.h#L47)
  and 0.9 from 0.8.0 ("Increase default `freeGpuMemoryFraction` parameter from 0.85 to 0.9",
  https://github.com/NVIDIA/TensorRT-LLM/blob/v0.8.0/CHANGELOG.md).
- ``max_tokens`` (``max_tokens_in_paged_kv_cache``) caps it: "Both freeGpuMemoryFraction ...
  and maxTokens ... are set ... The smaller value will be used". In the older single-pool code
  a ``maxTokens`` given *without* a fraction is used alone, even past the free memory; the
  per-window code of 2025 takes the minimum with the default fraction always. sits-doctor cuts
  at :data:`MAX_TOKENS_ALWAYS_MIN` (the first release where the per-window code was read).
- Blocks: ``tc::ceilDiv(maxTokens, tokensPerBlock)`` — the count is rounded *up* to whole
  blocks, so the pool logged by ``Allocated X GiB for max tokens in paged KV cache (N)`` is
  ``blocks · tokens_per_block`` (the log in https://nvidia.github.io/TensorRT-LLM/reference/memory.html:
  4060 blocks × 64 = 259840). 0.5.x
  printed ``Using N tokens in paged KV cache`` before the rounding (maintainer's reply in
  https://github.com/NVIDIA/TensorRT-LLM/issues/224).
- What sizes the execution context: in 0.5.0's ``examples/llama/build.py`` ``--max_input_len``
  defaults to 2048 (L159), ``--tokens_per_block`` to 64 (L313) and, with packed input, an unset
  ``--max_num_tokens`` becomes ``max_input_len · max_batch_size``
  (``tensorrt_llm/models/generation_mixin.py`` L71–75; read at
  https://github.com/octoml/TensorRT-LLM-release/blob/98e78cc7607ce43a6cf78cdd6b9c3ad95d6a53ec/examples/llama/build.py#L159,
  a copy of NVIDIA's release/0.5.0). ``trtllm-build`` later defaults ``max_num_tokens`` to 8192.

PyTorch backend (the LLM API's and ``trtllm-serve``'s default from 1.0: "BREAKING CHANGE Promote
PyTorch to be the default LLM backend", https://github.com/NVIDIA/TensorRT-LLM/releases/tag/v1.0.0)
- ``KvCacheCreator`` (``tensorrt_llm/_torch/pyexecutor/_util.py``,
  https://github.com/NVIDIA/TensorRT-LLM/blob/0004396720054fd8e205cbf616f21f0b57c6b412/tensorrt_llm/_torch/pyexecutor/_util.py)
  first builds a small KV cache for dummy context requests that together hold
  ``max_num_tokens`` tokens (``_create_dummy_context_requests``, each at most
  ``max_seq_len − 1`` long), runs them once (``configure_kv_cache_capacity``, earlier
  ``estimate_max_kv_cache_tokens``), and measures the peak: torch's peak allocation plus the
  memory used outside torch (CUDA context, NCCL, CUDA graphs). Then
  ``available = (total − peak + kv_of_the_dry_run) · free_gpu_memory_fraction``
  (``_cal_max_memory``) — the fraction again applies to what is free after the weights and
  the activation peak, not to the total.
- ``kv_cache_config.max_tokens`` caps it (``min``), and from 1.0 so does
  ``max_gpu_total_bytes`` when > 0 (added by https://github.com/NVIDIA/TensorRT-LLM/pull/5933,
  July 2025, before main moved to 1.1.0rc0 on 2025-08-07 — PR #6651). ``max_tokens`` is then set
  to ``available // bytes_per_token`` and the final ``KVCacheManager``
  (``tensorrt_llm/_torch/pyexecutor/resource_manager.py``,
  https://github.com/NVIDIA/TensorRT-LLM/blob/d2a5560abdadfbdf496ce057696103e0509a71ed/tensorrt_llm/_torch/pyexecutor/resource_manager.py,
  ``calculate_max_num_blocks``) takes ``min(fraction · free_now, max_tokens)`` — ``free_now``
  is measured after the dry run is torn down, so the estimate is what binds. Its blocks are
  ``max_tokens // tokens_per_block`` in the newer copies read and ``math.ceil`` in a 2025 copy:
  one block either way.

The silent attention-window shrink (one sequence, not ``max_batch_size`` of them)
- C++ (``TrtGptModelInflightBatching::clampWindowSizesToFitAtLeastOneSequence`` in
  https://github.com/NVIDIA/TensorRT-LLM/blob/b35ac1b64368513d215c57d2ed01d62d910df8da/cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp):
  the best case of one sequence — prompt ``max_input_len``, output ``max_seq_len −
  max_input_len`` — needs ``ceil(min(max_seq_len, window) / tokens_per_block)`` blocks (beam 1,
  no sink tokens: ``KVCacheManager::calculateMaxBlockRequirements``). When the pool has fewer,
  the window becomes ``min(output + (blocks − ceil(output / tpb)) · tpb, max_seq_len)``
  (``calculateMaxAttentionWindow``; ``blocks · tpb`` when not even the output fits), and it logs
  ``maxAttentionWindowVec too large to fit at least one sequence in kvCache. Old: (w), New:
  (w')`` (``common::vec2str`` prints a vector in parentheses) then ``maxSequenceLen is reduced
  to maxAttentionWindow: w'`` (and ``maxInputLen is reduced to w'−1``). Older 0.x releases
  print ``maxAttentionWindow and maxSequenceLen are too large for at least one sequence to fit
  in kvCache. they are reduced to w'`` for the same condition (with the same numbers: 82 blocks
  of 64 → 5185 in
  https://github.com/NetEase-Media/grps_trtllm/blob/e53b6274aa14598e8cfa09618bb6bc93d8e3b67f/docs/scheduler.md).
  sits-doctor gives the ``Vec`` text from :data:`WINDOW_VEC_MESSAGE`, the first release where it
  was verified (the fail-fast option below is built on it); it may be older.
- ``fail_fast_on_attention_window_too_large`` (https://github.com/NVIDIA/TensorRT-LLM/pull/5974,
  merged 2025-07-25, so in 1.0; default ``False`` in the LLM API and ``trtllm-serve``) turns the
  warning into ``Attention window too large to fit even a single sequence in the KV cache.
  Failing fast rather than attempting an adjustment of the window sizes. Old: (w), New: (w')``.
  Only the TensorRT path reads it (later main moved it to ``TrtLlmArgs`` and made the
  ``trtllm-serve`` flag default to ``True``; no release with that was read).
- PyTorch (``KVCacheManager._validate_and_adjust_attention_windows`` /
  ``validate_and_adjust_attention_windows`` in resource_manager.py, from 1.0 —
  https://github.com/NVIDIA/TensorRT-LLM/pull/5151): the upper bound is the whole pool,
  ``blocks · tokens_per_block`` (beam 1, no sink); a window above it logs ``Attention window size
  w exceeds upper bound u for available blocks. Reducing to u.``, then ``Adjusted
  max_attention_window_vec to [u]`` and ``Adjusted max_seq_len to u``. Before 1.0 the PyTorch
  manager logged ``maxAttentionWindow and maxSequenceLen are too large for at least one sequence
  to fit in kvCache. They are reduced to u``. Nothing fails: requests longer than ``u`` are
  served with a sliding window or rejected as too long.

What no config states — the CUDA context, the TensorRT execution context's exact size, the
runtime/decoder buffers, CUDA-graph memory — is estimated, so the result is a range and names
each assumption.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from sits_doctor.frameworks.trtllm import KV_FRACTION_DEFAULT, TOKENS_PER_BLOCK_DEFAULT
from sits_doctor.memory import GIB

TENSORRT = "tensorrt"
PYTORCH = "pytorch"
BACKENDS = (TENSORRT, PYTORCH)

FRACTION_09 = "0.8.0"  # kDefaultGpuMemFraction 0.85 → 0.9 (CHANGELOG.md, 0.8.0)
OLD_FRACTION_DEFAULT = 0.85  # kvCacheConfig.h@v0.7.1 L47
PYTORCH_DEFAULT = "1.0.0"  # the LLM API and trtllm-serve default to the PyTorch backend
MAX_GPU_TOTAL_BYTES = "1.0.0"  # KvCacheConfig.max_gpu_total_bytes (PR #5933)
FAIL_FAST_OPTION = "1.0.0"  # fail_fast_on_attention_window_too_large (PR #5974)


NO_BLOCK_FITS = "no KV-cache block fits"  # sits-doctor's own explanation (the TensorRT backend prints no one line)


def own_explanation(reason: str | None) -> bool:
    """Whether a :func:`window_check` reason is sits-doctor's explanation, not a line TensorRT-LLM prints."""
    return not reason or reason.startswith(NO_BLOCK_FITS)


def shrinks_window(reason: str | None) -> bool:
    """Whether a :func:`window_check` failure is TensorRT-LLM's shrink-and-go-on (the window and
    max_seq_len reduced, a warning logged) rather than a refusal to start (fail fast, no block)."""
    return bool(reason) and reason.startswith(("Attention window size ", "maxAttentionWindow"))
WINDOW_VEC_MESSAGE = "1.0.0"  # "maxAttentionWindowVec too large ... Old: (..), New: (..)" (C++)
PYTORCH_WINDOW_MESSAGE = "1.0.0"  # "Attention window size w exceeds upper bound u ..." (PR #5151)
MAX_TOKENS_ALWAYS_MIN = "1.0.0"  # C++: max_tokens is min'ed with the default fraction even when no fraction is set
MAX_NUM_TOKENS_DEFAULT = 8192  # BuildConfig.max_num_tokens / LlmArgs.max_num_tokens (since 0.11)
MAX_BATCH_SIZE_DEFAULT = 2048  # BuildConfig.max_batch_size since 0.14 (256 in 0.11–0.13); trtllm-serve's default
TRT_ENGINE_TOKENS_PER_BLOCK = 64  # build.py --tokens_per_block default (0.5.0 L313); logs of later engines show 64

# Memory outside the model that no config states. CUDA context, cuBLAS/cuDNN workspaces (and
# NCCL buffers with tensor parallelism): 0.3–1 GiB on one GPU in public logs; more with TP.
OVERHEAD_GIB = {1: (0.3, 0.5, 1.0), "tp": (0.5, 0.9, 2.0)}
# PyTorch backend: CUDA graphs are captured for batch sizes up to 128 by default in 1.x
# (cuda_graph_config) before the dry run is measured, so their pool counts in the peak.
CUDA_GRAPHS_GIB = (0.2, 0.5, 1.5)
# Activation per token of max_num_tokens: about (2·intermediate/tp + 4·hidden)·2 bytes for a
# gated-MLP decoder in 16 bits (the fused gate/up output and a few hidden-size buffers alive
# together) — the formula of vllm_memory, which also matches a TensorRT engine: Qwen2.5-7B's
# execution context fell from 262 MB to 91 MB when max_num_tokens went from 2048 to 512
# (≈111 KiB/token; the formula gives 104). Range ×0.6–×1.6 for other architectures.
ACTIVATION_RANGE = (0.6, 1.0, 1.6)
# TensorRT path: runtime and decoder buffers hold max_batch_size × vocab fp32 logits several
# times over (logits, probabilities, sorted copies for top-k/top-p): issue #1188's Qwen2.5-0.5B
# engine (vocab 151936, max_batch_size most likely the 2048 default) logged 2.66 GB of runtime
# buffers and 5.76 GB for the decoder ≈ 6.7 logits tensors. PyTorch path: the sampler of the
# dry run, over the dummy requests only.
LOGITS_COPIES = {TENSORRT: (2.0, 5.0, 8.0), PYTORCH: (1.5, 3.0, 4.5)}


class Pool(NamedTuple):
    """The KV-cache tokens one rank will allocate: low / estimate / high, with the arithmetic."""

    low: int
    estimate: int
    high: int
    kv_bytes_per_token: float
    tokens_per_block: int
    free_bytes: tuple[float, float, float]  # memory the fraction applies to (low, est, high)
    weights_bytes: float  # on this rank
    backend: str
    steps: tuple[str, ...]
    assumptions: tuple[str, ...]


def default_fraction(version: str) -> float:
    """``free_gpu_memory_fraction`` when nobody sets it: 0.85 before 0.8.0, 0.9 since."""
    from sits_doctor.versions import V

    return KV_FRACTION_DEFAULT if V(version) >= V(FRACTION_09) else OLD_FRACTION_DEFAULT


def default_backend(version: str) -> str:
    """The LLM API's / ``trtllm-serve``'s backend when none is named: PyTorch from 1.0."""
    from sits_doctor.versions import V

    return PYTORCH if V(version) >= V(PYTORCH_DEFAULT) else TENSORRT


def pool(*, version: str, backend: str, memory_bytes: float, weights_bytes: float, kv_bytes_per_token: float,
         fraction: float | None = None, max_tokens: int | None = None, tokens_per_block: int | None = None,
         max_num_tokens: int = 8192, max_batch_size: int = 256, hidden: int | None = None,
         intermediate: int | None = None, vocab: int | None = None, tp: int = 1, pp: int = 1,
         max_seq_len: int | None = None, max_gpu_total_bytes: float | None = None,
         cuda_graphs: bool = True) -> Pool:
    """The KV pool of one rank (sizes in bytes; ``weights_bytes`` for all ranks together,
    ``kv_bytes_per_token`` for one rank). ``fraction=None`` means not set (the version's
    default applies; with ``max_tokens`` set the old C++ code then uses ``max_tokens`` alone)."""
    from sits_doctor.versions import V

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    ver = V(version)
    ranks = max(1, tp) * max(1, pp)
    tpb = int(tokens_per_block or (TRT_ENGINE_TOKENS_PER_BLOCK if backend == TENSORRT else TOKENS_PER_BLOCK_DEFAULT))
    frac = fraction if fraction is not None else default_fraction(version)
    weights = weights_bytes / ranks
    steps, assumptions = [], []
    if tokens_per_block is None:
        assumptions.append(f"tokens_per_block {tpb}: the {backend} default (an engine's config.json states its own)")
    if fraction is None:
        assumptions.append(f"free_gpu_memory_fraction {frac:g}: default of TensorRT-LLM {version}")
    elif frac >= 1:
        assumptions.append(f"free_gpu_memory_fraction {frac:g} is refused at startup (\"Invalid freeMemFraction, "
                           "freeMemFraction ... must be smaller than 1.0f\"); the pool below is what it would ask for")
    steps.append(f"weights on this rank = {weights_bytes / GIB:.2f} GiB / {ranks} rank(s) = {weights / GIB:.2f} GiB")

    # activation memory sized from max_num_tokens (TensorRT: at build time; PyTorch: the dry run)
    per_token = (2 * (intermediate or 0) / max(1, tp) + 4 * (hidden or 0)) * 2
    if backend == TENSORRT:
        logit_rows = max_batch_size
        where = "execution context sized at build time"
        graphs = (0.0, 0.0, 0.0)
    else:
        logit_rows = max(1, math.ceil(max_num_tokens / max(1, (max_seq_len or max_num_tokens + 1) - 1)))
        where = "dry run of the dummy context requests"
        graphs = tuple(g * GIB for g in CUDA_GRAPHS_GIB) if cuda_graphs else (0.0, 0.0, 0.0)
    logits = logit_rows * (vocab or 0) * 4
    act = tuple(max_num_tokens * per_token * f + logits * c
                for f, c in zip(ACTIVATION_RANGE, LOGITS_COPIES[backend]))
    overhead = tuple(g * GIB for g in OVERHEAD_GIB["tp" if ranks > 1 else 1])
    steps.append(f"activations ({where}) ≈ {max_num_tokens} max_num_tokens × {per_token / 1024:.0f} KiB "
                 f"+ {logit_rows} × {vocab or 0} fp32 logits ×{LOGITS_COPIES[backend][1]:g} = {act[1] / GIB:.2f} GiB "
                 f"(range {act[0] / GIB:.2f}–{act[2] / GIB:.2f})")
    steps.append(f"CUDA context and workspaces ≈ {overhead[1] / GIB:.2f} GiB (range {overhead[0] / GIB:.2f}–"
                 f"{overhead[2] / GIB:.2f})" + (f"; CUDA graphs ≈ {graphs[1] / GIB:.2f} GiB" if graphs[1] else ""))
    # the most KV comes with the smallest overheads, and the other way round
    free = tuple(memory_bytes - weights - a - o - g
                 for a, o, g in zip(reversed(act), reversed(overhead), reversed(graphs)))
    steps.append(f"free after the model = {memory_bytes / GIB:.2f} GiB − weights − activations − overheads = "
                 f"{free[1] / GIB:.2f} GiB (range {free[0] / GIB:.2f}–{free[2] / GIB:.2f})")
    kv = [max(0.0, f) * frac for f in free]
    steps.append(f"KV budget = free_gpu_memory_fraction {frac:g} × free = {kv[1] / GIB:.2f} GiB "
                 f"(the fraction applies to free memory, not to the {memory_bytes / GIB:.2f} GiB total)")
    if backend == PYTORCH and max_gpu_total_bytes and ver >= V(MAX_GPU_TOTAL_BYTES):
        kv = [min(k, max_gpu_total_bytes) for k in kv]
        steps.append(f"max_gpu_total_bytes {max_gpu_total_bytes / GIB:.2f} GiB caps it → {kv[1] / GIB:.2f} GiB")
    alone = backend == TENSORRT and fraction is None and ver < V(MAX_TOKENS_ALWAYS_MIN)
    tokens = [_fraction_tokens(k, kv_bytes_per_token) for k in kv]
    if max_tokens is not None:
        tokens = [int(max_tokens) if alone else min(t, int(max_tokens)) for t in tokens]
        steps.append(f"max_tokens {max_tokens} set without a fraction: used as is (TensorRT-LLM {version})" if alone
                     else f"max_tokens {max_tokens}: the smaller of it and the fraction's tokens wins")
    blocks = [_blocks(t, tpb, backend) for t in tokens]
    how = "rounded up to whole blocks (ceilDiv)" if backend == TENSORRT else "rounded down to whole blocks"
    if backend == PYTORCH:
        assumptions.append("PyTorch backend: blocks = max_tokens // tokens_per_block (some 2025 releases round up: "
                           "one block more)")
    out = [b * tpb for b in blocks]
    steps.append(f"KV pool = {tokens[1]} tokens at {kv_bytes_per_token / 1024:.1f} KiB/token, {how} of {tpb} → "
                 f"{blocks[1]} blocks = {out[1]} tokens (range {out[0]}–{out[2]})")
    assumptions.append("CUDA context, activation and buffer memory are measured by TensorRT-LLM at startup (or sized "
                       "by TensorRT at build time), not stated in any config: sits-doctor estimates them")
    return Pool(out[0], out[1], out[2], kv_bytes_per_token, tpb, tuple(free), weights, backend, tuple(steps),
                tuple(assumptions))


def tokens_in_pool(free_bytes: float, *, fraction: float, kv_bytes_per_token: float, tokens_per_block: int,
                   backend: str, max_tokens: int | None = None, max_tokens_alone: bool = False) -> int:
    """The tokens TRT-LLM allocates when ``free_bytes`` are free at the moment it sizes the pool
    (what ``Memory usage when calculating max tokens in paged kv cache: ... available: X GiB``
    prints): the fraction of the free memory in whole tokens, the ``max_tokens`` cap, and the
    rounding to blocks of the backend."""
    tokens = _fraction_tokens(max(0.0, free_bytes) * fraction, kv_bytes_per_token)
    if max_tokens is not None:
        tokens = int(max_tokens) if max_tokens_alone else min(tokens, int(max_tokens))
    return _blocks(tokens, tokens_per_block, backend) * tokens_per_block


def _fraction_tokens(kv_bytes: float, per_token: float) -> int:
    return math.floor(kv_bytes / per_token) if kv_bytes > 0 and per_token > 0 else 0


def _blocks(tokens: int, tokens_per_block: int, backend: str) -> int:
    """C++ ``tc::ceilDiv(maxTokens, tokensPerBlock)``; the PyTorch manager's ``max_tokens // tokens_per_block``."""
    if backend == TENSORRT:
        return -(-tokens // tokens_per_block)
    return tokens // tokens_per_block


def shrunk_window(max_seq_len: int, pool_tokens: int, tokens_per_block: int, backend: str,
                  max_input_len: int | None = None) -> int | None:
    """The attention window TRT-LLM shrinks ``max_seq_len`` to for a pool of ``pool_tokens``
    (beam width 1, no sink tokens), or None when one sequence fits."""
    tpb = tokens_per_block
    blocks = pool_tokens // tpb
    if backend == PYTORCH:
        upper = blocks * tpb  # get_max_atten_window_upper_bound
        return upper if max_seq_len > upper else None
    if math.ceil(max_seq_len / tpb) <= blocks:  # calculateMaxBlockRequirements
        return None
    prompt = max_input_len if max_input_len is not None else max_seq_len - 1
    output = max(0, max_seq_len - prompt)
    output_blocks = math.ceil(output / tpb)
    if output_blocks > blocks:  # calculateMaxAttentionWindow
        return blocks * tpb
    return min(output + (blocks - output_blocks) * tpb, max_seq_len)


def window_check(max_seq_len: int, p: Pool, version: str, backend: str | None = None, *,
                 max_input_len: int | None = None, fail_fast: bool = False) -> tuple[bool | None, str | None]:
    """Whether one ``max_seq_len`` sequence fits the pool (True / False / None when the range
    straddles it), and — when it does not — what TensorRT-LLM logs as it shrinks the window (or
    raises, with ``fail_fast``), Old/New numbers from the estimate."""
    from sits_doctor.versions import V

    backend = backend or p.backend
    ver = V(version)
    tpb = p.tokens_per_block

    def fits(tokens: int) -> bool:
        return shrunk_window(max_seq_len, tokens, tpb, backend, max_input_len) is None

    if fits(p.low):
        return True, None
    if fits(p.high):
        return None, None
    if p.estimate < tpb:
        if backend == PYTORCH:
            return False, "Impossible to fit in any sequence in kvCache"
        left = p.free_bytes[1] / GIB
        return False, (f"{NO_BLOCK_FITS}: the weights, activations and buffers leave {left:.2f} GiB free — "
                       "startup runs out of memory (or ends with no KV cache)")
    new = shrunk_window(max_seq_len, p.estimate, tpb, backend, max_input_len)
    if new is None:  # cannot happen (estimate ≤ high and high does not fit); kept so the function is total
        return None, None
    if backend == PYTORCH:
        if ver >= V(PYTORCH_WINDOW_MESSAGE):
            return False, (f"Attention window size {max_seq_len} exceeds upper bound {new} for available blocks. "
                           f"Reducing to {new}. Adjusted max_attention_window_vec to [{new}]. "
                           f"Adjusted max_seq_len to {new}")
        return False, (f"maxAttentionWindow and maxSequenceLen are too large for at least one sequence to fit in "
                       f"kvCache. They are reduced to {new}")
    if ver < V(WINDOW_VEC_MESSAGE):
        text = (f"maxAttentionWindow and maxSequenceLen are too large for at least one sequence to fit in kvCache. "
                f"they are reduced to {new}")
    elif fail_fast and ver >= V(FAIL_FAST_OPTION):
        return False, ("Attention window too large to fit even a single sequence in the KV cache. Failing fast "
                       f"rather than attempting an adjustment of the window sizes. Old: ({max_seq_len}), New: ({new})")
    else:
        text = (f"maxAttentionWindowVec too large to fit at least one sequence in kvCache. Old: ({max_seq_len}), "
                f"New: ({new}). maxSequenceLen is reduced to maxAttentionWindow: {new}")
    if max_input_len is not None and max_input_len > new - 1:
        text += f". maxInputLen is reduced to {new - 1}"
    return False, text
