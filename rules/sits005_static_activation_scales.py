"""static-activation-scales (SITS005)

## What it does
Finds quantized checkpoints whose activation scales are static: calibrated once, before
deployment, and stored with the weights, with nothing recomputing them at run time. It reads the
checkpoint's quantization config as the loaders do:
- Hugging Face / vLLM `quant_method: fp8` with `activation_scheme: static` (`dynamic`, the
  transformers default, is quiet);
- compressed-tensors (llm-compressor) with a config group whose `input_activations` is present
  and whose `dynamic` is `false` or absent (the default is static); `input_activations: null`
  (weight-only, W4A16) and `dynamic: "local"` (NVFP4's per-group scales) are quiet;
- ModelOpt `quant_algo` `FP8`, `W8A8_SQ_PER_CHANNEL` (INT8 SmoothQuant) and `W4A8_AWQ` (or a
  `MIXED_PRECISION` checkpoint with such a layer in `quantized_layers`), in `config.json`'s
  `quantization_config` or, when that is absent, in `hf_quant_config.json` (where ModelOpt up
  to 0.29 wrote it and vLLM still reads it);
- TensorRT-LLM engines whose `pretrained_config.quantization.quant_algo` is `FP8` or a
  per-tensor SmoothQuant (`W8A8_SQ_PER_CHANNEL`, `W8A8_SQ_PER_TENSOR_PLUGIN`,
  `W8A8_SQ_PER_CHANNEL_PER_TENSOR_PLUGIN`).

Weight-only methods (AWQ, GPTQ, bitsandbytes, W4A16, W8A16) and dynamic schemes
(`FP8_PER_CHANNEL_PER_TOKEN`, `FP8_BLOCK_SCALES`, the `*_PER_TOKEN_PLUGIN` SmoothQuants,
`fbgemm_fp8`, compressed-tensors `dynamic: true`) never fire. It reports the model config
itself, and every vLLM or TensorRT-LLM deployment whose model config it can read (at the line
that names the model).

## Why it hurts
A static scale is fixed from the activations the calibration set produced (for the FP8 and
SmoothQuant recipes above, one number per layer input). At run time every input is divided by it
and clamped to the format's range (±448 for fp8 e4m3, ±127 for int8): an activation larger than
anything the calibration data showed is clipped, and with int8 a batch whose values are much
smaller than the calibrated maximum lands on only a few of the 255 levels. Whether that costs
accuracy depends on how well the calibration set covers the traffic; nothing at run time
notices. Dynamic schemes compute the scale from each token's own values (per-token), so nothing
is clipped, at the cost of one absmax reduction per token before each quantized matrix multiply.

## Example
```json file=model/config.json target=transformers==5.24.0
{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
 "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
 "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
 "torch_dtype": "bfloat16",
 "quantization_config": {"quant_method": "fp8", "activation_scheme": "static"}}
```
Use instead:
```json file=model/config.json target=transformers==5.24.0
{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
 "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
 "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
 "torch_dtype": "bfloat16",
 "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}
```

## Fix
For a Hugging Face model config loaded by transformers, `sits-doctor fix --unsafe-fixes`
edits the value in place: `activation_scheme: dynamic` for `fp8`, and `dynamic: true` with
`strategy: token` in the compressed-tensors group. The fp8 / compressed-tensors weights carry
their own scales, so the same weights run with per-token activation scales; the checkpoint's
stored activation scales are then unused (transformers lists unused checkpoint tensors as
UNEXPECTED in its load report, a warning).
Unsafe: the numerics and the speed of every quantized Linear change; check your evaluations.
Do not apply it to a folder vLLM serves: vLLM 0.33.0 registers no `input_scale` parameter for
dynamic activations and its loader skips only KV-cache scale tensors it has no parameter for,
so it is not built to load the leftover tensors. For vLLM, ModelOpt and TensorRT-LLM the scales
are part of the checkpoint and no option replaces them: re-quantize from the original weights
with the per-token twin (llm-compressor `FP8_DYNAMIC`, ModelOpt `FP8_PER_CHANNEL_PER_TOKEN`,
TensorRT-LLM `W8A8_SQ_*_PER_TOKEN_PLUGIN`), shown as advice. For a live bf16 transformers model,
`sits_doctor.patch(model, ["act_calib"])` quantizes the MLP inputs per token at run time and
counts, per layer, what a static scale would have clipped.

## How it is measured
Not measured by `check`: the finding reads the quantization config. The act_calib kernels'
benchmark (`python bench/kernels.py`) times per-token activation quantization on the GPU it runs
on; `act_quant.RuntimeCalibrator` counts the values a static scale clips on real traffic.

## Sources
- transformers `utils/quantization_config.py`@v5.24.0 `FineGrainedFP8Config` (`activation_scheme`
  defaults to `dynamic`; `static` accepted) and `integrations/finegrained_fp8.py`@v5.24.0
  `fp8_linear` ("pass a per-tensor scalar to use static activation quant; leave None for
  dynamic (per-token) quant"); `utils/loading_report.py`@v5.24.0 `log_state_dict_report`
  (unexpected keys are logged, not raised).
- vLLM `vllm/model_executor/layers/quantization/fp8.py`@v0.33.0 (`Fp8Config.from_config` requires
  `activation_scheme`; static uses `kFp8StaticTensorSym` and loads `input_scale`, dynamic
  `kFp8DynamicTokenSym`), `quantization/modelopt.py`@v0.33.0 (`FP8`: static per-tensor weight and
  activation; `FP8_PER_CHANNEL_PER_TOKEN`: dynamic per-token activation),
  `quantization/compressed_tensors/compressed_tensors.py`@v0.33.0 (`is_static_input_scheme = not
  input_quant.dynamic`), `transformers_utils/config.py`@v0.33.0 (`hf_quant_config.json` read when
  config.json has no `quantization_config`), `models/utils.py`@v0.33.0 `AutoWeightsLoader` and
  `quantization/base_config.py`@v0.33.0 `_ignore_unexpected_suffixes` (only q/k/v scales):
  https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/layers/quantization/fp8.py
- compressed-tensors `src/compressed_tensors/quantization/quant_args.py`@0.18.0 (`dynamic: ... =
  False`, "Defaults to False for static quantization"; static `token` is rejected),
  `quant_scheme.py`@0.18.0 (presets `FP8`: static per-tensor, `FP8_DYNAMIC`: dynamic per-token),
  `lifecycle/initialize.py`@0.18.0 (no scale parameters for `dynamic: true`):
  https://github.com/vllm-project/compressed-tensors/blob/0.18.0/src/compressed_tensors/quantization/quant_args.py
- ModelOpt `modelopt/torch/quantization/config.py`@0.39.0 (`FP8_DEFAULT_CFG`,
  `INT8_SMOOTHQUANT_CFG`, `W4A8_AWQ_BETA_CFG`: `*input_quantizer` with `axis: None`, calibrated;
  `FP8_PER_CHANNEL_PER_TOKEN_CFG`: `type: dynamic`) and `modelopt/torch/export/quant_utils.py`@0.39.0
  (exported as `FP8`, `W8A8_SQ_PER_CHANNEL`, `W4A8_AWQ`, `FP8_PER_CHANNEL_PER_TOKEN`; more than one
  recipe: `MIXED_PRECISION` with `quantized_layers`):
  https://github.com/NVIDIA/TensorRT-Model-Optimizer/blob/0.39.0/modelopt/torch/quantization/config.py
- TensorRT-LLM `tensorrt_llm/quantization/mode.py` `QuantMode.from_quant_algo` (per-token
  dynamic scaling only for `*_PER_TOKEN_PLUGIN` and `FP8_PER_CHANNEL_PER_TOKEN`;
  `has_act_static_scaling` otherwise) and https://nvidia.github.io/TensorRT-LLM/reference/precision.html
  (per-tensor, per-token and per-channel scaling modes).
- shared research: vllm-hf-facts §9 (`quantization_config` shapes).
"""

from __future__ import annotations

from functools import reduce
from typing import Iterator

from sits_doctor.finding import Finding, Fix, Safety, Severity
from sits_doctor.fixes import config as edit
from sits_doctor.fixes.config_insert import add_member
from sits_doctor.fixes.config_style import CannotEdit
from sits_doctor.frameworks import transformers as tf
from sits_doctor.plan import Plan, Setting
from sits_doctor.rule import Rule

RULE = Rule(
    code="SITS005",
    name="static-activation-scales",
    summary="a quantized checkpoint with static activation scales (calibrated once, stored with the weights) and "
            "no runtime calibration",
    severity=Severity.WARNING,
    frameworks=("hf", "vllm", "trtllm"),
)

CONFIG_FIXABLE = (tf.FP8_METHOD, tf.CT_METHOD)  # a config edit gives the same weights dynamic scales
# How each method is re-quantized with per-token activation scales, for the advice.
REQUANTIZE = {
    tf.CT_METHOD: "llm-compressor scheme FP8_DYNAMIC (fp8) or W8A8 (int8): per-token activation scales",
    tf.FP8_METHOD: "llm-compressor scheme FP8_DYNAMIC: per-token activation scales",
}
ACT_CALIB = "for a live bf16 transformers model, sits_doctor.patch(model, ['act_calib']) quantizes per token at run time"


def check(plan: Plan, ctx) -> Iterator[Finding]:
    dims = plan.facts.model if plan.facts is not None else None
    found = dims.activation_scales if dims is not None else None
    if found is None or not found.value.static:
        return
    scales = found.value
    own = plan.framework == "hf"  # a Hugging Face model config: transformers loads it
    here = own or found.prov.file == plan.file  # a model config (with its sidecars) or an engine: not a deployment
    at = found.setting if here else (plan.model_ref or found.setting)
    whose = "" if here else "the served model's "
    evidence = [f"{scales.scheme} ({found.prov})", f"target: {ctx.target}"]
    fixes: list[Fix | None] = []
    if own and scales.method in CONFIG_FIXABLE:
        fixes.append(_fix(found.setting, scales))
        hint = f"{_dynamic_text(scales)} (the weights keep their own scales; not for a folder vLLM serves)"
    else:
        hint = f"re-quantize from the unquantized weights with {_twin(scales)}"
    if own:
        hint += f"; or, {ACT_CALIB}"
    yield RULE.finding(
        plan, at,
        f"{whose}{scales.scheme}: static activation scales; inputs beyond the calibrated range are clipped",
        why=f"activations are quantized with {_granularity(scales)}, calibrated once and stored in the checkpoint; "
            "nothing recalibrates them at run time",
        evidence=evidence, fix_hint=hint, fixes=fixes,
    )


# --- helpers ---------------------------------------------------------------------------------

def _granularity(scales) -> str:
    if scales.granularity == "tensor":
        return "one per-tensor scale per layer input"
    return f"{scales.granularity} scales"


def _twin(scales) -> str:
    """The recipe that quantizes the same way with dynamic (per-token) activation scales."""
    if scales.method in REQUANTIZE:
        return REQUANTIZE[scales.method]
    fmt, twin = tf.STATIC_ACTIVATION_ALGOS.get(scales.name, (None, None))
    if twin is None:
        return f"a recipe with dynamic per-token activation scales ({scales.name} has no per-token variant)"
    return f"{tf.QUANT_ALGO_KEY} {twin} ({fmt} with per-token activation scales)"


def _dynamic_text(scales) -> str:
    if scales.method == tf.FP8_METHOD:
        return f"set {tf.FP8_ACTIVATION_KEY}: {tf.FP8_DYNAMIC}"
    return (f"set {tf.CT_DYNAMIC}: true and {tf.CT_STRATEGY}: {tf.CT_TOKEN} in "
            f"{tf.CT_GROUPS}.{scales.name}.{tf.CT_INPUTS}")


def _fix(setting: Setting, scales) -> Fix | None:
    title = f"{_dynamic_text(scales)} (per-token activation scales at run time)"
    if scales.method == tf.FP8_METHOD:
        return edit.replace_value(setting, tf.FP8_DYNAMIC, title, Safety.UNSAFE)
    site = setting.site
    if site is None or site.doc is None:
        return None
    doc = site.doc
    inputs = site.pointer if setting.key == tf.CT_INPUTS else site.pointer.rsplit("/", 1)[0]
    values = tf.value_at(doc.data, inputs)
    wanted = ((tf.CT_DYNAMIC, True), (tf.CT_STRATEGY, tf.CT_TOKEN))
    edits, added = [], []
    try:
        for key, value in wanted:
            if key in values:
                if values[key] == value:
                    continue
                pointer = f"{inputs}/{key}"
                one = edit.replace_value(Setting(key, key, values[key], values[key], setting.prov,
                                                 site=site._replace(pointer=pointer)), value, title, Safety.UNSAFE)
                if one.why_not:
                    raise CannotEdit(one.why_not)
                edits.extend(one.edits)
            else:
                added.append(add_member(doc, inputs, key, value))
    except CannotEdit as why:
        return Fix(title, doc.path, (), Safety.DISPLAY, str(why), doc.text)
    if added:  # members added to the same mapping go in at the same place: one edit, in order
        edits.append(reduce(lambda a, b: a._replace(new=a.new + b.new), added))
    return Fix(title, doc.path, tuple(sorted(edits, key=lambda e: e.start)), Safety.UNSAFE, None, doc.text)
