"""full-precision-kv-at-long-context (SITS007)

## What it does
Finds long-context deployments whose KV cache is kept in 16 bits (`kv_cache_dtype` `auto` on a
bf16/fp16 model, or `bfloat16` / `float16` written out) while the KV pool holds only a few
requests of `max_model_len` tokens, on a GPU where vLLM keeps fp8 KV natively. It reports:
- **warning**: `max_model_len` ≥ 32768 and fewer than 4 requests of that length fit in the
  predicted pool at once;
  also when one max-length request may not fit in the 16-bit pool (SITS001's error or info) but
  would in fp8: another way out than a shorter `max_model_len`;
- **info**: the same with 4 to 8 such requests; or the GPU is given only by its memory size
  (`--gpu-memory`), so whether it has fp8 is unknown.

It stays silent when `max_num_seqs` already caps the batch below the number that fits, when one
max-length request would not fit even in fp8, on GPUs without native fp8 (Ampere, Turing,
Volta), and for ModelOpt checkpoints that declare `kv_cache_quant_algo: FP8` and leave
`kv_cache_dtype` unset (recent vLLM turns `auto` into fp8 for them). The finding says
whether the checkpoint carries calibrated KV scales. TensorRT-LLM LLM-API files on the
PyTorch backend (`kv_cache_config.dtype`) are judged the same way, from the pool TensorRT-LLM
sizes out of the memory left free after the model (see SITS001).

## Why it hurts
At long context the KV cache, not the weights, decides how many requests run at once: one
131072-token request of Llama-3.1-8B takes 16 GiB in bf16. On one H100 at the full context the
pool holds about 3.4 such requests; a fourth waits, or vLLM preempts a running one and
recomputes it later. fp8 (e4m3) KV takes 1 byte per value instead of 2: the same pool holds
twice the tokens, and every decode step reads half the KV bytes — at long context that read,
not the weights, is most of a step's memory traffic. On Hopper vLLM's FlashAttention 3 reads
the fp8 cache directly (queries are quantized to fp8 as well).

## Example
```yaml file=serve.yaml target=vllm==0.11.0 gpu=H100
model: meta-llama/Llama-3.1-8B-Instruct
max-model-len: 131072
```
Use instead:
```yaml file=serve.yaml target=vllm==0.11.0 gpu=H100
model: meta-llama/Llama-3.1-8B-Instruct
max-model-len: 131072
kv-cache-dtype: fp8
```

## Fix
`sits-doctor fix --unsafe-fixes` writes `kv_cache_dtype: fp8` (`--kv-cache-dtype fp8` on a command
line; `kv_cache_config.dtype: fp8` for TensorRT-LLM). Unsafe: it changes the numerics of
attention. A checkpoint with calibrated KV scales (compressed-tensors `kv_cache_scheme`, ModelOpt
`kv_cache_quant_algo`) gives vLLM the scales it needs. Without them vLLM uses 1.0 for K and V
and logs "Using KV cache scaling factor 1.0 for fp8_e4m3": whether that is close enough depends
on the model, so check your evaluations, or calibrate with llm-compressor (`kv_cache_scheme`).
vLLM up to 0.27 also had `--calculate-kv-scales` (scales from the first batch; removed in 0.28).

## How it is measured
`sits-doctor capacity` arithmetic (the same as SITS001): KV bytes per token per rank from the
model config, the weights, and vLLM's budget minus weights, activation peak, non-torch memory
and CUDA graphs, as a low / estimate / high pool. Requests at once = estimated pool tokens ÷
`max_model_len`. The fp8 figure is the same prediction with `kv_cache_dtype fp8`: KV bytes per
token recomputed at 1 byte per value, the budget and everything else unchanged.

Thresholds: from 32768 tokens one request of a Llama-3.1-8B-shaped model needs 4 GiB of KV
(Llama-3.1-70B: 10 GiB), so the KV cache, not the weights, sizes the batch; below that a
shorter context is rarely what turns requests away. The count of requests at
once is of max-length ones, the worst case: below 4, a handful of long prompts arriving together
fill the pool and vLLM queues or preempts the rest (warning); from 4 to 8 there is headroom for
the usual mix of long and short requests (info); from 8 on, long requests rarely wait for KV
space and the rule keeps quiet. A `max_num_seqs` below these counts lowers them: the scheduler,
not the pool, caps the batch. GPUs: the catalog's `fp8` (NVIDIA compute capability 8.9 and later,
AMD MI300 series). On Ampere and older, vLLM's default fp8-KV path is the Triton backend, which
needs SM 8.9 for e4m3 (vLLM #26431 on 0.11); `fp8_e5m2` or FlashInfer run there but convert in
software and lose precision or speed, so the rule does not suggest them.

## Sources
- vLLM `vllm/attention/utils/fa_utils.py@v0.8.5` and `@v0.11.0` `flash_attn_supports_fp8`
  (FlashAttention 3 on compute capability 9.x only), `vllm/v1/attention/backends/fa_utils.py@v0.33.0`
  `flash_attn_supports_kv_cache_dtype` (FA3 on SM90, FA4 on SM100; never `fp8_e5m2`):
  https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/attention/backends/fa_utils.py
- vLLM `vllm/platforms/cuda.py@v0.11.0` (fp8 KV on SM 8.x selects the Triton
  backend; `supports_fp8` = SM 8.9+; "All Blackwell backends support fp8") and `@v0.33.0`
  `_get_backend_priorities` (FLASH_ATTN, FLASHINFER, TRITON_ATTN);
  `vllm/v1/attention/backends/triton_attn.py@v0.33.0` ("FP8 KV cache is not supported by the
  Triton attention backend ... requires SM89+"):
  https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/attention/backends/triton_attn.py
- vLLM `vllm/engine/arg_utils.py@v0.8.5` `_is_v1_supported_oracle` (fp8 KV on V1 only with FA3).
- vLLM `vllm/model_executor/layers/quantization/kv_cache.py@v0.33.0` `BaseKVCacheMethod`
  (checkpoint k_scale/v_scale, else 1.0 and the warning; doubled on MI300's e4m3fnuz),
  `compressed_tensors/compressed_tensors.py@v0.33.0` (`kv_cache_scheme`: 8-bit float, tensor or
  attn_head strategy, symmetric), `vllm/utils/torch_utils.py@v0.33.0`
  `resolve_kv_cache_dtype_string` (ModelOpt `kv_cache_quant_algo` turns `auto` into fp8; PR
  https://github.com/vllm-project/vllm/pull/29980), `vllm/platforms/rocm.py@v0.33.0`
  (`float8_e4m3fnuz` on gfx94x).
- https://docs.vllm.ai/en/v0.11.2/features/quantization/quantized_kvcache/ and
  https://docs.vllm.ai/en/latest/features/quantization/quantized_kvcache/ (about double the KV
  space; scales default to 1.0; calibration with llm-compressor).
- https://github.com/vllm-project/vllm/issues/26431 (fp8 KV on an RTX 3090, vLLM 0.11.0: "type
  fp8e4nv not supported in this architecture").
- TensorRT-LLM `KvCacheConfig.dtype` ("auto", "fp8"; PyTorch backend):
  https://nvidia.github.io/TensorRT-LLM/1.0.0/features/quantization.html (FP8 KV cache can be
  enabled for checkpoints that do not carry it).
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from sits_doctor.finding import Finding, Fix, Safety, Severity
from sits_doctor.fixes import config as edit
from sits_doctor.fixes.config_insert import add_member, add_option
from sits_doctor.fixes.config_style import CannotEdit
from sits_doctor.frameworks import trtllm as trt
from sits_doctor.frameworks import vllm as fw
from sits_doctor.plan import Plan
from sits_doctor.rule import Rule

RULE = Rule(
    code="SITS007",
    name="full-precision-kv-at-long-context",
    summary="a 16-bit KV cache at long context where fp8 KV would hold twice the requests (fp8-capable GPU)",
    severity=Severity.WARNING,
    frameworks=("vllm", "trtllm"),
    needs=("model", "gpu", "sizing"),
)

LONG_CONTEXT = 32768  # max_model_len from which the KV cache, not the weights, sizes the batch
WARN_BELOW = 4  # fewer max-length requests at once than this: warning
INFO_BELOW = 8  # from WARN_BELOW up to this: info; from here on capacity does not bind
FP8 = "fp8"  # the value the fix writes (e4m3 in vLLM and TensorRT-LLM)

# TensorRT-LLM LLM-API: KvCacheConfig.dtype under kv_cache_config (tensorrt_llm/llmapi/llm_args.py).
TRT_KV_CONFIG = "/kv_cache_config"
TRT_KV_DTYPE = "dtype"
TRT_BACKEND = trt.BACKEND
TRT_PYTORCH = (None, trt.PYTORCH_BACKENDS[0])  # unset: the PyTorch backend, the LLM API's default from 1.0
# How each framework names the length and the KV dtype in messages.
NAMES = {"vllm": (fw.MAX_MODEL_LEN, None), "trtllm": (trt.MAX_SEQ_LEN, trt.KV_CACHE_DTYPE)}  # None: _vllm_option()
# What vLLM does without checkpoint scales (kv_cache.py BaseKVCacheMethod); not stated for TensorRT-LLM.
SCALE_ONE = {"vllm": ": K and V are quantized with scale 1.0"}


def check(plan: Plan, ctx) -> Iterator[Finding]:
    from sits_doctor.capacity import predict_plan

    if plan.framework == "trtllm" and (plan.kind != "trtllm-llmapi" or plan.value(TRT_BACKEND) not in TRT_PYTORCH):
        return  # an engine's KV dtype is fixed when it is built; kv_cache_config.dtype is PyTorch-backend only
    pred = predict_plan(plan)
    if pred is None or pred.tokens is None or not pred.max_model_len or pred.max_concurrency is None:
        return  # no capacity model for this framework yet, or facts missing (SITS001 says which)
    facts = plan.facts
    serving, dims, gpu = facts.serving, facts.model, facts.gpu
    kv = serving.kv_cache_dtype
    kv_name = str(kv.value) if kv is not None and kv.value is not None else "auto"
    if not _sixteen_bits(kv_name, dims):
        return
    length = pred.max_model_len
    if length < LONG_CONTEXT:
        return
    explicit = kv is not None and kv.is_set
    scales = _kv_scales(dims, SCALE_ONE.get(plan.framework, ""))
    len_name, dtype_name = NAMES[plan.framework]
    dtype_name = dtype_name or _vllm_option()
    if plan.framework == "vllm" and (not explicit or kv_name == "auto") and scales.declares_fp8:
        return  # vLLM turns `auto` into fp8 for this checkpoint (resolve_kv_cache_dtype_string)
    fit = pred.max_concurrency
    seqs = serving.max_num_seqs.value if serving.max_num_seqs is not None else None
    cap = seqs if isinstance(seqs, int) and not isinstance(seqs, bool) and seqs > 0 else None
    if fit >= min(INFO_BELOW, cap or INFO_BELOW):
        return  # room for the long requests, or max_num_seqs caps the batch first
    severity = Severity.WARNING if fit < min(WARN_BELOW, cap or WARN_BELOW) else Severity.INFO
    fits = pred.startup_ok is True  # else SITS001 reports the failure; fp8 may be another way out

    from sits_doctor.catalogs import gpus

    card = gpus.find(gpu.name)  # None: given by its memory alone (--gpu-memory)
    at = kv.setting if explicit else (serving.max_model_len.setting if serving.max_model_len is not None else None)
    low, estimate, high = pred.tokens
    kv_shown = kv_name if explicit else f"auto: the model's {_model_dtype(dims)}"
    what = (f"KV cache in {_bits(kv_name, dims)} bits at {len_name} {length}: "
            + (f"about {fit:.1f} requests of that length fit at once" if fits
               else "one request of that length may not fit (see SITS001)"))
    held = f"{dtype_name} {kv_shown}: {gpu.name} holds {estimate} KV tokens"
    if card is None:
        if not fits:
            return
        yield RULE.finding(
            plan, at,
            f"{what}; fp8 KV would hold twice as many, if {gpu.name} has fp8",
            why=f"{held}; whether {gpu.name} has fp8 is unknown (name the GPU with --gpu to check)",
            evidence=[f"GPU: {gpu.name}, {gpu.memory_gib:.2f} GiB each ({gpu.source})", *pred.steps,
                      f"target: {ctx.target}"],
            severity=Severity.INFO,
        )
        return
    if not card.fp8:
        return  # no native fp8 (vLLM's default fp8-KV path needs SM 8.9+): see the docs

    alt = predict_plan(_with_kv_dtype(plan, FP8))
    if alt is None or alt.tokens is None or alt.max_concurrency is None or (not fits and alt.startup_ok is not True):
        return  # (when 16-bit KV does not fit, fp8 is worth saying only if it does)
    title = f"set the KV cache dtype to {FP8} (about {alt.max_concurrency:.1f} max-length requests at once)"
    fixes = [_fix(plan, kv if explicit else None, title)]
    yield RULE.finding(
        plan, at,
        f"{what}; with fp8 KV about {alt.max_concurrency:.1f}{'' if fits else ' fit'}",
        why=f"{held}, {alt.tokens[1]} with fp8. {scales.message}",
        evidence=[
            f"GPU: {card.name}, {gpu.memory_gib:.2f} GiB each ({gpu.source}); "
            f"{'compute capability ' if card.vendor == 'nvidia' else ''}{card.compute_capability} "
            f"({card.architecture}): native fp8",
            f"{len_name} {length} ({serving.max_model_len.prov})" if serving.max_model_len is not None
            else f"{len_name} {length}",
            f"{dtype_name} {kv_name} ({kv.prov})" if kv is not None else f"{dtype_name} {kv_name} (not set)",
            *pred.steps,
            f"requests of {len_name} at once = {_at_once(pred, length)}",
            *(f"with fp8: {s}" for s in alt.steps if s.startswith(("KV per token", "KV pool"))),
            f"with fp8: requests at once = {_at_once(alt, length)}",
            *([f"max_num_seqs {cap} ({serving.max_num_seqs.prov})"] if cap else []),
            f"KV scales: {scales.evidence}",
            *pred.assumptions,
            f"target: {ctx.target}",
        ],
        severity=severity if fits else Severity.WARNING,
        fixes=fixes,
        fix_hint=f"set {dtype_name} {FP8} ({scales.hint})",
    )


def subject(plan: Plan, ctx):
    """What the rule would have judged when the model is unknown (the engine's "cannot check"
    info): vLLM's KV cache, unless it is already 8-bit; nothing for TensorRT-LLM files (SITS001
    already says their model is unknown)."""
    if plan.framework != "vllm" or plan.facts is None or plan.facts.serving is None:
        return None
    kv = plan.facts.serving.kv_cache_dtype
    if kv is not None and kv.is_set and not _sixteen_bits(str(kv.value), None):
        return None
    return (kv.setting if kv is not None and kv.is_set else None), "the KV cache dtype"


# --- helpers ---------------------------------------------------------------------------------

def _sixteen_bits(kv_name: str, dims) -> bool:
    """Whether the effective KV dtype stores 2 (or 4) bytes per value."""
    from sits_doctor.memory import dtype_bytes

    width = dtype_bytes(kv_name, model_dtype=_model_dtype(dims))
    return width is not None and width >= 2


def _bits(kv_name: str, dims) -> int:
    from sits_doctor.memory import dtype_bytes

    return int(8 * (dtype_bytes(kv_name, model_dtype=_model_dtype(dims)) or 2))


def _model_dtype(dims) -> str:
    return str(dims.dtype.value) if dims is not None and dims.dtype is not None else "bfloat16"




def _with_kv_dtype(plan: Plan, dtype: str) -> Plan:
    """The same deployment with its KV cache in ``dtype`` (what the fix would make of it)."""
    from sits_doctor.facts import Value

    serving = plan.facts.serving._replace(kv_cache_dtype=Value.derived(dtype, f"kv_cache_dtype {dtype} (the fix)"))
    return plan.copy(facts=plan.facts._replace(serving=serving))


class Scales(NamedTuple):
    """What the checkpoint says about KV-cache scales, for the message and the evidence."""

    present: bool | None  # True: calibrated scales; False: none; None: config.json cannot tell
    message: str
    evidence: str
    hint: str
    declares_fp8: bool = False  # the checkpoint asks for an fp8 KV cache itself (ModelOpt)


def _kv_scales(dims, scale_one: str = "") -> Scales:
    """Whether the served checkpoint carries calibrated K/V scales (from its quantization_config);
    ``scale_one`` says what the framework does without them (": K and V are quantized with ...")."""
    quant = dims.quantization if dims is not None else None
    none_hint = "no KV scales in the checkpoint: check accuracy, or calibrate them with llm-compressor"
    if quant is None:
        return Scales(False, f"The checkpoint carries no KV scales{scale_one}.",
                      "none: the model config has no quantization_config", none_hint)
    method = str(quant.value)
    config = quant.setting.value if quant.setting is not None and isinstance(quant.setting.value, dict) else {}
    where = f"quantization_config ({quant.prov})"
    if method == "compressed-tensors":
        scheme = config.get("kv_cache_scheme")
        if isinstance(scheme, dict):
            shape = ", ".join(f"{k} {scheme[k]}" for k in ("type", "num_bits", "strategy") if k in scheme)
            return Scales(True, f"The checkpoint carries calibrated KV scales (kv_cache_scheme: {shape}).",
                          f"kv_cache_scheme {{{shape}}} in {where}", "the checkpoint's KV scales are used")
        return Scales(False, "The checkpoint (compressed-tensors, no kv_cache_scheme) carries no KV scales"
                             f"{scale_one}.",
                      f"none: no kv_cache_scheme in {where}", none_hint)
    if method.startswith("modelopt"):
        inner = config.get("quantization") if isinstance(config.get("quantization"), dict) else config
        algo = inner.get("kv_cache_quant_algo") or inner.get("kv_cache_scheme")
        if isinstance(algo, dict):  # the compressed-tensors shape some ModelOpt exports write
            algo = FP8 if (algo.get("type"), algo.get("num_bits")) == ("float", 8) else str(algo)
        if algo:
            return Scales(True, f"The checkpoint carries calibrated KV scales (ModelOpt kv_cache_quant_algo {algo}).",
                          f"kv_cache_quant_algo {algo} in {where}", "the checkpoint's KV scales are used",
                          declares_fp8=str(algo).lower() == FP8)
        return Scales(False, f"The checkpoint (ModelOpt, no kv_cache_quant_algo) carries no KV scales{scale_one}.",
                      f"none: no kv_cache_quant_algo in {where}", none_hint)
    if method == FP8:
        return Scales(None, "Whether this fp8 checkpoint stores k_scale/v_scale is not in its config.json"
                            + (f"; without them{scale_one.removeprefix(':')}." if scale_one else "."),
                      f"unknown: quant_method fp8 in {where} (scales, if any, are weight tensors)",
                      "check whether the checkpoint stores k_scale/v_scale")
    return Scales(False, f"The checkpoint ({method}: weights only) carries no KV scales{scale_one}.",
                  f"none: quant_method {method} in {where}", none_hint)


def _at_once(pred, length: int) -> str:
    """How many max-length requests the pool holds, as arithmetic: pool tokens over the length,
    or (a model whose sliding-window or chunked layers hold less than the request) the pool's bytes
    over what one request needs."""
    low, estimate, high = pred.tokens
    if abs(pred.max_concurrency - estimate / length) < 1e-9:
        return f"{estimate} / {length} = {pred.max_concurrency:.2f} (range {low / length:.2f}–{high / length:.2f})"
    from sits_doctor.memory import GIB

    pool = estimate * pred.kv_bytes_per_token
    return (f"{pool / GIB:.2f} GiB of KV pool / {pool / pred.max_concurrency / GIB:.2f} GiB per request (its "
            f"windowed layers hold less than the request) = {pred.max_concurrency:.2f}")


def _fix(plan: Plan, written, title: str) -> Fix | None:
    """``kv_cache_dtype: fp8`` for vLLM, ``kv_cache_config.dtype: fp8`` for a TensorRT-LLM file."""
    if written is not None and written.setting is not None:
        return edit.replace_value(written.setting, FP8, title, Safety.UNSAFE)
    if plan.framework == "vllm":
        return add_option(plan, _vllm_option(), FP8, title, Safety.UNSAFE)
    doc = plan.doc
    if doc is None:
        return None
    try:
        if TRT_KV_CONFIG not in doc.positions:
            raise CannotEdit("the file has no kv_cache_config mapping to add dtype to")
        edits = (add_member(doc, TRT_KV_CONFIG, TRT_KV_DTYPE, FP8),)
    except CannotEdit as why:
        return Fix(f"{title}: add kv_cache_config: {{dtype: {FP8}}}", doc.path, (), Safety.DISPLAY, str(why), doc.text)
    return Fix(title, doc.path, edits, Safety.UNSAFE, None, doc.text)


def _vllm_option() -> str:
    """vLLM's name for the KV-dtype option."""
    return fw.KV_CACHE_DTYPE
