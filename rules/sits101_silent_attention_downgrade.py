"""silent-attention-downgrade (SITS101)

## What it does
Finds attention that is not what the config asks for, or that fails when it is asked for:
- Hugging Face `config.json` asking for `flash_attention_2` (`attn_implementation` or
  `_attn_implementation`) where it cannot run: on a GPU older than Ampere (the kernel raises at the
  first forward), or, when the check runs with the transformers that will serve (the installed
  package), without the `flash_attn` package: `from_pretrained` raises ImportError, or from 4.56 with
  the `kernels` package installed it downloads a Hub kernel at load instead (fails offline).
- `output_attentions: true` in `config.json` beside an SDPA or flash implementation: from 5.4.0 the
  config does not load; 4.53 and later run SDPA and return no attention weights; 4.45–4.52 fall
  back to eager attention on every call.
- A model whose transformers class has no SDPA path, so nothing asked for means eager attention
  (from the model built on the meta device with `--runtime`, or the 5.24.0 tables). Models without
  attention heads (Mamba, RWKV, xLSTM) are not attention models and are skipped.
- Float32 weights loaded by 5.x (whose `from_pretrained` default dtype is the config's) on an
  NVIDIA GPU: SDPA has no flash or cuDNN kernel for float32.
- vLLM `--attention-backend` / `attention_config.backend` naming a backend the target GPU cannot
  run: from vLLM 0.12.0 startup fails with `ValueError: Selected backend ... is not valid for this
  configuration`. (`VLLM_ATTENTION_BACKEND` left in a manifest for vLLM 0.16 and later, where it is
  ignored, is reported by SITS204.)

## Why it hurts
The attention kernel is most of a long prompt's time. Eager attention materializes a
`[batch, heads, q, k]` score matrix per layer and has no causal block skipping; float32 SDPA runs
the memory-efficient kernel without tensor-core bf16/fp16 math; and an implementation that cannot
load or a backend the GPU cannot run stops the server before it serves anything. The quiet cases
(SDPA returning no attentions, the eager fallback) change what the code gets back or how fast it
runs with nothing but a log line.

## Example
```json file=model/config.json gpu=T4 target=transformers==5.24.0
{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 2048,
 "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
 "intermediate_size": 8192, "vocab_size": 128256, "max_position_embeddings": 131072,
 "torch_dtype": "bfloat16", "_attn_implementation": "flash_attention_2"}
```
Use instead:
```json file=model/config.json gpu=T4 target=transformers==5.24.0
{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 2048,
 "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
 "intermediate_size": 8192, "vocab_size": 128256, "max_position_embeddings": 131072,
 "torch_dtype": "bfloat16", "_attn_implementation": "sdpa"}
```

## Fix
`sits-doctor fix --unsafe-fixes` writes `sdpa` where flash-attn cannot run, removes
`output_attentions` (set `attn_implementation: eager` instead if the weights are needed), writes
`bfloat16` for a float32 config on a bf16-capable GPU, and removes a vLLM backend the GPU cannot
run so vLLM picks one that can. All are unsafe: numerics or outputs change. A class without an
SDPA path has no config fix: ask for an implementation it has (`flash_attention_2`) or serve it with
vLLM.

## How it is measured
Not measured by `check`. `sits-doctor inspect` asks torch which SDPA backend it picks on this
machine for each dtype, head size and mask (float32 never gets flash or cuDNN).

## Sources
- transformers `modeling_utils.py` `_check_and_adjust_attn_implementation`@v4.56.0 and @v5.24.0
  (ImportError without flash_attn; the `kernels-community/flash-attn2` Hub fallback);
  `configuration_utils.py` `validate_output_attentions`@v5.4.0 (absent @v5.3.0);
  `integrations/sdpa_attention.py`@v4.53.0 (no attentions from SDPA); `modeling_utils.py`
  `dtype = "auto"`@v5.0.0 (4.57.1 loads float32). Each read in the release's wheel from PyPI and
  reproduced on 5.24.0.
- Dao-AILab/flash-attention `csrc/flash_attn/flash_api.cpp` ("FlashAttention only supports Ampere
  GPUs or newer").
- PyTorch `aten/src/ATen/native/transformers/cuda/sdp_utils.cpp` (flash and cuDNN take fp16/bf16).
- vLLM `vllm/platforms/cuda.py` `get_attn_backend_cls` and `vllm/v1/attention/backends/`
  `supports_compute_capability` @v0.12.0, @v0.13.0 and @v0.33.0 (the wheels from PyPI).
"""

from __future__ import annotations

from typing import Iterator

from sits_doctor.finding import Finding, Safety, Severity
from sits_doctor.fixes import config as edit
from sits_doctor.frameworks import transformers_attention as ta
from sits_doctor.frameworks import vllm_attention as va
from sits_doctor.plan import Plan
from sits_doctor.rule import Rule
from sits_doctor.versions import INSTALLED_SOURCE, V

RULE = Rule(
    code="SITS101",
    name="silent-attention-downgrade",
    summary="the attention that runs is not the one asked for, or the one asked for cannot run here",
    severity=Severity.WARNING,
    frameworks=("hf", "vllm"),
)


def check(plan: Plan, ctx) -> Iterator[Finding]:
    if plan.facts is None:
        return
    if plan.framework == "hf" and plan.kind == "hf-config":
        yield from _hf(plan, ctx)
    elif plan.framework == "vllm":
        yield from _vllm(plan, ctx)


def _card(plan: Plan):
    """The GPU's catalog entry and, for an NVIDIA card, its compute capability."""
    from sits_doctor.catalogs import gpus

    card = gpus.find(plan.facts.gpu.name) if plan.facts.gpu is not None else None
    return card, card.cuda_capability if card is not None else None


def _installed(name: str) -> bool:
    from sits_doctor.environment import packages

    return any(p["installed"] for p in packages() if p["name"] == name)


def _hf(plan: Plan, ctx) -> Iterator[Finding]:
    version = V(ctx.target.version)
    if version < V(ta.FIRST_KNOWN):
        return
    asked = ta.asked(plan.settings)
    impl = asked.value if asked is not None else None
    card, cc = _card(plan)
    runtime = plan.facts.runtime
    target = f"target: {ctx.target}"

    if impl == ta.FLASH_2:
        yield from _flash(plan, ctx, asked, card, cc)

    out = plan.settings.get(ta.OUTPUT_ATTENTIONS_KEY)
    if out is not None and out.value is True and impl != ta.EAGER:
        yield from _output_attentions(plan, ctx, out, impl)

    if impl is None and runtime is not None and runtime.attention is not None and runtime.attention.value == ta.EAGER \
            and runtime.supports_sdpa is not None and runtime.supports_sdpa.value is False \
            and plan.facts.model is not None and plan.facts.model.heads is not None:  # Mamba, RWKV: no attention
        dims = plan.facts.model
        at = dims.model_type.setting if dims is not None and dims.model_type is not None else None
        name = dims.model_type.value if dims is not None and dims.model_type is not None else "this model"
        yield RULE.finding(
            plan, at,
            f"{ctx.target.name} has no SDPA path for {name}: it runs eager attention",
            why="with no attn_implementation asked for, the class falls back to eager attention, which materializes "
                "every layer's [batch, heads, q, k] scores",
            evidence=[f"attention: {runtime.attention.prov}", f"SDPA support: {runtime.supports_sdpa.prov}", target],
            fix_hint="ask for an implementation the class has (attn_implementation='flash_attention_2' where flash-attn "
                     "is installed), or serve it with vLLM",
        )

    dtype = next((plan.settings[k] for k in ta.DTYPE_KEYS if k in plan.settings), None)
    live = runtime is not None and runtime.live
    if live and runtime.dtype is not None:
        dtype_value, dtype_shown = runtime.dtype.value, f"dtype {runtime.dtype.value} ({runtime.dtype.prov})"
    else:
        dtype_value = dtype.value if dtype is not None else None
        dtype_shown = f"{dtype.key} {dtype.value} ({dtype.prov})" if dtype is not None else ""
    effective = impl or (runtime.attention.value if runtime is not None and runtime.attention is not None else None)
    if (dtype_value in ta.FLOAT32 and effective == ta.SDPA and cc is not None
            and (live or version >= V(ta.DTYPE_AUTO_DEFAULT))):
        bf16 = cc >= ta.BF16_MIN_CC
        how = "the model runs in float32" if live else f"{ctx.target.name} loads this model in float32"
        loaded = "" if live else "from_pretrained's default dtype is the config's; "
        if live:
            hint = f"model.to(torch.{'bfloat16' if bf16 else 'float16'})"
        elif bf16:
            hint = "write bfloat16 (or pass dtype=torch.bfloat16 to from_pretrained)"
        else:
            hint = f"pass dtype=torch.float16 to from_pretrained ({card.name} has no bfloat16)"
        yield RULE.finding(
            plan, None if live else dtype,
            f"{how}: SDPA has no flash kernel for float32 on {card.name}, and the weights take twice the memory",
            why=f"{loaded}SDPA has no flash or cuDNN kernel for float32 on {card.name}: it runs the memory-efficient "
                "kernel or math; float32 weights take twice the memory of bfloat16",
            evidence=[dtype_shown, f"GPU: {card.name}, compute capability {card.compute_capability}",
                      f"attention: {effective}", target],
            fixes=[edit.replace_value(dtype, "bfloat16", "load in bfloat16", Safety.UNSAFE)] if bf16 and not live else [],
            fix_hint=hint,
        )


def _flash(plan: Plan, ctx, asked, card, cc) -> Iterator[Finding]:
    target = f"target: {ctx.target}"
    fix = edit.replace_value(asked, ta.SDPA, f"ask for {ta.SDPA}", Safety.UNSAFE)
    if cc is not None and cc < ta.FLASH_MIN_CC:
        yield RULE.finding(
            plan, asked,
            f"{ta.FLASH_2} on {card.name} (compute capability {card.compute_capability}): the first forward raises "
            "RuntimeError",
            quote=("flash-attn", f"RuntimeError: {ta.FLASH_CC_ERROR}"),
            why="flash-attn runs only on Ampere (compute capability 8.0) and newer",
            evidence=[f"{asked.key} {asked.value} ({asked.prov})", f"GPU: {card.name}, compute capability "
                      f"{card.compute_capability}", target],
            severity=Severity.ERROR, fixes=[fix], fix_hint=f"ask for {ta.SDPA}",
        )
        return
    if not ctx.target.source.startswith(INSTALLED_SOURCE) or _installed(ta.FLASH_PACKAGE):
        return  # the serving image's packages are not known here
    evidence = [f"{asked.key} {asked.value} ({asked.prov})", f"{ta.FLASH_PACKAGE}: not installed beside {ctx.target}"]
    if V(ctx.target.version) >= V(ta.FLASH_HUB_FALLBACK) and _installed(ta.KERNELS_PACKAGE):
        yield RULE.finding(
            plan, asked,
            f"{ta.FLASH_2} without the {ta.FLASH_PACKAGE} package: {ctx.target.name} downloads {ta.FLASH_HUB_KERNEL} "
            "from the Hugging Face Hub at every load instead (the load fails without network access)",
            evidence=[*evidence, f"{ta.KERNELS_PACKAGE}: installed"], fixes=[fix],
            fix_hint=f"install flash-attn in the image, or ask for {ta.SDPA}",
        )
        return
    yield RULE.finding(
        plan, asked,
        f"{ta.FLASH_2} without the {ta.FLASH_PACKAGE} package: from_pretrained raises ImportError: {ta.FLASH_IMPORT_ERROR}",
        evidence=evidence, severity=Severity.ERROR, fixes=[fix],
        fix_hint=f"install flash-attn in the image, or ask for {ta.SDPA}",
    )


def _output_attentions(plan: Plan, ctx, out, impl) -> Iterator[Finding]:
    version = V(ctx.target.version)
    shown = impl or ta.SDPA
    evidence = [f"{out.key} true ({out.prov})",
                f"attention: {impl} (asked)" if impl else "attention: sdpa (nothing asked: the default)",
                f"target: {ctx.target}"]
    fix = edit.remove(out, f"remove {ta.OUTPUT_ATTENTIONS_KEY}", Safety.UNSAFE)
    hint = f"remove it, or ask for attn_implementation {ta.EAGER} if the attention weights are needed"
    if impl is not None and version >= V(ta.OUTPUT_ATTENTIONS_VALIDATED):
        yield RULE.finding(
            plan, out,
            f"{ta.OUTPUT_ATTENTIONS_KEY} with {impl}: {ctx.target.name} refuses to load the config (ValueError)",
            evidence=evidence, severity=Severity.ERROR, fixes=[fix], fix_hint=hint,
            quote=(ctx.target.name, "ValueError: " + ta.OUTPUT_ATTENTIONS_ERROR.format(impl=impl)),
        )
    elif version >= V(ta.SDPA_NO_ATTENTIONS):
        yield RULE.finding(
            plan, out,
            f"{ta.OUTPUT_ATTENTIONS_KEY} with {shown}: {ctx.target.name} returns no attention weights, with only "
            "a log warning",
            why="SDPA computes no attention probabilities: outputs.attentions is empty",
            evidence=evidence, fixes=[fix], fix_hint=hint,
        )
    else:
        yield RULE.finding(
            plan, out,
            f"{ta.OUTPUT_ATTENTIONS_KEY} with {shown}: {ctx.target.name} falls back to eager attention on every call",
            why="only eager attention returns the weights: every call materializes every layer's [batch, heads, q, k] "
                "scores",
            evidence=evidence, fixes=[fix], fix_hint=hint,
        )


def _vllm(plan: Plan, ctx) -> Iterator[Finding]:
    serving = plan.facts.serving
    backend = serving.attention_backend if serving is not None else None
    if backend is None or backend.setting is None or V(ctx.target.version) < V(va.SELECTED_BACKEND_VALIDATED):
        return
    entry = va.backend(backend.value)
    card, cc = _card(plan)
    if entry is None or cc is None or entry.runs_on(cc):
        return
    name = str(backend.value).strip().upper()
    yield RULE.finding(
        plan, backend.setting,
        f"attention backend {name} cannot run on {card.name} (compute capability {card.compute_capability}): "
        f"{ctx.target.name} stops at startup (ValueError)",
        why=f"{name} needs {entry.needs()}",
        quote=(ctx.target.name, va.ERROR.format(name=name)),
        evidence=[f"attention backend {backend.value} ({backend.prov})",
                  f"GPU: {card.name}, compute capability {card.compute_capability}",
                  f"vllm/v1/attention/backends/{entry.source}: supports_compute_capability "
                  f"(read at vLLM {', '.join(va.CHECKED_AT)})",
                  f"target: {ctx.target}"],
        severity=Severity.ERROR,
        fixes=[edit.remove(backend.setting, "remove the backend choice (vLLM picks one the GPU runs)", Safety.UNSAFE)],
        fix_hint="remove it, or name a backend this GPU runs",
    )
