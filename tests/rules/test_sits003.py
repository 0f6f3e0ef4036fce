"""SITS003 materialized-causal-mask: transformers' mask handling (masking_utils.py@v5.24.0,
prefill_chunk_size from v4.51.0) and TensorRT-LLM's context FMHA switch
(docs/source/advanced/gpt-attention.md)."""

from __future__ import annotations

import json

import harness
import pytest

from conftest import FIXTURES
from sits_doctor.finding import Severity
from sits_doctor.fixer import apply_edits

CODE = "SITS003"
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 16,
         "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
GEMMA2 = {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "hidden_size": 2304, "num_hidden_layers": 26,
          "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 9216,
          "vocab_size": 256000, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}


def hf(tmp_path, monkeypatch, data: dict, target="transformers==5.24.0", generation: dict | None = None):
    files = {"m/config.json": json.dumps(data, indent=1)}
    if generation is not None:
        files["m/generation_config.json"] = json.dumps(generation, indent=1)
    return harness.findings(tmp_path, monkeypatch, files, "m/config.json", CODE, target)


# --- eager ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["attn_implementation", "_attn_implementation"])
def test_eager_on_a_class_with_sdpa(tmp_path, monkeypatch, key):
    (f,) = hf(tmp_path, monkeypatch, {**LLAMA, key: "eager"})
    assert f.severity == Severity.WARNING
    assert f.message == f"{key} eager: transformers 5.24.0 stores every layer's full [batch, heads, q, k] score matrix"
    assert f.evidence[0] == ("why: eager attention computes all scores, stores them and masks the upper triangle "
                             "afterwards; SDPA skips the masked blocks and stores no scores")
    assert (f.location.line, f.location.col) == (14, 2)
    (fix,) = f.fixes
    assert fix.safety.value == "unsafe"
    assert json.loads(apply_edits((tmp_path / "m/config.json").read_text(), fix.edits))[key] == "sdpa"


@pytest.mark.parametrize(("data", "target"), [
    ({**LLAMA, "attn_implementation": "sdpa"}, "transformers==5.24.0"),
    (LLAMA, "transformers==5.24.0"),
    ({**LLAMA, "attn_implementation": "eager", "output_attentions": True}, "transformers==5.24.0"),
    ({**LLAMA, "attn_implementation": "eager", "attn_logit_softcapping": 50.0}, "transformers==5.24.0"),
    ({**GEMMA2, "attn_implementation": "eager"}, "transformers==5.24.0"),  # no SDPA path: eager is all it has
    ({**LLAMA, "attn_implementation": "eager"}, "transformers==4.47.1"),  # no table for that release: unknown
])
def test_eager_quiet(tmp_path, monkeypatch, data, target):
    assert hf(tmp_path, monkeypatch, data, target) == []


def test_softcapping_null_is_no_reason_for_eager(tmp_path, monkeypatch):
    assert len(hf(tmp_path, monkeypatch, {**LLAMA, "attn_implementation": "eager", "attn_logit_softcapping": None})) == 1


# --- chunked prefill ------------------------------------------------------------------------------
def test_prefill_chunks_get_an_explicit_mask(tmp_path, monkeypatch):
    (f,) = hf(tmp_path, monkeypatch, LLAMA, generation={"max_new_tokens": 256, "prefill_chunk_size": 2048})
    assert f.location.file.endswith("generation_config.json") and (f.location.line, f.location.col) == (3, 2)
    assert f.message.startswith("prefill_chunk_size 2048 with sdpa: chunks after the first run SDPA off its flash")
    assert f.evidence[0].startswith("why: every prompt chunk after the first has fewer queries than keys")
    (fix,) = f.fixes
    assert fix.safety.value == "display" and "causal_trim" in fix.title


def test_prefill_chunks_with_sdpa_asked_and_from_4_51(tmp_path, monkeypatch):
    gen = {"prefill_chunk_size": 512}
    data = {**LLAMA, "attn_implementation": "sdpa"}
    assert len(hf(tmp_path, monkeypatch, data, "transformers==4.51.0", generation=gen)) == 1
    assert hf(tmp_path, monkeypatch, data, "transformers==4.50.3", generation=gen) == []


@pytest.mark.parametrize("gen", [{"max_new_tokens": 256}, {"prefill_chunk_size": 0}, {"prefill_chunk_size": None},
                                 {"prefill_chunk_size": True}])
def test_prefill_chunks_quiet(tmp_path, monkeypatch, gen):
    assert hf(tmp_path, monkeypatch, LLAMA, generation=gen) == []


def test_prefill_chunks_with_eager_is_the_eager_finding_only(tmp_path, monkeypatch):
    (f,) = hf(tmp_path, monkeypatch, {**LLAMA, "attn_implementation": "eager"}, generation={"prefill_chunk_size": 512})
    assert f.message.startswith("attn_implementation eager")


# --- TensorRT-LLM ---------------------------------------------------------------------------------
ENGINE = FIXTURES / "trtllm" / "good_engine_qwen2_0.5b_v0.17.json"


@pytest.mark.parametrize("value", [False, "disable"])
def test_engine_without_context_fmha(tmp_path, monkeypatch, value):
    data = json.loads(ENGINE.read_text())
    data["build_config"]["plugin_config"]["context_fmha"] = value
    text = json.dumps(data, indent=4)
    (f,) = harness.findings(tmp_path, monkeypatch, {"engine/config.json": text}, "engine/config.json", CODE)
    shown = "false" if value is False else value
    assert f.message.startswith(f"the engine was built with context_fmha {shown}: its context phase stores the whole "
                                "Q*K^T matrix")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if '"context_fmha"' in t)
    assert f.location.line == line
    (fix,) = f.fixes
    assert fix.safety.value == "display" and fix.title == "rebuild the engine: trtllm-build --context_fmha enable"


@pytest.mark.parametrize("value", [True, "enable"])
def test_engine_with_context_fmha_is_quiet(tmp_path, monkeypatch, value):
    data = json.loads(ENGINE.read_text())
    data["build_config"]["plugin_config"]["context_fmha"] = value
    files = {"engine/config.json": json.dumps(data, indent=4)}
    assert harness.findings(tmp_path, monkeypatch, files, "engine/config.json", CODE) == []


def test_llm_api_on_the_tensorrt_backend_builds_without_it(tmp_path, monkeypatch):
    text = "backend: tensorrt\nmax_batch_size: 8\nbuild_config:\n  plugin_config:\n    context_fmha: false\n"
    (f,) = harness.findings(tmp_path, monkeypatch, {"llm.yaml": text}, "llm.yaml", CODE, "trtllm==1.0.0")
    assert f.message.startswith("the engine is built with context_fmha false")
    assert (f.location.line, f.location.col) == (5, 5)
    (fix,) = f.fixes
    assert fix.safety.value == "unsafe"
    assert apply_edits(text, fix.edits).endswith("    context_fmha: true\n")
    # the PyTorch backend builds no engine: nothing to say here
    text = text.replace("tensorrt", "pytorch")
    assert harness.findings(tmp_path, monkeypatch, {"llm.yaml": text}, "llm.yaml", CODE, "trtllm==1.0.0") == []


def test_prefill_chunk_of_one_token_counts(tmp_path, monkeypatch):
    assert len(hf(tmp_path, monkeypatch, LLAMA, generation={"prefill_chunk_size": 1})) == 1


def test_prefill_chunks_when_what_runs_is_unknown(tmp_path, monkeypatch):
    # 4.51.0 is older than the 5.24.0 tables and nothing is asked: which implementation runs is not known
    assert hf(tmp_path, monkeypatch, LLAMA, "transformers==4.51.0", generation={"prefill_chunk_size": 512}) == []


def _live(**kw):
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         intermediate_size=128, vocab_size=128, dtype="bfloat16")
    return AutoModelForCausalLM.from_config(config, **kw)


def test_live_model_loaded_with_eager():
    from sits_doctor import check_model

    report = check_model(_live(attn_implementation="eager"))
    assert not report.internal_errors and not report.errors
    (f,) = [f for f in report.findings if f.code == CODE]
    assert f.message.startswith("the model runs eager attention: transformers ")
    assert f.location.file == "<model LlamaForCausalLM>"
    assert f.fix_hint == "switch it with model.set_attn_implementation('sdpa')"
    assert [f for f in check_model(_live()).findings if f.code == CODE] == []


@pytest.mark.parametrize(("version", "switch"), [("4.54.0", "model.set_attn_implementation('sdpa')"),
                                                 ("4.53.3", "from_pretrained(..., attn_implementation='sdpa')")])
def test_live_switch_advice_follows_the_installed_release(monkeypatch, version, switch):
    import transformers

    from sits_doctor import check_model

    model = _live(attn_implementation="eager")
    monkeypatch.setattr(transformers, "__version__", version)
    (f,) = [f for f in check_model(model).findings if f.code == CODE]
    assert f.fix_hint == f"switch it with {switch}"


def test_pre_0_8_engine_with_context_fmha_type_disabled(tmp_path, monkeypatch):
    text = (FIXTURES / "trtllm" / "engine-pre08" / "config.json").read_text()
    assert '"context_fmha_type": 1,' in text
    assert harness.findings(tmp_path, monkeypatch, {"e/config.json": text}, "e/config.json", CODE) == []
    off = text.replace('"context_fmha_type": 1,', '"context_fmha_type": 0,')
    (f,) = harness.findings(tmp_path, monkeypatch, {"e/config.json": off}, "e/config.json", CODE)
    assert f.message.startswith("the engine was built with context_fmha_type 0 (disabled): its context phase")
    assert f.location.line == next(i for i, t in enumerate(off.splitlines(), 1) if "context_fmha_type" in t)
    assert f.fix_hint.startswith("rebuild with examples/<model>/build.py --enable_context_fmha")
