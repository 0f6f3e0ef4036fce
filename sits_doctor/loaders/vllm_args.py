"""vLLM engine arguments: command-line tokens and YAML keys to normalized Settings.

Follows vLLM's own normalization (shared/research/vllm-hf-facts.md §2): ``_`` and ``-`` are the
same up to the first ``.``; ``--no-X`` turns a boolean off; ``-tp/-pp/-dp/-q/-cc/-ac/-O<n>`` are
shorthands; ``--a.b=c`` sets a nested field; JSON-valued options are parsed and their fields
become Settings too; ``max_model_len`` takes ``8k``/``8K`` suffixes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from sits_doctor.plan import Provenance, Setting

SHORTHANDS = {
    "-tp": "tensor_parallel_size",
    "-pp": "pipeline_parallel_size",
    "-dp": "data_parallel_size",
    "-q": "quantization",
    "-cc": "compilation_config",
    "-ac": "attention_config",
}

# Options that take no value (store_true / BooleanOptionalAction) in vLLM's arg parser.
BOOL_OPTIONS = frozenset(
    """
    enforce_eager trust_remote_code enable_prefix_caching enable_chunked_prefill disable_log_stats
    disable_log_requests enable_log_requests enable_lora enable_auto_tool_choice
    disable_custom_all_reduce calculate_kv_scales enable_expert_parallel disable_sliding_window
    disable_cascade_attn skip_tokenizer_init enable_prompt_embeds enable_sleep_mode
    disable_async_output_proc use_v2_block_manager async_scheduling enable_eplb
    disable_frontend_multiprocessing enable_request_id_headers disable_fastapi_docs
    enable_server_load_tracking enable_force_include_usage enable_prompt_tokens_details
    return_tokens_as_token_ids enable_log_outputs headless api_server_count_auto
    fully_sharded_loras enable_lora_bias
    """.split()
)
INT_OPTIONS = frozenset(
    """
    tensor_parallel_size pipeline_parallel_size data_parallel_size max_num_seqs
    max_num_batched_tokens block_size max_seq_len_to_capture max_logprobs seed port
    max_loras max_lora_rank max_cpu_loras num_gpu_blocks_override
    max_cudagraph_capture_size kv_cache_memory_bytes max_parallel_loading_workers
    num_scheduler_steps api_server_count decode_context_parallel_size
    """.split()
)
FLOAT_OPTIONS = frozenset("gpu_memory_utilization swap_space cpu_offload_gb".split())
LIST_OPTIONS = frozenset(
    "cuda_graph_sizes cudagraph_capture_sizes served_model_name allowed_origins middleware".split()
)
JSON_OPTIONS = frozenset(
    """
    compilation_config attention_config hf_overrides speculative_config kv_transfer_config
    limit_mm_per_prompt override_generation_config rope_scaling model_loader_extra_config
    kv_events_config structured_outputs_config additional_config mm_processor_kwargs
    """.split()
)

_HUMAN_INT = re.compile(r"^(\d+(?:\.\d+)?)([kmgKMG]?)$")
_SHELL_VAR = re.compile(r"\$(\{|\()?[A-Za-z_][A-Za-z0-9_]*[})]?")  # $VAR, ${VAR}, k8s $(VAR)


@dataclass(frozen=True)
class Token:
    """One command-line word and where it was written."""

    text: str
    prov: Provenance
    templated: bool = False


def normalize_key(name: str) -> str:
    """``max-model-len`` → ``max_model_len``; only the part before the first ``.`` changes."""
    head, dot, rest = name.partition(".")
    return head.replace("-", "_") + dot + rest


def parse_human_int(value: Any) -> int | str:
    """vLLM's human-readable ints (from 0.8.4): ``1k``=1000, ``1K``=1024, ``25.6k``=25600.

    Returns the int, or the text unchanged when it is not such a number (``auto`` etc.).
    """
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    m = _HUMAN_INT.match(text)
    if not m:
        return text
    number, suffix = m.groups()
    power = "kmg".index(suffix.lower()) + 1 if suffix else 0
    base = 1024 if suffix.isupper() else 1000
    scaled = float(number) * base**power
    return int(scaled) if scaled == int(scaled) else text


def coerce(key: str, value: Any) -> Any:
    """Parse a value the way vLLM's arg parser would, leaving unparseable text as it is."""
    base = key.partition(".")[0]
    if base == "max_model_len" and "." not in key:
        return parse_human_int(value)
    if not isinstance(value, str):
        return value
    if "." in key:  # --compilation-config.level=3: a field of a JSON option
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if not isinstance(parsed, (dict, list)) or value.strip()[:1] in "{[" else value
    try:
        if base in INT_OPTIONS and "." not in key:
            return int(value)
        if base in FLOAT_OPTIONS and "." not in key:
            return float(value)
    except ValueError:
        return value
    if base in BOOL_OPTIONS and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if base in JSON_OPTIONS and "." not in key and value.strip()[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _is_flag(text: str) -> bool:
    if not text.startswith("-") or text == "-":
        return False
    return not re.fullmatch(r"-\d+(\.\d+)?", text)


def expand_nested(setting: Setting) -> dict[str, Setting]:
    """Fields of a dict-valued option as their own Settings (``compilation_config.x``)."""
    out: dict[str, Setting] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                key = f"{prefix}.{k}"
                out[key] = setting.model_copy(update={"key": key, "raw_key": k, "value": v, "raw": v})
                walk(key, v)

    walk(setting.key, setting.value)
    return out


def parse_args(tokens: list[Token]) -> tuple[dict[str, Setting], list[Token]]:
    """Engine options and positional words from a vLLM command line (after ``serve``)."""
    settings: dict[str, Setting] = {}
    positional: list[Token] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        text = tok.text
        if not _is_flag(text):
            positional.append(tok)
            i += 1
            continue
        name, eq, inline = text.partition("=")
        templated = tok.templated
        if re.fullmatch(r"-O\d+", name):
            key, value = "optimization_level", int(name[2:])
        else:
            head, dot, rest = name.partition(".")
            if head in SHORTHANDS:
                key = SHORTHANDS[head] + dot + rest
            else:
                key = normalize_key(name.lstrip("-"))
            base = key.partition(".")[0]
            if eq:
                value = inline
            elif base.startswith("no_") and (base[3:] in BOOL_OPTIONS or i + 1 >= len(tokens) or _is_flag(tokens[i + 1].text)):
                key, value = base[3:], False
            elif base in BOOL_OPTIONS:
                value = True
            elif base in LIST_OPTIONS:
                values = []
                while i + 1 < len(tokens) and not _is_flag(tokens[i + 1].text):
                    i += 1
                    values.append(tokens[i].text)
                    templated = templated or tokens[i].templated
                value = values
            elif i + 1 < len(tokens) and not _is_flag(tokens[i + 1].text):
                i += 1
                value = tokens[i].text
                templated = templated or tokens[i].templated
            else:
                value = True
        setting = Setting(
            key=key,
            raw_key=name,
            value=coerce(key, value) if not templated else value,
            raw=value,
            prov=tok.prov,
            templated=templated,
        )
        settings[key] = setting
        settings.update(expand_nested(setting))
        i += 1
    return settings, positional


def is_shell_templated(text: str) -> bool:
    return bool(_SHELL_VAR.search(text))
