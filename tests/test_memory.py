"""KV bytes per token, parameter counts and weight bytes, against worked examples that follow from
the frameworks' own formulas (vLLM AttentionSpec / MLAAttentionSpec page sizes) and the models'
published sizes."""

from __future__ import annotations

import json

import pytest

from sits_doctor import memory
from sits_doctor.catalogs import models
from sits_doctor.frameworks.transformers import model_dims
from sits_doctor.frameworks import vllm_memory
from sits_doctor.loaders.hf import model_facts
from sits_doctor.source import parse_json

KIB = 1024


def dims(config: dict):
    return model_dims(model_facts(parse_json(json.dumps(config), "config.json")))


def catalog(hub_id: str):
    return dims(models.lookup(hub_id).config)


LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
            "torch_dtype": "bfloat16", "tie_word_embeddings": False}


def kv(d, dtype="auto", **kw) -> float:
    value, missing = memory.kv_bytes_per_token(d, dtype, **kw)
    assert missing is None, missing
    return value.value


def test_llama_3_1_8b_is_128_kib_per_token():
    assert kv(dims(LLAMA_8B)) == 128 * KIB  # 2 · 8 · 128 · 2 B · 32 layers


@pytest.mark.parametrize(("dtype", "expected"), [("fp8", 64 * KIB), ("fp8_e5m2", 64 * KIB), ("float32", 256 * KIB),
                                                 ("bfloat16", 128 * KIB)])
def test_kv_dtype_sets_the_bytes(dtype, expected):
    assert kv(dims(LLAMA_8B), dtype) == expected


def test_fp32_checkpoint_with_auto_kv_is_served_in_16_bits():
    assert kv(dims({**LLAMA_8B, "torch_dtype": "float32"})) == 128 * KIB


@pytest.mark.parametrize(("tp", "expected"), [(1, 320), (2, 160), (8, 40), (16, 40)])
def test_70b_kv_heads_split_by_tp_then_replicated(tp, expected):
    d = catalog("meta-llama/Llama-3.1-70B-Instruct")  # 80 layers, 8 KV heads, head_dim 128
    assert kv(d, tp=tp) == expected * KIB


def test_pipeline_stages_hold_their_own_layers():
    assert kv(dims(LLAMA_8B), pp=3) == 2 * 8 * 128 * 2 * 11  # ceil(32 / 3) layers on the largest stage


@pytest.mark.parametrize("tp", [1, 8, 16])
def test_deepseek_v3_mla_latent_is_not_split_by_tp(tp):
    d = catalog("deepseek-ai/DeepSeek-V3")  # kv_lora_rank 512 + rope 64, 61 layers
    assert kv(d, "bfloat16", tp=tp) == 576 * 2 * 61
    assert kv(d, "fp8_ds_mla", tp=tp) == 656 * 61


def test_sliding_window_layers_are_left_out_per_token():
    d = catalog("openai/gpt-oss-120b")  # 36 layers alternating sliding (128) / full, 8 KV heads of 64
    value, _ = memory.kv_bytes_per_token(d, "auto")
    assert value.value == 2 * 8 * 64 * 2 * 18
    assert "18 sliding-window layers (window 128)" in str(value.prov)
    assert "bf16 assumed" in str(value.prov)  # gpt-oss states no torch_dtype


def test_linear_attention_layers_hold_no_per_token_kv():
    # a Qwen3.5/3.6-style hybrid: 3 linear-attention layers for every full-attention one
    hybrid = {**LLAMA_8B, "num_hidden_layers": 8, "head_dim": 256, "num_key_value_heads": 2,
              "layer_types": ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3 + ["full_attention"]}
    for before_hybrid_accounting in (False, True):
        value, _ = memory.kv_bytes_per_token(dims(hybrid), "auto", sliding_per_token=before_hybrid_accounting)
        assert value.value == 2 * 2 * 256 * 2 * 2  # K,V · 2 heads · 256 · bf16 · the 2 full layers
        assert "6 linear-attention layers" in str(value.prov)
    mixed = {**hybrid, "sliding_window": 512,
             "layer_types": ["sliding_attention", "linear_attention"] * 3 + ["full_attention"] * 2}
    per_request, _ = memory.kv_bytes_per_token(dims(mixed), "auto")
    every_token, _ = memory.kv_bytes_per_token(dims(mixed), "auto", sliding_per_token=True)
    assert (per_request.value, every_token.value) == (2 * 2 * 256 * 2 * 2, 2 * 2 * 256 * 2 * 5)


def test_unknown_kv_dtype_is_missing_not_guessed():
    value, missing = memory.kv_bytes_per_token(dims(LLAMA_8B), "turboquant_3bit")
    assert value is None and "turboquant_3bit" in missing


@pytest.mark.parametrize(("hub_id", "published"), [
    ("meta-llama/Llama-2-7b-hf", 6.738e9), ("meta-llama/Llama-2-70b-hf", 68.977e9),
    ("mistralai/Mixtral-8x7B-v0.1", 46.7e9), ("mistralai/Mixtral-8x22B-v0.1", 140.6e9),
    ("deepseek-ai/DeepSeek-V3", 671e9), ("openai/gpt-oss-120b", 116.8e9), ("Qwen/Qwen3-235B-A22B", 235e9),
])
def test_parameter_count_from_the_shape_matches_the_published_size(hub_id, published):
    d = catalog(hub_id)
    assert d.params is not None
    assert abs(d.params.value / published - 1) < 0.01


def test_quantized_weights_keep_embeddings_in_16_bits():
    d = dims({**LLAMA_8B, "quantization_config": {"quant_method": "awq", "bits": 4}})
    value, _ = memory.weights_bytes(d)
    embed = 2 * 128256 * 4096
    rest = d.params.value - embed
    assert value.value == pytest.approx(embed * 2 + rest * (0.5 + 4 / 128))


def test_mxfp4_quantizes_only_the_experts():
    d = catalog("openai/gpt-oss-120b")
    value, _ = memory.weights_bytes(d)
    experts = d.param_parts.value["experts"]
    assert value.value == pytest.approx(experts * (0.5 + 1 / 32) + (d.params.value - experts) * 2)
    assert 55 < value.value / memory.GIB < 70  # vLLM logs 64.4–66.0 GiB for it (tests/data/capacity)


def test_pool_arithmetic_and_block_rounding():
    p = vllm_memory.pool(version="0.10.0", memory_bytes=80 * memory.GIB, utilization=0.9,
                         weights_bytes=16 * memory.GIB, kv_bytes_per_token=128 * KIB, batched_tokens=0,
                         hidden=4096, intermediate=14336, block_size=16)
    # 72 GiB budget − 16 GiB weights − non-torch (its middle estimate) − no activation, no graphs (< 0.20)
    non_torch = vllm_memory.NON_TORCH_GIB[1][1]
    assert p.estimate == int((72 - 16 - non_torch) * memory.GIB / (128 * KIB * 16)) * 16
    assert p.low < p.estimate < p.high
    assert p.estimate % 16 == 0


def test_cuda_graph_memory_counts_from_0_20():
    args = dict(memory_bytes=80 * memory.GIB, utilization=0.9, weights_bytes=16 * memory.GIB,
                kv_bytes_per_token=128 * KIB, batched_tokens=2048, hidden=4096, intermediate=14336)
    before, after = vllm_memory.pool(version="0.19.1", **args), vllm_memory.pool(version="0.20.0", **args)
    assert after.estimate < before.estimate
    eager = vllm_memory.pool(version="0.20.0", cuda_graphs=False, **args)
    assert eager.estimate == before.estimate


def test_startup_check_prints_vllms_message_when_one_request_cannot_fit():
    p = vllm_memory.Pool(1000, 2000, 3000, 128 * KIB, 72 * memory.GIB, 16 * memory.GIB, (), ())
    ok, message = vllm_memory.startup_check(131072, p, "0.33.0")
    assert ok is False
    assert "max seq len (131072)" in message and "estimated maximum model length is 2000" in message
    assert vllm_memory.startup_check(2500, p, "0.33.0") == (None, None)  # the range straddles it
    assert vllm_memory.startup_check(500, p, "0.33.0") == (True, None)


def test_batched_tokens_default_by_gpu_tier():
    h100 = 79.2 * memory.GIB
    assert vllm_memory.batched_tokens_default("0.10.0", h100, "H100-SXM-80GB", 8192, None)[0] == 8192
    assert vllm_memory.batched_tokens_default("0.10.0", h100, "A100-SXM-80GB", 8192, None)[0] == 2048
    assert vllm_memory.batched_tokens_default("0.6.3", 24 * memory.GIB, "RTX-3090", 20000, None)[0] == 20000


def test_weights_that_exceed_the_budget_are_named_as_the_cause():
    p = vllm_memory.Pool(0, 0, 0, 320 * KIB, 71 * memory.GIB, 131 * memory.GIB, (), ())
    ok, message = vllm_memory.startup_check(131072, p, "0.11.0")
    assert ok is False and message.startswith("the weights alone (131.00 GiB per rank) exceed")


def test_sliding_window_layers_are_checked_by_their_window_from_the_hybrid_manager_on():
    from sits_doctor.capacity import predict_vllm

    d = catalog("openai/gpt-oss-120b")  # 18 full + 18 sliding (window 128) layers, 8 KV heads of 64
    full = 2 * 8 * 64 * 2 * 18
    # ~39 GiB for KV after ~61 GiB of weights: all 36 layers per token → ~573k tokens; the 18 full layers → ~1.1M
    args = dict(memory_bytes=112 * memory.GIB, utilization=0.9, max_model_len=800_000, kv_dtype="auto",
                max_num_batched_tokens=8192, max_num_seqs=16, cuda_graphs=False)
    old = predict_vllm(d, version="0.9.2", **args)
    new = predict_vllm(d, version="0.10.0", **args)
    assert old.startup_ok is False and "max seq len (800000)" in old.startup_reason
    assert new.startup_ok is True
    held = 128 - 1 + 8192
    assert any(f"{held} tokens (window 128 − 1 + 8192 batched)" in s for s in new.steps)
    # and when even the full layers cannot hold it, vLLM's estimate counts the window part once
    short = predict_vllm(d, version="0.10.0", **{**args, "max_model_len": 1_300_000})
    assert short.startup_ok is False
    have = short.tokens[1] * short.kv_bytes_per_token
    longest = int((have - held * full) // full)
    assert f"estimated maximum model length is {longest}." in short.startup_reason


@pytest.mark.parametrize(("quantization_config", "rate"), [
    ({"quant_method": "compressed-tensors",
      "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}, "targets": ["Linear"]}}}, 1.0),
    ({"quant_method": "compressed-tensors",
      "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int", "group_size": 128}}}}, 0.5 + 4 / 128),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, 0.5 + 1 / 16),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, 1.0),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, 0.5 + 4 / 128),  # int4 + an fp16 scale and zero per 128
    ({"quant_method": "awq", "bits": 4, "group_size": 128}, 0.5 + 4 / 128),
])
def test_weights_are_weighed_by_the_format_the_quantization_config_stores(quantization_config, rate):
    d = dims({**LLAMA_8B, "quantization_config": quantization_config})
    plain = dims(LLAMA_8B)
    value, _ = memory.weights_bytes(d)
    parts = plain.param_parts.value
    params = plain.params.value
    expected = (params - parts["embeddings"]) * rate + parts["embeddings"] * 2
    assert value.value == pytest.approx(expected)
    assert d.quantization.value == quantization_config["quant_method"]  # the method itself is kept as written


def test_mixed_precision_modelopt_weights_are_unknown_not_guessed():
    d = dims({**LLAMA_8B, "quantization_config": {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}})
    value, missing = memory.weights_bytes(d)
    assert value is None and "mixed-precision" in missing


def test_mxfp4_experts_are_weighed_in_the_padded_layout_vllm_stores():
    d = catalog("openai/gpt-oss-120b")  # experts 2880 × 2880: Marlin pads to 2944 (×128) × 3072 (×256)
    plain, _ = memory.weights_bytes(d)
    padded, _ = memory.weights_bytes(d, mxfp4_padding=(128, 256, "test layout"))
    experts = d.param_parts.value["experts"]
    rate = memory.BYTES_PER_PARAM["mxfp4"]
    assert padded.value - plain.value == pytest.approx(experts * rate * (2944 * 3072 / (2880 * 2880) - 1))
    assert "×1.0904 for test layout" in str(padded.prov)
    dense, _ = memory.weights_bytes(dims(LLAMA_8B), mxfp4_padding=(128, 256, "test layout"))
    assert dense.value == memory.weights_bytes(dims(LLAMA_8B))[0].value  # only mxfp4 experts are padded


def test_no_room_for_one_block_fails_whatever_the_length():
    from sits_doctor.capacity import predict_vllm

    pred = predict_vllm(catalog("openai/gpt-oss-120b"), version="0.10.1", memory_bytes=72 * memory.GIB,
                        utilization=0.9, max_model_len=None)
    assert pred.tokens[2] == 0 and pred.startup_ok is False
    assert pred.startup_reason.startswith("No available memory for the cache blocks")


def test_v0_chunks_prefill_of_long_context_models_by_itself():
    gpu = 24 * memory.GIB
    long_v0 = vllm_memory.batched_tokens_default("0.6.3", gpu, "RTX-4090", 131072, None)
    assert long_v0[0] == 2048 and "chunked prefill on by default above 32768" in long_v0[1]
    assert vllm_memory.batched_tokens_default("0.6.3", gpu, "RTX-4090", 32768, None)[0] == 32768  # not above 32K
    assert vllm_memory.batched_tokens_default("0.5.3", gpu, "RTX-4090", 131072, None)[0] == 131072  # before #6666
    assert vllm_memory.batched_tokens_default("0.6.3", gpu, "RTX-4090", 131072, False)[0] == 131072  # turned off


def test_weights_from_the_checkpoints_own_index_when_it_sits_beside_the_config(tmp_path):
    from sits_doctor.loaders import load_model_config
    from sits_doctor.loaders.hf import model_facts as facts_of

    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 16060522496}, "weight_map": {"lm_head.weight": "model-00004-of-00004.safetensors"}}))
    doc, sidecars, _ = load_model_config(tmp_path / "config.json")
    value, _ = memory.weights_bytes(model_dims(facts_of(doc, sidecars)))
    assert value.value == 16060522496 and "model.safetensors.index.json" in str(value.prov)
    (tmp_path / "model.safetensors.index.json").write_text("{not json")
    doc, sidecars, _ = load_model_config(tmp_path / "config.json")
    value, _ = memory.weights_bytes(model_dims(facts_of(doc, sidecars)))
    assert value.value == memory.weights_bytes(dims(LLAMA_8B))[0].value  # a broken index: computed from the shape


GEMMA3_TEXT_ONLY = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                    "text_config": {"model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504,
                                    "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
                                    "head_dim": 128, "sliding_window": 1024},
                    "torch_dtype": "bfloat16"}


def test_keys_a_config_leaves_out_take_transformers_class_defaults():
    # google/gemma-3-27b-it states no vocab_size, tie_word_embeddings or layer_types in text_config
    d = dims(GEMMA3_TEXT_ONLY)
    assert d.vocab.value == 262208 and d.vocab.prov.kind == "default"
    assert "model_type 'gemma3_text'" in str(d.vocab.prov)
    full = [i for i, t in enumerate(d.layer_types.value) if t == "full_attention"]
    assert full == list(range(5, 62, 6))  # every 6th layer full attention, the rest sliding
    assert abs(d.params.value - 27.0e9) / 27.0e9 < 0.01  # the published 27B (text model), embeddings tied
    value, _ = memory.kv_bytes_per_token(d, "auto")
    assert value.value == 2 * 16 * 128 * 2 * 10


def test_a_stated_key_wins_and_computed_defaults_are_not_taken():
    d = dims({**GEMMA3_TEXT_ONLY, "text_config": {**GEMMA3_TEXT_ONLY["text_config"], "vocab_size": 1000}})
    assert d.vocab.value == 1000 and d.vocab.prov.kind == "file"
    llama = dims({k: v for k, v in LLAMA_8B.items() if k != "num_key_value_heads"} | {"num_attention_heads": 40,
                                                                                     "hidden_size": 5120})
    assert llama.kv_heads.value == 40  # LlamaConfig copies num_attention_heads: never a fixed 32
    assert llama.head_dim.value == 128  # hidden_size / heads, not a stored default


def test_class_defaults_data_matches_the_installed_transformers():
    transformers = pytest.importorskip("transformers")
    import importlib.util
    from pathlib import Path

    data = json.loads((Path(memory.__file__).parent / "frameworks" / "data" / "hf_config_defaults.json").read_text())
    if transformers.__version__ != data["transformers"]:
        pytest.skip(f"data from transformers {data['transformers']}, installed {transformers.__version__}")
    spec = importlib.util.spec_from_file_location(
        "gen", Path(memory.__file__).parent.parent / "tools" / "gen_hf_config_defaults.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    from transformers import CONFIG_MAPPING

    for model_type in ("gemma3_text", "llama", "qwen2", "gpt_oss", "mistral"):
        assert gen.constants(CONFIG_MAPPING[model_type]) == data["models"][model_type], model_type


def test_a_vision_encoder_counts_and_stays_in_16_bits_when_the_text_model_is_quantized():
    vlm = {**GEMMA3_TEXT_ONLY, "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152,
                                                 "num_hidden_layers": 27, "intermediate_size": 4304}}
    d = dims(vlm)
    vision = 27 * (4 * 1152 * 1152 + 2 * 1152 * 4304)
    assert d.params.value == dims(GEMMA3_TEXT_ONLY).params.value + vision
    assert abs(d.params.value - 27.4e9) / 27.4e9 < 0.01  # google/gemma-3-27b-it's published size
    fp8 = dims({**vlm, "quantization_config": {"quant_method": "fp8"}})
    parts = fp8.param_parts.value
    value, _ = memory.weights_bytes(fp8)
    quantized = fp8.params.value - parts["embeddings"] - parts["vision"]
    assert value.value == pytest.approx(quantized * 1.0 + (parts["embeddings"] + parts["vision"]) * 2)


@pytest.mark.parametrize(("name", "size"), [("half", 2), ("fp16", 2), ("bf16", 2), ("float16", 2), ("fp8_e5m2", 1),
                                            ("fp8_e4m3", 1), ("int8", 1), ("float32", 4), ("fp8_per_token_head", 1),
                                            ("fp32", 4), ("float", 4), ("fp8", 1), ("fp8_inc", 1),
                                            ("int8_per_token_head", 1)])
def test_kv_dtype_spellings_and_their_bytes(name, size):
    assert memory.dtype_bytes(name) == size


def test_a_shape_without_layers_is_missing_not_guessed():
    value, missing = memory.kv_bytes_per_token(dims({k: v for k, v in LLAMA_8B.items() if k != "num_hidden_layers"}
                                                    | {"model_type": "unknown_arch"}), "auto")
    assert value is None and missing == "num_hidden_layers"


def test_one_pipeline_stage_is_not_mentioned_and_mla_without_a_rope_part_counts_the_latent_alone():
    one, _ = memory.kv_bytes_per_token(dims(LLAMA_8B), "auto", pp=1)
    assert "pipeline" not in str(one.prov)
    latent = {**LLAMA_8B, "model_type": "an_mla_model", "kv_lora_rank": 512, "qk_nope_head_dim": 128, "v_head_dim": 128}
    value, _ = memory.kv_bytes_per_token(dims(latent), "auto")
    assert value.value == 512 * 2 * 32


def test_shapes_that_cannot_be_sized_say_what_is_missing():
    assert memory.dtype_bytes(None) is None
    assert memory.kv_bytes_per_token(None, "auto") == (None, "the model config")
    assert memory.weights_bytes(None) == (None, "the model config")
    fp32_kv, _ = memory.kv_bytes_per_token(dims({**LLAMA_8B, "torch_dtype": "float32"}), "auto")
    assert fp32_kv.value == 2 * 8 * 128 * 2 * 32  # vLLM serves an fp32 checkpoint in fp16 (dtype auto)
    assert memory.layers_per_rank(32, 0) == 32  # no pipeline stages given: one
    mla = dims({**LLAMA_8B, "model_type": "an_mla_model", "kv_lora_rank": 512, "qk_rope_head_dim": 64})
    assert memory.kv_bytes_per_token(mla, "turboquant_3bit") == (None, "the KV dtype (turboquant_3bit)")
    headless = {k: v for k, v in LLAMA_8B.items() if k not in ("num_attention_heads", "num_key_value_heads")}
    assert memory.kv_bytes_per_token(dims(headless | {"model_type": "unknown_arch"}), "auto") == (
        None, "num_key_value_heads / head_dim")


# --- Llama 4: chunked-attention layers hold a chunk per request --------------------------------

LLAMA4_SCOUT_TEXT = {  # the text config of meta-llama/Llama-4-Scout-17B-16E-Instruct (public config.json)
    "model_type": "llama4_text", "attention_chunk_size": 8192, "head_dim": 128, "hidden_size": 5120,
    "intermediate_size": 8192, "intermediate_size_mlp": 16384, "max_position_embeddings": 10485760,
    "num_attention_heads": 40, "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 16,
    "num_experts_per_tok": 1, "vocab_size": 202048, "torch_dtype": "bfloat16", "no_rope_layers": [1, 1, 1, 0] * 12,
}


def _scout_dims(tmp_path):
    import json

    from sits_doctor.frameworks import transformers as tf
    from sits_doctor.loaders import load_model_config
    from sits_doctor.loaders.hf import model_facts

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
                                "text_config": LLAMA4_SCOUT_TEXT}))
    doc, sidecars, _ = load_model_config(path)
    return tf.model_dims(model_facts(doc, sidecars))


def test_llama4_chunked_layers_are_not_counted_per_token(tmp_path):
    dims = _scout_dims(tmp_path)
    assert dims.layer_types.value.count("chunked_attention") == 36 and dims.attention_chunk.value == 8192
    full, _ = memory.kv_bytes_per_token(dims, "auto")
    every, _ = memory.kv_bytes_per_token(dims, "auto", sliding_per_token=True)
    per_layer = 2 * 8 * 128 * 2  # K and V, 8 KV heads, head_dim 128, bf16
    assert (full.value, every.value) == (12 * per_layer, 48 * per_layer)
    assert "36 chunked-attention layers (chunk 8192)" in str(full.prov)


def test_llama4_requests_at_once_count_a_chunk_on_the_chunked_layers(tmp_path):
    """vLLM >= 0.10 keeps chunk + one step's tokens per request on the 36 chunked layers
    (ChunkedLocalAttentionSpec): at 1310720 tokens a request needs about a quarter of what 48
    full layers would, so about four times as many fit."""
    from sits_doctor.capacity import predict_vllm

    dims = _scout_dims(tmp_path)
    kw = dict(memory_bytes=80e9, gpu_name="H100", utilization=0.9, tp=8, max_model_len=1310720,
              max_num_batched_tokens=8192)
    new = predict_vllm(dims, version="0.10.0", **kw)
    per_layer_rank = 2 * 1 * 128 * 2  # one KV head per rank at TP 8
    need = 1310720 * 12 * per_layer_rank + (8192 + 8192) * 36 * per_layer_rank
    pool = new.tokens[1] * new.kv_bytes_per_token
    assert new.max_concurrency == pytest.approx(pool / need, rel=1e-9)
    old = predict_vllm(dims, version="0.9.2", **kw)  # before the hybrid allocator: every layer per token
    assert old.max_concurrency == pytest.approx(old.tokens[1] / 1310720)
    assert new.max_concurrency > 3.5 * old.max_concurrency
