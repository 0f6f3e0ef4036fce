"""SITS007 full-precision-kv-at-long-context: edge cases beside the fixtures
(fixtures/vllm/gpu-h100/) and the docstring example."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import FIXTURES, run_cli, write
from sits_doctor import CheckOptions, check
from sits_doctor.capacity import Prediction
from sits_doctor.rules import sits007_full_precision_kv_at_long_context as sits007

LLAMA = "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 131072\n"
LLAMA_CONFIG = FIXTURES / "hf" / "llama-3.1-8b-instruct" / "config.json"


@pytest.fixture(autouse=True)
def _registered(monkeypatch):
    """Run the rule even where the registry (rules/__init__.py) does not list it yet."""
    import sits_doctor.rules as registry

    if sits007 not in registry.RULES:
        monkeypatch.setattr(registry, "RULES", tuple(sorted((*registry.RULES, sits007), key=lambda m: m.RULE.code)))
        monkeypatch.setitem(registry.BY_CODE, sits007.RULE.code, sits007)


def run(tmp_path, monkeypatch, text: str, gpu: str | None = "H100", target: str = "vllm==0.11.0", **more):
    write(tmp_path, "serve.yaml", text)
    monkeypatch.chdir(tmp_path)
    report = check(["serve.yaml"], CheckOptions(targets=[target], isolated=True, select=["SITS007"], gpu=gpu, **more))
    assert not report.errors and not report.internal_errors, (report.errors, report.internal_errors)
    return report.findings


def model_with(tmp_path, quantization_config: dict | None) -> str:
    """A local copy of Llama-3.1-8B-Instruct's config.json with this quantization_config."""
    config = json.loads(LLAMA_CONFIG.read_text(encoding="utf-8"))
    if quantization_config is not None:
        config["quantization_config"] = quantization_config
    write(tmp_path, "model/config.json", json.dumps(config, indent=2))
    return "model: ./model\nmax-model-len: 131072\n"


# --- fires ---------------------------------------------------------------------------------------

def test_fail_full_context_bf16_kv_on_an_h100(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, LLAMA)
    assert f.severity.value == "warning"
    assert f.location.line == 2  # at max-model-len: the KV dtype is not written
    assert f.message == ("KV cache in 16 bits at max_model_len 131072: about 3.4 requests of that length fit at once; "
                         "with fp8 KV about 6.7")
    assert f.evidence[0].startswith("why: kv_cache_dtype auto: the model's bfloat16: H100-SXM-80GB holds 440080 KV "
                                    "tokens, 880176 with fp8.")
    evidence = "\n".join(f.evidence)
    assert "compute capability 9.0 (Hopper): native fp8" in evidence
    assert "KV per token: 128.0 KiB/token/rank" in evidence
    assert "with fp8: KV per token: 64.0 KiB/token/rank" in evidence
    assert "with fp8: KV pool ≈ 53.72 GiB → 880176 tokens" in evidence  # the same pool, half the bytes per token
    (fix,) = f.fixes
    assert fix.safety.value == "unsafe"
    assert [e.new for e in fix.edits] == ["kv-cache-dtype: fp8\n"]


def test_fail_written_bfloat16_is_replaced(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, LLAMA + "kv_cache_dtype: bfloat16\n")
    assert "kv_cache_dtype bfloat16:" in f.evidence[0]
    assert f.location.line == 3
    (fix,) = f.fixes
    assert [e.new for e in fix.edits] == ["fp8"]


def test_fail_written_auto_is_replaced(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, LLAMA + "kv-cache-dtype: auto\n")
    assert "kv_cache_dtype auto:" in f.evidence[0]
    assert [e.new for e in f.fixes[0].edits] == ["fp8"]


def test_fail_on_a_command_line_adds_the_flag(tmp_path, monkeypatch):
    write(tmp_path, "compose.yaml", "services:\n  vllm:\n    image: vllm/vllm-openai:v0.11.0\n"
                                    "    command: --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 131072\n")
    monkeypatch.chdir(tmp_path)
    (f,) = check(["compose.yaml"], CheckOptions(isolated=True, select=["SITS007"], gpu="H100")).findings
    (fix,) = f.fixes
    assert [e.new for e in fix.edits] == [" --kv-cache-dtype fp8"]


def test_info_when_concurrency_is_only_moderately_bound(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, LLAMA, gpu="H200")  # 141 GB: about 6.8 max-length requests
    assert f.severity.value == "info"
    assert "about 6." in f.message


def test_info_when_the_gpu_is_known_only_by_its_memory(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, LLAMA, gpu=None, gpu_memory=80 * 2**30)
    assert f.severity.value == "info"
    assert "whether GPU has fp8 is unknown" in f.evidence[0]
    assert f.fixes == ()


# --- does not fire -------------------------------------------------------------------------------

def test_pass_short_context(tmp_path, monkeypatch):
    assert run(tmp_path, monkeypatch, "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 16384\n") == []


@pytest.mark.parametrize("dtype", ["fp8", "fp8_e4m3", "fp8_e5m2"])
def test_pass_kv_already_fp8(tmp_path, monkeypatch, dtype):
    assert run(tmp_path, monkeypatch, LLAMA + f"kv-cache-dtype: {dtype}\n") == []


@pytest.mark.parametrize("gpu", ["A100-80GB", "A100-80GBx2"])
def test_pass_gpu_without_native_fp8(tmp_path, monkeypatch, gpu):
    # the same capacity picture as on the H100 (about 3 requests), but vLLM's default fp8-KV path
    # on Ampere (the Triton backend) needs SM 8.9
    assert run(tmp_path, monkeypatch, LLAMA, gpu=gpu) == []


def test_pass_when_max_num_seqs_caps_the_batch_below_what_fits(tmp_path, monkeypatch):
    assert run(tmp_path, monkeypatch, LLAMA + "max-num-seqs: 2\n") == []


def test_max_num_seqs_above_what_fits_still_binds(tmp_path, monkeypatch):
    # 3.4 max-length requests fit and the scheduler would take 4: the pool binds
    (f,) = run(tmp_path, monkeypatch, LLAMA + "max-num-seqs: 4\n")
    assert f.severity.value == "warning"
    assert "max_num_seqs 4 (serve.yaml:3:1)" in f.evidence
    assert run(tmp_path, monkeypatch, LLAMA + "max-num-seqs: 3\n") == []


def test_pass_concurrency_not_binding(tmp_path, monkeypatch):
    # 32768 tokens on an H100: about 13 requests of that length fit
    assert run(tmp_path, monkeypatch, "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 32768\n") == []


def test_pass_when_one_request_does_not_fit(tmp_path, monkeypatch):
    # L4 (24 GB): a 131072-token request does not fit at all; that is SITS001's error
    assert run(tmp_path, monkeypatch, LLAMA, gpu="L4") == []


LLAMA_70B = "model: meta-llama/Llama-3.1-70B-Instruct\nmax-model-len: 131072\n"


def test_fail_when_only_fp8_lets_one_request_fit(tmp_path, monkeypatch):
    # 70B on one MI300X: 131072 tokens of bf16 KV (40 GiB) do not fit beside the weights (SITS001),
    # in fp8 about 1.9 such requests do
    (f,) = run(tmp_path, monkeypatch, LLAMA_70B, gpu="MI300X")
    assert f.severity.value == "warning"
    assert "one request of that length may not fit (see SITS001); with fp8 KV about 1.9 fit" in f.message
    assert "MI300X holds 124768 KV tokens" in f.evidence[0]
    assert "; gfx942 (CDNA 3): native fp8" in f.evidence[1]


def test_pass_when_fp8_would_not_fit_either_or_the_gpu_lacks_it(tmp_path, monkeypatch):
    assert run(tmp_path, monkeypatch, LLAMA_70B, gpu="H100") == []  # 131 GiB of weights on 80 GB
    assert run(tmp_path, monkeypatch, LLAMA_70B + "tensor-parallel-size: 4\n", gpu="A100-80GBx4") == []  # no fp8
    (f,) = run(tmp_path, monkeypatch, LLAMA_70B + "tensor-parallel-size: 4\n", gpu="H100x4")  # the same on Hopper
    assert "about 3.6 requests" in f.message


def test_fires_on_ada(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, LLAMA, gpu="L40S")
    assert "compute capability 8.9 (Ada Lovelace): native fp8" in "\n".join(f.evidence)


# --- what the checkpoint says about KV scales --------------------------------------------------

def test_no_quantization_config_means_no_kv_scales(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, model_with(tmp_path, None))
    assert f.evidence[0].endswith("The checkpoint carries no KV scales: K and V are quantized with scale 1.0.")
    assert "KV scales: none: the model config has no quantization_config" in f.evidence
    assert "calibrate them with llm-compressor" in f.fix_hint


def test_compressed_tensors_kv_cache_scheme_carries_scales(tmp_path, monkeypatch):
    text = model_with(tmp_path, {
        "quant_method": "compressed-tensors", "format": "float-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float"}}},
        "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True},
    })
    (f,) = run(tmp_path, monkeypatch, text)
    assert f.evidence[0].endswith(
        "The checkpoint carries calibrated KV scales (kv_cache_scheme: type float, num_bits 8, strategy tensor).")
    assert f.fix_hint == "set kv_cache_dtype fp8 (the checkpoint's KV scales are used)"


def test_compressed_tensors_without_kv_cache_scheme_has_none(tmp_path, monkeypatch):
    text = model_with(tmp_path, {"quant_method": "compressed-tensors", "format": "float-quantized",
                                 "kv_cache_scheme": None})
    (f,) = run(tmp_path, monkeypatch, text)
    assert "(compressed-tensors, no kv_cache_scheme) carries no KV scales" in f.evidence[0]


def test_fp8_checkpoint_scales_cannot_be_told_from_config_json(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, model_with(tmp_path, {"quant_method": "fp8", "activation_scheme": "dynamic"}))
    assert "Whether this fp8 checkpoint stores k_scale/v_scale is not in its config.json" in f.evidence[0]


def test_weight_only_checkpoint_has_no_kv_scales(tmp_path, monkeypatch):
    text = model_with(tmp_path, {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True})
    (f,) = run(tmp_path, monkeypatch, text)
    assert "The checkpoint (awq: weights only) carries no KV scales" in f.evidence[0]


MODELOPT = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}


def test_modelopt_fp8_kv_checkpoint_left_to_auto_is_not_reported(tmp_path, monkeypatch):
    # vLLM resolves kv_cache_dtype auto to fp8 for it (resolve_kv_cache_dtype_string)
    assert run(tmp_path, monkeypatch, model_with(tmp_path, MODELOPT)) == []
    assert run(tmp_path, monkeypatch, model_with(tmp_path, MODELOPT) + "kv-cache-dtype: auto\n") == []


def test_modelopt_fp8_kv_checkpoint_forced_to_bf16_is_reported_with_its_scales(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, model_with(tmp_path, MODELOPT) + "kv-cache-dtype: bfloat16\n")
    assert f.evidence[0].endswith("The checkpoint carries calibrated KV scales (ModelOpt kv_cache_quant_algo FP8).")


# --- the fix, end to end ---------------------------------------------------------------------------

def test_fix_applied_makes_fp8_kv_and_the_rule_stops(tmp_path, hermetic):
    folder = tmp_path / "h100"
    shutil.copytree(FIXTURES / "vllm" / "gpu-h100", folder)
    shutil.copytree(FIXTURES / "hf" / "llama-3.1-8b-instruct", tmp_path / "hf" / "llama-3.1-8b-instruct")
    (tmp_path / "vllm").mkdir()
    target = tmp_path / "vllm" / "gpu-h100"
    folder.rename(target)
    bad = target / "bad_bf16_kv_llama31_8b_128k.yaml"
    before = bad.read_text(encoding="utf-8")

    first = run_cli("check", bad.name, "--select", "SITS007", cwd=target)
    assert first.exit_code == 1 and "SITS007 [warning]" in first.stdout
    applied = run_cli("fix", bad.name, "--unsafe-fixes", "--apply", cwd=target)
    assert applied.exit_code in (0, 1), applied.stderr
    after = bad.read_text(encoding="utf-8")
    assert after == before + "kv-cache-dtype: fp8\n"

    report = check([str(bad)], CheckOptions(select=["SITS007"]))
    (plan,) = report.deployments
    kv = plan.facts.serving.kv_cache_dtype
    assert kv.value == "fp8" and kv.is_set
    assert report.findings == []
    again = run_cli("fix", bad.name, "--unsafe-fixes", "--apply", cwd=target)
    assert bad.read_text(encoding="utf-8") == after, again.stdout  # a second pass changes nothing


# --- TensorRT-LLM: only with a capacity prediction --------------------------------------------------

TRT = "kv_cache_config:\n  free_gpu_memory_fraction: 0.9\n  enable_block_reuse: true\nmax_seq_len: 131072\n"


def trt(tmp_path, monkeypatch, text: str):
    write(tmp_path, "extra.yaml", text)
    monkeypatch.chdir(tmp_path)
    report = check(["extra.yaml"], CheckOptions(targets=["trtllm==1.2.0"], isolated=True, select=["SITS007"],
                                                gpu="H100", model_config=str(LLAMA_CONFIG)))
    assert not report.errors and not report.internal_errors, (report.errors, report.internal_errors)
    return report.findings


def test_trtllm_without_a_capacity_prediction_says_nothing(tmp_path, monkeypatch):
    import sits_doctor.capacity as capacity

    real = capacity.predict_plan
    monkeypatch.setattr(capacity, "predict_plan", lambda plan: None if plan.framework == "trtllm" else real(plan))
    assert trt(tmp_path, monkeypatch, TRT) == []


def fake_trtllm_pool(monkeypatch, tokens: int = 400000):
    """A TensorRT-LLM capacity prediction (sits-doctor has none yet): ``tokens`` in 16-bit KV,
    twice that in fp8."""
    import sits_doctor.capacity as capacity

    real = capacity.predict_plan

    def predict(plan):
        if plan.framework != "trtllm":
            return real(plan)
        kv = plan.facts.serving.kv_cache_dtype
        n = tokens * (2 if kv is not None and kv.value == "fp8" else 1)
        length = plan.facts.serving.max_model_len.value
        return Prediction("trtllm", 131072.0, 16e9, (n, n, n), length, n / length, True, None,
                          (f"KV pool → {n} tokens",), ())

    monkeypatch.setattr(capacity, "predict_plan", predict)


def test_trtllm_with_a_prediction_adds_dtype_to_kv_cache_config(tmp_path, monkeypatch):
    fake_trtllm_pool(monkeypatch)
    (f,) = trt(tmp_path, monkeypatch, TRT)
    assert f.severity.value == "warning"
    assert f.message.startswith("KV cache in 16 bits at max_seq_len 131072: about 3.1 requests")
    assert "kv_cache_config.dtype auto: the model's bfloat16: H100-SXM-80GB holds" in f.evidence[0]
    assert "with fp8 KV about 6.1" in f.message
    assert f.evidence[0].endswith("The checkpoint carries no KV scales.")  # what TensorRT-LLM does then: not stated
    (fix,) = f.fixes
    assert fix.safety.value == "unsafe"
    assert [e.new for e in fix.edits] == ["  dtype: fp8\n"]


def test_trtllm_written_auto_is_replaced(tmp_path, monkeypatch):
    fake_trtllm_pool(monkeypatch)
    (f,) = trt(tmp_path, monkeypatch, TRT.replace("kv_cache_config:\n", "kv_cache_config:\n  dtype: auto\n"))
    assert [e.new for e in f.fixes[0].edits] == ["fp8"]


def test_trtllm_without_kv_cache_config_shows_the_fix(tmp_path, monkeypatch):
    fake_trtllm_pool(monkeypatch)
    (f,) = trt(tmp_path, monkeypatch, "max_seq_len: 131072\nmax_num_tokens: 8192\n")
    (fix,) = f.fixes
    assert fix.safety.value == "display" and fix.edits == ()
    assert fix.title.endswith("add kv_cache_config: {dtype: fp8}")


def test_trtllm_fp8_already_is_not_reported(tmp_path, monkeypatch):
    fake_trtllm_pool(monkeypatch)
    assert trt(tmp_path, monkeypatch, TRT.replace("kv_cache_config:\n", "kv_cache_config:\n  dtype: fp8\n")) == []


def test_trtllm_tensorrt_backend_is_not_reported(tmp_path, monkeypatch):
    # kv_cache_config.dtype is a PyTorch-backend option; a TensorRT engine's KV dtype is built in
    fake_trtllm_pool(monkeypatch)
    assert trt(tmp_path, monkeypatch, TRT + "backend: tensorrt\n") == []


@pytest.mark.parametrize(("length", "severity"), [
    (112_000, "warning"),  # about 3.9 requests at once on one H100 (440080 tokens)
    (100_000, "info"),  # about 4.4: from 4 on an info
    (60_000, "info"),  # about 7.3: still below 8
    (54_000, None),  # about 8.1: capacity does not bind
])
def test_the_thresholds_count_max_length_requests(tmp_path, monkeypatch, length, severity):
    found = run(tmp_path, monkeypatch, f"model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: {length}\n")
    assert [f.severity.value for f in found] == ([severity] if severity else [])


@pytest.mark.parametrize(("length", "fires"), [(32768, True), (32767, False)])
def test_long_context_starts_at_32768(tmp_path, monkeypatch, length, fires):
    # one L4 (Ada, fp8): Llama-3.1-8B leaves room for about 1.2 requests of 32768 tokens
    found = run(tmp_path, monkeypatch, f"model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: {length}\n", gpu="L4")
    assert bool(found) is fires


@pytest.mark.parametrize(("text", "line"), [
    ("model: org/private-model\nmax-model-len: 131072\n", 1),  # nothing written: at the deployment
    ("model: org/private-model\nkv-cache-dtype: bfloat16\n", 2),  # at the 16-bit dtype it would change
    ("model: org/private-model\nkv-cache-dtype: fp8\n", None),  # already 8-bit: nothing to check
])
def test_an_unknown_model_is_said_once_at_what_the_rule_would_judge(tmp_path, monkeypatch, text, line):
    found = run(tmp_path, monkeypatch, text)
    if line is None:
        assert found == []
    else:
        (f,) = found
        assert f.severity.value == "info" and "cannot check the KV cache dtype against the model" in f.message
        assert f.location.line == line


def test_an_unknown_model_in_a_trtllm_file_is_left_to_sits001(tmp_path, monkeypatch):
    write(tmp_path, "llm_api.yaml", "model: org/private-model\nmax_num_tokens: 8192\nmax_seq_len: 131072\n")
    monkeypatch.chdir(tmp_path)
    report = check(["llm_api.yaml"], CheckOptions(targets=["trtllm==1.0.0"], isolated=True, select=["SITS007"],
                                                  gpu="H100"))
    assert report.findings == [] and not report.internal_errors
