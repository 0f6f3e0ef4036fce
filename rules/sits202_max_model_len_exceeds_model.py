"""max-model-len-exceeds-model (SITS202)

## What it does
Compares vLLM's `max_model_len` with the longest context vLLM derives from the served model's
`config.json` (length keys, `model_max_length`, RoPE scaling factor, version by version) and
reports a value above it: vLLM refuses to start with `ValueError: User-specified max_model_len
(X) is greater than the derived max_model_len (...)`.

## Why it hurts
The failure comes after the image is pulled, the weights are downloaded and the GPUs are
allocated: a crash loop in Kubernetes, minutes per attempt. Working around it with
`VLLM_ALLOW_LONG_MAX_MODEL_LEN=1` starts the server, but vLLM itself warns that positions past
the derived length give NaN (RoPE) or out-of-bounds reads (absolute position embeddings): the
model answers garbage on long prompts instead of failing. This rule reports that case as a
warning.

## Example
The model's config says 8192 positions:
```json file=llama/config.json context
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "max_position_embeddings": 8192,
 "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32}
```
```yaml file=serve.yaml
model: ./llama
max-model-len: 32768
```
Use instead:
```yaml file=serve.yaml
model: ./llama
max-model-len: 8192
```

## Fix
Lower `max_model_len` to the derived value (`sits-doctor fix --unsafe-fixes`; unsafe: it changes
the longest request served), or serve a model whose config declares a longer context (RoPE
scaling through `hf_overrides`, only if the model was trained for it).

## How it is measured
Not measured: a predicted startup failure. The derived length is computed offline from the
model's `config.json` (found locally or in the Hugging Face cache; never downloaded). When the
model cannot be found, the rule reports that as info and names what is missing.

## Sources
- vLLM `vllm/config/model.py` `_get_and_verify_max_len` (vllm/config.py before 0.10.2), read in
  the source releases 0.6.6.post1 … 0.33.0: length keys, the `model_max_length` override, the
  Gemma3 exemption (≥0.8), `rope_parameters` (≥0.12), YaRN exempt from scaling from 0.30.0 (up
  to 0.29: `original_max_position_embeddings × factor`), the ValueError text (unchanged
  0.8.5 → 0.33.0) and `VLLM_ALLOW_LONG_MAX_MODEL_LEN`.
- transformers `configuration_utils.py` `get_text_config()`@5.24.0 (the text config of
  multimodal models) and the v5 `rope_parameters` field (`modeling_rope_utils.py`@5.0.0).
"""

from __future__ import annotations

from typing import Iterator

from sits_doctor.finding import Finding, Safety, Severity
from sits_doctor.fixes import config as edit
from sits_doctor.plan import Plan
from sits_doctor.rule import Rule
from sits_doctor.frameworks import vllm as fw
from sits_doctor.frameworks.vllm_max_model_len import allow_long_max_model_len

RULE = Rule(
    code="SITS202",
    name="max-model-len-exceeds-model",
    summary="vLLM max_model_len above what vLLM derives from the model config: startup ValueError",
    severity=Severity.ERROR,
    frameworks=("vllm",),
    needs=("model",),
)


def subject(plan: Plan, ctx):
    """The max_model_len this rule would check (None: unset, "auto", -1 or not a number)."""
    setting = fw.max_model_len_setting(plan)
    if setting is None or setting.templated:
        return None
    requested = setting.value
    if not isinstance(requested, int) or isinstance(requested, bool) or requested == -1:
        return None  # vLLM derives it; non-numbers are another rule's business
    return setting, f"max_model_len {requested}"


def check(plan: Plan, ctx) -> Iterator[Finding]:
    found = subject(plan, ctx)
    if found is None:
        return
    setting, _ = found
    requested = setting.value
    version = ctx.target.version
    derived = fw.derived_max_len(plan, version)
    if requested <= derived.value:
        return
    if derived.model_max_length is not None and requested <= derived.model_max_length:
        return
    evidence = [*derived.steps, f"target: {ctx.target}"]
    limit = int(derived.value)
    vllm_message = (
        f"User-specified max_model_len ({requested}) is greater than the derived max_model_len "
        f"({derived.key}={derived.value} or model_max_length={derived.model_max_length} in model's "
        "config.json)."
    )
    allowed = allow_long_max_model_len(plan.env)
    if allowed is not None:
        evidence.append(f"VLLM_ALLOW_LONG_MAX_MODEL_LEN={allowed.value} ({allowed.prov})")
        yield RULE.finding(
            plan, setting,
            f"max_model_len {requested} exceeds the model's {limit} positions; "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN lets vLLM start, but positions past "
            f"{limit} give NaN (RoPE) or out-of-bounds reads (absolute positions)",
            evidence=evidence,
            fix_hint=f"set max_model_len to at most {limit} and drop VLLM_ALLOW_LONG_MAX_MODEL_LEN",
            severity=Severity.WARNING,
        )
        return
    yield RULE.finding(
        plan, setting,
        f"max_model_len {requested} exceeds the {limit} that {ctx.target.name} derives from the model: startup fails "
        "(ValueError)",
        evidence=evidence, quote=(ctx.target.name, f"ValueError: {vllm_message}"),
        fix_hint=f"set max_model_len to at most {limit}",
        fixes=[edit.replace_value(setting, limit, f"lower max_model_len to {limit} (the longest request served "
                                  "gets shorter)", Safety.UNSAFE)],
    )
