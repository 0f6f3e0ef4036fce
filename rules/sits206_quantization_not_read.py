"""quantization-not-read (SITS206)

## What it does
Reads where a quantized checkpoint says how its weights are stored — config.json's
`quantization_config`, ModelOpt's `hf_quant_config.json`, AutoGPTQ's `quantize_config.json` —
and reports when the framework that loads it does not read that place, or refuses what it finds:

- a `quantization_config` that names no `quant_method` (and no bitsandbytes `load_in_4bit` /
  `load_in_8bit`): transformers raises `ValueError` at load; vLLM reads it only in ModelOpt's
  layout (`producer.name: modelopt` with `quantization.quant_algo`), from 0.10.1;
- a recipe only in `hf_quant_config.json` (ModelOpt up to 0.29): vLLM reads it from 0.10.1
  (earlier only with `--quantization modelopt`); transformers never does;
- a recipe only in `quantize_config.json` (AutoGPTQ): transformers never reads it; vLLM only with
  `--quantization gptq` (or `gptq_marlin`, `auto_gptq`, `marlin`).

## Why it hurts
A loader that does not read the recipe builds an unquantized model: the checkpoint's packed
int4 `qweight` tensors have no parameter to load into (transformers leaves those weights at
their random initialisation and only warns), and FP8 weights are cast without their scales.
The server starts and answers garbage, or fails while loading the weights, after the download
and the GPU allocation. A missing `quant_method` fails transformers at `from_pretrained`.

## Example
```json file=config.json
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
 "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 8192,
 "quantization_config": {"bits": 4, "group_size": 128}}
```
Use instead:
```json file=config.json
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
 "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 8192,
 "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}}
```

## Fix
By hand (no automatic fix: the right `quant_method` depends on the tool that quantized the
weights): name the method in config.json's `quantization_config` (`"quant_method": "gptq"` with
AutoGPTQ's `bits`, `group_size`, `desc_act`, `sym`; `"quant_method": "modelopt"` for ModelOpt),
or for vLLM pass `--quantization` with the checkpoint's method.

## How it is measured
Not measured: a load failure or a wrong model, read from the files offline.

## Sources
- transformers `src/transformers/quantizers/auto.py`@5.25.0 and @4.40.0 (the same lines):
  `AutoQuantizationConfig.from_dict` (`load_in_4bit` / `load_in_8bit` → `bitsandbytes_4bit` /
  `_8bit`; no `quant_method` → the ValueError quoted). No module of transformers 4.40.0 or
  5.25.0 reads `hf_quant_config.json` or `quantize_config.json` (searched the released wheels).
- vLLM `vllm/transformers_utils/config.py`@v0.33.0 `get_config` (hf_quant_config.json read when
  config.json has no quantization_config; absent in 0.10.0, present in 0.10.1),
  `vllm/transformers_utils/model_arch_config_convertor.py`@v0.33.0
  `_normalize_quantization_config` (`vllm/config/__init__.py`@v0.10.2 `_parse_quant_hf_config`:
  ModelOpt producer → `modelopt` / `modelopt_fp4` / `modelopt_mixed`), `vllm/config/model.py`
  @v0.33.0 `_verify_quantization` (an empty quant_method means unquantized),
  `vllm/model_executor/model_loader/weight_utils.py` `get_quant_config` and
  `quantization/auto_gptq.py`@v0.33.0 / `quantization/gptq.py`@v0.8.5 `get_config_filenames`
  (`quantize_config.json`), `quantization/modelopt.py`@v0.8.5 (`hf_quant_config.json`), all read
  in the released wheels.
"""

from __future__ import annotations

from typing import Iterator

from sits_doctor.finding import Finding, Severity
from sits_doctor.frameworks import transformers as tf
from sits_doctor.frameworks import vllm_quant as vq
from sits_doctor.plan import Plan
from sits_doctor.rule import Rule

RULE = Rule(
    code="SITS206",
    name="quantization-not-read",
    summary="a checkpoint's quantization is written where its loader does not read it, or names no quant_method: "
            "load failure or an unquantized (wrong) model",
    severity=Severity.ERROR,
    frameworks=("hf", "vllm"),
)

TRANSFORMERS_VALUE_ERROR = ("ValueError: The model's quantization config from the arguments has no `quant_method` "
                            "attribute. Make sure that the model has been correctly quantized")


def check(plan: Plan, ctx) -> Iterator[Finding]:
    dims = plan.facts.model if plan.facts is not None else None
    found = dims.checkpoint_quant if dims is not None else None
    if found is None:
        return
    quant = found.value
    own = plan.framework == "vllm"
    asked = own and plan.settings.get(vq.QUANTIZATION) is not None
    vllm_reads, vllm_why = vq.reads_checkpoint_quant(found, ctx.target.version if own else None, asked)
    if plan.framework == "hf":
        yield from _transformers(plan, ctx, found, vllm_reads)
    elif not vllm_reads:
        here = found.prov.file == plan.file
        head, _, why = vllm_why.partition("; ")
        yield RULE.finding(
            plan, found.setting if here else (plan.model_ref or found.setting),
            f"the served model's {_written(quant)}: {ctx.target.name} {head}",
            evidence=[*([why] if why else []), f"{quant.where} ({found.prov})", f"target: {ctx.target}"],
            fix_hint=_hint(quant, "vllm"),
        )


def _transformers(plan: Plan, ctx, found, vllm_reads: bool) -> Iterator[Finding]:
    quant = found.value
    if quant.where == tf.QUANT_CONFIG_KEY:
        if quant.declared:
            return
        what = f"{_written(quant)}: {ctx.target.name} refuses to load it (ValueError)"
    else:
        what = (f"{_written(quant)}: {ctx.target.name} ignores it and builds an unquantized model "
                "(wrong outputs)")
    also = (f"vLLM reads it (from {vq.READS_HF_QUANT_CONFIG})" if vllm_reads
            else "vLLM does not read it either without --quantization")
    refused = quant.where == tf.QUANT_CONFIG_KEY
    yield RULE.finding(
        plan, found.setting, what,
        evidence=[f"{quant.where} ({found.prov})", also, f"target: {ctx.target}"],
        quote=(ctx.target.name, TRANSFORMERS_VALUE_ERROR) if refused else None,
        fix_hint=_hint(quant, "hf"),
        # a checkpoint that vLLM serves as written may not be meant for transformers at all
        severity=Severity.WARNING if vllm_reads else Severity.ERROR,
    )


def _written(quant) -> str:
    if quant.where == tf.QUANT_CONFIG_KEY:
        shape = f" (ModelOpt {quant.weights} recipe)" if quant.method == tf.MODELOPT_METHOD else ""
        return f"quantization_config names no quant_method{shape}"
    who = "ModelOpt" if quant.where == tf.HF_QUANT_CONFIG else "AutoGPTQ"
    return f"{who} {quant.weights} quantization is only in {quant.where}"


def _hint(quant, framework: str) -> str:
    method = {tf.AUTOGPTQ_CONFIG: "gptq", tf.HF_QUANT_CONFIG: tf.MODELOPT_METHOD}.get(quant.where, quant.method)
    if quant.where == tf.QUANT_CONFIG_KEY and quant.method == tf.UNDECLARED:
        return "add the quant_method of the tool that quantized the weights to quantization_config"
    if framework == "vllm":
        return f"pass --quantization {method}, or write quantization_config with \"quant_method\": \"{method}\" " \
               "into config.json"
    return f"write the recipe into config.json's quantization_config with \"quant_method\": \"{method}\""
