"""vLLM deployments: ``vllm serve --config`` YAML files and command lines found in wrappers."""

from __future__ import annotations

from typing import Any

from sits_doctor.loaders.commands import vllm_invocation
from sits_doctor.loaders.flatten import flatten
from sits_doctor.loaders.vllm_args import Token, coerce, expand_nested, normalize_key, parse_args
from sits_doctor.plan import Plan, Provenance, Setting
from sits_doctor.source import SourceDoc

# Keys that only a vLLM engine-args file would have (dash or underscore spelling); used to sniff.
VLLM_KEYS = frozenset(
    """
    model max_model_len tensor_parallel_size pipeline_parallel_size data_parallel_size
    gpu_memory_utilization max_num_seqs max_num_batched_tokens enable_prefix_caching
    enable_chunked_prefill enforce_eager kv_cache_dtype served_model_name trust_remote_code
    dtype quantization swap_space block_size compilation_config hf_overrides
    speculative_config tokenizer download_dir load_format disable_log_requests
    disable_log_stats max_seq_len_to_capture cuda_graph_sizes calculate_kv_scales host port
    api_key generation_config enable_lora max_loras max_lora_rank lora_modules
    chat_template tool_call_parser enable_auto_tool_choice seed cpu_offload_gb
    uvicorn_log_level attention_backend kv_transfer_config async_scheduling
    worker_use_ray speculative_model num_speculative_tokens use_v2_block_manager
    tokenizer_pool_size tokenizer_pool_type enable_reasoning reasoning_parser device
    num_scheduler_steps multi_step_stream_outputs preemption_mode disable_async_output_proc
    scheduler_delay_factor rope_scaling rope_theta guided_decoding_backend task runner convert
    max_cudagraph_capture_size cudagraph_capture_sizes enable_log_requests
    structured_outputs_config distributed_executor_backend disable_custom_all_reduce
    max_cpu_loras enable_prompt_adapter max_prompt_adapters long_lora_scaling_factors
    """.split()
)


# Names that plenty of other YAML files use too (Hydra, training configs): never enough alone.
GENERIC_KEYS = frozenset(
    "model device seed dtype host port tokenizer task download_dir load_format api_key revision "
    "runner convert quantization block_size".split()
)


def is_vllm_yaml(data: Any) -> bool:
    """A mapping whose keys are mostly vLLM engine-argument names, one of them specific to vLLM."""
    if not isinstance(data, dict) or not data:
        return False
    keys = [normalize_key(str(k)).partition(".")[0] for k in data]
    known = [k for k in keys if k in VLLM_KEYS]
    return any(k not in GENERIC_KEYS for k in known) and len(known) * 2 >= len(keys)


def plan_from_config_yaml(doc: SourceDoc) -> Plan:
    """A ``vllm serve --config cfg.yaml`` file: top-level keys are flag names without ``--``."""
    settings: dict[str, Setting] = {}
    for key, setting in flatten(doc, doc.data, normalize=normalize_key).items():
        value = coerce(key, setting.value) if not setting.templated else setting.value
        setting = setting.model_copy(update={"value": value})
        settings[key] = setting
        if isinstance(value, dict) and not isinstance(setting.raw, dict):  # JSON string value
            settings.update(expand_nested(setting))
    return Plan(
        framework="vllm",
        kind="vllm-yaml",
        label=f"vllm serve --config {doc.path}",
        file=doc.path,
        anchor=Provenance.at(doc, "", key=False),
        settings=settings,
        model_ref=settings.get("model"),
        doc=doc,
    )


def plan_from_command(
    doc: SourceDoc,
    tokens: list[Token],
    *,
    label: str,
    anchor: Provenance,
    image: Setting | None = None,
    env: dict[str, Setting] | None = None,
    entrypoint_kept: bool = True,
) -> Plan | None:
    """A Plan for the vLLM invocation inside ``tokens``, or None if there is none.

    ``entrypoint_kept``: the image's own entrypoint runs (k8s without ``command``, compose without
    ``entrypoint``), so with a vLLM image the words are the server's arguments.
    """
    image_is_vllm = (
        entrypoint_kept and image is not None and "vllm" in str(image.value).rsplit("/", 1)[-1]
    )
    found = vllm_invocation(tokens, image_is_vllm)
    if found is None:
        return None
    args, how = found
    settings, positional = parse_args(args)
    model_ref = settings.get("model")
    if model_ref is None and positional:
        first = positional[0]
        model_ref = Setting(
            key="model", raw_key="model", value=first.text, raw=first.text, prov=first.prov,
            templated=first.templated,
        )
    if args:
        anchor = args[-1].prov
    return Plan(
        framework="vllm",
        kind="vllm-args",
        label=f"{label} ({how})",
        file=doc.path,
        anchor=anchor,
        settings=settings,
        env=env or {},
        image=image,
        model_ref=model_ref,
        doc=doc,
    )
