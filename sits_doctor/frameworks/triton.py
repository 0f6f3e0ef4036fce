"""What the Triton Inference Server TensorRT-LLM backend (``backend: "tensorrtllm"``) reads from a
model's ``config.pbtxt``: the ``parameters`` keys, how each string is converted, and the default
used when a key is missing or does not convert.

Every parameter is a string (``parameters { key: "k" value: { string_value: "v" } }``); the
backend converts it with ``std::stoi`` / ``std::stof`` / ``std::stoull`` or its own bool and
comma-list parsers (``ModelState::GetParameter<T>``), and nearly every read is wrapped in a
``try``/``catch`` that logs a warning and keeps the default. So a value that does not convert,
and a ``${...}`` placeholder that ``tools/fill_template.py`` left unfilled
(``string.Template.safe_substitute`` keeps unknown ``${name}`` as written), both mean "the
default" for most keys. The exceptions: ``gpt_model_type`` is read without a ``catch`` and must be
one of ``V1``/``v1``/``inflight_batching``/``inflight_fused_batching`` or the model fails to load
(:data:`REQUIRED`), and an engine path that does not exist is dropped, which fails the load when
no other engine path is left.

Sources (versions read):

- ``docs/model_config.md`` at tag v1.0.0 (efb8a497eac3e16acf6f3ad250565465c80e6f0a) of
  https://github.com/triton-inference-server/tensorrtllm_backend — the documented parameters
  (named there by their ``fill_template.py`` variable, e.g. ``batching_strategy`` and
  ``engine_dir``) and documented defaults.
- ``all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt``, ``tools/fill_template.py``,
  ``inflight_batcher_llm/src/model_state.cc`` and ``.../model_instance_state.cc`` at tag v0.18.0
  (86542b637bbccdd708ab892337c8ad3a95932131) of the same repository: the template (which variable
  fills which key) and the C++ that reads each key. v0.18.0 is the last tag with the backend's
  source in that repository; from v0.19 it lives in https://github.com/NVIDIA/TensorRT-LLM under
  ``triton_backend/``.
- ``triton_backend/inflight_batcher_llm/src/model_instance_state.cc`` at NVIDIA/TensorRT-LLM
  commit 0c8de69a1ca6213eebb20a51873890ff128666c2 (a later copy; not mapped to a release here):
  adds ``num_nodes``, ``lora_prefetch_dir``, ``lookahead_*``, the guided-decoding keys, reads
  ``enable_trt_overlap`` again, and changes the ``enable_kv_cache_reuse`` default to true.
- ``protobuf/model_config.proto`` at triton-inference-server/common commit
  83adf7cf88a2f343005974dff3728be746de2d66: which ``ModelConfig`` fields are repeated or maps
  (what the pbtxt loader needs to know without the schema).
"""

from __future__ import annotations

import re
from typing import Any, Callable, NamedTuple

BACKEND_REPO = "triton-inference-server/tensorrtllm_backend"
SOURCE_TAG = "v0.18.0"
DOCS_TAG = "v1.0.0"
MODEL_INSTANCE_STATE = "inflight_batcher_llm/src/model_instance_state.cc"
MODEL_STATE = "inflight_batcher_llm/src/model_state.cc"
MODEL_CONFIG_DOC = "docs/model_config.md"
TEMPLATE = "all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt"
LATER_COPY = "NVIDIA/TensorRT-LLM@0c8de69a triton_backend/inflight_batcher_llm/src/model_instance_state.cc"

# ``backend: "tensorrtllm"`` loads the C++ backend (model_config.md, ``triton_backend``: "tensorrtllm
# to utilize the C++ TRT-LLM backend implementation", "python" for the TRT-LLM Python runtime).
# The ``tensorrt_llm`` spellings (the model's usual name) are read as meaning the same backend: no
# source names them, Triton would look for a backend folder of that name.
BACKENDS = ("tensorrtllm", "tensorrt_llm")
PLATFORMS = ("tensorrt_llm",)

# A fill_template.py variable left in the file (string.Template's braced form).
PLACEHOLDER = re.compile(r"\$\{[^{}\n]*\}")


def has_placeholder(value: Any) -> bool:
    return isinstance(value, str) and PLACEHOLDER.search(value) is not None


class Param(NamedTuple):
    """One ``parameters`` key the backend reads."""

    kind: str  # "str" | "int" | "uint" | "float" | "bool" | "ints" (comma list) | "choices" ({..},{..})
    default: Any  # what the backend uses when the key is missing or does not convert; None: unset
    meaning: str
    variable: str | None = None  # the fill_template.py variable the shipped template fills it from
    source: str = MODEL_INSTANCE_STATE  # where the read is (SOURCE_TAG unless it names LATER_COPY)


# Keys in the order the C++ reads them. Defaults are the C++ initial values at SOURCE_TAG.
PARAMETERS: dict[str, Param] = {
    "gpt_model_type": Param(
        "str", None, "batching: V1/v1 (static) or inflight_batching/inflight_fused_batching; "
        "required, any other value fails the model load", "batching_strategy"),
    "max_tokens_in_paged_kv_cache": Param(
        "int", None, "upper bound on KV-cache tokens; the cache is the smaller of this and "
        "kv_cache_free_gpu_mem_fraction of free memory (unset: no token bound)"),
    "kv_cache_free_gpu_mem_fraction": Param(
        "float", 0.9, "fraction of the GPU memory free after loading the engine that the KV cache "
        "may take (unset: the executor's KvCacheConfig default, 0.9 per model_config.md)"),
    "cross_kv_cache_fraction": Param(
        "float", None, "share of the KV cache for cross-attention; encoder-decoder models only "
        "(model_config.md: default 0.5)"),
    "kv_cache_host_memory_bytes": Param("uint", 0, "host memory for offloading KV-cache blocks (0: off)"),
    "kv_cache_onboard_blocks": Param("bool", True, "move offloaded blocks back to the GPU before use"),
    "max_attention_window_size": Param(
        "ints", None, "comma-separated attention window(s) in tokens, one per layer group "
        "(unset: max_sequence_length of the engine)"),
    "sink_token_length": Param("int", None, "sink tokens always kept in the attention window"),
    "enable_kv_cache_reuse": Param(
        "bool", False, "reuse KV blocks of shared prompt prefixes (needs an engine built with "
        "paged context FMHA); default false at v0.18.0, true in the later TensorRT-LLM copy"),
    "multi_block_mode": Param("bool", True, "multi-block attention kernels for long sequences"),
    "enable_context_fmha_fp32_acc": Param("bool", False, "FP32 accumulation in context FMHA"),
    "cuda_graph_mode": Param("bool", False, "run generation steps as CUDA graphs"),
    "cuda_graph_cache_size": Param("int", 0, "number of CUDA graphs kept"),
    "gpu_device_ids": Param(
        "str", None, "GPU ids per instance: comma-separated ids, instances separated by ';' "
        "(unset: all visible GPUs)", source=MODEL_STATE),
    "participant_ids": Param(
        "str", None, "MPI ranks per instance, same format as gpu_device_ids (orchestrator mode)",
        source=MODEL_STATE),
    "num_nodes": Param("int", 1, "number of MPI nodes", source=LATER_COPY),
    "lora_cache_max_adapter_size": Param("int", 64, "largest LoRA adapter size a cache page must fit"),
    "lora_cache_optimal_adapter_size": Param("int", 8, "adapter size cache pages are sized for"),
    "lora_cache_gpu_memory_fraction": Param(
        "float", 0.05, "fraction of the memory left after the engine and the KV cache for the LoRA cache"),
    "lora_cache_host_memory_bytes": Param("uint", 2**30, "host LoRA cache size (1 GiB)"),
    "lora_prefetch_dir": Param("str", None, "LoRA weights loaded at startup", source=LATER_COPY),
    "batch_scheduler_policy": Param(
        "str", "guaranteed_no_evict", "max_utilization (pack greedily, may pause requests) or "
        "guaranteed_no_evict (a started request is never paused)"),
    "speculative_decoding_fast_logits": Param(
        "bool", False, "fast logits for speculative decoding (orchestrator mode without spawned processes only)"),
    "max_beam_width": Param("int", 1, "beam width of requests sent to the executor"),
    "iter_stats_max_iterations": Param("int", None, "iterations of statistics kept (unset: ExecutorConfig default)"),
    "request_stats_max_iterations": Param(
        "int", None, "iterations of per-request statistics kept (unset: ExecutorConfig default)"),
    "enable_trt_overlap": Param(
        "bool", False, "removed from the template (model_config.md); at v0.18.0 a warning says it is "
        "deprecated and ignored, the later TensorRT-LLM copy passes it to the executor again"),
    "normalize_log_probs": Param("bool", True, "normalize output_log_probs"),
    "enable_chunked_context": Param(
        "bool", False, "chunked prefill (needs an engine built with use_paged_context_fmha)"),
    "decoding_mode": Param(
        "str", None, "top_k, top_p, top_k_top_p, beam_search, medusa, redrafter, lookahead or eagle "
        "(unset or invalid: top_k_top_p when max_beam_width is 1, else beam_search)"),
    "medusa_choices": Param("choices", None, "Medusa tree, e.g. \"{0, 0, 0}, {0, 1}\" (unset: mc_sim_7b_63)"),
    "eagle_choices": Param("choices", None, "EAGLE tree, same format (unset: mc_sim_7b_63 or per request)"),
    "lookahead_window_size": Param("uint", None, "lookahead decoding window (required with decoding_mode lookahead)",
                                   source=LATER_COPY),
    "lookahead_ngram_size": Param("uint", None, "lookahead decoding n-gram size", source=LATER_COPY),
    "lookahead_verification_set_size": Param("uint", None, "lookahead verification set size", source=LATER_COPY),
    "gpu_weights_percent": Param(
        "float", 1.0, "share of weights kept on the GPU; below 1.0 needs an engine built with weight streaming"),
    "recv_poll_period_ms": Param("int", 0, "orchestrator receive-thread sleep (0: busy loop)"),
    "guided_decoding_backend": Param(
        "str", None, "xgrammar to enable guided decoding (empty or ${guided_decoding_backend}: off)",
        source=LATER_COPY),
    "xgrammar_tokenizer_info_path": Param(
        "str", None, "xgrammar tokenizer info JSON for guided decoding; must exist when guided decoding is on",
        source=LATER_COPY),
    "tokenizer_dir": Param("str", None, "ignored by the C++ guided-decoding path", source=LATER_COPY),
    "gpt_model_path": Param(
        "str", None, "engine directory of the decoder (or decoder-only model); a path that does not exist "
        "is dropped with a warning, and with no encoder path either the load fails with \"Both encoder and "
        "decoder model paths are empty\"", "engine_dir"),
    "encoder_model_path": Param(
        "str", None, "engine directory of the encoder (encoder-decoder models); dropped like gpt_model_path "
        "when it does not exist", "encoder_engine_dir"),
    "exclude_input_in_output": Param("bool", False, "return only the completion tokens, not the prompt"),
    "cancellation_check_period_ms": Param("int", 100, "sleep of the cancellation-check thread"),
    "stats_check_period_ms": Param("int", 100, "sleep of the statistics thread"),
    "executor_worker_path": Param(
        "str", "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker",
        "trtllmExecutorWorker executable (orchestrator mode)", source=MODEL_STATE),
    "worker_path": Param(
        "str", None, "no longer supported: model_state.cc throws when it is set (use executor_worker_path)",
        source=MODEL_STATE),
}

# Read without a catch: a missing key (or, for gpt_model_type, a value it does not know) fails the
# model load. At SOURCE_TAG only gpt_model_type; the later copy (LATER_COPY,
# getGuidedDecodingConfigFromParams) also reads the three guided-decoding keys without one, so
# there they must be present, even if only as the template's unfilled ${...}.
REQUIRED = ("gpt_model_type",)
# The values gpt_model_type accepts (ModelInstanceState, SOURCE_TAG); anything else fails the load.
GPT_MODEL_TYPES = ("V1", "v1", "inflight_batching", "inflight_fused_batching")
REQUIRED_LATER = REQUIRED + ("tokenizer_dir", "xgrammar_tokenizer_info_path", "guided_decoding_backend")

# Read by Triton itself (not the TensorRT-LLM backend), written in the shipped template.
TRITON_PARAMETERS = frozenset({"FORCE_CPU_ONLY_INPUT_TENSORS"})

# Template variables that fill non-``parameters`` fields of the tensorrt_llm model's template.
TEMPLATE_FIELDS = {
    "triton_backend": "backend",
    "triton_max_batch_size": "max_batch_size (and dynamic_batching.preferred_batch_size)",
    "decoupled_mode": "model_transaction_policy.decoupled (true is needed for streaming)",
    "max_queue_delay_microseconds": "dynamic_batching.max_queue_delay_microseconds",
    "max_queue_size": "dynamic_batching.default_queue_policy.max_queue_size "
                      "(fill_template.py fills 0 when not given)",
    "logits_datatype": "data_type of the context_logits / generation_logits outputs",
    "encoder_input_features_data_type": "data_type of the encoder_input_features input",
}

# --- protobuf text format without the schema (model_config.proto) ------------------------------
# Repeated fields of ModelConfig and its messages: always a list, even when written once.
REPEATED = frozenset(
    """
    input output batch_input batch_output instance_group model_warmup dims gpus secondary_devices
    profile shape resources target_name source_input versions dim graph_spec
    gpu_execution_accelerator cpu_execution_accelerator preferred_batch_size int32_false_true
    fp32_false_true bool_false_true control initial_state control_input state step
    op_library_filename agents buckets metric_control
    """.split()
)
# map<string, string> and map<string, ModelParameter> fields: read as {key: string value}.
STRING_MAPS = frozenset({"parameters", "input_map", "output_map", "cc_model_filenames", "metric_tags"})
# Singular ModelConfig fields: protobuf refuses a file that sets one twice.
SINGULAR_TOP = frozenset(
    """
    name platform backend runtime version_policy max_batch_size default_model_filename
    dynamic_batching sequence_batching ensemble_scheduling optimization model_transaction_policy
    model_operations model_repository_agents response_cache model_metrics
    """.split()
)


# --- converting a parameter string the way ModelState::GetParameter<T> does ---------------------
_C_INT = re.compile(r"\s*([+-]?\d+)")  # std::stoi / stoul / stoull: leading digits, rest ignored
_C_FLOAT = re.compile(
    r"\s*([+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan))", re.IGNORECASE
)  # std::stof (hexadecimal floats are not modelled)
_TRUE = ("True", "true", "TRUE", "1")
_FALSE = ("False", "false", "FALSE", "0")


def _int(text: str) -> int:
    m = _C_INT.match(text)
    if not m:
        raise ValueError(f"std::stoi cannot convert {text!r}")
    return int(m.group(1))


def _uint(text: str) -> int:
    value = _int(text)
    if value < 0:  # std::stoul accepts "-1" and wraps it; no config means that
        raise ValueError(f"negative value {text!r} for an unsigned parameter")
    return value


def _float(text: str) -> float:
    m = _C_FLOAT.match(text)
    if not m:
        raise ValueError(f"std::stof cannot convert {text!r}")
    return float(m.group(1))


def ignored_tail(name: str, text: str) -> str:
    """What the C conversion of a number parameter silently ignores after the number it reads
    (``"0,85"`` is read as 0: std::stof stops at the comma); "" when it reads it all."""
    param = PARAMETERS.get(name)
    pattern = {"int": _C_INT, "uint": _C_INT, "float": _C_FLOAT}.get(param.kind) if param else None
    m = pattern.match(text) if pattern else None
    return text[m.end():].strip() if m else ""


def _bool(text: str) -> bool:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"Cannot convert {text} to a boolean.")


def _ints(text: str) -> list[int]:
    """utils::csvStrToVecInt: comma-separated, each item through std::stoi."""
    if not text:
        raise ValueError("Cannot convert empty string to vector of vector of ints")
    out = []
    for item in text.split(","):
        item = item.lstrip()
        if not item:
            break
        out.append(_int(item))
    if not out:
        raise ValueError("Empty vector")
    return out


_PARSERS: dict[str, Callable[[str], Any]] = {
    "int": _int, "uint": _uint, "float": _float, "bool": _bool, "ints": _ints,
}


def convert(name: str, text: str) -> Any:
    """``text`` (a parameter's string_value) as the backend converts it for ``name``; strings,
    choice trees and unknown keys are returned as written. Raises ValueError where the backend's
    conversion fails (it then logs a warning and keeps the default, or for gpt_model_type fails)."""
    param = PARAMETERS.get(name)
    parse = _PARSERS.get(param.kind) if param else None
    return parse(text) if parse else text
