"""SITS206 quantization-not-read, and the one reader of a checkpoint's quantization that SITS001,
SITS005, SITS007 and ``capacity`` share (sits_doctor.frameworks.transformers.checkpoint_quant):
config.json's quantization_config, else hf_quant_config.json (ModelOpt), else quantize_config.json
(AutoGPTQ)."""

from __future__ import annotations

import json

import harness
import pytest
from conftest import run_cli, write

from sits_doctor.finding import Severity
from sits_doctor.frameworks import transformers as tf
from sits_doctor.loaders import load_model_config
from sits_doctor.loaders.hf import model_facts
from sits_doctor.memory import GIB, weights_bytes

CODE = "SITS206"
LLAMA_8B = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
            "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
MODELOPT_SIDECAR = {"producer": {"name": "modelopt", "version": "0.19.0"},
                    "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None, "exclude_modules": ["lm_head"]}}
AUTOGPTQ = {"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": False, "sym": True}


def folder(tmp_path, quant: dict | None = None, **sidecars) -> str:
    data = dict(LLAMA_8B)
    if quant is not None:
        data["quantization_config"] = quant
    write(tmp_path, "m/config.json", json.dumps(data, indent=1))
    for name, content in sidecars.items():
        write(tmp_path, f"m/{name}.json", json.dumps(content, indent=1))
    return str(tmp_path / "m" / "config.json")


def dims_of(path: str):
    from pathlib import Path

    doc, sidecars, errors = load_model_config(Path(path))
    assert not errors
    return tf.model_dims(model_facts(doc, sidecars))


def weights_gib(path: str) -> float:
    value, missing = weights_bytes(dims_of(path))
    assert missing is None, missing
    return value.value / GIB


# --- the shared reader -----------------------------------------------------------------------

def test_modelopt_sidecar_sizes_the_weights_as_fp8(tmp_path):
    plain = weights_gib(folder(tmp_path / "a"))
    fp8 = weights_gib(folder(tmp_path / "b", hf_quant_config=MODELOPT_SIDECAR))
    # embeddings and the output head stay in bf16: 2·128256·4096 parameters at 2 B
    kept = 2 * 128256 * 4096 * 2 / GIB
    assert fp8 == pytest.approx((plain - kept) / 2 + kept, rel=1e-6)
    dims = dims_of(folder(tmp_path / "c", hf_quant_config=MODELOPT_SIDECAR))
    assert dims.weight_scheme.value == "fp8" and dims.quantization.value == "modelopt"
    assert dims.weight_scheme.prov.file.endswith("hf_quant_config.json")
    assert (dims.weight_scheme.prov.line, dims.weight_scheme.prov.col) == (7, 3)  # quantization.quant_algo
    assert dims.checkpoint_quant.value.where == tf.HF_QUANT_CONFIG


def test_config_json_wins_over_the_sidecar(tmp_path):
    dims = dims_of(folder(tmp_path, {"quant_method": "fp8", "activation_scheme": "dynamic"},
                          hf_quant_config={**MODELOPT_SIDECAR, "quantization": {"quant_algo": "NVFP4"}}))
    assert dims.checkpoint_quant.value == tf_quant("fp8", "fp8", tf.QUANT_CONFIG_KEY, True)


def tf_quant(*fields):
    from sits_doctor.facts import CheckpointQuant

    return CheckpointQuant(*fields)


@pytest.mark.parametrize("algo, weights", [("NVFP4", "nvfp4"), ("FP8_PER_CHANNEL_PER_TOKEN", "fp8"),
                                           ("W4A16_AWQ", "int4"), ("MIXED_PRECISION", "mixed precision"),
                                           ("SOMETHING_NEW", "unknown")])
def test_modelopt_algorithms_name_their_weight_format(tmp_path, algo, weights):
    sidecar = {**MODELOPT_SIDECAR, "quantization": {"quant_algo": algo}}
    assert dims_of(folder(tmp_path, hf_quant_config=sidecar)).weight_scheme.value == weights


def test_autogptq_sidecar_sizes_the_weights_as_int4(tmp_path):
    plain = weights_gib(folder(tmp_path / "a"))
    int4 = weights_gib(folder(tmp_path / "b", quantize_config=AUTOGPTQ))
    kept = 2 * 128256 * 4096 * 2 / GIB
    assert int4 == pytest.approx((plain - kept) / 2 * (0.5 + 4 / 128) + kept, rel=1e-6)
    dims = dims_of(folder(tmp_path / "c", quantize_config={**AUTOGPTQ, "bits": 8}))
    assert dims.weight_scheme.value == "int8" and dims.quantization.value == "gptq"


def test_bitsandbytes_8bit_is_weighed_at_one_byte(tmp_path):
    eight = dims_of(folder(tmp_path / "a", {"quant_method": "bitsandbytes", "load_in_8bit": True}))
    four = dims_of(folder(tmp_path / "b", {"quant_method": "bitsandbytes", "load_in_4bit": True}))
    bare = dims_of(folder(tmp_path / "c", {"load_in_4bit": True}))  # transformers' older spelling
    assert (eight.weight_scheme.value, four.weight_scheme.value, bare.weight_scheme.value) == \
        ("int8", "bitsandbytes", "bitsandbytes")
    assert bare.checkpoint_quant.value.declared


def test_an_unnamed_format_is_not_sized(tmp_path):
    """No quant_method and nothing else that says the format: the weights are not guessed."""
    value, missing = weights_bytes(dims_of(folder(tmp_path, {"bits": 4, "group_size": 128})))
    assert value is None and "stored format is not known" in missing


def test_modelopt_recipe_without_quant_method_has_static_scales(tmp_path):
    """A ModelOpt FP8 recipe copied into config.json with no quant_method: SITS005 reads its
    quant_algo (nested, as in hf_quant_config.json, and flat)."""
    nested = dims_of(folder(tmp_path / "a", MODELOPT_SIDECAR))
    flat = dims_of(folder(tmp_path / "b", {"quant_algo": "FP8", "producer": {"name": "modelopt"}}))
    for dims in (nested, flat):
        assert dims.activation_scales.value.static
        assert dims.checkpoint_quant.value.method == "modelopt" and not dims.checkpoint_quant.value.declared
    assert nested.activation_scales.prov.pointer == "/quantization_config/quantization/quant_algo"
    assert flat.activation_scales.prov.pointer == "/quantization_config/quant_algo"


# --- SITS206 ---------------------------------------------------------------------------------

def hf_findings(tmp_path, monkeypatch, quant=None, **sidecars):
    data = dict(LLAMA_8B)
    if quant is not None:
        data["quantization_config"] = quant
    files = {"m/config.json": json.dumps(data, indent=1),
             **{f"m/{k}.json": json.dumps(v, indent=1) for k, v in sidecars.items()}}
    return harness.findings(tmp_path, monkeypatch, files, "m/config.json", CODE, "transformers==5.24.0")


def test_fail_quant_method_missing(tmp_path, monkeypatch):
    (f,) = hf_findings(tmp_path, monkeypatch, {"bits": 4, "group_size": 128})
    assert f.severity is Severity.ERROR  # neither transformers nor vLLM reads it
    assert f.fix_hint == "add the quant_method of the tool that quantized the weights to quantization_config"
    assert f.message.endswith("transformers 5.24.0 refuses to load it (ValueError)")
    assert f.evidence[0].startswith("transformers 5.24.0 prints: ValueError: The model's quantization config")
    text = (tmp_path / "m" / "config.json").read_text()
    at = text.index('"quantization_config"')
    assert (f.location.line, f.location.col) == (text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at))


def test_fail_modelopt_layout_without_quant_method_is_a_warning(tmp_path, monkeypatch):
    """vLLM names the method itself from producer + quant_algo: transformers alone refuses."""
    (f,) = hf_findings(tmp_path, monkeypatch, MODELOPT_SIDECAR)
    assert f.severity is Severity.WARNING and "(ModelOpt fp8 recipe)" in f.message
    assert "vLLM reads it (from 0.10.1)" in f.evidence


def test_fail_autogptq_sidecar(tmp_path, monkeypatch):
    (f,) = hf_findings(tmp_path, monkeypatch, quantize_config=AUTOGPTQ)
    assert f.severity is Severity.ERROR
    assert f.location.file.endswith("quantize_config.json") and f.location.line == 2
    assert f.message.startswith("AutoGPTQ int4 quantization is only in quantize_config.json: transformers")
    assert "ignores it and builds an unquantized model" in f.message
    assert f.fix_hint == 'write the recipe into config.json\'s quantization_config with "quant_method": "gptq"'


def test_fail_modelopt_sidecar_for_transformers(tmp_path, monkeypatch):
    (f,) = hf_findings(tmp_path, monkeypatch, hf_quant_config=MODELOPT_SIDECAR)
    assert f.severity is Severity.WARNING
    assert f.message.startswith("ModelOpt fp8 quantization is only in hf_quant_config.json")
    assert f.fix_hint.endswith('with "quant_method": "modelopt"')


@pytest.mark.parametrize("quant", [None, {"quant_method": "gptq", "bits": 4}, {"load_in_4bit": True},
                                   {"quant_method": "bitsandbytes", "load_in_8bit": True}])
def test_pass_declared_or_unquantized(tmp_path, monkeypatch, quant):
    assert hf_findings(tmp_path, monkeypatch, quant) == []


def vllm_findings(tmp_path, monkeypatch, serve: str, target: str, quant=None, **sidecars):
    data = dict(LLAMA_8B)
    if quant is not None:
        data["quantization_config"] = quant
    files = {"m/config.json": json.dumps(data, indent=1), "serve.yaml": serve,
             **{f"m/{k}.json": json.dumps(v, indent=1) for k, v in sidecars.items()}}
    return harness.findings(tmp_path, monkeypatch, files, "serve.yaml", CODE, target)


SERVE = "model: ./m\nmax_model_len: 8192\nenable_prefix_caching: true\n"


@pytest.mark.parametrize("target, fires", [("vllm==0.10.0", True), ("vllm==0.10.1", False), ("vllm==0.33.0", False)])
def test_vllm_reads_the_modelopt_sidecar_from_0_10_1(tmp_path, monkeypatch, target, fires):
    found = vllm_findings(tmp_path, monkeypatch, SERVE, target, hf_quant_config=MODELOPT_SIDECAR)
    assert bool(found) is fires
    if fires:
        assert "only with --quantization modelopt (on its own from 0.10.1)" in found[0].message


def test_pass_vllm_told_the_method(tmp_path, monkeypatch):
    served = SERVE + "quantization: gptq\n"
    assert vllm_findings(tmp_path, monkeypatch, served, "vllm==0.33.0", quantize_config=AUTOGPTQ) == []
    served = SERVE + "quantization: modelopt\n"
    assert vllm_findings(tmp_path, monkeypatch, served, "vllm==0.10.0", hf_quant_config=MODELOPT_SIDECAR) == []


def test_fail_vllm_autogptq_sidecar(tmp_path, monkeypatch):
    (f,) = vllm_findings(tmp_path, monkeypatch, SERVE, "vllm==0.33.0", quantize_config=AUTOGPTQ)
    assert f.severity is Severity.ERROR and f.location.file.endswith("serve.yaml")
    assert "reads it only with a GPTQ --quantization" in f.message
    assert f.fix_hint.startswith("pass --quantization gptq, or write quantization_config")


@pytest.mark.parametrize("algo, fires", [("FP8", False), ("NVFP4", False), ("W4A8_AWQ", True)])
def test_vllm_modelopt_layout_in_config_json(tmp_path, monkeypatch, algo, fires):
    quant = {**MODELOPT_SIDECAR, "quantization": {"quant_algo": algo}}
    found = vllm_findings(tmp_path, monkeypatch, SERVE, "vllm==0.33.0", quant)
    assert bool(found) is fires
    if fires:
        assert f"ValueError: Unknown ModelOpt quant algo: {algo}" in found[0].message
    assert vllm_findings(tmp_path / "old", monkeypatch, SERVE, "vllm==0.10.0", quant)  # not normalised before 0.10.1


def test_fail_vllm_flat_quant_algo(tmp_path, monkeypatch):
    (f,) = vllm_findings(tmp_path, monkeypatch, SERVE, "vllm==0.33.0", {"quant_algo": "FP8"})
    assert "for an unquantized model" in f.message


def test_capacity_sizes_the_modelopt_sidecar(tmp_path):
    """The reported case: a ModelOpt FP8 checkpoint whose precision is only in hf_quant_config.json
    is sized as fp8 by capacity, not as bf16."""
    folder(tmp_path, hf_quant_config=MODELOPT_SIDECAR)
    write(tmp_path, "serve.yaml", SERVE)
    result = run_cli("capacity", "serve.yaml", "--gpu", "H100", "--isolated", "--format", "json", cwd=tmp_path)
    (row,) = json.loads(result.stdout)["deployments"]
    weights = row["weights_bytes"]
    assert weights / GIB == pytest.approx(weights_gib(str(tmp_path / "m" / "config.json")), rel=1e-6)
    assert 8.3 < weights / GIB < 8.6


@pytest.mark.parametrize("quant", [{"quant_method": "gptq", "bits": 4, "group_size": 128},
                                   {"quant_method": "fp8", "activation_scheme": "dynamic"}])
def test_pass_vllm_reads_a_declared_quantization_config(tmp_path, monkeypatch, quant):
    assert vllm_findings(tmp_path, monkeypatch, SERVE, "vllm==0.33.0", quant) == []


def test_the_modelopt_layout_without_quant_method_is_told_its_method(tmp_path, monkeypatch):
    (f,) = hf_findings(tmp_path, monkeypatch, MODELOPT_SIDECAR)
    assert f.fix_hint == 'write the recipe into config.json\'s quantization_config with "quant_method": "modelopt"'
