"""SITS001 unbounded-kv-cache: edge cases beside the fixtures (fixtures/vllm/gpu-a10g/,
fixtures/k8s/gpu-h100/) and the docstring example."""

from __future__ import annotations

import pytest

from conftest import write
from sits_doctor import CheckOptions, check

FIXTURES = __import__("pathlib").Path(__file__).resolve().parent.parent.parent / "fixtures"
LLAMA = "model: meta-llama/Llama-3.1-8B-Instruct\ngpu-memory-utilization: 0.9\n"


def clean(report):
    """The report, once it is known the rule ran to its end (a crash is an internal error)."""
    assert not report.internal_errors, report.internal_errors
    return report


def run(tmp_path, monkeypatch, text: str, gpu: str | None = "A10G", target: str = "vllm==0.11.0", **more):
    write(tmp_path, "serve.yaml", text)
    monkeypatch.chdir(tmp_path)
    return clean(check(["serve.yaml"], CheckOptions(targets=[target], isolated=True, select=["SITS001"], gpu=gpu,
                                                    **more)))


def test_fail_full_context_on_a_24gb_gpu_names_vllms_message_and_the_bound(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, LLAMA).findings
    assert f.severity.value == "error"
    assert f.message.startswith("max_model_len 131072 (unset, so the model's) cannot fit on A10G (22.49 GiB): "
                                "vLLM 0.11.0 refuses to start")
    said = f.evidence[0]  # vLLM's own message, word for word
    assert said.startswith("vLLM 0.11.0 prints: To serve at least one request") and "16.00 GiB KV cache is needed" in said
    assert "the models's max seq len (131072)" in said  # vLLM 0.11's own typo, as it prints it
    (fix,) = f.fixes
    assert fix.safety.value == "unsafe" and fix.title.startswith("set max_model_len to ")


def test_message_spelling_follows_the_version(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, LLAMA, target="vllm==0.22.0").findings
    assert "the model's max seq len (131072)" in f.evidence[0]


def test_pass_bounded_length_fits(tmp_path, monkeypatch):
    assert run(tmp_path, monkeypatch, LLAMA + "max-model-len: 16384\n").findings == []


def test_fail_a_written_length_that_cannot_fit_is_replaced(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, LLAMA + "max-model-len: 100000\n").findings
    assert "max_model_len 100000 (as set)" in f.message
    assert f.location.line == 3


def test_warn_full_context_with_room_for_only_one_request(tmp_path, monkeypatch):
    # L40S (48 GB): a 131072-token request fits, two do not
    (f,) = run(tmp_path, monkeypatch, LLAMA, gpu="L40S").findings
    assert f.severity.value == "warning"
    assert "holds about 1." in f.message


def test_pass_full_context_on_an_h100(tmp_path, monkeypatch):
    assert run(tmp_path, monkeypatch, LLAMA, gpu="H100").findings == []


def test_gpu_memory_wins_over_the_catalog(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, LLAMA, gpu="H100", gpu_memory=24 * 2**30).findings
    assert f.severity.value == "error"


def test_without_a_gpu_one_note_for_the_run_and_no_finding(tmp_path, monkeypatch):
    report = run(tmp_path, monkeypatch, LLAMA, gpu=None)
    assert report.findings == []
    assert [str(n) for n in report.notices if "SITS001" in str(n)] == [
        'note: SITS001 did not check 1 deployment(s): no GPU is known; pass --gpu NAME[xN] '
        '(e.g. --gpu H100x2) or set gpu = "NAME" in .sits-doctor.toml']


def test_unknown_gpu_is_an_argument_error(tmp_path, monkeypatch):
    report = run(tmp_path, monkeypatch, LLAMA, gpu="H900")
    assert [str(e) for e in report.errors] == ["error: --gpu unknown GPU 'H900'; did you mean 'NVIDIA H200'?"]


def test_gpu_from_the_settings_file(tmp_path, monkeypatch):
    write(tmp_path, ".sits-doctor.toml", 'gpu = "A10G"\ntarget = ["vllm==0.11.0"]\n')
    write(tmp_path, "serve.yaml", LLAMA)
    monkeypatch.chdir(tmp_path)
    (f,) = check(["serve.yaml"], CheckOptions(select=["SITS001"])).findings
    assert f.code == "SITS001" and "A10G" in f.message


@pytest.mark.parametrize("text", ["gpu-memory-utilization: 0.9\n", "model: org/unknown-model\ngpu-memory-utilization: 0.9\n"])
def test_unknown_model_with_a_gpu_is_info(tmp_path, monkeypatch, text):
    (f,) = run(tmp_path, monkeypatch, text).findings
    assert f.severity.value == "info" and "cannot check" in f.message


MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama-8b
spec:
  template:
    spec:
{placement}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args: ["--model", "meta-llama/Llama-3.1-8B-Instruct"]
          resources:
            limits:
              nvidia.com/gpu: 2
"""
SELECTOR = "      nodeSelector:\n        nvidia.com/gpu.product: {label}"
AFFINITY = """      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - key: nvidia.com/gpu.product
                    operator: In
                    values: ["{label}"]"""


@pytest.mark.parametrize("placement", [SELECTOR, AFFINITY], ids=["nodeSelector", "nodeAffinity"])
def test_the_manifest_names_the_gpu(tmp_path, monkeypatch, placement):
    text = MANIFEST.format(placement=placement.format(label="NVIDIA-A10G"))
    (f,) = run(tmp_path, monkeypatch, text, gpu=None).findings
    assert f.severity.value == "error" and "cannot fit on A10G (22.49 GiB)" in f.message
    (gpu,) = [e for e in f.evidence if e.startswith("GPU: ")]
    assert gpu.startswith("GPU: A10G, 22.49 GiB each (nvidia.com/gpu.product 'NVIDIA-A10G' (serve.yaml:")


def test_gpu_option_wins_over_the_manifest(tmp_path, monkeypatch):
    text = MANIFEST.format(placement=SELECTOR.format(label="NVIDIA-A10G"))
    assert run(tmp_path, monkeypatch, text, gpu="H100").findings == []


def test_unknown_product_label_means_no_gpu(tmp_path, monkeypatch):
    text = MANIFEST.format(placement=SELECTOR.format(label="NVIDIA-Hypothetical-9000"))
    report = run(tmp_path, monkeypatch, text, gpu=None)
    assert report.findings == [] and any("no GPU is known" in str(n) for n in report.notices)


# --- ORT GenAI: the KV buffer preallocated for search.max_length ----------------------------------

def ort_config(max_length: int, share: bool = True, beams: int = 1, providers: str = '[{"cuda": {}}]',
               filename: str = "phi3-mini-128k-instruct-cuda-fp16.onnx") -> str:
    import json

    return json.dumps({
        "model": {"type": "phi3", "context_length": 131072, "vocab_size": 32064, "decoder": {
            "filename": filename, "head_size": 96, "hidden_size": 3072, "num_attention_heads": 32,
            "num_hidden_layers": 32, "num_key_value_heads": 32,
            "session_options": {"provider_options": json.loads(providers)}}},
        "search": {"max_length": max_length, "past_present_share_buffer": share, "num_beams": beams}}, indent=2)


def ort(tmp_path, monkeypatch, text: str, gpu: str = "A10G"):
    write(tmp_path, "genai_config.json", text)
    monkeypatch.chdir(tmp_path)
    return clean(check(["genai_config.json"], CheckOptions(isolated=True, select=["SITS001"], gpu=gpu)))


def test_fail_ort_preallocation_larger_than_the_gpu(tmp_path, monkeypatch):
    (f,) = ort(tmp_path, monkeypatch, ort_config(131072)).findings
    assert f.severity.value == "error"
    assert "preallocates 48.00 GiB of KV cache" in f.message  # 2·32·32·131072·96·2 B (Phi-3-mini-128k)
    (fix,) = f.fixes
    assert fix.safety.value == "unsafe" and fix.title.startswith("set search.max_length to ")


def test_warn_ort_preallocation_above_half_the_gpu(tmp_path, monkeypatch):
    (f,) = ort(tmp_path, monkeypatch, ort_config(131072), gpu="H100").findings
    assert f.severity.value == "warning" and "61% of H100-SXM-80GB's memory" in f.message


@pytest.mark.parametrize(("text", "why"), [(ort_config(8192), "bounded"), (ort_config(131072, share=False), "no shared buffer"),
                                           (ort_config(131072, beams=4), "beam search turns sharing off")])
def test_pass_ort_without_a_big_preallocation(tmp_path, monkeypatch, text, why):
    assert ort(tmp_path, monkeypatch, text).findings == [], why


def test_ort_cpu_export_counts_fp32_kv(tmp_path, monkeypatch):
    """A CPU int4 export keeps fp32 inputs (so fp32 KV), in system memory: an info, not the GPU's."""
    cpu = ort_config(65536, providers="[]", filename="phi3-mini-128k-instruct-cpu-int4-rtn-block-32-acc-level-4.onnx")
    (f,) = ort(tmp_path, monkeypatch, cpu, gpu="H100").findings
    assert "preallocates 48.00 GiB" in f.message  # half the length, twice the bytes
    assert f.severity.value == "info" and "system memory" in f.message
    assert any(e.startswith("KV dtype: 4 B per element") for e in f.evidence)


def test_ort_weights_from_the_files_beside_the_config(tmp_path, monkeypatch):
    (tmp_path / "model.onnx").write_bytes(b"\0" * 1024)
    (tmp_path / "model.onnx.data").write_bytes(b"\0" * 4096)
    (f,) = ort(tmp_path, monkeypatch, ort_config(131072, filename="model.onnx")).findings
    assert "weights: 0.00 GiB (the decoder's ONNX files beside the config)" in f.evidence


# --- transformers generate(): generation_config.json beside config.json ---------------------
LLAMA_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
                "torch_dtype": "bfloat16", "tie_word_embeddings": False}


def hf(tmp_path, monkeypatch, generation: dict, gpu: str | None = "A10G", target: str = "transformers==4.57.1"):
    import json

    write(tmp_path, "model/config.json", json.dumps(LLAMA_CONFIG, indent=2))
    write(tmp_path, "model/generation_config.json", json.dumps(generation, indent=2))
    monkeypatch.chdir(tmp_path)
    return clean(check(["model"], CheckOptions(targets=[target], isolated=True, select=["SITS001"], gpu=gpu)))


def test_warn_hf_dynamic_cache_grows_past_the_gpu(tmp_path, monkeypatch):
    (f,) = hf(tmp_path, monkeypatch, {"max_length": 131072}).findings
    assert f.severity.value == "warning" and f.location.file.endswith("generation_config.json")
    # A10G 22.49 GiB − 14.96 GiB of weights − 1 GiB = 6.53 GiB at 128 KiB per token
    room = 22.49 * 2**30 - 8.03e9 * 2 - 2**30
    assert f"near token {int(room // (128 * 1024)) // 100}" in f.message  # leading digits; weights rounded
    assert "16.00 GiB of KV cache at 131072 tokens" in f.evidence[0]
    (fix,) = f.fixes
    assert fix.safety.value == "unsafe"
    bound = int(fix.title.split()[3])
    assert bound % 1024 == 0 and bound * 128 * 1024 <= room + 2**30 * 0.05


def test_fail_hf_static_cache_preallocates_at_the_first_call(tmp_path, monkeypatch):
    (f,) = hf(tmp_path, monkeypatch, {"max_length": 131072, "cache_implementation": "static"}).findings
    assert f.severity.value == "error" and "preallocates 16.00 GiB of KV" in f.message
    assert "allocates max_length 131072 tokens of KV" in f.evidence[0]


@pytest.mark.parametrize(("generation", "gpu", "why"), [
    ({"max_length": 131072, "max_new_tokens": 4096}, "A10G", "max_new_tokens bounds the answer"),
    ({"max_length": 16384}, "A10G", "2 GiB of KV fits beside the weights"),
    ({"max_length": 131072}, "H100", "16 GiB fits on 80 GB"),
    ({"temperature": 0.6}, "A10G", "no max_length: transformers' default of 20 new tokens"),
])
def test_pass_hf_bounded_generation(tmp_path, monkeypatch, generation, gpu, why):
    assert hf(tmp_path, monkeypatch, generation, gpu=gpu).findings == [], why


def test_hf_fix_writes_a_length_that_no_longer_fires(tmp_path, monkeypatch):
    import json

    from conftest import run_cli

    hf(tmp_path, monkeypatch, {"max_length": 131072})
    result = run_cli("fix", "--unsafe-fixes", "--apply", "--gpu", "A10G", "--select", "SITS001", "--isolated",
                     "model", cwd=tmp_path)
    assert result.exit_code in (0, 1), result.stdout + result.stderr
    written = json.loads((tmp_path / "model" / "generation_config.json").read_text())
    assert written["max_length"] < 131072 and written["max_length"] % 1024 == 0
    assert hf(tmp_path, monkeypatch, written).findings == []


# --- TensorRT-LLM: the attention window shrinks instead of a failed start ----------------------
def trt(tmp_path, monkeypatch, text: str, gpu: str = "L4", target: str = "trtllm==1.0.0"):
    write(tmp_path, "llm_api.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\nmax_num_tokens: 8192\n" + text)
    monkeypatch.chdir(tmp_path)
    return clean(check(["llm_api.yaml"], CheckOptions(targets=[target], isolated=True, select=["SITS001"], gpu=gpu)))


def test_fail_trtllm_full_context_shrinks_the_window_with_the_pytorch_message(tmp_path, monkeypatch):
    (f,) = trt(tmp_path, monkeypatch, "max_seq_len: 131072\n").findings
    assert f.severity.value == "error" and "shrinks the attention window" in f.message
    assert "Attention window size 131072 exceeds upper bound" in f.evidence[0]  # the PyTorch backend's log, 1.0+
    (fix,) = f.fixes
    bound = int(fix.title.split()[3])
    assert fix.safety.value == "unsafe" and bound % 32 == 0 and bound < 131072  # whole blocks of 32


def test_trtllm_unset_max_seq_len_is_the_models_and_the_fix_adds_it(tmp_path, monkeypatch):
    (f,) = trt(tmp_path, monkeypatch, "max_batch_size: 8\n").findings
    assert "max_seq_len 131072 (not set: the model's maximum)" in f.message
    (fix,) = f.fixes
    assert fix.edits and "max_seq_len: " in fix.edits[0].new


def test_trtllm_tensorrt_backend_logs_the_cpp_message(tmp_path, monkeypatch):
    (f,) = trt(tmp_path, monkeypatch, "backend: tensorrt\nmax_seq_len: 131072\nmax_batch_size: 8\n").findings
    assert "maxAttentionWindowVec too large to fit at least one sequence in kvCache. Old: (131072)" in f.evidence[0]


def test_trtllm_fail_fast_refuses_instead(tmp_path, monkeypatch):
    (f,) = trt(tmp_path, monkeypatch, "backend: tensorrt\nmax_seq_len: 131072\nmax_batch_size: 8\n"
                                      "fail_fast_on_attention_window_too_large: true\n").findings
    assert f.message.endswith("fails at startup") and "shrinks" not in f.message
    assert "Failing fast" in f.evidence[0]


@pytest.mark.parametrize(("text", "gpu", "why"), [
    ("max_seq_len: 16384\n", "L4", "one sequence fits"),
    ("max_seq_len: 131072\n", "H100", "80 GB hold 131072 tokens of 128 KiB"),
])
def test_pass_trtllm_one_sequence_fits(tmp_path, monkeypatch, text, gpu, why):
    assert trt(tmp_path, monkeypatch, text, gpu=gpu).findings == [], why


def test_trtllm_fraction_applies_to_free_memory(tmp_path, monkeypatch):
    from sits_doctor.capacity import predict_plan

    report = trt(tmp_path, monkeypatch, "max_seq_len: 16384\nkv_cache_config:\n  free_gpu_memory_fraction: 0.5\n")
    (plan,) = report.deployments
    half = predict_plan(plan)
    report = trt(tmp_path, monkeypatch, "max_seq_len: 16384\nkv_cache_config:\n  free_gpu_memory_fraction: 0.9\n")
    (plan,) = report.deployments
    most = predict_plan(plan)
    assert abs(half.tokens[1] / most.tokens[1] - 0.5 / 0.9) < 0.01  # a share of what is free, not of the total


def test_kv_cache_memory_bytes_sizes_the_pool_without_profiling(tmp_path, monkeypatch):
    (f,) = run(tmp_path, monkeypatch, LLAMA + "kv-cache-memory-bytes: 4294967296\n", target="vllm==0.11.0").findings
    assert "kv_cache_memory_bytes = 4.00 GiB (set: no profiling)" in f.evidence
    assert "estimated maximum model length is 32768" in f.evidence[0]  # 4 GiB / 128 KiB per token



# --- edges: what the rule does when it cannot size, and where its thresholds sit ---------------
def test_full_context_with_room_for_two_or_more_requests_is_not_a_warning(tmp_path, monkeypatch):
    # 62 GiB per GPU: about 2.5 requests of 131072 tokens fit (the warning is for fewer than 2)
    assert run(tmp_path, monkeypatch, LLAMA, gpu=None, gpu_memory=62 * 2**30).findings == []
    (f,) = run(tmp_path, monkeypatch, LLAMA, gpu=None, gpu_memory=50 * 2**30).findings  # about 1.8
    assert f.severity.value == "warning"


MIXED = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
         "quantization_config": {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}}


@pytest.mark.parametrize("framework", ["vllm", "trtllm"])
def test_weights_that_cannot_be_sized_are_an_info_not_a_guess(tmp_path, monkeypatch, framework):
    import json

    write(tmp_path, "m/config.json", json.dumps(MIXED))
    text = "model: ./m\nmax-model-len: 8192\n" if framework == "vllm" else "model: ./m\nmax_num_tokens: 8192\n"
    report = run(tmp_path, monkeypatch, text) if framework == "vllm" else _trt_file(tmp_path, monkeypatch, text)
    (f,) = report.findings
    assert f.severity.value == "info" and f.message.startswith("cannot size the KV cache: the weights' size")


def _trt_file(tmp_path, monkeypatch, text):
    write(tmp_path, "llm_api.yaml", text)
    monkeypatch.chdir(tmp_path)
    return clean(check(["llm_api.yaml"], CheckOptions(targets=["trtllm==1.0.0"], isolated=True, select=["SITS001"],
                                                      gpu="L4")))


@pytest.mark.parametrize("framework", ["vllm", "trtllm"])
def test_a_model_with_no_length_gives_no_verdict(tmp_path, monkeypatch, framework):
    import json

    write(tmp_path, "m/config.json", json.dumps({k: v for k, v in LLAMA_CONFIG.items()
                                                 if k != "max_position_embeddings"} | {"model_type": "unknown_arch"}))
    report = (run(tmp_path, monkeypatch, "model: ./m\n") if framework == "vllm"
              else _trt_file(tmp_path, monkeypatch, "model: ./m\nmax_num_tokens: 8192\n"))
    assert report.findings == []


@pytest.mark.parametrize(("generation", "why"), [({"max_length": "131072"}, "a string is not a length"),
                                                 ({"max_length": True}, "nor is a bool"),
                                                 ({"max_length": 0}, "nor 0")])
def test_hf_length_that_is_not_a_length_is_left_to_the_schema(tmp_path, monkeypatch, generation, why):
    assert hf(tmp_path, monkeypatch, generation).findings == [], why


def test_hf_weights_that_cannot_be_sized_say_nothing(tmp_path, monkeypatch):
    import json

    write(tmp_path, "model/config.json", json.dumps(MIXED))
    write(tmp_path, "model/generation_config.json", json.dumps({"max_length": 131072}))
    monkeypatch.chdir(tmp_path)
    report = clean(check(["model"], CheckOptions(isolated=True, select=["SITS001"], gpu="A10G")))
    assert report.findings == []


def test_trtllm_hints_by_what_can_change(tmp_path, monkeypatch):
    import json

    (f,) = trt(tmp_path, monkeypatch, "max_seq_len: 131072\n").findings
    assert f.fix_hint.startswith("set max_seq_len ≤ ") and "fail_fast_on_attention_window_too_large" in f.fix_hint
    engine = json.loads((FIXTURES / "trtllm" / "good_engine_llama31_8b_fp8_v1.0.json").read_text())
    engine["build_config"]["max_seq_len"] = 2_000_000
    write(tmp_path, "engine/config.json", json.dumps(engine, indent=2))
    report = clean(check(["engine/config.json"], CheckOptions(isolated=True, select=["SITS001"], gpu="L4")))
    (f,) = report.findings
    assert f.fix_hint.startswith("rebuild the engine with trtllm-build --max_seq_len ≤ ") and not f.fixes
    write(tmp_path, "llm_api.yaml", "model: meta-llama/Llama-3.1-70B-Instruct\nmax_num_tokens: 8192\n"
                                    "max_seq_len: 131072\n")
    report = clean(check(["llm_api.yaml"], CheckOptions(targets=["trtllm==1.0.0"], isolated=True, select=["SITS001"],
                                                        gpu="L4")))
    (f,) = report.findings  # 70B in bf16 does not fit an L4 at all: no length to suggest
    assert f.fix_hint == "use more GPUs (tensor/pipeline parallelism) or a quantized checkpoint" and not f.fixes


def test_a_range_that_straddles_the_length_is_a_warning_for_vllm_and_trtllm(tmp_path, monkeypatch):
    # 36 GiB per GPU: Llama-3.1-8B's pool is about 128k–138k tokens, around its 131072 context
    (f,) = run(tmp_path, monkeypatch, LLAMA, gpu=None, gpu_memory=36 * 2**30).findings
    assert f.severity.value == "warning" and "may not fit" in f.message
    write(tmp_path, "llm_api.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\nmax_num_tokens: 8192\n"
                                    "max_seq_len: 131072\n")
    report = clean(check(["llm_api.yaml"], CheckOptions(targets=["trtllm==1.0.0"], isolated=True, select=["SITS001"],
                                                        gpu_memory=35 * 2**30)))
    (f,) = report.findings
    assert f.severity.value == "warning" and "may not fit one sequence" in f.message
    assert f.location.line == 3  # at the max_seq_len it judges


def test_hf_model_larger_than_the_gpu_has_no_length_to_offer(tmp_path, monkeypatch):
    import json

    seventy = {**LLAMA_CONFIG, "hidden_size": 8192, "num_hidden_layers": 80, "num_attention_heads": 64,
               "intermediate_size": 28672}
    write(tmp_path, "model/config.json", json.dumps(seventy))
    write(tmp_path, "model/generation_config.json", json.dumps({"max_length": 131072}))
    monkeypatch.chdir(tmp_path)
    (f,) = clean(check(["model"], CheckOptions(isolated=True, select=["SITS001"], gpu="A10G"))).findings
    assert f.fix_hint == "use a GPU with more memory or a quantized checkpoint" and not f.fixes
    assert f.severity.value == "error" and "the weights alone (" in f.message and "leave no room on A10G" in f.message


def test_ort_length_from_context_length_is_reported_without_an_edit(tmp_path, monkeypatch):
    import json

    config = json.loads(ort_config(131072))
    del config["search"]["max_length"]  # 0 / unset: ORT GenAI takes model.context_length (131072)
    (f,) = ort(tmp_path, monkeypatch, json.dumps(config, indent=2)).findings
    assert f.severity.value == "error" and "search.max_length 131072" in f.message and not f.fixes


@pytest.mark.parametrize(("target", "per_token"), [("transformers==4.57.1", 4), ("transformers==5.0.0", 2)])
def test_hf_sliding_layers_hold_the_window_from_transformers_5(tmp_path, monkeypatch, target, per_token):
    # 4 layers, two of them sliding: 4.x's DynamicCache keeps every token on all of them, 5.x only on the full ones
    sliding = {**LLAMA_CONFIG, "num_hidden_layers": 4, "sliding_window": 4096, "hidden_size": 8192,
               "num_attention_heads": 64, "intermediate_size": 28672,
               "layer_types": ["sliding_attention", "full_attention"] * 2}
    import json

    write(tmp_path, "model/config.json", json.dumps(sliding))
    write(tmp_path, "model/generation_config.json", json.dumps({"max_length": 10_000_000}))
    monkeypatch.chdir(tmp_path)
    (f,) = clean(check(["model"], CheckOptions(targets=[target], isolated=True, select=["SITS001"],
                                               gpu="A10G"))).findings
    kib = 2 * 8 * 128 * 2 * per_token / 1024
    assert any(e.startswith(f"KV per token: {kib:.1f} KiB/token/rank") for e in f.evidence), f.evidence


def test_ort_on_a_gpu_the_weights_fill_offers_no_length(tmp_path, monkeypatch):
    write(tmp_path, "genai_config.json", ort_config(131072))
    monkeypatch.chdir(tmp_path)
    report = clean(check(["genai_config.json"], CheckOptions(isolated=True, select=["SITS001"], gpu_memory=8 * 2**30)))
    (f,) = report.findings  # Phi-3-mini's ~7.6 GB of fp16 weights leave nothing of 8 GiB for the buffer
    assert f.severity.value == "error" and not f.fixes and f.fix_hint == "use a GPU with more memory"


def test_a_live_float32_model_caches_kv_in_float32():
    # generate() keeps K and V in the model's dtype: 4 bytes per value for a float32 model (check_model)
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from sits_doctor import check_model

    def token(dtype):
        config = LlamaConfig(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                             intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072, dtype=dtype)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        model.generation_config.max_length = 131072
        return [f for f in check_model(model, gpu="A100-SXM-40GB").findings if f.code == "SITS001"]

    assert token("bfloat16") == []
    (f,) = token("float32")
    assert "near token 35520" in f.message and "32.00 GiB of KV cache at 131072 tokens" in f.evidence[0]
    assert "· 4 B · 32 layers" in f.evidence[2]


def test_trtllm_no_block_fits_is_a_startup_failure_not_a_shrink(tmp_path, monkeypatch):
    """When not even one KV block fits, TensorRT-LLM does not start: the message must not say it
    shrinks the window and goes on."""
    (f,) = trt(tmp_path, monkeypatch, "max_seq_len: 131072\n", gpu="T4").findings  # 15 GiB: bf16 8B weights leave nothing
    assert f.message.endswith("fails at startup") and "shrinks" not in f.message
