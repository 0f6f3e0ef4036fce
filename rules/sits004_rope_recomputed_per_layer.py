"""rope-recomputed-per-layer (SITS004)

## What it does
Finds Hugging Face model configs whose transformers release computes the rotary embedding tables
(cos and sin for every position) again inside every attention layer instead of once per forward:
Mistral, Gemma 2 and Phi-3 before transformers 4.48.0, Llama before 4.43.0, and, in 5.24.0,
the architectures whose code still keeps a rotary module in each layer (`moshi`,
`recurrent_gemma`, `deepseek_v4`'s compressor). Where RoPE runs is read from the model built with
the installed transformers (`check --runtime`), or else from version tables generated the same
way. A model whose code comes from its repository (`auto_map`) and whose `model_type` transformers
has no class for gets an info finding: sits-doctor never runs that code, so it cannot say. When
transformers has its own class (`phi3`, `qwen2`, `nemotron_h` ...), that class is what
`from_pretrained` builds unless `trust_remote_code=True` is passed (`resolve_trust_remote_code`:
local code wins), so it is judged as that class. Dynamic NTK scaling is not a trigger: it rebuilds its
frequencies only when a sequence outgrows the cached length.

## Why it hurts
Every forward pass of every layer rebuilds a `[batch, seq, head_dim]` cos and sin pair from the
positions (an outer product, two transcendental maps and a concatenation): `num_hidden_layers`
times the work and memory traffic of doing it once, and at decode a handful of extra small kernel
launches per layer. The result is the same in every layer, so all but one of those computations
are wasted.

## Example
```json file=model/config.json target=transformers==4.47.1
{"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 4096,
 "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
 "intermediate_size": 14336, "vocab_size": 32000, "max_position_embeddings": 32768,
 "torch_dtype": "bfloat16", "transformers_version": "4.47.1"}
```
Use instead:
```json file=model/config.json target=transformers==4.48.0
{"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 4096,
 "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
 "intermediate_size": 14336, "vocab_size": 32000, "max_position_embeddings": 32768,
 "torch_dtype": "bfloat16", "transformers_version": "4.48.0"}
```

## Fix
Nothing in the config decides this: the installed transformers does. For the families that moved
RoPE to the model, upgrade transformers to that release (shown, not applied). For a live model of
the Llama / Mistral / Qwen2 / Qwen3 code path, `sits_doctor.patch(model, ["rope_hoist"])` builds
one cos/sin cache per model and rotates q and k in place in one kernel (verified against the
unpatched model before it is kept). The per-layer architectures of 5.24.0 have no patch.

## How it is measured
Not measured by `check`: the finding says where the rotary modules are. The rope_hoist kernel's
own benchmark (`python bench/kernels.py`) measures the rotation against transformers' eager
code on the GPU it runs on.

## Sources
- transformers `models/mistral/modeling_mistral.py`, `models/gemma2/modeling_gemma2.py`,
  `models/phi3/modeling_phi3.py` @v4.47.1 (the attention module calls `self.rotary_emb`) and
  @v4.48.0 (the model calls `self.rotary_emb` once and passes `position_embeddings` to the
  layers); `models/llama/modeling_llama.py`@v4.43.0 (the same move for Llama).
- transformers 5.24.0, every causal-LM architecture built on the meta device by
  `tools/gen_hf_runtime.py` (`sits_doctor/frameworks/data/hf_runtime.json`).
- Dynamic NTK: `modeling_rope_utils.py` `dynamic_rope_update`@v5.24.0 (recomputes `inv_freq`
  only past the cached length).
- transformers `dynamic_module_utils.py` `resolve_trust_remote_code`@5.25.0 (with
  `trust_remote_code` not given and a class of its own for the model type, the repository's code
  is not used).
"""

from __future__ import annotations

from typing import Iterator

from sits_doctor.finding import Finding, Severity
from sits_doctor.fixes import config as edit
from sits_doctor.frameworks import transformers as tf
from sits_doctor.plan import Plan
from sits_doctor.rule import Rule
from sits_doctor.versions import V

RULE = Rule(
    code="SITS004",
    name="rope-recomputed-per-layer",
    summary="rotary cos/sin built inside every attention layer instead of once per forward",
    severity=Severity.WARNING,
    frameworks=("hf",),
)
HOISTABLE = ("llama", "mistral", "qwen2", "qwen3")  # the code path fixes/kernel_patches/rope_hoist.py patches


def check(plan: Plan, ctx) -> Iterator[Finding]:
    runtime = plan.facts.runtime if plan.facts is not None else None
    if runtime is None:
        return
    dims = plan.facts.model
    model_type = dims.model_type if dims is not None else None
    at = model_type.setting if model_type is not None else None
    name = model_type.value if model_type is not None else "this model"
    if runtime.custom_code:
        yield RULE.finding(
            plan, at,
            f"{name} runs code from its repository ({tf.CUSTOM_CODE_KEY}): where it computes rotary embeddings is not "
            "known (sits-doctor never runs that code)",
            severity=Severity.INFO, evidence=[f"target: {ctx.target}"],
        )
        return
    rope = runtime.rope
    if rope is None or rope.value != "attention":
        return
    evidence = [f"target: {ctx.target}", f"where: {rope.prov}"]
    if runtime.native_over_remote:
        evidence.append(tf.REMOTE_CODE_NOTE)
    if runtime.rotary_modules:
        evidence.append("rotary modules: " + ", ".join(runtime.rotary_modules))
    moved = tf.ROPE_MOVED_TO_MODEL.get(name)
    if moved is not None and V(ctx.target.version) < V(moved):
        hint = f"transformers {moved} and later compute them once per forward: upgrade transformers"
        fixes = [edit.display(at, f"install transformers>={moved}", "the installed package decides this, not the config")]
        if name in HOISTABLE:
            hint += f" (then sits_doctor.patch(model, ['rope_hoist']) also fuses the rotation)"
    else:
        hint = "no transformers release or sits-doctor patch hoists it for this architecture"
        fixes = []
    yield RULE.finding(
        plan, at,
        f"{ctx.target.name} recomputes {name}'s rotary cos/sin tables in every attention layer, not once per forward",
        evidence=evidence, fix_hint=hint, fixes=fixes,
    )
