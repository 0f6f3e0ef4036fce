"""vLLM's KV-cache pool, as each version sizes it: the one home of vLLM's memory-profiling facts.

Read in the release sources (links as github.com/vllm-project/vllm/blob/v<release>/<path>):
- Budget: ``total · gpu_memory_utilization`` (``vllm/v1/worker/gpu_worker.py``
  ``determine_available_memory``, 0.9.1–0.33; V0 ``vllm/worker/worker.py``
  ``determine_num_available_blocks``). From it go the weights, the torch peak of one profiling
  forward pass, the growth of non-torch memory (CUDA context, cuBLAS, NCCL) and, from 0.20.0,
  the CUDA graphs (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to 1 in
  ``vllm/envs.py`` from 0.20.0; 0 in 0.18–0.19; before 0.18 graphs are captured after the KV
  cache and live in the ``1 − utilization`` headroom).
- The profiling pass runs ``max_num_batched_tokens`` tokens as ``min(max_num_seqs, tokens)``
  requests and samples once for them with fp32 logits over the vocabulary (``_dummy_sampler_run``
  in ``vllm/v1/worker/gpu_model_runner.py``; V0 samples ``max_num_seqs`` prompts).
- The pool is cut into blocks of ``block_size`` tokens (``vllm/v1/core/kv_cache_utils.py``); the
  engine refuses to start when one ``max_model_len`` request does not fit
  (``check_enough_kv_cache_memory``; ``_check_enough_kv_cache_memory`` in 0.33's
  ``kv_cache_planning.py``). From 0.34 its advice depends on the extensible KV cache (on by
  default on CUDA and ROCm; ``_more_kv_cache_memory_hint`` in ``vllm/v1/core/kv_cache_planning.py@0.34.0``).

Activation and non-torch memory are measured by vLLM at startup, not written in any config, so
sits-doctor gives a range: each assumption is named in the result.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from sits_doctor.memory import GIB

CUDAGRAPH_PROFILED = "0.20.0"  # CUDA-graph memory counted before the KV cache is sized (vllm/envs.py)
A100_SMALL_TIER = "0.9.0"  # the A100 gets the small batch defaults (vllm/engine/arg_utils.py)
HYBRID_TOKENS_BY_CONCURRENCY = "0.20.1"  # "GPU KV cache size" = max_concurrency · max_model_len (kv_cache_utils.py)
# From the hybrid KV-cache manager on, a sliding-window layer needs at most its window (plus the
# tokens of one step) per request, so the startup check of a model mixing sliding-window and full
# layers asks for less than max_model_len on those layers (``SlidingWindowSpec.max_memory_usage_bytes``
# in vllm/v1/kv_cache_interface.py; https://docs.vllm.ai/en/latest/design/hybrid_kv_cache_manager.html).
# The release is assumed: the first after the allocator (RFC vllm-project/vllm#11382) landed.
SLIDING_CHECKED_BY_WINDOW = "0.10.0"
MESSAGE_TYPO_FIXED = "0.22.0"  # "models's max seq len" before
HINT_BY_KV_CACHE_MODE = "0.34.0"  # the startup check's advice names the extensible KV cache
_OLD_HINT = ("Try increasing `gpu_memory_utilization` when initializing the engine (this flag also controls CPU "
             "memory reservation on the CPU backend, despite its name).")


def _hint(utilization: float, extensible: bool | None) -> str:
    """What vLLM ≥0.34 tells the user to do when the KV cache does not fit
    (``_more_kv_cache_memory_hint``, vllm/v1/core/kv_cache_planning.py@0.34.0); ``extensible``
    None: on, the default on CUDA."""
    if extensible is False:
        return _OLD_HINT
    if utilization < 1.0:
        return (f"The KV cache gets what is left after the model and its activations within "
                f"`gpu_memory_utilization`={utilization:g}; increase it (with the extensible KV cache it defaults to "
                "1.0) or decrease `max_model_len` or `max_num_seqs`.")
    return ("The extensible KV cache already takes all device memory left after the model and its activations; "
            "decrease `max_model_len` or `max_num_seqs`, or the model needs a device with more memory.")
V1_ENGINE = "0.8.0"
# V0 turns chunked prefill on by itself for models longer than 32K tokens, so its profiling pass is
# max_num_batched_tokens, not max_model_len (vllm-project/vllm#6666, merged 2024-07-23; the first
# release after it is 0.5.4; multimodal models excepted from 0.6.1, #8425)
V0_LONG_CONTEXT_CHUNKED = "0.5.4"
V0_LONG_CONTEXT = 32768
DEFAULT_BLOCK_SIZE = 16
# mxfp4 MoE experts (gpt-oss) as vLLM's Marlin backend stores them: intermediate size rounded up
# to a multiple of 128 and hidden size to 256 (``Mxfp4MoEMethod.create_weights`` in
# vllm/model_executor/layers/quantization/mxfp4.py, read at main 007d500). Marlin serves below
# Hopper and wherever triton_kernels is missing; the Triton backend on Hopper pads less — public
# gpt-oss-120b logs on one H100: 65.97 GiB loaded with Marlin (vLLM #23278), 64.38 with Triton
# (#33155), against 60.7 GiB unpadded. The padded size is taken as the estimate.
MXFP4_PADDING = (128, 256, "vLLM's Marlin mxfp4 layout (intermediate to ×128, hidden to ×256)")  # CacheConfig.DEFAULT_BLOCK_SIZE

# Non-torch memory seen in real startup logs (CUDA context, cuBLAS workspaces; NCCL buffers with
# TP): 0.35 GiB on one RTX 3090 (vLLM #10517); about 0.7 GiB per rank left for it and the sampler
# on 4×A10 at TP 4 (vLLM #17469); up to about 2 GiB reported with TP on several GPUs.
NON_TORCH_GIB = {1: (0.3, 0.45, 1.0), "tp": (0.4, 0.7, 2.0)}
# CUDA-graph memory when profiled (0.20+): a few hundred MiB to ~1.5 GiB for the default capture
# sizes (vLLM prints "CUDA graph memory" in its memory profile).
CUDAGRAPH_GIB = (0.3, 0.7, 1.5)
# Torch activation peak per batched token of the profiling run: about
# (2·intermediate/tp + 4·hidden)·2 bytes for a gated-MLP decoder in bf16 (the fused gate/up output
# and a few hidden-size buffers alive together). Fit to the one public log with a full profile
# breakdown: Llama-3.1-8B on an RTX 3090 (vLLM #10517) peaks 2.07 GiB above its 14.99 GiB of
# weights at 20 000 tokens and 2.99 GiB at 29 000 — about 108 KiB/token with the sampler, 89
# without; the formula gives 88. Range ×0.6–×1.6 for other architectures.
ACTIVATION_RANGE = (0.6, 1.0, 1.6)
# The profiling run also samples once for max_num_seqs dummy requests (``_dummy_sampler_run``,
# vllm/v1/worker/gpu_model_runner.py, 0.8+): fp32 logits of max_num_seqs × vocab, plus the
# probabilities and the sorted copies of top-k/top-p — counted as 1.5 / 3 / 4.5 logits tensors.
SAMPLER_COPIES = (1.5, 3.0, 4.5)


class Pool(NamedTuple):
    """The KV-cache tokens one rank can hold: low / estimate / high, with the arithmetic."""

    low: int
    estimate: int
    high: int
    kv_bytes_per_token: float
    budget_bytes: float  # total · utilization
    weights_bytes: float  # on this rank
    steps: tuple[str, ...]  # the arithmetic, one line per term
    assumptions: tuple[str, ...]
    parts: tuple[tuple[str, float], ...] = ()  # the estimate of each term, in bytes per rank (for comparisons with logs)
    total_bytes: float = 0.0  # the GPU's memory (0: not given)
    fixed_kv: bool = False  # sized by kv_cache_memory_bytes (no profiling; 0.34's extensible KV cache is off)


def batched_tokens_default(version: str, memory_bytes: float, gpu_name: str, max_model_len: int | None,
                           chunked_prefill: bool | None) -> tuple[int, str]:
    """``max_num_batched_tokens`` vLLM uses when it is not set (EngineArgs.get_batch_defaults,
    OPENAI_API_SERVER context): 8192 on ≥70 GiB GPUs (0.8.5+; the A100 excepted from 0.9.0;
    16384 on ≥160 GiB from 0.28), else 2048; with chunked prefill off, at least max_model_len."""
    from sits_doctor.versions import V

    ver = V(version)
    gib = memory_bytes / GIB
    if gib >= 160 and ver >= V("0.28.0"):
        value, why = 16384, "≥160 GiB GPU"
    elif gib >= 70 and ver >= V("0.8.5") and not ("A100" in gpu_name.upper() and ver >= V(A100_SMALL_TIER)):
        value, why = 8192, "≥70 GiB GPU other than the A100"
    else:
        value, why = 2048, "GPU below 70 GiB (or an A100)"
    long_context_chunked = (ver < V(V1_ENGINE) and chunked_prefill is None and ver >= V(V0_LONG_CONTEXT_CHUNKED)
                            and (max_model_len or 0) > V0_LONG_CONTEXT)
    if long_context_chunked:
        why += f"; chunked prefill on by default above {V0_LONG_CONTEXT} tokens"
    elif ver < V(V1_ENGINE) or chunked_prefill is False:
        if max_model_len:
            value, why = max(value, max_model_len), why + "; chunked prefill off: at least max_model_len"
    return value, f"default of vLLM {version} for a {why}"


def seqs_default(version: str, memory_bytes: float, gpu_name: str) -> tuple[int, str]:
    """``max_num_seqs`` when it is not set (EngineArgs.get_batch_defaults): 1024 on ≥70 GiB GPUs
    from 0.8.5 (the A100 excepted from 0.9.0), else 256."""
    from sits_doctor.versions import V

    ver = V(version)
    if memory_bytes / GIB >= 70 and ver >= V("0.8.5") and not ("A100" in gpu_name.upper() and ver >= V(A100_SMALL_TIER)):
        return 1024, f"default of vLLM {version} for a ≥70 GiB GPU other than the A100"
    return 256, f"default of vLLM {version}"


def pool(*, version: str, memory_bytes: float, utilization: float, weights_bytes: float, kv_bytes_per_token: float,
         batched_tokens: int, hidden: int | None, intermediate: int | None, tp: int = 1, pp: int = 1,
         block_size: int | None = None, cuda_graphs: bool = True, kv_cache_memory_bytes: float | None = None,
         vocab: int | None = None, max_num_seqs: int = 0) -> Pool:
    """The KV pool of one rank (all sizes in bytes; ``weights_bytes`` for all ranks together)."""
    from sits_doctor.versions import V

    block = block_size or DEFAULT_BLOCK_SIZE
    ranks = max(1, tp) * max(1, pp)
    budget = memory_bytes * utilization
    weights = weights_bytes / ranks
    steps = [f"budget = {memory_bytes / GIB:.2f} GiB × gpu_memory_utilization {utilization:g} = {budget / GIB:.2f} GiB",
             f"weights on this rank = {weights_bytes / GIB:.2f} GiB / {ranks} rank(s) = {weights / GIB:.2f} GiB"]
    assumptions = []
    parts = [("budget", budget), ("weights", weights)]
    if kv_cache_memory_bytes is not None:
        kv = (kv_cache_memory_bytes,) * 3
        steps.append(f"kv_cache_memory_bytes = {kv_cache_memory_bytes / GIB:.2f} GiB (set: no profiling)")
    else:
        per_token = ((2 * (intermediate or 0) / max(1, tp)) + 4 * (hidden or 0)) * 2
        requests = min(max_num_seqs, batched_tokens) if batched_tokens else max_num_seqs
        logits = requests * (vocab or 0) * 4
        act = [batched_tokens * per_token * f + logits * c for f, c in zip(ACTIVATION_RANGE, SAMPLER_COPIES)]
        non_torch = [g * GIB for g in NON_TORCH_GIB["tp" if ranks > 1 else 1]]
        graphs = ([g * GIB for g in CUDAGRAPH_GIB] if cuda_graphs and V(version) >= V(CUDAGRAPH_PROFILED)
                  else [0.0, 0.0, 0.0])
        steps.append(f"activation peak ≈ {batched_tokens} batched tokens × {per_token / 1024:.0f} KiB + sampling "
                     f"{requests} requests × {vocab or 0} vocab in fp32 (×{SAMPLER_COPIES[1]:g}) = "
                     f"{act[1] / GIB:.2f} GiB (range {act[0] / GIB:.2f}–{act[2] / GIB:.2f})")
        steps.append(f"non-torch memory ≈ {non_torch[1] / GIB:.2f} GiB (range {non_torch[0] / GIB:.2f}–{non_torch[2] / GIB:.2f})")
        if graphs[1]:
            steps.append(f"CUDA graphs ≈ {graphs[1] / GIB:.2f} GiB (profiled from vLLM {CUDAGRAPH_PROFILED})")
        # the most KV comes with the smallest overheads, and the other way round
        kv = tuple(budget - weights - a - n - g for a, n, g in zip(reversed(act), reversed(non_torch), reversed(graphs)))
        parts += [("activation", act[1]), ("non_torch", non_torch[1]), ("cuda_graphs", graphs[1])]
        assumptions += ["activation peak, non-torch and CUDA-graph memory are measured by vLLM at startup; "
                        "sits-doctor estimates them (ranges from public startup logs)"]
    tokens = tuple(_tokens(k, kv_bytes_per_token, block) for k in kv)
    steps.append(f"KV pool ≈ {kv[1] / GIB:.2f} GiB → {tokens[1]} tokens at {kv_bytes_per_token / 1024:.1f} KiB/token "
                 f"in blocks of {block} (range {tokens[0]}–{tokens[2]})")
    parts.append(("kv", kv[1]))
    return Pool(tokens[0], tokens[1], tokens[2], kv_bytes_per_token, budget, weights, tuple(steps), tuple(assumptions),
                tuple(parts), memory_bytes, kv_cache_memory_bytes is not None)


def _tokens(kv_bytes: float, per_token: float, block: int) -> int:
    if kv_bytes <= 0 or per_token <= 0:
        return 0
    blocks = math.floor(kv_bytes / (per_token * block))
    return blocks * block


WEIGHTS_EXCEED = "the weights alone"  # the start of sits-doctor's own reason (not a message vLLM prints)


def own_explanation(reason: str | None) -> bool:
    """Whether a :func:`startup_check` reason is sits-doctor's explanation (the weights alone do
    not fit, so vLLM dies in torch's allocator), not the message vLLM prints."""
    return bool(reason) and reason.startswith(WEIGHTS_EXCEED)


def startup_check(max_model_len: int, p: Pool, version: str, *, need_bytes: float | None = None,
                  full_bytes_per_token: float | None = None, fixed_bytes: float = 0.0,
                  extensible: bool | None = None) -> tuple[bool | None, str | None]:
    """Whether one request of ``max_model_len`` fits (True / False / None when the range straddles
    it), and the message vLLM prints when it does not. ``need_bytes``: what one request needs when
    its layers differ (sliding-window layers hold only their window: ``fixed_bytes`` of it), with
    ``full_bytes_per_token`` growing with the length."""
    need = max_model_len
    if extensible is None and p.fixed_kv:
        extensible = False  # kv_cache_memory_bytes turns the extensible KV cache off (vllm/config/vllm.py@0.34.0)
    hybrid = need_bytes is not None and bool(full_bytes_per_token)
    have = [t * p.kv_bytes_per_token for t in (p.low, p.estimate, p.high)]
    if hybrid:
        ok = False if have[2] < need_bytes else True if have[0] >= need_bytes else None
    else:
        ok = False if p.high < need else True if p.low >= need else None
    if ok is not False:
        return ok, None
    if p.weights_bytes >= (p.total_bytes or p.budget_bytes):
        return False, (f"{WEIGHTS_EXCEED} ({p.weights_bytes / GIB:.2f} GiB per rank) exceed "
                       + (f"the GPU's {p.total_bytes / GIB:.2f} GiB" if p.total_bytes else
                          f"gpu_memory_utilization's budget ({p.budget_bytes / GIB:.2f} GiB)")
                       + ": vLLM runs out of memory loading them (torch.OutOfMemoryError) — use more GPUs "
                         "(tensor/pipeline parallelism) or a quantized checkpoint")
    from sits_doctor.versions import V

    ver = V(version)
    hint = (_hint(p.budget_bytes / p.total_bytes if p.total_bytes else 1.0, extensible)
            if ver >= V(HINT_BY_KV_CACHE_MODE) else None)
    if p.estimate <= 0:
        over = (f" (the weights, {p.weights_bytes / GIB:.2f} GiB per rank, already exceed gpu_memory_utilization's "
                f"budget of {p.budget_bytes / GIB:.2f} GiB)" if p.weights_bytes >= p.budget_bytes else "")
        if hint is not None:
            return False, f"No available memory for the cache blocks. {hint}" + over
        return False, ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                       "initializing the engine." + over)
    if ver < V(V1_ENGINE):  # V0 (vllm/worker/worker.py raise_if_cache_size_invalid)
        return False, (f"The model's max seq len ({need}) is larger than the maximum number of tokens that can be "
                       f"stored in KV cache ({p.estimate}). Try increasing `gpu_memory_utilization` or decreasing "
                       "`max_model_len` when initializing the engine.")
    if hybrid:
        longest = max(0, int((have[1] - fixed_bytes) // full_bytes_per_token))
        return False, _too_long_message(version, need, need_bytes / GIB, have[1] / GIB, longest, hint)
    return False, _too_long_message(version, need, need * p.kv_bytes_per_token / GIB, have[1] / GIB, p.estimate, hint)


def _too_long_message(version: str, need: int, needed_gib: float, have_gib: float, longest: int,
                      hint: str | None = None) -> str:
    from sits_doctor.versions import V

    whose = "model's" if V(version) >= V(MESSAGE_TYPO_FIXED) else "models's"
    advice = (f"{hint} Decreasing `max_model_len` also reduces what is needed." if hint is not None else
              "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.")
    return (f"To serve at least one request with the {whose} max seq len ({need}), ({needed_gib:.2f} GiB KV cache "
            f"is needed, which is larger than the available KV cache memory ({have_gib:.2f} GiB). Based on the "
            f"available memory, the estimated maximum model length is {longest}. {advice}")
