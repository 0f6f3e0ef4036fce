"""What ``trtllm-serve disaggregated -c FILE`` (and ``disaggregated_mpi_worker -c FILE``) reads
from its config file: the one home of those key names.

``tensorrt_llm/llmapi/disagg_utils.py`` ``parse_disagg_config_file`` loads the YAML and calls
``extract_disagg_cfg(**config)``. Its named parameters are the disaggregated server's own keys
(:data:`SERVER_KEYS`); every other top-level key lands in ``**kwargs`` and is copied into both
``context_servers`` and ``generation_servers`` (a key set both at the top and in a section with
another value raises ``ValueError``). Each section is read by ``extract_router_config`` (pops
``router``) and ``extract_ctx_gen_cfgs(type, num_instances=1, urls=None, **kwargs)``: the rest of
the section becomes ``CtxGenServerConfig.other_args``, which ``disaggregated_mpi_worker`` turns
into the worker's LLM arguments with ``get_llm_args(**other_args)`` followed by
``update_llm_args_with_extra_dict`` (``tensorrt_llm/commands/serve.py``) — so a section holds
LLM-API (``LlmArgs``) fields, plus the parameter names of ``get_llm_args`` that are not fields
(:data:`WORKER_PARAMS`). ``trtllm-serve disaggregated`` itself (the router) uses only
``num_instances``, ``urls``, ``router`` and ``max_batch_size``/``max_num_tokens``/
``kv_cache_config.tokens_per_block`` for the router; its workers are started on their own.

Sources: NVIDIA/TensorRT-LLM ``tensorrt_llm/llmapi/disagg_utils.py``@0228a71 (the newest snapshot
read; ``extract_disagg_cfg``, ``extract_ctx_gen_cfgs``, ``extract_router_config``) and
``tensorrt_llm/commands/serve.py``@00209af (``get_llm_args``, ``disaggregated``,
``disaggregated_mpi_worker``). Older releases name fewer top-level keys; a key the newest
snapshot names is never reported (an older release would pass it on to the workers instead).
"""

from __future__ import annotations

WORKER_ENTRY = "trtllm-serve disaggregated_mpi_worker -c"  # the command that builds an LLM from a section

SECTIONS = ("context_servers", "generation_servers")
# extract_disagg_cfg's named parameters: the disaggregated server's own settings
SERVER_KEYS = frozenset(
    """
    hostname port max_retries perf_metrics_max_requests return_perf_metrics perf_metrics_output_dir
    context_servers generation_servers conditional_disagg_config otlp_config disagg_cluster node_id
    schedule_style allow_request_chat_template gen_strip_message_history gen_tokids_ctxbytes
    num_workers disagg_coordinator_url
    """.split()
)
# keys a section holds for the disaggregated reader itself, not for the worker's LLM
SECTION_KEYS = frozenset({"num_instances", "urls", "router"})
# get_llm_args parameters that are not LlmArgs fields, and the field each one sets
WORKER_PARAMS: dict[str, str] = {"free_gpu_memory_fraction": "kv_cache_config.free_gpu_memory_fraction"}


def is_disagg_config(data) -> bool:
    """A disaggregated serving config: a ``context_servers`` or ``generation_servers`` mapping at
    the top (``extract_disagg_cfg`` reads both; ``trtllm-serve serve`` would refuse either)."""
    return isinstance(data, dict) and any(isinstance(data.get(s), dict) for s in SECTIONS)


def inherited(data: dict) -> list[str]:
    """The top-level keys ``extract_disagg_cfg`` copies into both sections (its ``**kwargs``)."""
    return [k for k in data if isinstance(k, str) and k not in SERVER_KEYS]
