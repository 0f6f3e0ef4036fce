"""SITS101 silent-attention-downgrade: transformers' attention selection (modeling_utils.py /
configuration_utils.py / integrations/sdpa_attention.py at the releases named in the rule) and
vLLM's validation of a selected attention backend (vllm/platforms/cuda.py@v0.12.0-v0.33.0)."""

from __future__ import annotations

import json

import harness
import pytest
import yaml

from sits_doctor.finding import Severity
from sits_doctor.fixer import apply_edits

CODE = "SITS101"
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 16,
         "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
GEMMA2 = {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "hidden_size": 2304, "num_hidden_layers": 26,
          "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 9216,
          "vocab_size": 256000, "max_position_embeddings": 8192, "attn_logit_softcapping": 50.0,
          "torch_dtype": "bfloat16"}


def hf(tmp_path, monkeypatch, data: dict, target=(), **opts):
    return harness.findings(tmp_path, monkeypatch, {"m/config.json": json.dumps(data, indent=1)}, "m/config.json",
                            CODE, target, **opts)


def vllm(tmp_path, monkeypatch, text: str, target="vllm==0.33.0", **opts):
    return harness.findings(tmp_path, monkeypatch, {"serve.yaml": text}, "serve.yaml", CODE, target, **opts)


def fixed(tmp_path, finding, name="m/config.json") -> str:
    (fix,) = finding.fixes
    assert fix.safety.value == "unsafe"
    return apply_edits((tmp_path / name).read_text(), fix.edits)


def installed(monkeypatch, version="5.24.0", have=()):
    """Pretend the installed transformers is ``version`` with exactly the packages in ``have``."""
    import sits_doctor.environment as env
    import sits_doctor.versions as versions

    monkeypatch.setattr(versions, "installed", lambda fw: version if fw == "hf" else None)
    monkeypatch.setattr(env, "packages", lambda: [{"name": n, "installed": n in have} for n in ("flash_attn", "kernels")])


# --- flash_attention_2 ----------------------------------------------------------------------------
def test_flash_attention_2_on_turing_fails_at_first_forward(tmp_path, monkeypatch):
    data = {**LLAMA, "_attn_implementation": "flash_attention_2"}
    (f,) = hf(tmp_path, monkeypatch, data, "transformers==5.24.0", gpu="T4")
    assert f.severity == Severity.ERROR
    assert f.message == "flash_attention_2 on T4 (compute capability 7.5): the first forward raises RuntimeError"
    assert f.evidence[:2] == ("flash-attn prints: RuntimeError: FlashAttention only supports Ampere GPUs or newer.",
                              "why: flash-attn runs only on Ampere (compute capability 8.0) and newer")
    assert (f.location.line, f.location.col) == (14, 2)
    assert json.loads(fixed(tmp_path, f))["_attn_implementation"] == "sdpa"


@pytest.mark.parametrize("key", ["attn_implementation", "_attn_implementation"])
def test_both_spellings_are_read(tmp_path, monkeypatch, key):
    (f,) = hf(tmp_path, monkeypatch, {**LLAMA, key: "flash_attention_2"}, "transformers==5.24.0", gpu="V100")
    assert "compute capability 7.0" in f.message and f"{key} flash_attention_2" in f.evidence[2]


def test_flash_attention_2_on_ampere_or_unknown_packages_is_quiet(tmp_path, monkeypatch):
    data = {**LLAMA, "_attn_implementation": "flash_attention_2"}
    assert hf(tmp_path, monkeypatch, data, "transformers==5.24.0", gpu="A10G") == []
    # a pinned target: the serving image's packages are not this machine's, so nothing is said
    assert hf(tmp_path, monkeypatch, data, "transformers==5.24.0") == []


def test_flash_attention_2_without_flash_attn_installed_is_an_import_error(tmp_path, monkeypatch):
    installed(monkeypatch)
    (f,) = hf(tmp_path, monkeypatch, {**LLAMA, "_attn_implementation": "flash_attention_2"})
    assert f.severity == Severity.ERROR
    assert f.message.startswith("flash_attention_2 without the flash_attn package: from_pretrained raises ImportError: "
                                "FlashAttention2 has been toggled on")
    assert "flash_attn: not installed beside transformers 5.24.0 (installed package)" in f.evidence
    assert json.loads(fixed(tmp_path, f))["_attn_implementation"] == "sdpa"


def test_kernels_package_makes_it_a_hub_download_from_4_56(tmp_path, monkeypatch):
    data = {**LLAMA, "_attn_implementation": "flash_attention_2"}
    installed(monkeypatch, "4.56.0", have=("kernels",))
    (f,) = hf(tmp_path, monkeypatch, data)
    assert f.severity == Severity.WARNING
    assert "downloads kernels-community/flash-attn2 from the Hugging Face Hub" in f.message
    installed(monkeypatch, "4.55.4", have=("kernels",))
    (f,) = hf(tmp_path, monkeypatch, data)
    assert f.severity == Severity.ERROR and "ImportError" in f.message


def test_flash_attn_installed_is_quiet(tmp_path, monkeypatch):
    installed(monkeypatch, have=("flash_attn",))
    assert hf(tmp_path, monkeypatch, {**LLAMA, "_attn_implementation": "flash_attention_2"}) == []


# --- output_attentions ----------------------------------------------------------------------------
def test_output_attentions_with_sdpa_asked_does_not_load_from_5_4(tmp_path, monkeypatch):
    data = {**LLAMA, "_attn_implementation": "sdpa", "output_attentions": True}
    (f,) = hf(tmp_path, monkeypatch, data, "transformers==5.4.0")
    assert f.severity == Severity.ERROR
    assert f.message == "output_attentions with sdpa: transformers 5.4.0 refuses to load the config (ValueError)"
    assert f.evidence[0] == ("transformers 5.4.0 prints: ValueError: The `output_attentions` attribute is not supported "
                             "when using the `attn_implementation` set to sdpa. Please set it to 'eager' instead.")
    (f,) = hf(tmp_path, monkeypatch, data, "transformers==5.3.0")
    assert f.severity == Severity.WARNING and "returns no attention weights" in f.message


@pytest.mark.parametrize(("version", "what"), [("4.52.4", "falls back to eager attention on every call"),
                                               ("4.53.0", "returns no attention weights"),
                                               ("5.24.0", "returns no attention weights")])
def test_output_attentions_with_the_default(tmp_path, monkeypatch, version, what):
    (f,) = hf(tmp_path, monkeypatch, {**LLAMA, "output_attentions": True}, f"transformers=={version}")
    assert f.severity == Severity.WARNING and what in f.message
    assert f.message.startswith("output_attentions with sdpa:")
    assert "attention: sdpa (nothing asked: the default)" in f.evidence
    assert (f.location.line, f.location.col) == (14, 2)
    assert "output_attentions" not in json.loads(fixed(tmp_path, f))


@pytest.mark.parametrize("data", [{**LLAMA, "output_attentions": True, "_attn_implementation": "eager"},
                                  {**LLAMA, "output_attentions": False}, LLAMA])
def test_output_attentions_quiet(tmp_path, monkeypatch, data):
    assert hf(tmp_path, monkeypatch, data, "transformers==5.24.0") == []


def test_releases_before_the_known_ones_are_not_judged(tmp_path, monkeypatch):
    assert hf(tmp_path, monkeypatch, {**LLAMA, "output_attentions": True}, "transformers==4.44.2") == []


# --- a class with no SDPA path --------------------------------------------------------------------
def test_model_without_sdpa_runs_eager(tmp_path, monkeypatch):
    (f,) = hf(tmp_path, monkeypatch, GEMMA2, "transformers==5.24.0")
    assert f.message == "transformers 5.24.0 has no SDPA path for gemma2: it runs eager attention"
    assert f.evidence[0].endswith("which materializes every layer's [batch, heads, q, k] scores")
    assert (f.location.line, f.location.col) == (2, 2)  # model_type
    assert f.fixes == ()


def test_model_without_sdpa_quiet_when_asked_or_unknown(tmp_path, monkeypatch):
    assert hf(tmp_path, monkeypatch, {**GEMMA2, "_attn_implementation": "eager"}, "transformers==5.24.0") == []
    assert hf(tmp_path, monkeypatch, GEMMA2, "transformers==4.47.1") == []  # no table for that release
    assert hf(tmp_path, monkeypatch, LLAMA, "transformers==5.24.0") == []
    mamba = {"model_type": "falcon_mamba", "architectures": ["FalconMambaForCausalLM"], "hidden_size": 4096,
             "num_hidden_layers": 64, "vocab_size": 65024, "state_size": 16}
    assert hf(tmp_path, monkeypatch, mamba, "transformers==5.24.0") == []  # no attention at all


# --- float32 --------------------------------------------------------------------------------------
def test_float32_on_ampere_gets_bfloat16(tmp_path, monkeypatch):
    data = {**LLAMA, "torch_dtype": "float32"}
    (f,) = hf(tmp_path, monkeypatch, data, "transformers==5.24.0", gpu="A10G")
    assert f.severity == Severity.WARNING
    assert "loads this model in float32" in f.message and "no flash or cuDNN kernel for float32 on A10G" in f.evidence[0]
    assert (f.location.line, f.location.col) == (13, 2)
    assert json.loads(fixed(tmp_path, f))["torch_dtype"] == "bfloat16"


def test_float32_from_5_0_when_sdpa_is_known(tmp_path, monkeypatch):
    data = {**LLAMA, "torch_dtype": "float32", "_attn_implementation": "sdpa"}
    assert len(hf(tmp_path, monkeypatch, data, "transformers==5.0.0", gpu="A10G")) == 1
    # with nothing asked, 5.0.0 is older than the 5.24.0 tables: which implementation runs is not known
    assert hf(tmp_path, monkeypatch, {**LLAMA, "torch_dtype": "float32"}, "transformers==5.0.0", gpu="A10G") == []


def test_float32_on_turing_says_float16_and_offers_no_edit(tmp_path, monkeypatch):
    (f,) = hf(tmp_path, monkeypatch, {**LLAMA, "torch_dtype": "float32"}, "transformers==5.24.0", gpu="T4")
    assert f.fixes == () and f.fix_hint == "pass dtype=torch.float16 to from_pretrained (T4 has no bfloat16)"


@pytest.mark.parametrize(("data", "target", "gpu"), [
    ({**LLAMA, "torch_dtype": "float32"}, "transformers==4.57.1", "A10G"),  # 4.x loads float32 whatever the config says
    ({**LLAMA, "torch_dtype": "float32"}, "transformers==5.24.0", None),
    ({**LLAMA, "torch_dtype": "float32"}, "transformers==5.24.0", "MI300X"),  # not CUDA
    ({**LLAMA, "torch_dtype": "float32", "_attn_implementation": "eager"}, "transformers==5.24.0", "A10G"),
    (LLAMA, "transformers==5.24.0", "A10G"),
])
def test_float32_quiet(tmp_path, monkeypatch, data, target, gpu):
    assert hf(tmp_path, monkeypatch, data, target, gpu=gpu) == []


def test_dtype_spelling_of_v5(tmp_path, monkeypatch):
    data = {k: v for k, v in LLAMA.items() if k != "torch_dtype"} | {"dtype": "float32"}
    (f,) = hf(tmp_path, monkeypatch, data, "transformers==5.24.0", gpu="H100")
    assert "dtype float32" in f.evidence[1]


# --- vLLM attention backends ----------------------------------------------------------------------
SERVE = "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\nattention-backend: {}\n"


def test_backend_the_gpu_cannot_run_stops_vllm(tmp_path, monkeypatch):
    (f,) = vllm(tmp_path, monkeypatch, SERVE.format("FLASH_ATTN"), gpu="T4")
    assert f.severity == Severity.ERROR
    assert f.message == ("attention backend FLASH_ATTN cannot run on T4 (compute capability 7.5): vLLM 0.33.0 stops "
                         "at startup (ValueError)")
    assert f.evidence[0] == ("vLLM 0.33.0 prints: ValueError: Selected backend FLASH_ATTN is not valid for this "
                             "configuration. Reason: ['compute capability not supported']")
    assert (f.location.line, f.location.col) == (3, 1)
    assert "attention-backend" not in yaml.safe_load(fixed(tmp_path, f, "serve.yaml"))


def test_backend_names_are_read_as_vllm_reads_them(tmp_path, monkeypatch):
    (f,) = vllm(tmp_path, monkeypatch, SERVE.format("flash_attn"), gpu="T4")
    assert "backend FLASH_ATTN" in f.message


@pytest.mark.parametrize(("backend", "gpu", "needs"), [("CUTLASS_MLA", "H100", "compute capability 10.x"),
                                                       ("FLASHMLA", "A100", "compute capability 9.x or 10.x"),
                                                       ("FLASH_ATTN_MLA", "B200", "compute capability 9.x"),
                                                       ("FLASHINFER", "V100", "compute capability 7.5 or newer"),
                                                       ("FLASHINFER_MLA", "H100", "compute capability 10.x")])
def test_each_backend_has_its_own_gpus(tmp_path, monkeypatch, backend, gpu, needs):
    (f,) = vllm(tmp_path, monkeypatch, SERVE.format(backend), gpu=gpu)
    assert f.evidence[1] == f"why: {backend} needs {needs}"


@pytest.mark.parametrize(("backend", "gpu", "target"), [
    ("FLASH_ATTN", "A10G", "vllm==0.33.0"), ("FLASHMLA", "H100", "vllm==0.33.0"), ("CUTLASS_MLA", "B200", "vllm==0.33.0"),
    ("FLASHINFER_MLA", "B200", "vllm==0.33.0"),
    ("FLASHINFER", "T4", "vllm==0.33.0"), ("TRITON_ATTN", "T4", "vllm==0.33.0"), ("auto", "T4", "vllm==0.33.0"),
    ("FLASH_ATTN", "T4", "vllm==0.11.0"),  # no validation of a selected backend before 0.12.0
])
def test_backend_quiet(tmp_path, monkeypatch, backend, gpu, target):
    assert vllm(tmp_path, monkeypatch, SERVE.format(backend), target, gpu=gpu) == []


def test_backend_without_a_gpu_is_quiet(tmp_path, monkeypatch):
    assert vllm(tmp_path, monkeypatch, SERVE.format("FLASH_ATTN")) == []


def test_first_release_judged(tmp_path, monkeypatch):
    (f,) = hf(tmp_path, monkeypatch, {**LLAMA, "output_attentions": True}, "transformers==4.45.0")
    assert "falls back to eager attention on every call" in f.message


def test_flash_attention_2_on_compute_capability_8_0_runs(tmp_path, monkeypatch):
    data = {**LLAMA, "_attn_implementation": "flash_attention_2"}
    assert hf(tmp_path, monkeypatch, data, "transformers==5.24.0", gpu="A100") == []


def test_pre_ampere_is_one_finding_even_without_flash_attn(tmp_path, monkeypatch):
    installed(monkeypatch)
    (f,) = hf(tmp_path, monkeypatch, {**LLAMA, "_attn_implementation": "flash_attention_2"}, gpu="T4")
    assert "RuntimeError" in f.message


def test_gpu_known_only_by_its_memory(tmp_path, monkeypatch):
    data = {**LLAMA, "torch_dtype": "float32"}
    assert hf(tmp_path, monkeypatch, data, "transformers==5.24.0", gpu_memory=24 * 2**30) == []


def test_backend_validation_starts_at_0_12(tmp_path, monkeypatch):
    assert len(vllm(tmp_path, monkeypatch, SERVE.format("FLASH_ATTN"), "vllm==0.12.0", gpu="T4")) == 1


@pytest.mark.parametrize(("text", "cc"), [("8.6", (8, 6)), ("10.0", (10, 0)), ("gfx942", None), ("9.x", None),
                                          (None, None), (9.0, None)])
def test_catalog_compute_capability_is_read_only_when_it_is_major_dot_minor(text, cc):
    from sits_doctor.catalogs.gpus import capability

    assert capability(text) == cc


def test_live_model_in_float32():
    from transformers import AutoModelForCausalLM, LlamaConfig

    from sits_doctor import check_model

    config = LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         intermediate_size=128, vocab_size=128, dtype="float32")
    model = AutoModelForCausalLM.from_config(config)
    (f,) = [f for f in check_model(model, gpu="A10G").findings if f.code == CODE]
    assert f.message.startswith("the model runs in float32: SDPA has no flash kernel for float32 on A10G")
    assert f.fix_hint == "model.to(torch.bfloat16)" and f.fixes == ()
    assert [f for f in check_model(model, gpu="T4").findings if f.code == CODE][0].fix_hint == "model.to(torch.float16)"
    assert [f for f in check_model(model.to(dtype=__import__("torch").bfloat16), gpu="A10G").findings
            if f.code == CODE] == []


def test_float32_on_compute_capability_8_0_gets_bfloat16(tmp_path, monkeypatch):
    (f,) = hf(tmp_path, monkeypatch, {**LLAMA, "torch_dtype": "float32"}, "transformers==5.24.0", gpu="A100")
    assert f.fix_hint.startswith("write bfloat16") and len(f.fixes) == 1
