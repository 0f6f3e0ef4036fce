"""check --runtime for Hugging Face model configs: the model built with the installed transformers on
the meta device, and the version tables the static path uses, must say the same."""

from __future__ import annotations

import json

import pytest

from sits_doctor.engine import CheckOptions, check
from sits_doctor.frameworks import transformers as tf
from sits_doctor.plan import ModelFacts

# Real shapes (num_hidden_layers is cut to 4 when built); each model_type is one family the issue names.
CONFIGS = {
    "llama": {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
              "max_position_embeddings": 131072, "rope_theta": 500000.0,
              "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 8192}},
    "qwen2": {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584, "num_hidden_layers": 28,
              "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064},
    "gemma2": {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "hidden_size": 2304, "num_hidden_layers": 26,
               "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 9216,
               "vocab_size": 256000, "sliding_window": 4096, "attn_logit_softcapping": 50.0},
    "mistral": {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 4096,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                "vocab_size": 32000, "sliding_window": 4096},
    "phi3": {"model_type": "phi3", "architectures": ["Phi3ForCausalLM"], "hidden_size": 3072, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 8192, "vocab_size": 32064},
    "deepseek_v3": {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168,
                    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
                    "n_routed_experts": 256, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "kv_lora_rank": 512,
                    "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
                    "moe_intermediate_size": 2048, "intermediate_size": 18432, "vocab_size": 129280},
}


def _model(data: dict) -> ModelFacts:
    return ModelFacts("config.json", data)


def _fields(rt):
    return {k: (None if getattr(rt, k) is None else getattr(rt, k).value)
            for k in ("attention", "supports_sdpa", "rope")} | {"rotary_modules": rt.rotary_modules}


# --- the tables (static path) ----------------------------------------------------------------------

def test_rope_moved_to_the_model_in_4_48_for_mistral_gemma2_phi3():
    for family in ("mistral", "gemma2", "phi3"):
        before = tf.runtime_from_tables(_model(CONFIGS[family]), "4.47.1")
        after = tf.runtime_from_tables(_model(CONFIGS[family]), "4.48.0")
        assert (before.rope.value, after.rope.value) == ("attention", "model"), family
        assert "before 4.48.0" in before.rope.prov.note
    assert tf.runtime_from_tables(_model(CONFIGS["llama"]), "4.45.0").rope.value == "model"
    # a family the tables know only at the generated release: unknown below it
    assert tf.runtime_from_tables(_model(CONFIGS["qwen2"]), "4.47.1").rope is None


def test_tables_at_and_after_the_generated_release():
    known = tf.runtime_table()["transformers"]
    rt = tf.runtime_from_tables(_model(CONFIGS["gemma2"]), known)
    assert (rt.attention.value, rt.supports_sdpa.value) == ("eager", False)  # softcapping: no SDPA path
    assert "assumed" not in rt.attention.prov.note
    later = tf.runtime_from_tables(_model(CONFIGS["llama"]), "99.0.0")
    assert later.attention.value == "sdpa" and f"assumed for 99.0.0" in later.attention.prov.note


def test_an_attention_implementation_written_in_config_json_wins():
    rt = tf.runtime_from_tables(_model({**CONFIGS["llama"], "attn_implementation": "eager"}), "5.24.0")
    assert rt.attention.value == "eager" and rt.attention.prov.kind == "file"


def test_custom_code_is_never_described_from_tables():
    rt = tf.runtime_from_tables(_model({**CONFIGS["llama"], "model_type": "acme_lm", "auto_map": {"AutoModel": "x.Y"}}),
                                tf.runtime_table()["transformers"])
    assert rt.custom_code and rt.attention is None and rt.rope is None and not rt.native_over_remote


def test_auto_map_on_a_native_type_is_described_as_the_native_class():
    rt = tf.runtime_from_tables(_model({**CONFIGS["llama"], "auto_map": {"AutoModel": "x.Y"}}),
                                tf.runtime_table()["transformers"])
    assert not rt.custom_code and rt.native_over_remote and rt.rope.value == "model"


# --- introspection agrees with the tables ------------------------------------------------------------

transformers = pytest.importorskip("transformers")
pytest.importorskip("torch")
from sits_doctor import runtime_hf  # noqa: E402


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_introspection_and_tables_agree(family):
    installed = transformers.__version__
    if installed != tf.runtime_table()["transformers"]:
        pytest.skip(f"the tables were generated with transformers {tf.runtime_table()['transformers']}, "
                    f"{installed} is installed: run tools/gen_hf_runtime.py")
    built = runtime_hf.introspect(_model(CONFIGS[family]))
    table = tf.runtime_from_tables(_model(CONFIGS[family]), installed)
    assert _fields(built) == _fields(table)
    assert built.model_class == CONFIGS[family]["architectures"][0]
    assert built.rope.value == "model" and built.cache.value == "DynamicCache"


def test_introspection_honours_an_asked_implementation_and_names_the_quantizer():
    data = {**CONFIGS["llama"], "attn_implementation": "eager",
            "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}}
    rt = runtime_hf.introspect(_model(data))
    assert rt.attention.value == "eager"
    from transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING

    assert rt.quantizer.value == AUTO_QUANTIZER_MAPPING["fp8"].__name__


@pytest.mark.parametrize("quant, key", [
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, "bitsandbytes_4bit"),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "bitsandbytes_8bit"),
    ({"load_in_4bit": True}, "bitsandbytes_4bit"),
    ({"quant_method": "gptq", "bits": 4}, "gptq"),
])
def test_the_quantizer_is_the_one_transformers_derives(quant, key):
    """bitsandbytes checkpoints say quant_method "bitsandbytes"; transformers picks the 4- or 8-bit
    quantizer from load_in_4bit / load_in_8bit (quantizers/auto.py), which the mapping is keyed by."""
    from transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING

    assert runtime_hf._quantizer(quant, "src").value == AUTO_QUANTIZER_MAPPING[key].__name__


def test_a_quantization_config_without_quant_method_is_refused():
    assert "no quant_method" in runtime_hf._quantizer({"bits": 4}, "src").value
    assert "has no quantizer for 'nonesuch'" in runtime_hf._quantizer({"quant_method": "nonesuch"}, "src").value
    assert runtime_hf._quantizer(None, "src") is None


def test_introspection_never_builds_custom_code():
    data = {**CONFIGS["llama"], "model_type": "acme_lm", "auto_map": {"AutoModelForCausalLM": "modeling_x.X"}}
    rt = runtime_hf.introspect(_model(data))
    assert rt.custom_code and rt.model_class is None and "never runs" in rt.how


def test_introspection_builds_the_native_class_a_config_with_auto_map_gets():
    rt = runtime_hf.introspect(_model({**CONFIGS["llama"], "auto_map": {"AutoModelForCausalLM": "modeling_x.X"}}))
    assert not rt.custom_code and rt.native_over_remote and rt.model_class == "LlamaForCausalLM"


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_a_live_model_reads_the_same_as_introspection(family):
    """introspect() and live() share read_built(): a model built from the same config (meta device, the
    same 4 layers introspection builds) reads the same, with the live provenance."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    data = {**CONFIGS[family], "num_hidden_layers": runtime_hf.MAX_LAYERS}
    config = AutoConfig.for_model(**{k: v for k, v in data.items() if k != "architectures"})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    built, live = runtime_hf.introspect(_model(data)), runtime_hf.live(model)
    assert _fields(live) == _fields(built)
    assert (live.model_class, live.cache.value, live.quantizer) == (built.model_class, built.cache.value, None)
    assert live.dtype.value == built.dtype.value == "float32" and live.device.value == "meta"
    assert str(live.rope.prov) == f"live model {built.model_class} (transformers {transformers.__version__})"
    assert built.how.startswith("built with") and live.how.startswith("live model")


def test_introspection_names_the_dtype_from_pretrained_loads():
    from sits_doctor.versions import V

    rt = runtime_hf.introspect(_model({**CONFIGS["llama"], "torch_dtype": "bfloat16"}))
    # 5.x: dtype="auto" by default (the config's); 4.x: float32 unless asked
    assert rt.dtype.value == ("bfloat16" if V(transformers.__version__) >= V("5.0.0") else "float32")
    assert rt.device is None
    assert runtime_hf.introspect(_model(CONFIGS["llama"])).dtype.value == "float32"  # no dtype in the config


# --- check --runtime -------------------------------------------------------------------------------

def _write(tmp_path, family, extra=None):
    folder = tmp_path / family
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**CONFIGS[family], **(extra or {})}))
    return str(folder / "config.json")


def test_check_runtime_reports_what_runs(tmp_path):
    paths = [_write(tmp_path, f) for f in ("gemma2", "mistral")]
    report = check(paths, CheckOptions(runtime=True, isolated=True))
    by_class = {r["model_class"]: r for r in report.runtime}
    assert set(by_class) == {"Gemma2ForCausalLM", "MistralForCausalLM"}
    assert by_class["Gemma2ForCausalLM"]["attention"] == "eager" and by_class["MistralForCausalLM"]["rope"] == "model"
    assert all(r["how"].startswith("built with transformers") for r in report.runtime)
    # without --runtime nothing is built and nothing is reported
    assert check(paths, CheckOptions(isolated=True)).runtime == []


def test_a_target_other_than_the_installed_version_uses_the_tables(tmp_path):
    path = _write(tmp_path, "mistral")
    report = check([path], CheckOptions(runtime=True, isolated=True, targets=["transformers==4.47.1"]))
    (row,) = report.runtime
    assert row["how"] == "tables for transformers 4.47.1" and row["rope"] == "attention"
    assert any("the target is transformers 4.47.1 but" in n.message for n in report.notices)


def test_cli_text_and_json(tmp_path, capsys):
    from sits_doctor.cli import run

    path = _write(tmp_path, "phi3")
    run(["check", path, "--runtime", "--isolated"])
    out = capsys.readouterr().out
    assert "runtime: Phi3ForCausalLM (built with transformers" in out
    assert "  rotary embeddings: once per forward, passed to every layer (model.rotary_emb)" in out
    run(["check", path, "--runtime", "--isolated", "--format", "json"])
    (row,) = json.loads(capsys.readouterr().out)["runtime"]
    assert row["attention"] == "sdpa" and row["supports_sdpa"] is True


def test_tables_name_the_class_and_say_what_they_cannot_tell(tmp_path, capsys):
    """A target older than the generated tables: the class config.json names, the RoPE placement
    from the moved-to-model table where it has the family, and 'not in the tables' for the rest."""
    from sits_doctor.cli import run
    from sits_doctor.versions import V

    older = "5.0.0"
    assert V(older) < V(tf.runtime_table()["transformers"])
    for family, rope_line in (("llama", "  rotary embeddings: once per forward, passed to every layer"),
                              ("deepseek_v3", "  rotary embeddings: not in the version tables for this target")):
        path = _write(tmp_path, family)
        run(["check", path, "--runtime", "--isolated", "--target", f"transformers=={older}"])
        out = capsys.readouterr().out
        assert f"runtime: {CONFIGS[family]['architectures'][0]} (tables for transformers {older})" in out
        assert "  attention: not in the version tables for this target (install that transformers version" in out
        assert rope_line in out
    assert tf.runtime_from_tables(_model({"model_type": "llama"}), older).model_class is None
    assert tf.runtime_from_tables(_model({**CONFIGS["qwen2"], "architectures": [7]}), older).model_class is None


def test_runtime_lines_print_what_is_known_and_only_that():
    from sits_doctor.reporters.text import runtime_lines

    base = {"file": "m/config.json", "model_class": "LlamaForCausalLM", "how": "built with transformers 5.24.0",
            "custom_code": False, "attention": "sdpa", "supports_sdpa": None, "rope": "model",
            "rotary_modules": [], "cache": None, "quantizer": None}
    assert runtime_lines([base]) == ["m/config.json: runtime: LlamaForCausalLM (built with transformers 5.24.0)",
                                     "  attention: sdpa",
                                     "  rotary embeddings: once per forward, passed to every layer"]
    full = {**base, "supports_sdpa": False, "rotary_modules": ["model.rotary_emb"], "cache": "StaticCache",
            "quantizer": "fp8"}
    assert runtime_lines([full])[1:] == ["  attention: sdpa; the class has no SDPA path",
                                         "  rotary embeddings: once per forward, passed to every layer (model.rotary_emb)",
                                         "  generate() cache: StaticCache", "  quantization: fp8"]
    # built, but attention and rope unknown: nothing is said of them (only the tables say 'not in the tables')
    assert runtime_lines([{**base, "attention": None, "rope": None}]) == runtime_lines([base])[:1]
    custom = {**full, "custom_code": True, "model_class": None}
    assert runtime_lines([custom]) == ["m/config.json: runtime: model (built with transformers 5.24.0)"]


def test_tables_read_the_text_config_the_generation_config_and_no_config():
    from types import SimpleNamespace

    installed = tf.runtime_table()["transformers"]
    # a multimodal config: the text model's type is under text_config; the outer one is not a decoder
    vlm = ModelFacts("config.json", {"model_type": "some_vlm", "architectures": ["VlmForConditionalGeneration", "X"],
                                     "text_config": CONFIGS["llama"]}, text_pointer="/text_config")
    rt = tf.runtime_from_tables(vlm, installed)
    assert rt.attention.value == "sdpa" and rt.rope.value == "model"
    assert rt.model_class == "VlmForConditionalGeneration"  # the first architecture, not the last
    assert rt.cache.value == tf.DEFAULT_CACHE and rt.cache.prov.note == "generate() default"
    static = ModelFacts("config.json", CONFIGS["llama"],
                        generation=SimpleNamespace(data={"cache_implementation": "static"}))
    rt = tf.runtime_from_tables(static, installed)
    assert rt.cache.value == "static" and rt.cache.prov.note == "generation_config.json"
    nothing = tf.runtime_from_tables(None, installed)
    assert (nothing.attention, nothing.rope, nothing.model_class) == (None, None, None)
    assert nothing.cache.value == tf.DEFAULT_CACHE and nothing.how == f"tables for transformers {installed}"
