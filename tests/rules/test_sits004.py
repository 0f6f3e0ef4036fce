"""SITS004 rope-recomputed-per-layer: transformers' modeling files at v4.47.1 / v4.48.0 (Mistral,
Gemma 2, Phi-3 moved RoPE to the model in 4.48.0; Llama in 4.43.0), and every causal-LM architecture
of 5.24.0 built on the meta device (tools/gen_hf_runtime.py)."""

from __future__ import annotations

import json

import harness
import pytest

from sits_doctor.finding import Severity

CODE = "SITS004"
MISTRAL = {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 4096,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
           "vocab_size": 32000, "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}
RECURRENT = {"model_type": "recurrent_gemma", "architectures": ["RecurrentGemmaForCausalLM"], "hidden_size": 2560,
             "num_hidden_layers": 26, "num_attention_heads": 10, "num_key_value_heads": 1, "head_dim": 256,
             "intermediate_size": 15360, "vocab_size": 256000, "block_types": ["recurrent", "recurrent", "attention"],
             "lru_width": 2560, "attention_window_size": 2048, "partial_rotary_factor": 0.5}


def findings(tmp_path, monkeypatch, data: dict, target: str, **opts):
    return harness.findings(tmp_path, monkeypatch, {"m/config.json": json.dumps(data, indent=1)}, "m/config.json",
                            CODE, target, **opts)


@pytest.mark.parametrize("family", ["mistral", "gemma2", "phi3"])
def test_fires_before_4_48_and_not_from_it(tmp_path, monkeypatch, family):
    data = {**MISTRAL, "model_type": family}
    (f,) = findings(tmp_path, monkeypatch, data, "transformers==4.47.1")
    assert f.severity == Severity.WARNING
    assert f.message == (f"transformers 4.47.1 recomputes {family}'s rotary cos/sin tables in every "
                         "attention layer, not once per forward")
    assert (f.location.line, f.location.col) == (2, 2)  # at "model_type"
    assert f.fix_hint.startswith("transformers 4.48.0 and later compute them once per forward")
    (fix,) = f.fixes
    assert fix.safety.value == "display" and fix.title == "install transformers>=4.48.0"
    assert findings(tmp_path, monkeypatch, data, "transformers==4.48.0") == []


def test_rope_hoist_is_offered_only_for_its_code_path(tmp_path, monkeypatch):
    (m,) = findings(tmp_path, monkeypatch, MISTRAL, "transformers==4.47.1")
    assert "rope_hoist" in m.fix_hint
    (g,) = findings(tmp_path, monkeypatch, {**MISTRAL, "model_type": "gemma2"}, "transformers==4.47.1")
    assert "rope_hoist" not in g.fix_hint


def test_llama_moved_in_4_43(tmp_path, monkeypatch):
    data = {**MISTRAL, "model_type": "llama"}
    assert len(findings(tmp_path, monkeypatch, data, "transformers==4.42.4")) == 1
    assert findings(tmp_path, monkeypatch, data, "transformers==4.43.0") == []


def test_architectures_that_still_do_it_in_5_24(tmp_path, monkeypatch):
    (f,) = findings(tmp_path, monkeypatch, RECURRENT, "transformers==5.24.0")
    assert "rotary modules: model.layers.*.temporal_block.rotary_emb" in f.evidence
    assert f.fixes == () and f.fix_hint.startswith("no transformers release or sits-doctor patch")
    # the families that moved are quiet there, whatever their rope type (dynamic NTK is no trigger)
    dynamic = {**MISTRAL, "model_type": "llama", "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    assert findings(tmp_path, monkeypatch, dynamic, "transformers==5.24.0") == []


def test_unknown_placement_is_no_finding(tmp_path, monkeypatch):
    # qwen2 at 4.47: only the generated release's table knows it
    assert findings(tmp_path, monkeypatch, {**MISTRAL, "model_type": "qwen2"}, "transformers==4.47.1") == []


def test_custom_code_is_an_info(tmp_path, monkeypatch):
    """A model type transformers has no class for: only the repository's code can build it."""
    data = {**MISTRAL, "model_type": "acme_lm", "auto_map": {"AutoModelForCausalLM": "modeling_x.XForCausalLM"}}
    (f,) = findings(tmp_path, monkeypatch, data, "transformers==4.47.1")
    assert f.severity == Severity.INFO and "acme_lm runs code from its repository (auto_map)" in f.message


def test_auto_map_on_a_native_type_is_judged_as_the_native_class(tmp_path, monkeypatch):
    """Phi-3's config names its repository code, but without trust_remote_code=True transformers
    builds its own Phi3ForCausalLM (local code wins): judged like the native class."""
    data = {**MISTRAL, "model_type": "phi3", "architectures": ["Phi3ForCausalLM"],
            "auto_map": {"AutoConfig": "configuration_phi3.Phi3Config",
                         "AutoModelForCausalLM": "modeling_phi3.Phi3ForCausalLM"}}
    (f,) = findings(tmp_path, monkeypatch, data, "transformers==4.47.1")
    assert f.severity == Severity.WARNING and "recomputes phi3's rotary cos/sin tables in every attention layer" in f.message
    assert any("runs only with trust_remote_code=True" in e for e in f.evidence)
    assert findings(tmp_path / "new", monkeypatch, data, "transformers==5.24.0") == []


def test_runtime_introspection_fires_the_same(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    found = findings(tmp_path, monkeypatch, RECURRENT, f"transformers=={transformers.__version__}", runtime=True)
    (f,) = found
    assert any(e.startswith("where: RecurrentGemmaForCausalLM built with transformers") for e in f.evidence)
    built = findings(tmp_path, monkeypatch, MISTRAL, f"transformers=={transformers.__version__}", runtime=True)
    assert built == []
