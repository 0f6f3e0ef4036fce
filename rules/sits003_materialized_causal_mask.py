"""materialized-causal-mask (SITS003)

## What it does
Finds causal attention that computes, stores and then masks away the scores above the diagonal
instead of skipping them:
- Hugging Face `config.json` asking for `eager` attention (`attn_implementation` or
  `_attn_implementation`) for a model whose transformers class has an SDPA path (from `--runtime` or
  the 5.24.0 tables). Not reported when eager is needed: `output_attentions: true`, or logit
  soft-capping (`attn_logit_softcapping`), which SDPA refuses. For a model checked live
  (`sits_doctor.check_model`), the implementation it runs is read off the model.
- `generation_config.json` `prefill_chunk_size` (transformers 4.51 and later) with SDPA: every chunk
  after the first has fewer queries than keys, so transformers hands SDPA an explicit bottom-right
  boolean mask instead of `is_causal`, and torch cannot use its flash kernel for it.
- A TensorRT-LLM engine built with `plugin_config.context_fmha` disabled (before 0.8:
  `context_fmha_type: 0`), or an LLM-API config on
  the TensorRT backend (`backend: tensorrt`) that builds one: the context phase writes the whole
  `Q*K^T` matrix to memory before the softmax. (The PyTorch backend has no `build_config`.)

## Why it hurts
Causal attention over `n` tokens needs about half of the `n×n` score blocks. A kernel told the mask
is causal skips the rest and never stores a score; eager attention and the unfused TensorRT-LLM
path compute all `n×n` scores, store them (quadratic memory: 32 heads × 8192² scores × 2 bytes
= 4 GiB of bf16 scores per layer for one 8192-token sequence), add the mask and read them back for
the softmax. An explicit mask keeps SDPA off its flash kernel and makes the fused kernels that
accept one read the mask and compute every block. On an H200 (torch 2.11, bf16; B=4, H=32,
D=128), a 512-query chunk over 8192 keys took 0.83 ms through SDPA even with torch's own
bottom-right causal bias (`causal_lower_right`, no boolean mask tensor) and 0.59 ms in
`causal_trim`, which applies the causal bound itself (bench/results/kernels-h200-2026-11-29.md in
this repository).

## Example
```json file=model/config.json target=transformers==5.24.0
{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
 "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
 "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
 "torch_dtype": "bfloat16", "attn_implementation": "eager"}
```
Use instead:
```json file=model/config.json target=transformers==5.24.0
{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
 "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
 "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
 "torch_dtype": "bfloat16", "attn_implementation": "sdpa"}
```

## Fix
`sits-doctor fix --unsafe-fixes` writes `sdpa` in place of `eager` (unsafe: the kernel changes, and
with it the last bits of the output). For chunked prefill, `sits_doctor.patch(model, ["causal_trim"])`
runs each chunk through a kernel that applies the bottom-right causal mask itself (shown, not
applied); removing `prefill_chunk_size` gives up the memory it saves. A TensorRT-LLM engine has to
be rebuilt with `trtllm-build --context_fmha enable` (shown); in an LLM-API config the fix writes
`context_fmha: true` (unsafe: the engine it builds changes).

## How it is measured
Not measured by `check`. The kernel figures above come from the bench of this project
(`python bench/kernels.py` on the GPU it runs on); `sits-doctor inspect` shows which SDPA backend
torch picks here for a causal prefill and for an explicit mask.

## Sources
- transformers `masking_utils.py` `_ignore_causal_mask_sdpa`@v5.24.0 (the mask is dropped for
  `is_causal` only when q_len == 1, q_len == kv_len without padding, or the cache is empty);
  `generation/configuration_utils.py` `prefill_chunk_size`@v4.51.0 (absent @v4.50.0);
  `integrations/sdpa_attention.py`@v5.24.0 (softcap refused); `modeling_utils.py` attention
  selection, and every causal-LM class built on the meta device by `tools/gen_hf_runtime.py`.
- PyTorch `aten/src/ATen/native/transformers/cuda/sdp_utils.cpp` (the flash backend takes no
  `attn_mask`).
- TensorRT-LLM `docs/source/advanced/gpt-attention.md` "Context Phase" (context FMHA disabled stores
  `Q*K^T`; "the slowest method"), `tensorrt_llm/plugin/plugin.py` (`context_fmha` default true; `ContextFMHAType.disabled = 0`@v0.7.1).
"""

from __future__ import annotations

from typing import Iterator

from sits_doctor.finding import Finding, Safety, Severity
from sits_doctor.fixes import config as edit
from sits_doctor.frameworks import transformers_attention as ta
from sits_doctor.frameworks import trtllm as trt
from sits_doctor.frameworks import trtllm_attention as tra
from sits_doctor.plan import Plan
from sits_doctor.rule import Rule
from sits_doctor.versions import V

RULE = Rule(
    code="SITS003",
    name="materialized-causal-mask",
    summary="causal attention that computes and stores the masked scores instead of skipping them",
    severity=Severity.WARNING,
    frameworks=("hf", "trtllm"),
)


def check(plan: Plan, ctx) -> Iterator[Finding]:
    if plan.facts is None:
        return
    if plan.framework == "hf" and plan.kind == "hf-config":
        yield from _eager(plan, ctx)
        yield from _chunked_prefill(plan, ctx)
    elif plan.framework == "trtllm" and (plan.kind == "trtllm-engine" or (
            plan.kind == "trtllm-llmapi" and plan.value(trt.BACKEND) in trt.TENSORRT_BACKENDS)):
        yield from _context_fmha(plan, ctx)


def _eager(plan: Plan, ctx) -> Iterator[Finding]:
    asked = ta.asked(plan.settings)
    runtime = plan.facts.runtime
    if runtime is None or runtime.supports_sdpa is None:
        return
    live = asked is None and runtime.live and runtime.attention is not None
    if not live and (asked is None or asked.value != ta.EAGER):
        return
    if live and runtime.attention.value != ta.EAGER:
        return
    if runtime.supports_sdpa.value is not True:
        return  # eager is all the class has (SITS101 says so when nothing was asked)
    out = plan.settings.get(ta.OUTPUT_ATTENTIONS_KEY)
    if out is not None and out.value is True:
        return  # the attention weights are wanted: only eager returns them
    softcap = plan.settings.get(ta.SOFTCAP_KEY)
    if softcap is not None and softcap.value is not None:
        return  # SDPA refuses logit soft-capping
    what = f"{ctx.target.name} stores every layer's full [batch, heads, q, k] score matrix"
    why = "eager attention computes all scores, stores them and masks the upper triangle afterwards; SDPA skips " \
          "the masked blocks and stores no scores"
    if live:
        switch = (f"model.set_attn_implementation('{ta.SDPA}')" if V(ctx.target.version) >= V(ta.SET_ATTN_IMPLEMENTATION)
                  else f"from_pretrained(..., attn_implementation='{ta.SDPA}')")
        yield RULE.finding(
            plan, None, f"the model runs {ta.EAGER} attention: {what}", why=why,
            evidence=[f"attention: {ta.EAGER} ({runtime.attention.prov})", f"SDPA support: {runtime.supports_sdpa.prov}",
                      f"target: {ctx.target}"],
            fixes=[edit.display(None, switch, "the implementation of a loaded model is chosen in code")],
            fix_hint=f"switch it with {switch}",
        )
        return
    yield RULE.finding(
        plan, asked, f"{asked.key} {ta.EAGER}: {what}", why=why,
        evidence=[f"{asked.key} {asked.value} ({asked.prov})", f"SDPA support: {runtime.supports_sdpa.prov}",
                  f"target: {ctx.target}"],
        fixes=[edit.replace_value(asked, ta.SDPA, f"ask for {ta.SDPA}", Safety.UNSAFE)],
        fix_hint=f"ask for {ta.SDPA} (or flash_attention_2 where flash-attn is installed)",
    )


def _chunked_prefill(plan: Plan, ctx) -> Iterator[Finding]:
    chunk = plan.settings.get(ta.PREFILL_CHUNK_KEY)
    if chunk is None or not isinstance(chunk.value, int) or isinstance(chunk.value, bool) or chunk.value <= 0:
        return
    if V(ctx.target.version) < V(ta.PREFILL_CHUNK_FIRST):
        return  # generate() does not read it before 4.51
    asked = ta.asked(plan.settings)
    runtime = plan.facts.runtime
    impl = asked.value if asked is not None else (
        runtime.attention.value if runtime is not None and runtime.attention is not None else None)
    if impl != ta.SDPA:
        return
    yield RULE.finding(
        plan, chunk,
        f"prefill_chunk_size {chunk.value} with {ta.SDPA}: chunks after the first run SDPA off its flash kernel, "
        "with an explicit mask",
        why="every prompt chunk after the first has fewer queries than keys, so transformers passes SDPA a "
            "bottom-right boolean mask, which keeps torch off its flash kernel and computes the masked blocks",
        evidence=[f"prefill_chunk_size {chunk.value} ({chunk.prov})",
                  f"attention: {impl} ({asked.prov if asked is not None else runtime.attention.prov})",
                  f"target: {ctx.target}"],
        fixes=[edit.display(chunk, "sits_doctor.patch(model, ['causal_trim'])",
                            "a live-model kernel patch: it applies the bottom-right causal mask itself")],
        fix_hint="patch the live model with causal_trim, or drop prefill_chunk_size if the prompt fits in memory",
    )


def _context_fmha(plan: Plan, ctx) -> Iterator[Finding]:
    flag = plan.settings.get(tra.CONTEXT_FMHA)
    legacy = plan.settings.get(tra.LEGACY_CONTEXT_FMHA)
    if flag is not None and flag.value in tra.OFF:
        shown = f"context_fmha {'false' if flag.value is False else flag.value}"
    elif legacy is not None and legacy.value == tra.LEGACY_OFF and not isinstance(legacy.value, bool):
        flag, shown = legacy, "context_fmha_type 0 (disabled)"
    else:
        return
    built = plan.kind == "trtllm-engine"
    rebuild = tra.LEGACY_REBUILD if flag is legacy else tra.REBUILD
    if built:
        fix = edit.display(flag, f"rebuild the engine: {rebuild}", "an engine's plugins are fixed when it is built")
    else:
        fix = edit.replace_value(flag, True, "build with context_fmha enabled", Safety.UNSAFE)
    yield RULE.finding(
        plan, flag,
        f"the engine {'was' if built else 'is'} built with {shown}: its context phase stores the whole Q*K^T matrix",
        why="without fused multi-head attention the scores are materialized before the softmax: memory quadratic in "
            "the prompt length, and TensorRT-LLM's slowest attention path",
        evidence=[f"{shown} ({flag.prov})", f"target: {ctx.target}"],
        fixes=[fix],
        fix_hint=f"rebuild with {rebuild}" if built else "enable context_fmha (its default)",
    )
