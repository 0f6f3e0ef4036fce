"""unbounded-kv-cache (SITS001)

## What it does
Predicts, from the configs alone, whether vLLM can hold one request of `max_model_len` tokens in
the KV cache it will size on the given GPU (and for ORT GenAI, whether the KV buffer it
preallocates for `search.max_length` fits, for TensorRT-LLM whether one `max_seq_len` sequence fits the
pool it sizes from the free memory, and for transformers whether one sequence of a
`generation_config.json`'s `max_length` fits beside the weights) — the check vLLM itself runs only
after the weights are loaded, minutes into the start. It reports:
- **error**: one max-length request does not fit (vLLM refuses to start, with the message it
  would print; TensorRT-LLM starts but silently shrinks the attention window and `max_seq_len`
  to what fits, with the warning it would log), or the weights alone exceed the GPU;
- **warning**: `max_model_len` is left to the model's full context and fewer than two
  max-length requests fit at once; a transformers `max_length` with no `max_new_tokens` whose KV
  cache (DynamicCache grows a token at a time) outgrows the GPU mid-answer (an error when
  `cache_implementation: static` preallocates it at the first call); the predicted range
  straddles the need (it may or may not start: a possible startup failure is never ranked below
  advice);
- **info**: the GPU or the model is unknown (pass `--gpu`, or set `gpu = "H100"` in
  `.sits-doctor.toml`); for ORT GenAI, the fit depends on an export precision that neither the
  decoder's file name, its folder names nor the ONNX files' size states (a guess is not a
  prediction), or the model runs on the CPU (`provider_options` empty or without a GPU provider:
  the buffer comes from system memory, which is not checked) or an NPU.

## Why it hurts
A long-context model served without `--max-model-len` asks for its full context: Llama-3.1-8B's
131 072 tokens take 16 GiB of KV cache, more than an A10G has left after the weights. vLLM stops
with "To serve at least one request with the model's max seq len (131072) ... KV cache is needed"
— in a crash loop, after every restart has loaded the weights again.

## Example
```yaml file=serve.yaml target=vllm==0.11.0 gpu=A10G
model: meta-llama/Llama-3.1-8B-Instruct
gpu-memory-utilization: 0.9
```
Use instead:
```yaml file=serve.yaml target=vllm==0.11.0 gpu=A10G
model: meta-llama/Llama-3.1-8B-Instruct
gpu-memory-utilization: 0.9
max-model-len: 16384
```

## Fix
`sits-doctor fix --unsafe-fixes` sets `max_model_len` to the largest length that fits the low
end of the predicted pool, in whole KV blocks (unsafe: longer prompts are then refused). When
the weights do not fit, the fix is shown, not applied: more GPUs (tensor/pipeline parallelism)
or a quantized checkpoint.

## How it is measured
`sits-doctor capacity` shows the arithmetic: KV bytes per token per rank from the model config
(GQA, TP replication, MLA, sliding-window layers), weights from the parameter count and the
quantization, and vLLM's pool for the target version (budget = total × gpu_memory_utilization,
minus weights, profiling activations and sampler, non-torch memory and, from vLLM 0.20, CUDA
graphs) as a low / estimate / high range. Accuracy against real vLLM startup logs is recorded in
bench/results/capacity-accuracy.md in the sits-doctor repository.

## Sources
- vLLM `vllm/v1/worker/gpu_worker.py@v0.10.0` `determine_available_memory` (the same budget
  through `@v0.33.0`) and V0 `vllm/worker/worker.py@v0.6.3` `determine_num_available_blocks`:
  the budget and what is subtracted.
- vLLM `vllm/v1/core/kv_cache_utils.py@v0.10.0` `check_enough_kv_cache_memory`
  (`vllm/v1/core/kv_cache_planning.py@v0.33.0`): the startup check and its message;
  `vllm/v1/kv_cache_interface.py@v0.8.5` `AttentionSpec.page_size_bytes` / `MLAAttentionSpec`.
- vLLM `vllm/envs.py@v0.20.0` `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` (default 1 from then on).
- https://docs.vllm.ai/en/latest/configuration/conserving_memory.html (max_model_len and
  gpu_memory_utilization as the levers).
- ORT GenAI: `src/models/kv_cache.cpp@v0.11.0` (with `past_present_share_buffer` the KV buffer of
  `max_length` tokens is allocated at Generator creation), the model builder writing
  `search.max_length = context_length` (`src/python/py/models/builder.py@v0.11.0`),
  https://onnxruntime.ai/docs/genai/howto/past-present-share-buffer.html, and the failures in
  https://github.com/microsoft/onnxruntime-genai/issues/1379 and /issues/550. The KV dtype is the
  ONNX past inputs' type, which the builder sets per export (`set_io_dtype` in
  `src/python/py/models/builder.py@v0.11.0`: fp32 for CPU int4/int8 and fp32 exports, fp16 for GPU
  fp16/int4 ones); the device is the decoder's `session_options.provider_options`
  (`src/models/model.cpp@v0.11.0`: no provider runs on the CPU); int4 weights are MatMulNBits
  blocks (`block_size` 32 by default, 128 in microsoft's AWQ exports such as
  https://huggingface.co/microsoft/Phi-3-medium-4k-instruct-onnx-directml).
- TensorRT-LLM: the pool is `free_gpu_memory_fraction` of the memory free after the model
  (`KVCacheManager::calculateMaxNumBlocks` in `cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp`;
  the PyTorch backend's `KvCacheCreator` in `tensorrt_llm/_torch/pyexecutor/_util.py`,
  https://nvidia.github.io/TensorRT-LLM/reference/memory.html); the window shrink and its
  messages (`resource_manager.py`, https://github.com/NVIDIA/TensorRT-LLM/pull/5151;
  `fail_fast_on_attention_window_too_large`, https://github.com/NVIDIA/TensorRT-LLM/pull/5974).
- transformers: `DynamicCache.update` concatenates every step's keys and values
  (`src/transformers/cache_utils.py@v4.45.0`; `DynamicLayer.update@v5.24.0`, where a cache
  built from the model config keeps only the window on sliding layers);
  `StaticCache` is allocated for `max_cache_len` (generate passes `max_length`);
  `max_new_tokens` takes precedence over `max_length`
  (https://huggingface.co/docs/transformers/main_classes/text_generation,
  https://huggingface.co/docs/transformers/kv_cache).
"""

from __future__ import annotations

from typing import Iterator

from sits_doctor.finding import Finding, Safety, Severity
from sits_doctor.fixes import config as edit
from sits_doctor.fixes.config_insert import add_option
from sits_doctor.frameworks import vllm as fw
from sits_doctor.plan import Plan
from sits_doctor.rule import Rule

RULE = Rule(
    code="SITS001",
    name="unbounded-kv-cache",
    summary="the KV cache for the configured length cannot fit on this GPU (vLLM's pool, TensorRT-LLM's window, ORT GenAI's preallocation, transformers' generate), or barely does",
    severity=Severity.ERROR,
    frameworks=("vllm", "trtllm", "ortgenai", "hf"),
    needs=("model", "gpu", "sizing"),
)

LOW_CONCURRENCY = 2  # fewer max-length requests than this at once, with max_model_len unset: warn


def check(plan: Plan, ctx) -> Iterator[Finding]:
    by_framework = {"vllm": _vllm, "trtllm": _trtllm, "ortgenai": _ortgenai, "hf": _transformers}
    yield from by_framework[plan.framework](plan, ctx)


def _vllm(plan: Plan, ctx) -> Iterator[Finding]:
    pred = yield from _sized(plan)
    if pred is None:
        return
    serving = plan.facts.serving
    length = serving.max_model_len
    written = length is not None and length.is_set
    at = length.setting if written else None
    low, estimate, high = pred.tokens
    gpu = plan.facts.gpu
    where = f"{gpu.name} ({gpu.memory_gib:.2f} GiB)"
    evidence = [_memory_line(pred), f"GPU: {gpu.name}, {gpu.memory_gib:.2f} GiB each ({gpu.source})",
                *pred.steps, *pred.assumptions, *([gpu.note] if gpu.note else []), f"target: {ctx.target}"]
    how = "as set" if written else "unset, so the model's"
    if pred.startup_ok is False:
        fixes = []
        if low > 0:  # the pool is whole KV blocks: any tokens at all are at least one block
            title = f"set max_model_len to {low} (the most that fits the low estimate)"
            fixes.append(edit.replace_value(at, low, title, Safety.UNSAFE) if written
                         else add_option(plan, fw.MAX_MODEL_LEN, low, title, Safety.UNSAFE))
        from sits_doctor.frameworks.vllm_memory import own_explanation

        reason = pred.startup_reason or ""
        ours = own_explanation(reason)  # sits-doctor's own words, not vLLM's message
        head = reason.split(": ", 1)[0] if ours else f"{ctx.target.name} refuses to start"
        yield RULE.finding(
            plan, at,
            f"max_model_len {pred.max_model_len} ({how}) cannot fit on {where}: {head}",
            evidence=evidence[:1] + ([reason.split(": ", 1)[-1]] if ours else []) + evidence[1:], fixes=fixes,
            quote=None if ours or not reason else (ctx.target.name, reason),
            fix_hint=(f"set max_model_len ≤ {low}" if low > 0 else
                      "use more GPUs (tensor/pipeline parallelism) or a quantized checkpoint"),
        )
    elif pred.startup_ok is None:
        yield RULE.finding(
            plan, at,
            f"max_model_len {pred.max_model_len} ({how}) may not fit on {where}: the predicted KV pool is "
            f"{low}–{high} tokens (estimate {estimate}); {ctx.target.name} refuses to start below {pred.max_model_len}",
            evidence=evidence, severity=Severity.WARNING,
            fix_hint=f"set max_model_len ≤ {low} to be sure, or check `sits-doctor capacity` with --gpu-memory",
        )
    elif not written and estimate < LOW_CONCURRENCY * pred.max_model_len:
        yield RULE.finding(
            plan, at,
            f"max_model_len is not set, so it is the model's {pred.max_model_len}: {where} holds about "
            f"{estimate / pred.max_model_len:.1f} requests of that length at once ({estimate} KV tokens)",
            evidence=evidence, severity=Severity.WARNING,
            fix_hint="set max_model_len to the longest request you serve (the workload's p99)",
        )


_TERMS = {"weights": "weights", "activation": "activations", "non_torch": "non-torch", "cuda_graphs": "CUDA graphs"}


def _memory_line(pred) -> str:
    """The pool's arithmetic on one line (the steps after it have each term's derivation):
    ``memory per rank: budget 71.28 − weights 131.41 − ... = KV pool -63.42 GiB → 0 tokens``."""
    from sits_doctor.memory import GIB

    parts = dict(pred.parts)
    if "budget" not in parts or "kv" not in parts:
        return f"KV pool: {pred.tokens[1]} tokens per rank (estimate; range {pred.tokens[0]}–{pred.tokens[2]})"
    terms = "".join(f" − {name} {parts[key] / GIB:.2f}" for key, name in _TERMS.items() if parts.get(key))
    return (f"memory per rank (GiB): budget {parts['budget'] / GIB:.2f}{terms} = KV pool {parts['kv'] / GIB:.2f} → "
            f"{pred.tokens[1]} tokens (range {pred.tokens[0]}–{pred.tokens[2]}) at "
            f"{pred.kv_bytes_per_token / 1024:.1f} KiB/token")


def _sized(plan: Plan):
    """The plan's capacity prediction when it has a length to judge (returned), else nothing — with
    an info when what is missing is known (yielded)."""
    from sits_doctor.capacity import predict_plan

    pred = predict_plan(plan)
    if pred is None:
        return None
    if pred.tokens is None or not pred.max_model_len:
        if pred.missing:
            yield RULE.finding(plan, plan.anchor, f"cannot size the KV cache: {'; '.join(pred.missing)}",
                               severity=Severity.INFO)
        return None
    return pred


ORT_HEADROOM = 0.5  # a preallocated KV buffer above half the GPU's memory: warn (max_length above need)
ORT_LENGTH_STEP = 1024  # the bound a fix writes is a multiple of this


def _ortgenai(plan: Plan, ctx) -> Iterator[Finding]:
    """The preallocated KV buffer against the memory it comes from: an error only when it cannot fit
    even at the least the unknowns (precision, KV dtype) allow; an info when it depends on them or
    when the model does not run on the GPU."""
    from sits_doctor.frameworks.ortgenai import MAX_LENGTH
    from sits_doctor.frameworks.ortgenai_memory import predict_ortgenai
    from sits_doctor.memory import GIB

    pre = predict_ortgenai(plan)
    if pre.kv_bytes is None:
        return
    at = plan.settings.get(MAX_LENGTH)
    kv_low, kv_high = pre.kv_bytes
    what = f"search.max_length {pre.max_length} preallocates {_gib_range(kv_low, kv_high)} GiB of KV cache"
    how = "with past_present_share_buffer true the Generator allocates the whole KV buffer when it is created"
    if pre.device.kind != "gpu":
        memory_of = "system memory" if pre.device.kind == "cpu" else f"the memory of {pre.device.provider}"
        yield RULE.finding(
            plan, at,
            f"{what} from {memory_of}: not checked (only GPU memory is)",
            why=f"{how}; it runs on {memory_of}: {pre.device.source}",
            evidence=[*pre.steps, *pre.assumptions, f"target: {ctx.target}"], severity=Severity.INFO,
            fix_hint="set search.max_length to the longest sequence you generate (the builder writes context_length)",
        )
        return
    gpu = plan.facts.gpu
    memory = gpu.memory_gib * GIB
    w_low, w_high = pre.weights_bytes or (0.0, 0.0)
    evidence = [f"GPU: {gpu.name}, {gpu.memory_gib:.2f} GiB each ({gpu.source})", *pre.steps, *pre.assumptions,
                f"target: {ctx.target}"]
    room_best, room_worst = memory - w_low - GIB, memory - w_high - GIB  # a GiB for the CUDA context and activations
    # the bound a fix writes keeps the buffer within the worst-case room and within ORT_HEADROOM of the GPU
    fits = int(max(0.0, min(room_worst, ORT_HEADROOM * memory)) // pre.per_token[1]) // ORT_LENGTH_STEP * ORT_LENGTH_STEP
    if kv_low > room_best:
        fixes = ([edit.replace_value(at, fits, f"set search.max_length to {fits} (a buffer within half the GPU)",
                                     Safety.UNSAFE)]
                 if at is not None and fits > 0 else [])
        yield RULE.finding(
            plan, at,
            f"{what}, more than the {max(0.0, room_best) / GIB:.2f} GiB {gpu.name} has for it: the Generator "
            "fails to allocate it",
            quote=("ORT GenAI", "Could not allocate the key-value cache buffer"),
            why=f"{how}; {gpu.name} has {gpu.memory_gib:.2f} GiB"
                + (f", less {w_low / GIB:.2f} GiB of weights" if w_low else "") + ", less 1 GiB for the CUDA context",
            evidence=evidence, fixes=fixes,
            fix_hint=f"set search.max_length ≤ {fits}" if fits > 0 else "use a GPU with more memory",
        )
    elif kv_high > room_worst:
        yield RULE.finding(
            plan, at,
            f"{what}; {gpu.name} has {_gib_range(max(0.0, room_worst), room_best)} GiB for it: that depends on the "
            "export's unstated precision",
            why=f"{how}; precision: {pre.precision.source}",
            evidence=evidence, severity=Severity.INFO,
            fix_hint=(f"set search.max_length ≤ {fits} to be sure, or keep the ONNX files beside the config"
                      if fits > 0 else "keep the ONNX files beside the config so that their size is known"),
        )
    elif kv_low > ORT_HEADROOM * memory:
        yield RULE.finding(
            plan, at,
            f"{what}, {kv_low / memory:.0%} of {gpu.name}'s memory, whatever the requests' real lengths",
            why=how,
            evidence=evidence, severity=Severity.WARNING,
            fix_hint="set search.max_length to the longest sequence you generate (the builder writes context_length)",
        )


def _gib_range(low: float, high: float) -> str:
    from sits_doctor.memory import GIB

    return f"{low / GIB:.2f}" if f"{low / GIB:.2f}" == f"{high / GIB:.2f}" else f"{low / GIB:.2f}–{high / GIB:.2f}"


HF_LENGTH_STEP = 1024  # the max_length a fix writes is a multiple of this
HF_OVERHEAD_GIB = 1.0  # CUDA context and activations of one sequence, left out of the room for KV


def _transformers(plan: Plan, ctx) -> Iterator[Finding]:
    """A generation_config that lets one sequence grow past what the GPU holds: DynamicCache grows
    a step at a time, so generate() runs out of memory mid-answer; a static cache preallocates it
    all at the first call."""
    from sits_doctor import memory
    from sits_doctor.frameworks import transformers as tf
    from sits_doctor.versions import V

    dims, gpu = plan.facts.model, plan.facts.gpu
    length_at = plan.settings.get(tf.GENERATION_MAX_LENGTH)
    if dims is None or length_at is None or length_at.templated or plan.settings.get(
            tf.GENERATION_MAX_NEW_TOKENS) is not None:
        return
    length = length_at.value
    if not isinstance(length, int):  # a non-number is the schema's to report; 0 and below need no room
        return
    cache = plan.settings.get(tf.GENERATION_CACHE_KEY)
    static = cache is not None and cache.value in tf.STATIC_CACHES
    # generate() caches K and V in the model's dtype: a live model states it (check_model); a config's
    # "auto" counts float32 checkpoints at 2 bytes, as they are usually loaded in half precision
    rt = plan.facts.runtime
    live_dtype = rt.dtype.value if rt is not None and rt.live and rt.dtype is not None else None
    kv, _ = memory.kv_bytes_per_token(dims, live_dtype or "auto",
                                      sliding_per_token=V(ctx.target.version) < V(tf.DYNAMIC_CACHE_SLIDING_BOUNDED))
    weights, _ = memory.weights_bytes(dims)
    if kv is None or weights is None:
        return
    total = gpu.memory_gib * memory.GIB
    room = total - weights.value - HF_OVERHEAD_GIB * memory.GIB
    need = kv.value * length
    if need <= room:
        return
    fits = int(max(0.0, room) // kv.value)
    bound = fits // HF_LENGTH_STEP * HF_LENGTH_STEP
    evidence = [f"GPU: {gpu.name}, {gpu.memory_gib:.2f} GiB ({gpu.source})", f"KV per token: {kv.prov}",
                f"weights: {weights.prov}",
                f"room for KV = {gpu.memory_gib:.2f} GiB − {weights.value / memory.GIB:.2f} GiB of weights − "
                f"{HF_OVERHEAD_GIB:g} GiB for the CUDA context and activations = {max(0.0, room) / memory.GIB:.2f} GiB",
                f"one sequence of max_length {length} needs {need / memory.GIB:.2f} GiB of KV cache",
                f"target: {ctx.target}"]
    fixes = ([edit.replace_value(length_at, bound, f"set max_length to {bound} (what one sequence can hold)",
                                 Safety.UNSAFE)] if bound > 0 else [])
    if room <= 0:
        what = (f"the weights alone ({weights.value / memory.GIB:.2f} GiB) leave no room on {gpu.name} for the KV cache: "
                "torch.OutOfMemoryError at load or on the first token")
        why = f"{gpu.name} has {gpu.memory_gib:.2f} GiB; max_length {length} needs {need / memory.GIB:.2f} GiB of KV"
        severity = Severity.ERROR
    elif static:
        what = (f"cache_implementation {cache.value!r} preallocates {need / memory.GIB:.2f} GiB of KV, more than "
                f"{gpu.name} has beside the weights: torch.OutOfMemoryError before the first token")
        why = (f"the first generate() call allocates max_length {length} tokens of KV; {gpu.name} has "
               f"{max(0.0, room) / memory.GIB:.2f} GiB beside the weights")
        severity = Severity.ERROR
    else:
        what = (f"generation_config max_length {length} with no max_new_tokens: one sequence runs out of "
                f"{gpu.name}'s memory near token {fits} (torch.OutOfMemoryError)")
        why = (f"DynamicCache grows with every token; {need / memory.GIB:.2f} GiB of KV cache at {length} tokens, "
               "more than the GPU has beside the weights")
        severity = Severity.WARNING
    yield RULE.finding(plan, length_at, what, why=why, evidence=evidence, fixes=fixes, severity=severity,
                       fix_hint=(f"set max_new_tokens (or max_length ≤ {bound}); for fixed-shape serving, "
                                 "cache_implementation: static with that bound" if bound > 0
                                 else "use a GPU with more memory or a quantized checkpoint"))


def _trtllm(plan: Plan, ctx) -> Iterator[Finding]:
    """TensorRT-LLM starts even when one max_seq_len sequence does not fit its KV pool: it shrinks
    the attention window (and max_seq_len) to what fits and logs a warning (unless it fails fast,
    or no block fits at all: then it fails at startup)."""
    from sits_doctor.frameworks import trtllm as trt
    from sits_doctor.frameworks.trtllm_memory import own_explanation, shrinks_window

    pred = yield from _sized(plan)
    if pred is None:
        return
    low, estimate, high = pred.tokens
    length = pred.max_model_len
    engine = plan.kind == "trtllm-engine"
    at = plan.settings.get(trt.BUILD_MAX_SEQ_LEN if engine else trt.MAX_SEQ_LEN)
    gpu = plan.facts.gpu
    where = f"{gpu.name} ({gpu.memory_gib:.2f} GiB)"
    evidence = [_memory_line(pred), f"GPU: {gpu.name}, {gpu.memory_gib:.2f} GiB each ({gpu.source})",
                *pred.steps, *pred.assumptions, *([gpu.note] if gpu.note else []), f"target: {ctx.target}"]
    how = "as set" if at is not None else "not set: the model's maximum"
    bound = low  # the pool is whole KV blocks (tokens_per_block), so its low end is a bound as it stands
    if pred.startup_ok is False:
        fixes = []
        if not engine and bound > 0:
            title = f"set max_seq_len to {bound} (what one sequence can hold at the low estimate)"
            fixes.append(edit.replace_value(at, bound, title, Safety.UNSAFE) if at is not None
                         else add_option(plan, trt.MAX_SEQ_LEN, bound, title, Safety.UNSAFE))
        yield RULE.finding(
            plan, at if at is not None else plan.anchor,
            f"max_seq_len {length} ({how}) is more than the KV pool on {where} holds (about {estimate} tokens): "
            + (f"{ctx.target.name} shrinks the attention window" if shrinks_window(pred.startup_reason)
               else f"{ctx.target.name} fails at startup"),
            evidence=([pred.startup_reason] if own_explanation(pred.startup_reason) else []) + evidence, fixes=fixes,
            quote=None if own_explanation(pred.startup_reason) else (ctx.target.name, pred.startup_reason),
            fix_hint=_trtllm_hint(engine, bound),
        )
    elif pred.startup_ok is None:
        yield RULE.finding(
            plan, at if at is not None else plan.anchor,
            f"max_seq_len {length} ({how}) may not fit one sequence on {where}: the predicted KV pool is {low}–{high} "
            f"tokens (estimate {estimate}); below {length} {ctx.target.name} shrinks the attention window",
            evidence=evidence, severity=Severity.WARNING,
            fix_hint=f"set max_seq_len ≤ {bound} to be sure, or check `sits-doctor capacity` with --gpu-memory",
        )


def _trtllm_hint(engine: bool, bound: int) -> str:
    if bound <= 0:
        return "use more GPUs (tensor/pipeline parallelism) or a quantized checkpoint"
    if engine:
        return f"rebuild the engine with trtllm-build --max_seq_len ≤ {bound}"
    from sits_doctor.frameworks.trtllm import FAIL_FAST_WINDOW, MAX_SEQ_LEN

    return f"set {MAX_SEQ_LEN} ≤ {bound}, or {FAIL_FAST_WINDOW}: true to refuse to start instead of shrinking"
