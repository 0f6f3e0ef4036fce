"""SITS005 static-activation-scales: transformers FineGrainedFP8Config / vLLM Fp8Config
(`activation_scheme`), compressed-tensors QuantizationArgs (`dynamic` defaults to False), ModelOpt
and TensorRT-LLM `quant_algo` (FP8 and per-tensor SmoothQuant are static; *_PER_TOKEN dynamic)."""

from __future__ import annotations

import json

import harness
import pytest
from conftest import run_cli, write

from sits_doctor.finding import Safety, Severity
from sits_doctor.fixer import apply_edits

CODE = "SITS005"
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
         "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
TAIL = "static activation scales; inputs beyond the calibrated range are clipped"
WHY = ("why: activations are quantized with one per-tensor scale per layer input, calibrated once and stored in the "
       "checkpoint; nothing recalibrates them at run time")
STATIC_INPUTS = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "tensor", "observer": "minmax"}


def config(quant: dict | None) -> str:
    """Llama-3.1-8B's shape with ``quant`` as its quantization_config, one key per line."""
    data = dict(LLAMA)
    if quant is not None:
        data["quantization_config"] = quant
    return json.dumps(data, indent=1)


def position(text: str, needle: str, after: str = '"quantization') -> tuple[int, int]:
    """Line and column (1-based) of the first ``needle`` after ``after`` in ``text``."""
    at = text.index(needle, text.index(after))
    return text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)


def findings(tmp_path, monkeypatch, quant, target="transformers==5.24.0", extra=None):
    files = {"m/config.json": config(quant), **(extra or {})}
    return harness.findings(tmp_path, monkeypatch, files, "m/config.json", CODE, target)


def ct(*groups) -> dict:
    return {"quant_method": "compressed-tensors", "format": "float-quantized",
            "config_groups": {f"group_{i}": g for i, g in enumerate(groups)}}


def group(inputs, bits=8, kind="float") -> dict:
    return {"targets": ["Linear"], "weights": {"num_bits": bits, "type": kind, "strategy": "channel"},
            "input_activations": inputs}


def fixed(tmp_path, finding) -> str:
    (fix,) = finding.fixes
    assert fix.safety is Safety.UNSAFE
    return apply_edits((tmp_path / "m" / "config.json").read_text(), fix.edits)


# --- quant_method fp8 -------------------------------------------------------------------------

def test_fp8_static_fires_at_activation_scheme_and_the_fix_makes_it_dynamic(tmp_path, monkeypatch):
    (f,) = findings(tmp_path, monkeypatch, {"quant_method": "fp8", "activation_scheme": "static"})
    assert f.severity == Severity.WARNING
    assert f.message == f"fp8 activation_scheme static: {TAIL}"
    assert f.evidence[0] == WHY
    text = config({"quant_method": "fp8", "activation_scheme": "static"})
    assert (f.location.line, f.location.col) == position(text, '"activation_scheme"') == (16, 3)
    assert f.location.pointer == "/quantization_config/activation_scheme"
    assert f.fix_hint.startswith("set activation_scheme: dynamic (the weights keep their own scales; not for a "
                                 "folder vLLM serves); or, for a live bf16 transformers model, "
                                 "sits_doctor.patch(model, ['act_calib'])")
    assert f.fixes[0].title == "set activation_scheme: dynamic (per-token activation scales at run time)"
    text = fixed(tmp_path, f)
    assert json.loads(text)["quantization_config"] == {"quant_method": "fp8", "activation_scheme": "dynamic"}
    assert text.replace('"dynamic"', '"static"') == (tmp_path / "m" / "config.json").read_text()
    (tmp_path / "m" / "config.json").write_text(text)
    assert harness.findings(tmp_path, monkeypatch, {}, "m/config.json", CODE, "transformers==5.24.0") == []


@pytest.mark.parametrize("quant", [
    {"quant_method": "fp8", "activation_scheme": "dynamic"},
    {"quant_method": "fp8"},  # transformers' default is dynamic
    {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
])
def test_fp8_dynamic_is_quiet(tmp_path, monkeypatch, quant):
    assert findings(tmp_path, monkeypatch, quant) == []


def test_fp8_scheme_is_read_case_insensitively_as_transformers_does(tmp_path, monkeypatch):
    (f,) = findings(tmp_path, monkeypatch, {"quant_method": "fp8", "activation_scheme": "Static"})
    assert f.message.startswith("fp8 activation_scheme Static: ")


# --- compressed-tensors -----------------------------------------------------------------------

def test_ct_without_dynamic_is_static_by_default_and_the_fix_adds_it(tmp_path, monkeypatch):
    (f,) = findings(tmp_path, monkeypatch, ct(group(STATIC_INPUTS)))
    assert f.message == ("compressed-tensors config_groups.group_0.input_activations with dynamic unset "
                         f"(false), strategy tensor: {TAIL}")
    assert f.location.pointer == "/quantization_config/config_groups/group_0/input_activations"
    assert (f.location.line, f.location.col) == position(config(ct(group(STATIC_INPUTS))), '"input_activations"')
    data = json.loads(fixed(tmp_path, f))
    inputs = data["quantization_config"]["config_groups"]["group_0"]["input_activations"]
    assert inputs == {**STATIC_INPUTS, "strategy": "token", "dynamic": True}


def test_ct_dynamic_false_fires_at_dynamic_and_strategy_is_added_when_missing(tmp_path, monkeypatch):
    inputs = {"num_bits": 8, "type": "int", "symmetric": True, "dynamic": False}
    (f,) = findings(tmp_path, monkeypatch, ct(group(inputs, kind="int")))
    assert f.location.pointer.endswith("/input_activations/dynamic")
    text = config(ct(group(inputs, kind="int")))
    assert (f.location.line, f.location.col) == position(text, '"dynamic"', '"input_activations"')
    assert "with dynamic false, strategy tensor:" in f.message  # group_size null: per-tensor
    assert f.fixes[0].title == ("set dynamic: true and strategy: token in config_groups.group_0.input_activations "
                                "(per-token activation scales at run time)")
    data = json.loads(fixed(tmp_path, f))
    got = data["quantization_config"]["config_groups"]["group_0"]["input_activations"]
    assert got == {"num_bits": 8, "type": "int", "symmetric": True, "dynamic": True, "strategy": "token"}


def test_ct_strategy_is_inferred_from_group_size(tmp_path, monkeypatch):
    (f,) = findings(tmp_path, monkeypatch, ct(group({"num_bits": 8, "group_size": 128})))
    assert "strategy group:" in f.message and "with group scales, calibrated once" in f.evidence[0]
    (g,) = findings(tmp_path, monkeypatch, ct(group({"num_bits": 8, "group_size": -1})))
    assert "strategy channel:" in g.message


@pytest.mark.parametrize("inputs", [
    None,  # weight-only (W4A16, W8A16)
    {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True},
    {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "dynamic": "local"},  # NVFP4
])
def test_ct_weight_only_and_dynamic_are_quiet(tmp_path, monkeypatch, inputs):
    assert findings(tmp_path, monkeypatch, ct(group(inputs, bits=4))) == []


def test_ct_the_static_group_is_reported_whatever_its_place(tmp_path, monkeypatch):
    quant = ct(group(None, bits=4), group({"num_bits": 8, "dynamic": True, "strategy": "token"}),
               group(STATIC_INPUTS))
    (f,) = findings(tmp_path, monkeypatch, quant)
    assert f.location.pointer == "/quantization_config/config_groups/group_2/input_activations"
    assert "config_groups.group_2.input_activations" in f.message


# --- weight-only and dynamic methods never fire ------------------------------------------------

@pytest.mark.parametrize("quant", [
    {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"},
    {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True},
    {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
    {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0},
    {"quant_method": "modelopt", "quant_algo": "W4A16_AWQ", "group_size": 128},
    {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16},
    {"quant_method": "modelopt", "quant_algo": "FP8_PER_CHANNEL_PER_TOKEN"},
    {"quant_method": "modelopt", "quant_algo": None},
    {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"},
])
def test_weight_only_and_dynamic_methods_never_fire(tmp_path, monkeypatch, quant):
    assert findings(tmp_path, monkeypatch, quant) == []


def test_no_quantization_config_is_quiet(tmp_path, monkeypatch):
    assert findings(tmp_path, monkeypatch, None) == []


# --- ModelOpt ---------------------------------------------------------------------------------

@pytest.mark.parametrize("algo, twin", [
    ("FP8", "quant_algo FP8_PER_CHANNEL_PER_TOKEN (FP8 with per-token activation scales)"),
    ("W8A8_SQ_PER_CHANNEL", "quant_algo W8A8_SQ_PER_CHANNEL_PER_TOKEN_PLUGIN (INT8 SmoothQuant with per-token "
                            "activation scales)"),
    ("W4A8_AWQ", "a recipe with dynamic per-token activation scales (W4A8_AWQ has no per-token variant)"),
])
def test_modelopt_static_algos_fire_with_advice_and_no_edit(tmp_path, monkeypatch, algo, twin):
    (f,) = findings(tmp_path, monkeypatch, {"quant_method": "modelopt", "quant_algo": algo,
                                            "kv_cache_quant_algo": "FP8"})
    assert f.message == f"ModelOpt quant_algo {algo}: {TAIL}"
    assert f.location.pointer == "/quantization_config/quant_algo"
    text = config({"quant_method": "modelopt", "quant_algo": algo, "kv_cache_quant_algo": "FP8"})
    assert (f.location.line, f.location.col) == position(text, '"quant_algo"')
    assert f.fixes == ()
    assert f.fix_hint.startswith(f"re-quantize from the unquantized weights with {twin}; or, for a live bf16 ")


def test_modelopt_mixed_precision_reports_the_first_static_layer(tmp_path, monkeypatch):
    layers = {"model.layers.0.mlp.down_proj": {"quant_algo": "NVFP4", "group_size": 16},
              "model.layers.0.mlp.up_proj": {"quant_algo": "FP8_PER_CHANNEL_PER_TOKEN"},
              "model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"},
              "model.layers.1.self_attn.q_proj": {"quant_algo": "W8A8_SQ_PER_CHANNEL"}}
    quant = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers}
    (f,) = findings(tmp_path, monkeypatch, quant)
    assert f.message == ("ModelOpt quant_algo MIXED_PRECISION, quantized_layers.model.layers.0.self_attn.q_proj: "
                         f"FP8: {TAIL}")
    assert f.location.pointer == "/quantization_config/quantized_layers/model.layers.0.self_attn.q_proj/quant_algo"
    text = config(quant)
    assert (f.location.line, f.location.col) == position(text, '"quant_algo"', '"model.layers.0.self_attn.q_proj"')
    assert "quant_algo FP8_PER_CHANNEL_PER_TOKEN" in f.fix_hint
    quiet = {k: v for k, v in layers.items() if k.endswith(("down_proj", "up_proj"))}
    assert findings(tmp_path, monkeypatch, {**quant, "quantized_layers": quiet}) == []


def test_hf_quant_config_is_read_only_when_config_json_has_none(tmp_path, monkeypatch):
    side = {"m/hf_quant_config.json": json.dumps(
        {"producer": {"name": "modelopt", "version": "0.19.0"},
         "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None}}, indent=1)}
    (f,) = findings(tmp_path, monkeypatch, None, extra=side)
    assert f.location.file.endswith("hf_quant_config.json")
    assert (f.location.line, f.location.col, f.location.pointer) == (7, 3, "/quantization/quant_algo")
    assert f.message == f"ModelOpt quant_algo FP8: {TAIL}"
    # config.json's own quantization_config wins (vLLM transformers_utils/config.py)
    assert findings(tmp_path, monkeypatch, {"quant_method": "fp8", "activation_scheme": "dynamic"}, extra=side) == []


# --- TensorRT-LLM engines ---------------------------------------------------------------------

def engine(algo) -> str:
    return json.dumps({
        "version": "0.17.0.post1",
        "pretrained_config": {
            "architecture": "LlamaForCausalLM", "dtype": "bfloat16", "vocab_size": 128256, "hidden_size": 4096,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "intermediate_size": 14336, "max_position_embeddings": 131072,
            "mapping": {"world_size": 1, "tp_size": 1, "pp_size": 1},
            "quantization": {"quant_algo": algo, "kv_cache_quant_algo": None},
        },
        "build_config": {"max_seq_len": 8192, "max_batch_size": 64, "max_num_tokens": 8192},
    }, indent=1)


@pytest.mark.parametrize("algo, twin", [
    ("W8A8_SQ_PER_TENSOR_PLUGIN", "W8A8_SQ_PER_TENSOR_PER_TOKEN_PLUGIN"),
    ("W8A8_SQ_PER_CHANNEL_PER_TENSOR_PLUGIN", "W8A8_SQ_PER_CHANNEL_PER_TOKEN_PLUGIN"),
    ("FP8", "FP8_PER_CHANNEL_PER_TOKEN"),
])
def test_trtllm_per_tensor_engines_fire(tmp_path, monkeypatch, algo, twin):
    (f,) = harness.findings(tmp_path, monkeypatch, {"engine/config.json": engine(algo)}, "engine/config.json", CODE)
    assert f.message == f"TensorRT-LLM quant_algo {algo}: {TAIL}"
    assert f.location.pointer == "/pretrained_config/quantization/quant_algo"
    assert (f.location.line, f.location.col) == position(engine(algo), '"quant_algo"') == (19, 4)
    assert f.fixes == ()
    assert f.fix_hint.startswith(f"re-quantize from the unquantized weights with quant_algo {twin} (")
    assert "act_calib" not in f.fix_hint  # not a transformers model


@pytest.mark.parametrize("algo", ["W8A8_SQ_PER_CHANNEL_PER_TOKEN_PLUGIN", "W8A8_SQ_PER_TENSOR_PER_TOKEN_PLUGIN",
                                  "FP8_PER_CHANNEL_PER_TOKEN", "FP8_BLOCK_SCALES", "W8A16", "W4A16_AWQ",
                                  "W4A16_GPTQ", "NVFP4", None])
def test_trtllm_per_token_and_weight_only_engines_are_quiet(tmp_path, monkeypatch, algo):
    assert harness.findings(tmp_path, monkeypatch, {"engine/config.json": engine(algo)}, "engine/config.json",
                            CODE) == []


# --- deployments serving such a model ----------------------------------------------------------

def test_vllm_deployment_reports_the_served_model_at_its_model_line(tmp_path, monkeypatch):
    write(tmp_path, "m/config.json", config({"quant_method": "fp8", "activation_scheme": "static"}))
    serve = "max-model-len: 8192\nmodel: ./m\n"
    (f,) = harness.findings(tmp_path, monkeypatch, {"serve.yaml": serve}, "serve.yaml", CODE, "vllm==0.11.0")
    assert f.message == f"the served model's fp8 activation_scheme static: {TAIL}"
    assert (f.location.file, f.location.line, f.location.col) == ("serve.yaml", 2, 1)
    assert f.evidence[1] == "fp8 activation_scheme static (m/config.json:16:3)"
    assert f.evidence[2].startswith("target: vLLM 0.11.0")
    assert f.fixes == ()  # the scales are in the checkpoint: no vLLM option replaces them
    assert f.fix_hint == ("re-quantize from the unquantized weights with llm-compressor scheme FP8_DYNAMIC: "
                          "per-token activation scales")
    write(tmp_path, "m/config.json", config({"quant_method": "fp8", "activation_scheme": "dynamic"}))
    assert harness.findings(tmp_path, monkeypatch, {}, "serve.yaml", CODE, "vllm==0.11.0") == []


def test_vllm_deployment_of_a_compressed_tensors_model(tmp_path, monkeypatch):
    write(tmp_path, "m/config.json", config(ct(group(STATIC_INPUTS))))
    (f,) = harness.findings(tmp_path, monkeypatch, {"serve.yaml": "model: ./m\nmax-model-len: 8192\n"}, "serve.yaml", CODE,
                            "vllm==0.11.0")
    assert f.message.startswith("the served model's compressed-tensors config_groups.group_0.input_activations")
    assert f.fix_hint.startswith("re-quantize from the unquantized weights with llm-compressor scheme FP8_DYNAMIC "
                                 "(fp8) or W8A8 (int8)")


def test_explain_shows_the_doc_with_sources(tmp_path):
    r = run_cli("explain", CODE, cwd=tmp_path)
    assert r.exit_code == 0
    assert r.stdout.startswith("static-activation-scales (SITS005)")
    assert "## Sources" in r.stdout
    for cited in ("layers/quantization/fp8.py`@v0.33.0", "quantization/quant_args.py`@0.18.0",
                  "modelopt/torch/quantization/config.py`@0.39.0", "integrations/finegrained_fp8.py`@v5.24.0"):
        assert cited in r.stdout


# --- the compressed-tensors fix's edge cases -----------------------------------------------------

def test_ct_fix_is_display_only_when_a_value_cannot_be_edited(tmp_path, monkeypatch):
    from sits_doctor.source import SourceDoc

    inputs = {"num_bits": 8, "dynamic": False, "strategy": "tensor"}
    monkeypatch.setattr(SourceDoc, "is_shared", lambda self, pointer: pointer.endswith("/strategy"))
    (f,) = findings(tmp_path, monkeypatch, ct(group(inputs)))
    (fix,) = f.fixes
    assert fix.safety is Safety.DISPLAY and fix.edits == ()
    assert fix.why_not == "it is written once for several places (a YAML anchor, alias or << merge)"
    assert fix.title.startswith("set dynamic: true and strategy: token in config_groups.group_0.input_activations")


def test_ct_fix_is_display_only_when_a_member_cannot_be_added(tmp_path, monkeypatch):
    from sits_doctor.fixes.config_style import CannotEdit

    from sits_doctor.rules import sits005_static_activation_scales as rule

    def refuse(*args):
        raise CannotEdit("the mapping's position is unknown")

    monkeypatch.setattr(rule, "add_member", refuse)
    (f,) = findings(tmp_path, monkeypatch, ct(group(STATIC_INPUTS)))
    (fix,) = f.fixes
    assert (fix.safety, fix.edits, fix.why_not) == (Safety.DISPLAY, (), "the mapping's position is unknown")


def test_ct_fix_needs_a_file(tmp_path, monkeypatch):
    """A setting that no file wrote (sits_doctor.check_model's live config) gets no edit."""
    from sits_doctor.facts import ActivationScales
    from sits_doctor.plan import Provenance, Setting
    from sits_doctor.rules import sits005_static_activation_scales as rule

    scales = ActivationScales(True, "tensor", "compressed-tensors ...", "compressed-tensors", "group_0")
    setting = Setting("input_activations", "input_activations", {}, {}, Provenance.derived("live"))
    assert rule._fix(setting, scales) is None
    assert rule._fix(setting._replace(site=None), scales._replace(method="fp8")) is None


# --- the fact itself (ModelDims.activation_scales), dynamic schemes included --------------------

def scales_of(tmp_path, files: dict[str, str], main: str = "m/config.json"):
    from sits_doctor.frameworks.transformers import model_dims
    from sits_doctor.loaders import load_paths

    for name, text in files.items():
        write(tmp_path, name, text)
    (plan,) = load_paths([str(tmp_path / main)]).plans
    found = model_dims(plan.model).activation_scales
    return None if found is None else (tuple(found.value), found.prov.pointer)


@pytest.mark.parametrize("quant, expected", [
    ({"quant_method": "fp8", "activation_scheme": "dynamic"},
     ((False, "token", "fp8 activation_scheme dynamic", "fp8", ""), "/quantization_config/activation_scheme")),
    ({"quant_method": "fp8"},  # transformers' default
     ((False, "token", "fp8 activation_scheme dynamic", "fp8", ""), "/quantization_config")),
    ({"quant_method": "fp8", "activation_scheme": "static"},
     ((True, "tensor", "fp8 activation_scheme static", "fp8", ""), "/quantization_config/activation_scheme")),
    ({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0},
     ((False, "token", "fbgemm_fp8", "fbgemm_fp8", ""), "/quantization_config")),
    ({"quant_method": "modelopt", "quant_algo": "FP8_BLOCK_SCALES"},
     ((False, "block", "ModelOpt quant_algo FP8_BLOCK_SCALES", "modelopt", "FP8_BLOCK_SCALES"),
      "/quantization_config/quant_algo")),
    ({"quant_method": "modelopt", "quant_algo": "fp8"},  # read case-insensitively, shown as written
     ((True, "tensor", "ModelOpt quant_algo fp8", "modelopt", "FP8"), "/quantization_config/quant_algo")),
    ({"quant_method": "awq", "bits": 4}, None),
    ({"quant_method": "modelopt", "quant_algo": 8}, None),
    ({"quant_method": "modelopt"}, None),
])
def test_the_fact_for_each_method(tmp_path, quant, expected):
    assert scales_of(tmp_path, {"m/config.json": config(quant)}) == expected


def test_the_fact_for_compressed_tensors_dynamic_groups(tmp_path):
    dyn = {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}
    local = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "dynamic": "local"}
    got = scales_of(tmp_path, {"m/config.json": config(ct(group(None), group(local), group(dyn)))})
    assert got == ((False, "tensor_group", 'compressed-tensors config_groups.group_1.input_activations with '
                    'dynamic "local", strategy tensor_group', "compressed-tensors", "group_1"),
                   "/quantization_config/config_groups/group_1/input_activations/dynamic")
    assert scales_of(tmp_path, {"m/config.json": config(ct(group(None), "not a group"))}) is None
    assert scales_of(tmp_path, {"m/config.json": config({"quant_method": "compressed-tensors",
                                                          "config_groups": ["group_0"]})}) is None


def test_the_fact_for_engines_and_sidecars(tmp_path):
    got = scales_of(tmp_path, {"e/config.json": engine("W8A8_SQ_PER_TENSOR_PER_TOKEN_PLUGIN")}, "e/config.json")
    assert got == ((False, "token", "TensorRT-LLM quant_algo W8A8_SQ_PER_TENSOR_PER_TOKEN_PLUGIN", "trtllm",
                    "W8A8_SQ_PER_TENSOR_PER_TOKEN_PLUGIN"), "/pretrained_config/quantization/quant_algo")
    side = json.dumps({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8_PER_CHANNEL_PER_TOKEN"}})
    got = scales_of(tmp_path, {"s/config.json": config(None), "s/hf_quant_config.json": side}, "s/config.json")
    assert got == ((False, "token", "ModelOpt quant_algo FP8_PER_CHANNEL_PER_TOKEN", "modelopt",
                    "FP8_PER_CHANNEL_PER_TOKEN"), "/quantization/quant_algo")
    # a quantization_config that is not a mapping hides the sidecar (vLLM reads it only when absent)
    bad = config(None)[:-2] + ',\n "quantization_config": "fp8"\n}'
    assert scales_of(tmp_path, {"t/config.json": bad, "t/hf_quant_config.json": side}, "t/config.json") is None
