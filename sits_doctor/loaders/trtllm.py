"""TensorRT-LLM: engine ``config.json`` (written by ``trtllm-build``) and LLM-API / ``trtllm-serve``
YAML (``--extra_llm_api_options`` / ``--config``).

Shapes from shared/research/trtllm-ortgenai-facts.md §1 (engine: ``version`` /
``pretrained_config`` / ``build_config``) and §3 (LLM-API keys = ``LlmArgs`` fields).
"""

from __future__ import annotations

from typing import Any

from sits_doctor.loaders.flatten import flatten
from sits_doctor.plan import Plan, Provenance, Setting
from sits_doctor.source import SourceDoc

# Keys only an LLM-API options file has (1.x names and the pre-1.0 ones), used to sniff it.
LLMAPI_KEYS = frozenset(
    """
    kv_cache_config cuda_graph_config pytorch_backend_config use_cuda_graph cuda_graph_batch_sizes
    cuda_graph_max_batch_size cuda_graph_padding_enabled enable_attention_dp max_num_tokens
    build_config disable_overlap_scheduler moe_config attn_backend print_iter_log
    extended_runtime_perf_knob_config scheduler_config torch_compile_config enable_autotuner
    autotuner_enabled mixed_sampler enable_iter_perf_stats moe_expert_parallel_size
    cache_transceiver_config stream_interval sampler_type backend max_beam_width
    """.split()
)


def is_engine_config(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("pretrained_config"), dict) and isinstance(data.get("build_config"), dict)


def is_llmapi_yaml(data: Any) -> bool:
    if not isinstance(data, dict) or not data:
        return False
    if any("-" in str(k) for k in data):  # vLLM spelling; LlmArgs fields are snake_case
        return False
    return bool(LLMAPI_KEYS & {str(k) for k in data})


def plan_from_engine(doc: SourceDoc) -> Plan:
    settings = flatten(doc, doc.data)
    return Plan(
        framework="trtllm",
        kind="trtllm-engine",
        label=f"TensorRT-LLM engine {doc.path}",
        file=doc.path,
        anchor=Provenance.at(doc, "/build_config", key=False),
        settings=settings,
        doc=doc,
    )


def plan_from_llmapi(doc: SourceDoc) -> Plan:
    settings = flatten(doc, doc.data)
    model_ref: Setting | None = settings.get("model")
    return Plan(
        framework="trtllm",
        kind="trtllm-llmapi",
        label=f"TensorRT-LLM LLM-API options {doc.path}",
        file=doc.path,
        anchor=Provenance.at(doc, "", key=False),
        settings=settings,
        model_ref=model_ref,
        doc=doc,
    )
