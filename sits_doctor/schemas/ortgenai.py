"""A JSON Schema of what ORT GenAI's strict ``genai_config.json`` parser accepts.

Built from the element classes of microsoft/onnxruntime-genai ``src/config.cpp`` @00a26d59
(newest stored version; parser semantics from ``src/json.h``), with behaviour reproduced on the
0.18.0 wheel (shared/research/trtllm-ortgenai-facts.md §5):

- every section rejects unknown keys (``JSON Error: model:decoder: Unknown value "x"``);
- at the top level, unknown *objects and arrays* are errors but unknown *scalars* are ignored;
- ``session_options`` passes unknown keys to ORT's ``AddConfigEntry`` if their value is a string;
- provider options (``provider_options: [{"cuda": {...}}]``) take string values only;
- integers must be integral numbers, booleans JSON booleans, ``null`` is a type error.

Keys are the newest parser's (main, which knows a few keys 0.18.0 does not). ``schema_for(release)``
narrows it to what one release's wheel accepted: the keys it answered ``Unknown value`` to are
dropped (sits_doctor/frameworks/data/ortgenai_keys.json), unknown string session options are
rejected before the release that passes them to ONNX Runtime, integers take fractions in the
releases that read 4096.5 as 4096, and an unknown top-level boolean is an error where the release
did not ignore it (all from ortgenai_probes.json). ``schema_errors(doc, version)``
judges a config by the release a target version maps to (frameworks/ortgenai_releases.py).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

S: dict = {"type": "string"}
I: dict = {"type": "integer"}
N: dict = {"type": "number"}
B: dict = {"type": "boolean"}
INTS: dict = {"type": "array", "items": I}
STRS: dict = {"type": "array", "items": S}


def obj(props: dict[str, Any], extra: Any = False) -> dict:
    return {"type": "object", "properties": props, "additionalProperties": extra}


def strings(keys: str) -> dict:
    return obj({k: S for k in keys.split()})


SESSION_OPTIONS = obj(
    {
        "log_id": S, "enable_profiling": S, "custom_ops_library": S,
        "intra_op_num_threads": I, "inter_op_num_threads": I,
        "log_severity_level": I, "log_verbosity_level": I,
        "enable_cpu_mem_arena": B, "enable_mem_pattern": B,
        "graph_optimization_level": {
            "enum": ["ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL"]
        },
        "provider_options": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": obj(
                    {"device_filtering_options": obj(
                        {"hardware_device_type": S, "hardware_device_id": N, "hardware_vendor_id": N}
                    )},
                    extra=S,
                ),
            },
        },
    },
    extra=S,  # passed through to ORT AddConfigEntry unchecked
)
# Keys that session_options knows by name (the rest is passed through unchecked).
SESSION_OPTION_KEYS = frozenset(SESSION_OPTIONS["properties"])
RUN_OPTIONS = {"type": "object", "additionalProperties": S}
SHARED_INITIALIZERS = {
    "type": "array",
    "items": obj({"name": S, "data_file": S, "offset": S, "length": S, "data_type": I, "shape": INTS}),
}
COMMON = {"filename": S, "session_options": SESSION_OPTIONS, "run_options": RUN_OPTIONS}

PIPELINE_MODEL = obj(
    {
        "filename": S, "run_on_prompt": B, "run_on_token_gen": B, "is_lm_head": B,
        "inherit_session_options": B, "reset_session_idx": I,
        "session_options": SESSION_OPTIONS, "run_options": RUN_OPTIONS,
        "output_names_forwarder": {"type": "object", "additionalProperties": S},
        "inputs": STRS, "outputs": STRS,
    }
)
PIPELINE = {
    "type": ["array", "object"],
    "items": {"type": "object", "additionalProperties": PIPELINE_MODEL},
    "additionalProperties": PIPELINE_MODEL,
}
DECODER = obj(
    {
        **COMMON,
        "hidden_size": I, "num_attention_heads": I, "num_hidden_layers": I,
        "num_key_value_heads": I, "head_size": I, "state_update_capacity": I,
        "conv_cache_size": I, "ple_token_pad_id": N,
        "inputs": strings(
            """input_ids inputs_embeds attention_mask position_ids past_key_names past_value_names
            past_key_scale_names past_value_scale_names past_names cross_past_key_names
            cross_past_value_names past_sequence_length current_sequence_length
            total_sequence_length encoder_hidden_states encoder_attention_mask rnn_states_prev
            past_key_values_length cache_indirection cumulative_sequence_lengths
            past_sequence_lengths block_table block_table_windowed attention_metadata
            past_conv_names past_recurrent_names past_ple_token_names past_ple_conv_names
            past_indexer_names state_update_capture_count state_update_active hidden_states
            targets lstm_hidden_state lstm_cell_state per_layer_inputs targets_length"""
        ),
        "outputs": strings(
            """logits present_key_names present_value_names present_key_scale_names
            present_value_scale_names present_names output_cross_qk_names rnn_states
            present_conv_names present_recurrent_names present_ple_token_names
            present_ple_conv_names present_indexer_names state_update_conv_value_names
            state_update_recurrent_capsule_names hidden_states aux_hidden_states outputs
            lstm_hidden_state lstm_cell_state outputs_length"""
        ),
        "sliding_window": obj(
            {"window_size": I, "pad_value": I, "alignment": S, "slide_key_value_cache": B,
             "slide_inputs": B, "cache_slack": I, "layers": INTS}
        ),
        "pipeline": PIPELINE,
        "layer_types": STRS,
        "shared_initializers": SHARED_INITIALIZERS,
        "state_groups": {
            "type": "array",
            "items": obj({"kind": S, "layer_ids": INTS, "state_update": {"type": "object"}, "bindings": {}}),
        },
    }
)
ENCODER = obj(
    {
        **COMMON, "hidden_size": I, "num_attention_heads": I, "num_hidden_layers": I,
        "num_key_value_heads": I, "head_size": I,
        "inputs": strings(
            """input_ids inputs_embeds attention_mask position_ids audio_features input_lengths
            cache_last_channel cache_last_time cache_last_channel_len lang_id"""
        ),
        "outputs": strings(
            """encoder_hidden_states encoder_outputs output_lengths cache_last_channel_next
            cache_last_time_next cache_last_channel_len_next cross_present_key_names
            cross_present_value_names"""
        ),
    }
)
EMBEDDING = obj({**COMMON, "inputs": strings("input_ids image_features audio_features"),
                 "outputs": strings("inputs_embeds per_layer_inputs")})
VISION = obj(
    {
        **COMMON, "config_filename": S, "adapter_filename": S, "spatial_merge_size": I,
        "patch_size": I, "num_visual_tokens": I, "window_size": I, "num_position_embeddings": I,
        "tokens_per_second": N,
        "inputs": strings(
            """pixel_values pixel_position_ids image_sizes image_grid_thw attention_mask
            pos_embed_indices pos_embed_weights vision_cos vision_sin vision_attention_bias"""
        ),
        "outputs": strings("image_features"),
        "pipeline": {
            "type": ["array", "object"],
            "items": {"type": "object", "additionalProperties": obj(
                {"filename": S, "run_on_cpu": B, "session_options": SESSION_OPTIONS,
                 "run_options": RUN_OPTIONS, "inputs": STRS, "outputs": STRS})},
            "additionalProperties": {"type": "object"},
        },
    }
)
SPEECH = obj({**COMMON, "config_filename": S, "adapter_filename": S,
              "inputs": strings("audio_embeds attention_mask audio_sizes audio_projection_mode"),
              "outputs": strings("audio_features")})
JOINER = obj({**COMMON, "inputs": strings("encoder_outputs decoder_outputs"), "outputs": strings("logits")})
VAD = obj({**COMMON, "threshold": N, "silence_duration_ms": I, "prefix_padding_ms": I})
MTP = obj(
    {
        **COMMON, "num_hidden_layers": I, "num_key_value_heads": I, "head_size": I, "main_hidden_states": S,
        "inputs": strings("input_ids hidden_states attention_mask position_ids past_key_names past_value_names"),
        "outputs": strings("logits hidden_states present_key_names present_value_names"),
        "shared_initializers": SHARED_INITIALIZERS,
    }
)
DFLASH = obj(
    {
        **COMMON, "num_hidden_layers": I, "num_key_value_heads": I, "head_size": I, "block_size": I,
        "num_draft_tokens": I, "selector_top_k": I, "mask_token_id": I, "sliding_window": I,
        "main_aux_hidden_states": S,
        "inputs": strings(
            """aux_hidden_states input_ids q_row_map qkv_row_map block_row_index past_key_scale_names
            past_value_scale_names cumulative_sequence_lengths past_sequence_lengths block_table
            attention_metadata past_key_names past_value_names"""
        ),
        "outputs": strings(
            """candidate_ids scores present_key_scale_names present_value_scale_names
            present_key_names present_value_names"""
        ),
        "shared_initializers": SHARED_INITIALIZERS, "aux_hidden_state_layers": INTS,
    }
)
_MODEL_INTS = """vocab_size context_length pad_token_id bos_token_id decoder_start_token_id sep_token_id
    image_token_id audio_token_id boa_token_id video_token_id vision_start_token_id bot_token_id
    eot_token_id bor_token_id eor_token_id num_mels fft_size hop_length win_length
    subsampling_factor left_context conv_context pre_encode_cache_size sample_rate chunk_samples
    blank_id max_symbols_per_step left_context_samples right_context_samples"""
MODEL = obj(
    {
        "type": S, "tokenizer_dir": S,
        **{k: I for k in _MODEL_INTS.split()},
        "preemph": N, "log_eps": N, "norm_eps": N,
        "eos_token_id": {"type": ["integer", "array"], "items": I},
        "tdt_durations": INTS,
        "decoder": DECODER, "draft": DECODER, "encoder": ENCODER, "embedding": EMBEDDING,
        "vision": VISION, "speech": SPEECH, "joiner": JOINER, "vad": VAD, "mtp": MTP,
        "dflash2": DFLASH, "dspark": DFLASH,
    }
)
SEARCH = obj(
    {
        **{k: I for k in """min_length max_length batch_size num_beams num_return_sequences top_k
            no_repeat_ngram_size random_seed""".split()},
        **{k: N for k in """top_p temperature repetition_penalty length_penalty diversity_penalty
            blank_penalty chunk_size""".split()},
        **{k: B for k in "do_sample past_present_share_buffer early_stopping".split()},
    }
)
SPECULATIVE = obj({"max_draft_tokens": I, "ngram_size": I, "ngram_chained_lookup": B, "min_adaptive_k": I, "cooldown": B})
ENGINE = obj(
    {
        "dynamic_batching": obj({"block_size": I, "num_blocks": I, "gpu_utilization_factor": N,
                                 "max_batch_size": I, "max_scheduled_tokens": I}),
        "static_batching": obj({"max_batch_size": I}),
    }
)
# Every tested wheel (0.5.2 … 0.18.0) refuses a config without a positive context_length at
# Config(): "model context_length is 0 or was not set" (0.15+: "context_length must be > 0").
MODEL["required"] = ["context_length"]
MODEL["properties"]["context_length"] = {"type": "integer", "minimum": 1}
ROOT = obj(
    {"model": MODEL, "search": SEARCH, "speculative": SPECULATIVE, "engine": ENGINE},
    # unknown top-level objects and arrays are errors; unknown scalars are silently ignored
    extra={"not": {"type": ["object", "array"]}},
)


def schema_errors(doc, version: str | None = None) -> list:
    """The schema's errors for a genai_config document at a release (None: the newest schema), computed
    once per document and release."""
    release = None
    if version is not None:
        from sits_doctor.frameworks.ortgenai_releases import judged_as

        release = judged_as(version).release
    key = f"ortgenai-schema-errors@{release}"
    if key not in doc.derived:
        doc.derived[key] = list(validator(release).iter_errors(doc.data))
    return doc.derived[key]


def schema_for(release: str) -> dict:
    """The newest schema less what ``release``'s parser does not know (its own wheel's answers,
    sits_doctor/frameworks/data/ortgenai_keys.json): keys it calls unknown values, and, before
    unknown string session options were passed to ONNX Runtime, those too."""
    from sits_doctor.frameworks.ortgenai_releases import (ignores_top_level_booleans, passes_unknown_session_options,
                                                           reads_fractions_as_integers, unknown_keys)

    root = json.loads(json.dumps(ROOT))  # every section its own copy (ROOT shares SESSION_OPTIONS)
    for dotted in sorted(unknown_keys(release), key=len, reverse=True):
        *parents, name = dotted.split(".")
        node = root
        for part in parents:
            node = node.get("properties", {}).get(part, {})
        node.get("properties", {}).pop(name, None)
        if name in node.get("required", ()):
            node["required"] = [r for r in node["required"] if r != name]
    if not passes_unknown_session_options(release):
        for section in _sections(root):
            if "provider_options" in section.get("properties", {}):
                section["additionalProperties"] = False
    if reads_fractions_as_integers(release):
        _integers_as_numbers(root)
    if not ignores_top_level_booleans(release):
        root["additionalProperties"] = {"not": {"type": ["object", "array", "boolean"]}}
    return root


def _integers_as_numbers(node) -> None:
    """Let every integer field take any number (releases that read 4096.5 as 4096)."""
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "integer":
            node["type"] = "number"
        elif isinstance(kind, list) and "integer" in kind:
            node["type"] = ["number" if k == "integer" else k for k in kind]
        for value in node.values():
            _integers_as_numbers(value)
    elif isinstance(node, list):
        for value in node:
            _integers_as_numbers(value)


def _sections(schema: dict):
    """Every object schema reachable through named properties."""
    yield schema
    for sub in schema.get("properties", {}).values():
        if isinstance(sub, dict):
            yield from _sections(sub)


@lru_cache(maxsize=None)
def validator(release: str | None = None):
    from jsonschema import Draft7Validator

    root = ROOT if release is None else schema_for(release)
    return Draft7Validator({"$schema": "http://json-schema.org/draft-07/schema#", **root})
