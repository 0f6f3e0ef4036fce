"""SITS001 on ORT GenAI: the precision and the device come from what the model folder says.

Regression cases from issue 26 ("Truth on real configs"): microsoft's DirectML int4 AWQ exports
(``directml/directml-int4-awq-block-128/genai_config.json``, decoder ``model.onnx``) were sized at
2 bytes a parameter, and CPU exports (``provider_options: []``, ``cpu-int4-rtn-block-32``) were
charged against the GPU's memory, both as errors. The configs here are small ones written like
those (Phi-3-medium-4k / Phi-3-mini-128k shapes).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sits_doctor.engine import CheckOptions, check
from sits_doctor.frameworks import ortgenai_precision as prec
from sits_doctor.memory import GIB

MEDIUM = dict(context=4096, hidden=5120, heads=40, kv=10, layers=40, head=128)  # Phi-3-medium-4k
MINI_128K = dict(context=131072, hidden=3072, heads=32, kv=32, layers=32, head=96)  # Phi-3-mini-128k
VOCAB = 32064


def config(shape: dict, filename: str, providers, **search) -> dict:
    session = {"log_id": "onnxruntime-genai"}
    if providers is not ...:
        session["provider_options"] = providers
    return {
        "model": {
            "context_length": shape["context"], "type": "phi3", "vocab_size": VOCAB,
            "bos_token_id": 1, "eos_token_id": 32000, "pad_token_id": 32000,
            "decoder": {
                "filename": filename, "session_options": session, "head_size": shape["head"],
                "hidden_size": shape["hidden"], "num_attention_heads": shape["heads"],
                "num_key_value_heads": shape["kv"], "num_hidden_layers": shape["layers"],
                "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                           "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"},
                "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                            "present_value_names": "present.%d.value"},
            },
        },
        "search": {"max_length": shape["context"], "past_present_share_buffer": True, "num_beams": 1, **search},
    }


def write(tmp_path: Path, folder: str, data: dict) -> Path:
    """The config in ``models/<folder>/`` (the test's own folder name stays out of the names read)."""
    path = tmp_path / "models" / folder / "genai_config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4), encoding="utf-8")
    return path


def sits001(path: Path, gpu: str = "A10G"):
    report = check([path], CheckOptions(select=["SITS001"], gpu=gpu, isolated=True))
    assert not report.errors and not report.internal_errors
    return report.findings


def params(shape: dict) -> int:
    return 12 * shape["layers"] * shape["hidden"] ** 2 + VOCAB * shape["hidden"]


def weights_gib(finding) -> tuple[float, float]:
    line = next(e for e in finding.evidence if e.startswith("weights"))
    numbers = line.split("GiB")[0].split()[-1].split("–")
    return float(numbers[0]), float(numbers[-1])


# --- what the names say -------------------------------------------------------------------------
@pytest.mark.parametrize("name, expected, block", [
    ("directml-int4-awq-block-128", "int4", 128),
    ("cpu-int4-rtn-block-32-acc-level-4", "int4", 32),
    ("phi3-mini-4k-instruct-cuda-int4-rtn-block-32.onnx", "int4", 32),
    ("model_q4f16.onnx", "int4", None),
    ("gpu-int4-awq", "int4", None),
    ("cuda-fp16", "fp16", None),
    ("phi3-mini-128k-instruct-cuda-fp16.onnx", "fp16", None),
    ("cpu-fp32", "fp32", None),
    ("model-bf16", "bf16", None),
    ("cuda-int8", "int8", None),
])
def test_precision_from_microsofts_names(name, expected, block):
    got = prec.precision([(name, "the folder")])
    assert (got.name, got.block) == (expected, block)
    assert name in got.source


def test_precision_the_first_name_that_states_one_wins():
    names = [("model.onnx", "the decoder file"), ("cuda-fp16", "the folder"), ("cpu-int4", "the folder")]
    assert prec.precision(names).name == "fp16"
    unknown = prec.precision([("model.onnx", "the decoder file"), ("directml", "the folder")])
    assert unknown.name is None and "model.onnx" in unknown.source and "directml" in unknown.source


@pytest.mark.parametrize("providers, kind", [
    ([], "cpu"), (None, "cpu"), ([{"cpu": {}}], "cpu"), ([{"XnnPack": {}}], "cpu"),
    ([{"dml": {}}], "gpu"), ([{"cuda": {"enable_cuda_graph": "0"}}], "gpu"), ([{"CUDAExecutionProvider": {}}], "gpu"),
    ([{"DML": {}}], "gpu"), ([{"webgpu": {}}], "gpu"), ([{"NvTensorRtRtx": {}}], "gpu"),
    ([{"qnn": {}}], "other"), ([{"OpenVINO": {}}], "other"), ({"cuda": {}}, "other"),
])
def test_device_from_provider_options(providers, kind):
    assert prec.device(providers, "provider_options").kind == kind


def test_kv_dtype_follows_the_builder():
    cpu, gpu = prec.Device("cpu", None, ""), prec.Device("gpu", "cuda", "")
    int4, fp16, fp32 = (prec.Precision(n, None, "") for n in ("int4", "fp16", "fp32"))
    assert prec.io_bytes(int4, cpu) == (4.0, 4.0)  # CPU int4 exports keep fp32 inputs and outputs
    assert prec.io_bytes(int4, gpu) == (2.0, 2.0)
    assert prec.io_bytes(fp16, cpu) == prec.io_bytes(fp16, gpu) == (2.0, 2.0)
    assert prec.io_bytes(fp32, gpu) == (4.0, 4.0)
    low, high = prec.io_bytes(prec.Precision(None, None, ""), gpu)
    assert low < high


def test_int4_bytes_shrink_with_the_block():
    gpu = prec.Device("gpu", "dml", "")
    b32 = prec.weight_bytes(prec.Precision("int4", 32, ""), gpu)[0]
    b128 = prec.weight_bytes(prec.Precision("int4", 128, ""), gpu)[0]
    assert 0.5 < b128 < b32 < 1.0


# --- the DirectML int4 AWQ export (issue 26, case 1) --------------------------------------------
def test_directml_int4_awq_is_sized_as_int4_and_fits(tmp_path):
    path = write(tmp_path, "phi3-medium-4k-onnx-directml/directml-int4-awq-block-128",
                 config(MEDIUM, "model.onnx", [{"dml": {}}]))
    assert sits001(path) == []
    # the same config read as fp16 (its folder says so) is about 4 times the weights
    fp16 = write(tmp_path, "phi3-medium-4k-onnx-directml/directml-fp16", config(MEDIUM, "model.onnx", [{"dml": {}}]))
    int4 = sits001(path, gpu="T4")  # too small a GPU for fp16 medium: both report, with their weights
    half = sits001(fp16, gpu="T4")
    assert int4 == [] or int4[0].severity.value != "error"
    assert half and half[0].severity.value == "error"
    w16 = weights_gib(half[0])[0]
    assert w16 == pytest.approx(params(MEDIUM) * 2 / GIB, rel=0.01)


def test_directml_int4_awq_weights_are_about_a_quarter_of_fp16(tmp_path):
    path = write(tmp_path, "a/directml-int4-awq-block-128", config(MEDIUM, "model.onnx", [{"dml": {}}]))
    report = check([path], CheckOptions(select=["SITS001"], gpu="A10G", gpu_memory=8 * GIB, isolated=True))
    finding = report.findings[0]  # 8 GiB: int4 medium (about 6.6 GiB) + 0.78 GiB of KV + 1 GiB does not fit
    low, high = weights_gib(finding)
    assert low == high
    assert 6.0 < low < 7.0  # the issue: about 6–7 GiB (the real model.onnx.data)
    assert low / (params(MEDIUM) * 2 / GIB) < 0.3
    assert "directml-int4-awq-block-128" in " ".join(finding.evidence)


# --- CPU exports (issue 26, case 1) -------------------------------------------------------------
@pytest.mark.parametrize("providers", [[], ..., [{"cpu": {}}]])
def test_cpu_export_is_not_charged_against_the_gpu(tmp_path, providers):
    path = write(tmp_path, "phi3-mini-128k-onnx/cpu_and_mobile/cpu-int4-rtn-block-32",
                 config(MINI_128K, "phi3-mini-128k-instruct-cpu-int4-rtn-block-32-acc-level-4.onnx", providers))
    findings = sits001(path, gpu="T4")
    assert [f.severity.value for f in findings] == ["info"]
    assert "system memory" in findings[0].message and "not checked" in findings[0].message
    # fp32 KV (a CPU int4 export): 2 · 32 layers · 32 heads · 131072 · 96 · 4 B
    kv = 2 * 32 * 32 * 131072 * 96 * 4 / GIB
    assert f"{kv:.2f} GiB" in findings[0].message


def test_the_same_export_on_cuda_is_checked_against_the_gpu(tmp_path):
    path = write(tmp_path, "phi3-mini-128k-onnx/cuda/cuda-int4-rtn-block-32",
                 config(MINI_128K, "phi3-mini-128k-instruct-cuda-int4-rtn-block-32.onnx", [{"cuda": {}}]))
    findings = sits001(path, gpu="T4")
    assert [f.severity.value for f in findings] == ["error"]
    kv = 2 * 32 * 32 * 131072 * 96 * 2 / GIB  # fp16 KV on the GPU
    assert f"{kv:.2f} GiB" in findings[0].message
    assert findings[0].evidence[0] == "ORT GenAI prints: Could not allocate the key-value cache buffer"


def test_an_npu_provider_is_not_checked(tmp_path):
    path = write(tmp_path, "qnn-int4", config(MINI_128K, "model.onnx", [{"qnn": {"backend_path": "QnnHtp.dll"}}]))
    findings = sits001(path)
    assert [f.severity.value for f in findings] == ["info"] and "qnn" in findings[0].message


# --- unknown precision: info, never an asserted OOM ---------------------------------------------
def test_unknown_precision_that_decides_the_fit_is_an_info(tmp_path):
    path = write(tmp_path, "phi3-medium-4k/export", config(MEDIUM, "model.onnx", [{"cuda": {}}]))
    findings = sits001(path)
    assert [f.severity.value for f in findings] == ["info"]
    assert "precision" in findings[0].message and "model.onnx" in findings[0].evidence[0]
    low, high = weights_gib(findings[0])
    assert low < high


def test_unknown_precision_still_errors_when_even_the_least_cannot_fit(tmp_path):
    """131072 tokens of Phi-3-mini need 48 GiB of KV even in fp16 and int4 weights: more than an A10G."""
    path = write(tmp_path, "phi3-mini-128k/export", config(MINI_128K, "model.onnx", [{"cuda": {}}]))
    findings = sits001(path)
    assert [f.severity.value for f in findings] == ["error"]
    assert f"{2 * 32 * 32 * 131072 * 96 * 2 / GIB:.2f}–" in findings[0].message


def test_the_onnx_files_size_gives_the_precision(tmp_path):
    """model.onnx + model.onnx.data beside the config: measured weights, and the precision they imply."""
    path = write(tmp_path, "phi3-medium-4k/export", config(MEDIUM, "model.onnx", [{"cuda": {}}]))
    (path.parent / "model.onnx").write_bytes(b"\0" * 1024)
    data = path.parent / "model.onnx.data"
    with open(data, "wb") as f:  # a sparse file of int4 size: about 0.56 B a parameter
        f.truncate(int(params(MEDIUM) * 0.56))
    findings = sits001(path, gpu="T4")
    evidence = " ".join(e for f in findings for e in f.evidence)
    # int4 on the GPU: fp16 KV, so 0.78 GiB of KV and ≈6.6 GiB of weights fit a 15 GiB T4
    assert findings == [], evidence
    os.truncate(data, int(params(MEDIUM) * 2.0))  # now fp16 weights: 23.7 GiB, more than the T4
    findings = sits001(path, gpu="T4")
    assert [f.severity.value for f in findings] == ["error"]
    assert "fp16 from the size of the decoder's ONNX files" in " ".join(findings[0].evidence)


def test_kv_cache_quantization_bits_shrink_the_buffer(tmp_path):
    messages = []
    for folder, options in (("a/cuda-fp16", {}), ("b/cuda-fp16", {"kvCacheQuantizationBits": "8"})):
        path = write(tmp_path, folder, config(MINI_128K, "model.onnx", [{"cuda": options}]))
        messages.append(sits001(path)[0].message)
    kv16 = 2 * 32 * 32 * 131072 * 96 * 2 / GIB
    assert f"{kv16:.2f} GiB" in messages[0] and f"{kv16 / 2:.2f} GiB" in messages[1]


def test_kv_cache_quantization_bits_leave_the_embeddings_alone(tmp_path):
    """The provider option quantizes the KV cache only: the weight estimate (layers and the
    embedding table at the ONNX inputs' type) is the same with and without it."""
    weights = []
    for folder, options in (("a/cuda-fp16", {}), ("b/cuda-fp16", {"kvCacheQuantizationBits": "4"})):
        path = write(tmp_path, folder, config(MINI_128K, "model.onnx", [{"cuda": options}]))
        (line,) = [e for f in sits001(path) for e in f.evidence if e.startswith("weights ≈")]
        weights.append(line)
    assert weights[0] == weights[1]
    assert f"{VOCAB} vocab · 3072 embeddings · 2 B" in weights[1], weights[1]


def test_head_size_as_written_wins_over_hidden_over_heads(tmp_path):
    """Gemma-7B-style decoders have head_size 256 while hidden_size / heads is 192: the KV uses
    head_size as written, and hidden_size / heads only when head_size is missing."""
    shape = dict(context=8192, hidden=3072, heads=16, kv=16, layers=28, head=256)

    def finding(folder, data):
        path = write(tmp_path, folder, data)
        (found,) = check([path], CheckOptions(select=["SITS001"], gpu="A10G", gpu_memory=2 * GIB,
                                              isolated=True)).findings
        return found

    written = finding("a/cuda-fp16", config(shape, "model.onnx", [{"cuda": {}}]))
    assert "head_size 256" in " ".join(written.evidence)
    assert f"{2 * 28 * 16 * 8192 * 256 * 2 / GIB:.2f} GiB" in written.message
    data = config(shape, "model.onnx", [{"cuda": {}}])
    del data["model"]["decoder"]["head_size"]
    derived = finding("b/cuda-fp16", data)
    assert "head_size 192" in " ".join(derived.evidence)


def test_int4_without_a_stated_block_is_the_builders_default_32():
    gpu = prec.Device("gpu", "cuda", "")
    assert prec.weight_bytes(prec.Precision("int4", None, ""), gpu) == prec.weight_bytes(prec.Precision("int4", 32, ""), gpu)
