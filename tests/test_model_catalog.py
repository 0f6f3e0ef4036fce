"""The bundled model catalog (sits_doctor/catalogs/models.json and its loader)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import jsonschema
import pytest

from sits_doctor.catalogs import models as catalog

CONFIG_KEYS = [
    "architectures", "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size", "max_position_embeddings",
    "torch_dtype", "dtype", "tie_word_embeddings", "rope_scaling", "sliding_window", "use_sliding_window",
    "max_window_layers", "layer_types", "attention_chunk_size", "attention_bias",
    "num_local_experts", "num_experts", "n_routed_experts", "n_shared_experts", "moe_intermediate_size",
    "shared_expert_intermediate_size", "shared_intermediate_size", "intermediate_size_mlp",
    "num_experts_per_tok", "experts_per_token", "first_k_dense_replace", "moe_layer_freq",
    "decoder_sparse_step", "mlp_only_layers", "interleave_moe_layer_step",
    "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
    "num_nextn_predict_layers", "use_mtp", "num_mtp_modules", "mtp_transformer_layers",
    "quantization_config",
]
POS_INT = {"type": "integer", "minimum": 1}
NONNEG_INT = {"type": "integer", "minimum": 0}
_TYPES = {
    "architectures": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    "model_type": {"type": "string", "minLength": 1},
    "hidden_size": POS_INT, "num_hidden_layers": POS_INT, "num_attention_heads": POS_INT,
    "num_key_value_heads": POS_INT, "head_dim": POS_INT, "intermediate_size": POS_INT, "vocab_size": POS_INT,
    "max_position_embeddings": POS_INT, "torch_dtype": {"type": "string"}, "dtype": {"type": "string"},
    "tie_word_embeddings": {"type": "boolean"}, "rope_scaling": {"type": ["object", "null"]},
    "sliding_window": {"type": ["integer", "null"]}, "use_sliding_window": {"type": "boolean"},
    "max_window_layers": NONNEG_INT,
    "layer_types": {"type": "array", "items": {"type": "string"}},
    "num_local_experts": POS_INT, "num_experts": POS_INT, "n_routed_experts": POS_INT,
    "n_shared_experts": NONNEG_INT, "moe_intermediate_size": POS_INT, "num_experts_per_tok": POS_INT,
    "experts_per_token": POS_INT, "first_k_dense_replace": NONNEG_INT,
    "kv_lora_rank": POS_INT, "q_lora_rank": {"type": ["integer", "null"]},
    "qk_rope_head_dim": POS_INT, "qk_nope_head_dim": POS_INT, "v_head_dim": POS_INT,
    "num_nextn_predict_layers": NONNEG_INT,
    "quantization_config": {"type": "object", "required": ["quant_method"]},
}
CONFIG = {
    "type": "object",
    "properties": {k: _TYPES.get(k, {}) for k in CONFIG_KEYS},
    "additionalProperties": False,
}
CONFIG_WITH_NESTED = {
    **CONFIG,
    "properties": {
        **CONFIG["properties"],
        "text_config": {**CONFIG, "required": ["hidden_size", "num_hidden_layers", "num_attention_heads"]},
        "vision_config": {"type": "object"},
    },
    "required": ["architectures", "model_type"],
    "anyOf": [
        {"required": ["hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"]},
        {"required": ["text_config"]},
    ],
}
SCHEMA = {
    "type": "object",
    "required": ["about", "version", "models"],
    "additionalProperties": False,
    "properties": {
        "about": {"type": "string"},
        "version": {"const": 1},
        "models": {
            "type": "object",
            "minProperties": 35,
            "propertyNames": {"pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$"},
            "additionalProperties": {
                "type": "object",
                "required": ["config", "parameters", "sources"],
                "additionalProperties": False,
                "properties": {
                    "config": CONFIG_WITH_NESTED,
                    "parameters": {
                        "type": "object",
                        "required": ["total", "stated", "nominal", "source"],
                        "additionalProperties": False,
                        "properties": {
                            "total": {"type": "integer", "minimum": 100_000_000},
                            "active": {"type": "integer", "minimum": 100_000_000},
                            "stated": {"type": "string", "minLength": 1},
                            "nominal": {"type": "boolean"},
                            "source": {"type": "string", "minLength": 10},
                        },
                    },
                    "sources": {"type": "array", "minItems": 2, "items": {"type": "string", "minLength": 10}},
                    "notes": {"type": "string"},
                },
            },
        },
    },
}


def _pairs_no_duplicates(pairs):
    seen: dict[str, str] = {}
    for key, _ in pairs:
        assert key.lower() not in seen, f"duplicate key {key!r} (also {seen[key.lower()]!r})"
        seen[key.lower()] = key
    return dict(pairs)


@pytest.fixture(scope="module")
def data():
    return json.loads(catalog.DATA.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def entries(data):
    return data["models"]


def test_schema(data):
    jsonschema.validate(data, SCHEMA)


def test_ids_unique_case_insensitively():
    # json.loads keeps the last of duplicate keys; catch duplicates (in any case) at every level.
    json.loads(catalog.DATA.read_text(encoding="utf-8"), object_pairs_hook=_pairs_no_duplicates)


def test_every_entry_names_its_hub_page_and_where_it_was_read(entries):
    commit = re.compile(r"[0-9a-f]{40}")
    for hub_id, entry in entries.items():
        sources = entry["sources"]
        assert sources[0] == f"https://huggingface.co/{hub_id}/blob/main/config.json", hub_id
        read = [s for s in sources[1:] if s.startswith("read from ")]
        assert read, f"{hub_id}: no 'read from' source"
        for s in read:
            # a repository at a commit, or a stored copy of a Hugging Face page
            assert commit.search(s) or "https://huggingface.co/" in s, (hub_id, s)
        assert entry["parameters"]["source"].strip(), hub_id


def test_parameter_figures(entries):
    for hub_id, entry in entries.items():
        p = entry["parameters"]
        if "active" in p:
            assert p["active"] < p["total"], hub_id
        moe = _is_moe(entry["config"])
        assert ("active" in p) == moe, f"{hub_id}: 'active' is for MoE models only, and every MoE model has it"


def test_requested_families_are_present():
    ids = set(catalog.known_ids())
    for hub_id in (
        "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-70b-hf",
        "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Meta-Llama-3.1-405B",
        "meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.2-3B-Instruct", "meta-llama/Llama-3.3-70B-Instruct",
        "meta-llama/Llama-4-Scout-17B-16E-Instruct", "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
        "mistralai/Mistral-7B-Instruct-v0.3", "mistralai/Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x22B-v0.1",
        "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-72B-Instruct", "Qwen/Qwen3-8B", "Qwen/Qwen3-30B-A3B",
        "Qwen/Qwen3-235B-A22B", "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1",
        "deepseek-ai/DeepSeek-V2-Lite", "openai/gpt-oss-20b", "openai/gpt-oss-120b",
        "moonshotai/Kimi-K2-Instruct", "microsoft/phi-4",
    ):
        assert hub_id in ids, hub_id


# Spot checks against the values read from the sources; a transcription slip fails here.
@pytest.mark.parametrize("hub_id, path, expected", [
    ("meta-llama/Llama-3.1-70B-Instruct", "num_hidden_layers", 80),
    ("meta-llama/Llama-3.1-70B-Instruct", "num_key_value_heads", 8),
    ("meta-llama/Llama-3.1-70B-Instruct", "intermediate_size", 28672),
    ("meta-llama/Llama-3.1-8B-Instruct", "max_position_embeddings", 131072),
    ("meta-llama/Llama-2-7b-hf", "num_key_value_heads", 32),
    ("meta-llama/Llama-2-70b-hf", "num_key_value_heads", 8),
    ("meta-llama/Llama-3.2-1B-Instruct", "tie_word_embeddings", True),
    ("meta-llama/Llama-3.2-3B-Instruct", "head_dim", 128),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "text_config.num_local_experts", 16),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "text_config.num_local_experts", 128),
    ("deepseek-ai/DeepSeek-V3", "kv_lora_rank", 512),
    ("deepseek-ai/DeepSeek-V3", "q_lora_rank", 1536),
    ("deepseek-ai/DeepSeek-V3", "n_routed_experts", 256),
    ("deepseek-ai/DeepSeek-V3", "num_hidden_layers", 61),
    ("deepseek-ai/DeepSeek-V2-Lite", "q_lora_rank", None),
    ("moonshotai/Kimi-K2-Instruct", "n_routed_experts", 384),
    ("mistralai/Mixtral-8x7B-v0.1", "num_local_experts", 8),
    ("mistralai/Mixtral-8x7B-v0.1", "num_experts_per_tok", 2),
    ("mistralai/Mixtral-8x22B-v0.1", "num_hidden_layers", 56),
    ("Qwen/Qwen3-235B-A22B", "num_hidden_layers", 94),
    ("Qwen/Qwen3-235B-A22B", "num_experts", 128),
    ("Qwen/Qwen3-30B-A3B", "num_key_value_heads", 4),
    ("Qwen/Qwen3-32B-FP8", "quantization_config.quant_method", "fp8"),
    ("openai/gpt-oss-120b", "quantization_config.quant_method", "mxfp4"),
    ("openai/gpt-oss-120b", "num_hidden_layers", 36),
    ("openai/gpt-oss-20b", "sliding_window", 128),
    ("google/gemma-2-9b-it", "head_dim", 256),
    ("microsoft/phi-4", "num_key_value_heads", 10),
])
def test_spot_values(hub_id, path, expected):
    value = catalog.lookup(hub_id).config
    for part in path.split("."):
        value = value[part]
    assert value == expected


def test_gpt_oss_layer_types_cover_every_layer(entries):
    for hub_id in ("openai/gpt-oss-20b", "openai/gpt-oss-120b"):
        config = entries[hub_id]["config"]
        assert len(config["layer_types"]) == config["num_hidden_layers"]
        assert set(config["layer_types"]) == {"sliding_attention", "full_attention"}


def _is_moe(config: dict) -> bool:
    text = config.get("text_config", config)
    return any(k in text for k in ("num_local_experts", "num_experts", "n_routed_experts"))


def _dense_params(config: dict) -> int:
    """Embeddings + layers x (attention + gated MLP + two norms) + final norm + lm_head unless tied."""
    h, layers = config["hidden_size"], config["num_hidden_layers"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads)
    hd = config.get("head_dim") or h // heads
    attn = h * heads * hd * 2 + h * kv * hd * 2  # q, o and k, v projections
    if config["model_type"] == "qwen2":
        attn += heads * hd + 2 * kv * hd  # q/k/v biases
    if config["model_type"] == "qwen3":
        attn += 2 * hd  # q/k norms
    mlp = 3 * h * config["intermediate_size"]
    embeddings = config["vocab_size"] * h
    lm_head = 0 if config.get("tie_word_embeddings") else embeddings
    return embeddings + layers * (attn + mlp + 2 * h) + h + lm_head


def _cross_checked(entries):
    """Dense Llama-family entries (llama, mistral), and dense entries of any family whose figure is a
    count rather than a size label (Qwen's labels are rounded by up to 9%, so those are not)."""
    for hub_id, entry in entries.items():
        config = entry["config"]
        if _is_moe(config) or "text_config" in config or config["model_type"] == "gemma2":
            continue
        if config["model_type"] in ("llama", "mistral") or not entry["parameters"]["nominal"]:
            yield hub_id, entry


def test_dense_parameter_counts_match_the_dimensions(entries):
    checked = list(_cross_checked(entries))
    assert len(checked) >= 12
    for hub_id, entry in checked:
        computed = _dense_params(entry["config"])
        recorded = entry["parameters"]["total"]
        assert abs(computed - recorded) <= 0.02 * recorded, (hub_id, computed, recorded)


def test_cross_check_catches_a_wrong_dimension(entries):
    config = dict(entries["meta-llama/Llama-3.1-70B-Instruct"]["config"], num_hidden_layers=64)
    recorded = entries["meta-llama/Llama-3.1-70B-Instruct"]["parameters"]["total"]
    assert abs(_dense_params(config) - recorded) > 0.02 * recorded


def test_the_config_json_reader_takes_every_entry(entries):
    from sits_doctor.frameworks.transformers import model_dims
    from sits_doctor.loaders.hf import is_model_config, text_pointer
    from sits_doctor.plan import ModelFacts

    for hub_id in entries:
        config = catalog.lookup(hub_id).config
        assert is_model_config(config), hub_id
        facts = ModelFacts(path=f"catalog:{hub_id}", data=config, text_pointer=text_pointer(config))
        dims = model_dims(facts)
        text = config.get("text_config", config)
        assert dims.layers.value == text["num_hidden_layers"], hub_id
        assert dims.hidden.value == text["hidden_size"], hub_id
        if "quantization_config" in config:
            assert dims.quantization.value == config["quantization_config"]["quant_method"], hub_id


def test_lookup_is_exact_and_case_insensitive():
    hit = catalog.lookup("meta-llama/llama-3.1-70b-instruct")
    assert hit is not None and hit.hub_id == "meta-llama/Llama-3.1-70B-Instruct"
    assert hit.hub_url == "https://huggingface.co/meta-llama/Llama-3.1-70B-Instruct/blob/main/config.json"
    assert hit.total_parameters == hit.parameters["total"]
    assert hit.active_parameters is None
    assert catalog.lookup("DEEPSEEK-AI/DEEPSEEK-V3").active_parameters == 37_000_000_000
    for miss in ("meta-llama/Llama-3.1-70B-Instruct@main", "Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B",
                 " meta-llama/Llama-3.1-70B-Instruct", "", "nobody/nothing"):
        assert catalog.lookup(miss) is None, miss
    assert catalog.lookup(None) is None  # type: ignore[arg-type]


def test_lookup_returns_a_copy():
    first = catalog.lookup("deepseek-ai/DeepSeek-V3")
    first.config["num_hidden_layers"] = 1
    first.config["rope_scaling"]["factor"] = -1
    again = catalog.lookup("deepseek-ai/DeepSeek-V3")
    assert again.config["num_hidden_layers"] == 61
    assert again.config["rope_scaling"]["factor"] != -1


def test_known_ids(entries):
    ids = catalog.known_ids()
    assert sorted(ids) == sorted(entries)
    assert ids == sorted(ids, key=str.lower)
    assert all(catalog.lookup(i).hub_id == i for i in ids)


def test_import_is_light():
    code = (
        "import sys; import sits_doctor.catalogs.models as m; "
        "assert m._data.cache_info().currsize == 0, 'data read at import'; "
        "assert 'pydantic' not in sys.modules, 'pydantic imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
