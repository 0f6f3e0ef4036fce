"""What vLLM accepts, by version: the one home of every vLLM option name, spelling, type,
default, version cut-off and replacement that sits-doctor knows.

Loaders (sniffing, coercion, Helm mapping), rules and tools import from here; nothing else
writes a vLLM option name or version literal (tests/test_knowledge_home.py keeps it so).

Sources: the vLLM source releases 0.5.5 … :data:`NEWEST` (``vllm/engine/arg_utils.py``,
``vllm/entrypoints/openai/cli_args.py``, ``vllm/utils/argparse_utils.py``, ``vllm/config/``);
presence of each flag per release is in tests/data/vllm_flags.json (tools/scan_vllm_flags.py).
"""

from functools import lru_cache
from typing import Any, NamedTuple

# --- named cut-offs (first version with the behaviour) ---------------------------------------
V1_DEFAULT = "0.8.0"  # V1 engine default: prefix caching and chunked prefill on
HUMAN_INT = "0.8.4"  # --max-model-len takes 8k / 8K / 25.6k (human_readable_int)
BOOLEAN_OPTIONAL = "0.8.5"  # boolean config fields get --no-X (BooleanOptionalAction)
STORE_BOOLEAN_SPAN = ("0.6.6", "0.8.5")  # YAML `key: false` in dest spelling passes `--key False`
YAML_FALSE_AS_NO_FLAG = "0.28.0"  # load_config_file turns `key: false` into --no-<key as written>
COMPILATION_CONFIG_FORBIDS_EXTRA = "0.13.0"  # CompilationConfig(extra="forbid")
MAX_CAPTURE_SIZE_GONE = "0.11.1"  # compilation_config.max_capture_size no longer a field
ATTENTION_BACKEND_ENV_DEPRECATED = "0.13.0"  # VLLM_ATTENTION_BACKEND maps to --attention-backend, warns
ATTENTION_BACKEND_ENV_IGNORED = "0.16.0"  # VLLM_ATTENTION_BACKEND absent from vllm/envs.py
ROPE_PARAMETERS = "0.12.0"  # rope_parameters (transformers v5) read; the factor applied as a float
YARN_EXEMPT = "0.30.0"  # yarn/deepseek_yarn no longer scale the derived max_model_len
GEMMA3_EXEMPT = "0.8.0"  # gemma3 models skip RoPE scaling of max_model_len
SERVER_PARSER_MODEL_TAG = "0.10.0"  # make_arg_parser adds the optional positional model_tag (nargs="?")


PARSER_DATA = "vllm_options.json"  # data/, written by tools/gen_vllm_options.py


@lru_cache(maxsize=1)
def _parser_data() -> dict:
    """data/vllm_options.json, parsed once (NEWEST at import, parser_table when a rule asks)."""
    import json
    from pathlib import Path

    return json.loads((Path(__file__).parent / "data" / PARSER_DATA).read_text(encoding="utf-8"))


def _newest_release() -> str:
    """The newest release in data/vllm_options.json (tools/gen_vllm_options.py --update adds new
    ones): the tables, and so this module, cover releases up to it."""
    return _parser_data()["releases"][-1]


NEWEST = _newest_release()  # the newest release this module's tables cover
ENV_ALLOW_LONG_MAX_MODEL_LEN = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
ENV_ATTENTION_BACKEND = "VLLM_ATTENTION_BACKEND"
SERVE_SUBCOMMAND = "serve"
# Which argument parser reads a command's words (Plan.parser); a loader sets it where it finds the
# command, so that rules never match the display text of how the server is started.
PARSER_SERVE = "vllm serve"  # the serve subcommand: its positional model_tag is the model
PARSER_API_SERVER = "api_server"  # make_arg_parser as vllm.entrypoints.openai.api_server builds it: model_tag unread
PARSER_IMAGE = "image entrypoint"  # the vllm/vllm-openai image's own entrypoint
PARSER_LEGACY = "legacy api_server"  # vllm.entrypoints.api_server: a small parser of its own
MODULE_PARSERS = {"vllm.entrypoints.openai.api_server": PARSER_API_SERVER, "vllm.entrypoints.api_server": PARSER_LEGACY}
API_SERVER_MODULES = frozenset(MODULE_PARSERS)
# the parsers whose options are the serve parser's (the tables in data/vllm_options.json)
PARSERS_WITH_SERVE_OPTIONS = frozenset({PARSER_SERVE, PARSER_API_SERVER, PARSER_IMAGE})


class Option(NamedTuple):
    """One engine/server option: what sits-doctor needs beyond what the parsers say. Which releases
    accept which spelling, and when an option is deprecated, come from the releases' own parsers
    (:func:`lookup_flag`, data/vllm_options.json); this table holds how to read a value before the
    target is known (``kind``: bool, int, float, str, list, json, human_int), the advice when a
    release lacks the option, and semantic defaults a parser cannot show."""

    name: str
    kind: str = "str"
    short: tuple[str, ...] = ()
    helm: str | None = None  # production-stack vllmConfig key (helm/templates/deployment-vllm-multi.yaml)
    instead: str | None = None  # what to write instead where a release lacks or deprecates it
    renamed_to: str | None = None  # the option that replaces it, when the value carries over
    drop: str = "safe"  # removing it keeps the meaning ("safe") or changes behaviour ("unsafe")
    default_on: str | None = None  # a bool option that is on by default from this version
    generic: bool = False  # a name plenty of non-vLLM YAML files use too (never enough to sniff)

    @property
    def flag(self) -> str:
        return flag_of(self.name)


def _o(name: str, kind: str = "str", **kw: Any) -> Option:
    return Option(name, kind, **kw)


OPTIONS: dict[str, Option] = {o.name: o for o in (
    # model and load
    _o("model", generic=True), _o("tokenizer", generic=True), _o("revision", generic=True),
    _o("served_model_name", "list"), _o("trust_remote_code", "bool"), _o("dtype", generic=True),
    _o("download_dir", generic=True), _o("load_format", generic=True), _o("seed", "int", generic=True),
    _o("quantization", short=("-q",), generic=True), _o("hf_overrides", "json"),
    _o("generation_config"), _o("override_generation_config", "json"), _o("chat_template"),
    _o("skip_tokenizer_init", "bool"), _o("model_loader_extra_config", "json"),
    _o("max_parallel_loading_workers", "int"), _o("mm_processor_kwargs", "json"),
    _o("limit_mm_per_prompt", "json"), _o("enable_prompt_embeds", "bool"),
    _o("runner", instead="use --task on this version", generic=True),
    _o("convert", instead="use --task on this version", generic=True),
    _o("task", instead="use --runner / --convert", generic=True, drop="unsafe"),
    # memory and cache
    _o("max_model_len", "human_int", helm="maxModelLen"),
    _o("gpu_memory_utilization", "float", helm="gpuMemoryUtilization"),
    _o("kv_cache_dtype"), _o("block_size", "int", generic=True), _o("kv_cache_memory_bytes", "int"),
    _o("num_gpu_blocks_override", "int"), _o("cpu_offload_gb", "float"),
    _o("enable_extensible_kv_cache", "bool"),
    _o("enable_prefix_caching", "bool", default_on=V1_DEFAULT),
    _o("swap_space", "float", instead="remove it (no CPU swap space in the V1 engine)"),
    _o("calculate_kv_scales", "bool", instead="remove it; fp8 KV without checkpoint k/v scales uses scale 1.0", drop="unsafe"),
    # scheduling
    _o("max_num_seqs", "int", helm="maxNumSeqs"), _o("max_num_batched_tokens", "int"),
    _o("enable_chunked_prefill", "bool", default_on=V1_DEFAULT), _o("async_scheduling", "bool"),
    _o("num_scheduler_steps", "int", instead="remove it (multi-step scheduling was removed)", drop="unsafe"),
    _o("multi_step_stream_outputs", "bool", instead="remove it (multi-step scheduling was removed)"),
    _o("preemption_mode", instead="remove it (V0-only)", drop="unsafe"),
    _o("scheduler_delay_factor", "float", instead="remove it (V0-only)", drop="unsafe"),
    _o("disable_async_output_proc", "bool", instead="remove it (V0-only)"),
    _o("use_v2_block_manager", "bool", instead="remove it (the v1 block manager is gone; it was a no-op)"),
    # parallelism
    _o("tensor_parallel_size", "int", short=("-tp",), helm="tensorParallelSize"),
    _o("pipeline_parallel_size", "int", short=("-pp",), helm="pipelineParallelSize"),
    _o("data_parallel_size", "int", short=("-dp",)), _o("decode_context_parallel_size", "int"),
    _o("enable_expert_parallel", "bool"), _o("enable_eplb", "bool"),
    _o("distributed_executor_backend"), _o("disable_custom_all_reduce", "bool"),
    _o("worker_use_ray", "bool", instead="use --distributed-executor-backend ray", drop="unsafe"),
    # compilation, CUDA graphs, attention
    _o("enforce_eager", "bool"), _o("compilation_config", "json", short=("-cc",)),
    _o("attention_config", "json", short=("-ac",)), _o("attention_backend"),
    _o("optimization_level", "int"),
    _o("max_seq_len_to_capture", "int", instead="remove it; V1 sizes CUDA graphs by tokens per step "
               "(--cuda-graph-sizes on 0.11, --max-cudagraph-capture-size from 0.11.1)", drop="unsafe"),
    _o("cuda_graph_sizes", "list", instead="use --cudagraph-capture-sizes or --max-cudagraph-capture-size", drop="unsafe"),
    _o("max_cudagraph_capture_size", "int", instead="use --cuda-graph-sizes on this version"),
    _o("cudagraph_capture_sizes", "list", instead="use --compilation-config '{\"cudagraph_capture_sizes\": [...]}'"),
    _o("disable_sliding_window", "bool"), _o("disable_cascade_attn", "bool"),
    _o("rope_scaling", "json", instead="use --hf-overrides '{\"rope_scaling\": ...}'", drop="unsafe"),
    _o("rope_theta", "float", instead="use --hf-overrides '{\"rope_theta\": ...}'", drop="unsafe"),
    _o("device", instead="remove it (the platform is detected)", generic=True),
    # speculative decoding, LoRA, structured outputs
    _o("speculative_config", "json", instead="use --speculative-model / --num-speculative-tokens on this version"),
    _o("speculative_model", instead="use --speculative-config '{\"model\": ...}'", drop="unsafe"),
    _o("num_speculative_tokens", "int", instead="use --speculative-config '{\"num_speculative_tokens\": ...}'", drop="unsafe"),
    _o("enable_lora", "bool"), _o("max_loras", "int", helm="maxLoras"), _o("max_lora_rank", "int"),
    _o("max_cpu_loras", "int"), _o("lora_modules"), _o("fully_sharded_loras", "bool"),
    _o("enable_lora_bias", "bool"),
    _o("long_lora_scaling_factors", instead="remove it", drop="unsafe"),
    _o("lora_extra_vocab_size", "int", instead="remove it", drop="unsafe"),
    _o("enable_prompt_adapter", "bool", instead="remove it (prompt adapters were removed)", drop="unsafe"),
    _o("max_prompt_adapters", "int", instead="remove it (prompt adapters were removed)", drop="unsafe"),
    _o("structured_outputs_config", "json", instead="use --guided-decoding-backend on this version"),
    _o("guided_decoding_backend", instead="use --structured-outputs-config.backend", renamed_to="structured_outputs_config.backend"),
    _o("guided_decoding_disable_fallback", "bool", instead="use --structured-outputs-config.disable_fallback", renamed_to="structured_outputs_config.disable_fallback"),
    _o("guided_decoding_disable_any_whitespace", "bool", instead="use --structured-outputs-config.disable_any_whitespace", renamed_to="structured_outputs_config.disable_any_whitespace"),
    _o("guided_decoding_disable_additional_properties", "bool", instead="use --structured-outputs-config.disable_additional_properties", renamed_to="structured_outputs_config.disable_additional_properties"),
    _o("enable_reasoning", "bool", instead="use --reasoning-parser alone"),
    _o("reasoning_parser"), _o("tool_call_parser"), _o("enable_auto_tool_choice", "bool"),
    _o("tokenizer_pool_size", "int", instead="remove it"),
    _o("tokenizer_pool_type", instead="remove it"),
    _o("tokenizer_pool_extra_config", "json", instead="remove it"),
    # server and logging
    _o("host", generic=True), _o("port", "int", generic=True), _o("api_key", generic=True),
    _o("uvicorn_log_level"), _o("allowed_origins", "list"), _o("middleware", "list"),
    _o("disable_log_stats", "bool"),
    _o("disable_log_requests", "bool", instead="remove it (request logging is off by default; --enable-log-requests turns it on)"),
    _o("enable_log_requests", "bool", instead="request logging is already on unless --disable-log-requests"),
    _o("enable_log_outputs", "bool"), _o("max_logprobs", "int"), _o("api_server_count", "int"),
    _o("headless", "bool"), _o("enable_sleep_mode", "bool"), _o("disable_frontend_multiprocessing", "bool"),
    _o("enable_request_id_headers", "bool"), _o("disable_fastapi_docs", "bool"),
    _o("enable_server_load_tracking", "bool"), _o("enable_force_include_usage", "bool"),
    _o("enable_prompt_tokens_details", "bool"), _o("return_tokens_as_token_ids", "bool"),
    _o("kv_transfer_config", "json"), _o("kv_events_config", "json"), _o("additional_config", "json"),
)}

SHORTHANDS: dict[str, str] = {s: o.name for o in OPTIONS.values() for s in o.short}
# Key prefix of a word written like a flag with look-alike dashes (vLLM sees a positional word).
LOOKALIKE = "lookalike:"
# Key prefix of a flag a lenient server never hands to vLLM as the option (an underscore spelling
# under parse_known_args, which does not turn ``_`` into ``-``): kept apart so no rule reads it.
UNREAD = "unread:"
# Names the loaders and rules need by role (so no other module spells an option).
MODEL = "model"
REVISION = "revision"
HF_OVERRIDES = "hf_overrides"
MAX_MODEL_LEN = "max_model_len"
TENSOR_PARALLEL = "tensor_parallel_size"
PIPELINE_PARALLEL = "pipeline_parallel_size"
GPU_MEMORY_UTILIZATION = "gpu_memory_utilization"
# vLLM's own container image, tagged with the release (https://docs.vllm.ai/en/stable/deployment/docker/);
# other images named *vllm* (lmcache/vllm-openai, opea/vllm-gaudi, rocm/vllm-dev) tag their own versions.
OFFICIAL_IMAGES = ("vllm/vllm-openai",)


def is_official_image(name: str) -> bool:
    """Whether an image name (registry and tag removed or not) is one of vLLM's own images."""
    repo = name.split("@", 1)[0]
    if ":" in repo.rsplit("/", 1)[-1]:
        repo = repo.rsplit(":", 1)[0]
    parts = repo.split("/")
    if len(parts) > 2 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]  # a registry host (docker.io/vllm/vllm-openai)
    return "/".join(parts) in OFFICIAL_IMAGES
# Options that size memory: when one comes from a variable or template the file does not resolve,
# a memory check would silently use the default instead (SITS001/SITS007 say they cannot check).
SIZING = ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len", "gpu_memory_utilization",
          "kv_cache_dtype", "kv_cache_memory_bytes", "max_num_seqs", "max_num_batched_tokens", "block_size",
          "quantization", "dtype", "enforce_eager", "hf_overrides",
          # these decide whether 0.34's extensible KV cache is on, and so gpu_memory_utilization's default
          "enable_extensible_kv_cache", "num_gpu_blocks_override")
# Options that move memory in ways the memory model does not follow (weights offloaded to CPU
# memory, vllm/model_executor/models/utils.py maybe_offload_to_cpu): set, the memory rules say
# they cannot check rather than count the offloaded weights on the GPU.
NOT_MODELLED = {"cpu_offload_gb": "offloads that many GB of weights per GPU to CPU memory, which sits-doctor's "
                                  "memory model does not count"}


def sizing_unknown(plan) -> list[str]:
    """Why the memory of this plan cannot be sized: sizing options from an unresolved variable
    or template, and set options whose effect the memory model does not follow."""
    out = [f"{s.raw_key} is {s.shown!r}, a variable or template this file does not set ({s.prov})"
           for k, s in plan.settings.items() if s.templated and k.partition(".")[0] in SIZING]
    for key, why in NOT_MODELLED.items():
        s = plan.settings.get(key)
        if s is not None and (s.templated or s.value not in (0, 0.0, None)):
            out.append(f"{s.raw_key} {s.raw!r} ({s.prov}) {why}")
    return out


KV_CACHE_DTYPE = "kv_cache_dtype"
KV_CACHE_MEMORY_BYTES = "kv_cache_memory_bytes"  # sizes the pool directly: no memory profiling decides it
PREFIX_CACHING = "enable_prefix_caching"
CHUNKED_PREFILL = "enable_chunked_prefill"
DISABLE_SLIDING_WINDOW = "disable_sliding_window"
OPTIMIZATION_LEVEL = "optimization_level"  # -O<n>
# Words a broken file must contain to be reported as a broken vLLM config while walking.
SNIFF_WORDS = ("vllm", MAX_MODEL_LEN, "max-model-len", "tensor_parallel", "tensor-parallel")
HELM_FLAGS: dict[str, Option] = {o.helm: o for o in OPTIONS.values() if o.helm}
# production-stack's template spells these two with underscores; argparse accepts either.
HELM_UNDERSCORE = frozenset({"gpu_memory_utilization", "max_loras"})
HELM_BOOL_KEYS = {"enableChunkedPrefill": "enable_chunked_prefill", "enablePrefixCaching": "enable_prefix_caching"}
HELM_ALWAYS_WRITTEN = "enablePrefixCaching"  # the chart writes --no-enable-prefix-caching unless it is true
HELM_SPEC_FLAGS = {"enableLoRA": "enable_lora"}  # modelSpec keys (outside vllmConfig) that add a flag
# CompilationConfig fields that moved or went away.
COMPILATION_MAX_CAPTURE_SIZE = "compilation_config.max_capture_size"


def option(name: str) -> Option | None:
    return OPTIONS.get(name.partition(".")[0])


def kind_of(name: str) -> str | None:
    o = option(name)
    return o.kind if o else None


@lru_cache(maxsize=None)
def parser_kind(name: str, release: str | None = None) -> tuple[str, str] | None:
    """(kind, parser type) with which ``release``'s own parser reads option ``name``
    (data/vllm_options.json: ``human_int`` / ``human_readable_int`` for ``max_num_batched_tokens``
    from 0.9.1, ``int`` before); ``release`` None: the newest release that has the option. None
    when no release in the tables (or not ``release``) has it."""
    releases = _parser_data()["releases"]
    index = {v: i for i, v in enumerate(releases)}
    segments = _parser_data()["options"].get(name) or []
    if release is not None:
        i = index.get(release)
        segments = [seg for seg in segments if i is not None and index[seg["first"]] <= i <= index[seg["last"]]]
    if not segments:
        return None
    seg = max(segments, key=lambda seg: index[seg["last"]])
    return seg["kind"], str(seg.get("type") or "")


def normalize_key(name: str) -> str:
    """``max-model-len`` → ``max_model_len``; only the part before the first ``.`` changes
    (``vllm/utils/argparse_utils.py``: dashes and underscores are the same up to the first dot)."""
    head, dot, rest = name.partition(".")
    return head.replace("-", "_") + dot + rest


def flag_of(name: str, *, dashed: bool = True) -> str:
    head, dot, rest = name.partition(".")
    return "--" + (head.replace("_", "-") if dashed else head) + dot + rest


@lru_cache(maxsize=None)
def sniff_keys() -> frozenset[str]:
    """Option names that make a YAML mapping a vLLM --config file."""
    return frozenset(OPTIONS)


def is_generic(name: str) -> bool:
    o = OPTIONS.get(name)
    return o is not None and o.generic


def default_on(name: str, version) -> bool:
    """Whether a boolean option is on by default at ``version`` (a packaging Version)."""
    from sits_doctor.versions import V

    o = OPTIONS.get(name)
    return o is not None and o.default_on is not None and version >= V(o.default_on)


# Boolean options that are off by default in every version (store_true, or a config field
# defaulting to False); a dropped `false` for them changes nothing.
DEFAULT_OFF = frozenset(
    """enforce_eager trust_remote_code disable_log_stats enable_lora calculate_kv_scales
    enable_auto_tool_choice disable_custom_all_reduce disable_sliding_window enable_expert_parallel
    enable_sleep_mode skip_tokenizer_init enable_prompt_embeds enable_log_requests async_scheduling
    enable_eplb""".split()
)
# 0.6.6.post1 … 0.8.4: options parsed with StoreBoolean, which `key: false` in dest spelling reaches.
STORE_BOOLEAN = frozenset({"enable_chunked_prefill", "multi_step_stream_outputs", "disable_logprobs_during_spec_decoding"})


def default_off(name: str) -> bool:
    return name in DEFAULT_OFF


def yaml_false_dropped(setting, version) -> bool:
    """Whether vLLM's --config loader drops this `key: false` line (``load_config_file``: every
    false before 0.28; from 0.28 only underscored keys, whose --no-<key> is no flag; 0.6.6 … 0.8.4
    pass StoreBoolean options spelled as their dest on as ``--key False``)."""
    from sits_doctor.versions import V

    if setting.raw is not False or "." in setting.key:
        return False
    ver = V(version)
    if ver >= V(YAML_FALSE_AS_NO_FLAG):
        return "_" in setting.raw_key
    low, high = STORE_BOOLEAN_SPAN
    return not (setting.key in STORE_BOOLEAN and setting.raw_key == setting.key and V(low) <= ver < V(high))


# --- options a release accepts but does not act on (SITS204 reports them) -------------------
class Ignored(NamedTuple):
    """An option the parser accepts that changes nothing in the releases ``first`` … ``last``
    (``last`` None: up to the newest known), unless ``unless`` (another option) is on."""

    first: str
    last: str | None
    why: str
    source: str
    unless: str | None = None


LORA_SOURCE = ("vllm/engine/arg_utils.py EngineArgs.create_engine_config (lora_config = LoRAConfig(...) "
               "if self.enable_lora else None) @0.9.2, @0.10.0, @0.17.1, @0.33.0, @0.34.0")
_LORA_ONLY = "vLLM builds its LoRA config only with --enable-lora"
IGNORED: dict[str, Ignored] = {
    "swap_space": Ignored(
        "0.11.0", "0.17.1",
        "the V1 engine, the only one from 0.11.0, keeps no CPU swap space: the value is read only by the "
        "startup check that it fits in CPU memory (\"Too large swap space\")",
        "vllm/config/cache.py@0.17.1 CacheConfig.verify_with_parallel_config; the V0 workers that allocated it "
        "(vllm/worker/worker.py num_cpu_blocks = swap_space_bytes // ...) are in 0.10.2 and gone in 0.11.0; "
        "0.8.0-0.10.2 still fall back to V0 (EngineArgs._is_v1_supported_oracle)"),
    **{name: Ignored("0.9.2", None, _LORA_ONLY, LORA_SOURCE, unless="enable_lora")
       for name in ("max_loras", "max_lora_rank", "max_cpu_loras", "fully_sharded_loras")},
}


def ignored_at(name: str, version: str, plan=None) -> Ignored | None:
    """Why ``version`` accepts option ``name`` and does nothing with it (None when it acts on it,
    or when that was not checked for this release)."""
    from sits_doctor.versions import V

    entry = IGNORED.get(name)
    if entry is None or V(version) < V(entry.first) or (entry.last is not None and V(version) > V(entry.last)):
        return None
    if entry.unless is not None:
        on = plan.get(entry.unless) if plan is not None else None
        if plan is None or (on is not None and (on.templated or on.value is not False)):
            return None  # the option it depends on is on (or may be)
    return entry


# --- effective serving facts ------------------------------------------------------------------
GPU_MEMORY_UTILIZATION_092 = "0.20.0"  # default 0.92 from here (0.90 before)
# From 0.34 the KV cache is "extensible" by default on CUDA and ROCm (sized from measured memory)
# and an unset gpu_memory_utilization resolves to 1.0; 0.92 where that cache is off
# (vllm/config/cache.py@0.34.0 CacheConfig.resolved_gpu_memory_utilization,
# vllm/config/vllm.py@0.34.0 VllmConfig._resolve_extensible_kv_cache).
EXTENSIBLE_KV_CACHE = "0.34.0"
EXTENSIBLE_KV_CACHE_OFF_BY = ("kv_cache_memory_bytes", "num_gpu_blocks_override")  # these turn it off


def utilization_default(version: str, plan=None) -> float:
    """``gpu_memory_utilization`` when it is not set, for this release (and plan: from 0.34 the
    default depends on whether the extensible KV cache is on)."""
    from sits_doctor.versions import V

    if V(version) >= V(EXTENSIBLE_KV_CACHE) and not _extensible_kv_cache_off(plan):
        return 1.0
    return 0.92 if V(version) >= V(GPU_MEMORY_UTILIZATION_092) else 0.90


def _extensible_kv_cache_off(plan) -> bool:
    if plan is None:
        return False
    if plan.value("enable_extensible_kv_cache") is False:
        return True
    return any(plan.value(k) is not None for k in EXTENSIBLE_KV_CACHE_OFF_BY)
DEFAULT_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE
ARG_UTILS = "vllm/engine/arg_utils.py"
BATCH_DEFAULTS_NOTE = ("depends on the GPU (EngineArgs.get_batch_defaults: 1024 sequences and 8192 batched "
                       "tokens for the API server on ≥70 GiB GPUs other than A100, 256 and 2048 otherwise)")


# Options whose values size memory as numbers: the effective facts read them as the target's own
# parser does (``read_as_parsed``), whatever a loader made of them before the target was known.
NUMERIC = frozenset({MAX_MODEL_LEN, "max_num_seqs", "max_num_batched_tokens", "block_size", TENSOR_PARALLEL,
                     PIPELINE_PARALLEL, "data_parallel_size", GPU_MEMORY_UTILIZATION, "max_cudagraph_capture_size",
                     KV_CACHE_MEMORY_BYTES})


def read_as_parsed(plan, setting, version: str):
    """What ``version``'s argument parser makes of the value ``setting`` wrote (its words, as
    the command line or the --config loader hands them over: ``str(value)`` of a YAML scalar):
    the number, None for an optional type's ``""`` / ``"None"``, or the text it cannot read
    (which the validated facts hold as invalid and SITS201 reports)."""
    from sits_doctor.loaders.vllm_args import coerce

    found = parser_release(version)
    release = found[0] if found is not None else parser_table()[0][0]
    raw = setting.raw
    if setting.site is not None and setting.site.kind == "helm" or plan.kind == KWARGS:
        written = raw  # a chart's template or EngineArgs keywords: the value as it is
    elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
        written = str(raw)  # --config YAML: load_config_file passes str(value) to the parser
    else:
        written = raw
    if isinstance(written, bool):
        return setting.value
    return coerce(setting.key, written, release)


def effective(plan, target, model_dims=None):
    """The :class:`~sits_doctor.facts.Serving` of a vLLM Plan at ``target`` (a Target), typed
    by :func:`sits_doctor.facts.validated`."""
    from sits_doctor.facts import Serving, Value, validated
    from sits_doctor.plan import Provenance
    from sits_doctor.versions import V

    version = target.version
    ver = V(version)

    def default(value, what: str = ARG_UTILS):
        return Value.default(value, f"default of vLLM {version} ({what})")

    def setting(*keys):
        for key in keys:
            s = plan.settings.get(key)
            if s is not None and not s.templated:
                return s
        return None

    def val(key, fallback=None, *more):
        s = setting(key, *more)
        if s is not None and plan.kind == "vllm-yaml" and yaml_false_dropped(s, version):
            if fallback is None:
                return None
            return Value(fallback.value, Provenance.derived(
                f"`{s.raw_key}: false` ({s.prov}) is dropped by vLLM {version}'s config loader; {fallback.prov}"))
        if s is None:
            return fallback
        if s.key in NUMERIC:
            value = read_as_parsed(plan, s, version)
            return fallback if value is None else Value(value, s.prov, s)
        return Value.of(s)

    eager = val("enforce_eager", default(False))
    level = setting("optimization_level", "compilation_config.level", "compilation_config.mode")
    mode = val("compilation_config.cudagraph_mode")
    graphs_off = eager.value is True or (level is not None and level.value in (0, "0"))
    if mode is not None and str(mode.value).upper() == "NONE":
        graphs_off = True
    why = eager if eager.value is True else (Value.of(level) if graphs_off and level is not None else mode)
    cuda_graphs = (Value(False, why.prov, why.setting) if graphs_off and why is not None
                   else Value.derived(True, f"CUDA graphs are on unless --enforce-eager, -O0 or cudagraph_mode NONE "
                                            f"(vLLM {version})"))
    util_default = utilization_default(version, plan)
    backend = val("attention_backend", None, "attention_config.backend")
    env_backend = plan.env.get(ENV_ATTENTION_BACKEND)
    if backend is None and env_backend is not None and not env_backend.templated and ver < V(ATTENTION_BACKEND_ENV_IGNORED):
        backend = Value.of(env_backend)
    kv_dtype = val("kv_cache_dtype")
    if kv_dtype is None:
        model_dtype = model_dims.dtype if model_dims is not None else None
        kv_dtype = (Value.derived(model_dtype.value, f"kv_cache_dtype auto: the model dtype ({model_dtype.prov})")
                    if model_dtype is not None else default("auto"))
    max_len = val(MAX_MODEL_LEN)
    if max_len is not None and (max_len.value == -1 or (max_len.value == "auto" and ver >= V(MAX_MODEL_LEN_AUTO))):
        max_len = _derived_max_len(plan, version)  # -1 and "auto": vLLM derives it from the model
    elif max_len is None:
        max_len = _derived_max_len(plan, version)
    seqs = val("max_num_seqs", default(None, BATCH_DEFAULTS_NOTE))
    tokens = val("max_num_batched_tokens", default(None, BATCH_DEFAULTS_NOTE))
    capture = val("max_cudagraph_capture_size", None, "compilation_config.max_cudagraph_capture_size")
    on_v1 = ver >= V(V1_DEFAULT)
    return validated(Serving(
        max_model_len=max_len,
        max_num_seqs=seqs,
        max_num_batched_tokens=tokens,
        kv_cache_dtype=kv_dtype,
        block_size=val("block_size", default(DEFAULT_BLOCK_SIZE, "vllm/config/cache.py")),
        tensor_parallel=val("tensor_parallel_size", default(1)),
        pipeline_parallel=val("pipeline_parallel_size", default(1)),
        data_parallel=val("data_parallel_size", default(1)),
        expert_parallel=val("enable_expert_parallel", default(False)),
        memory_fraction=val("gpu_memory_utilization", default(util_default, ARG_UTILS if util_default < 1.0 else
                            "vllm/config/cache.py resolved_gpu_memory_utilization: the extensible KV cache is on, "
                            "as on CUDA and ROCm (assumed)")),
        enforce_eager=eager,
        cuda_graphs=cuda_graphs,
        cudagraph_mode=mode,
        capture_sizes=val("cudagraph_capture_sizes", None, "compilation_config.cudagraph_capture_sizes", "cuda_graph_sizes"),
        max_capture_size=capture,
        attention_backend=backend,
        prefix_caching=val(PREFIX_CACHING, default(True) if on_v1 else None),
        chunked_prefill=val(CHUNKED_PREFILL, default(True) if on_v1 else None),
        speculative=val("speculative_config"),
        kv_cache_bytes=val(KV_CACHE_MEMORY_BYTES),
    ))


def max_model_len_setting(plan):
    return plan.settings.get(MAX_MODEL_LEN)


def derived_max_len(plan, version):
    """vLLM's derivation for this plan's model (the sliding-window switch included)."""
    from sits_doctor.frameworks.vllm_max_model_len import derived_max_model_len

    return derived_max_model_len(plan.model, version, disable_sliding_window=plan.value(DISABLE_SLIDING_WINDOW) is True)


def _derived_max_len(plan, version):
    from sits_doctor.facts import Value

    if plan.model is None:
        return None
    d = derived_max_len(plan, version)
    if d.value == float("inf"):
        return None
    steps = "; ".join(d.steps)
    return Value.derived(int(d.value), f"max_model_len unset: vLLM {version} derives {int(d.value)} from the model ({steps})")


# --- what each release's own parser accepts (data/vllm_options.json, tools/gen_vllm_options.py) --
COMPILATION_CONFIG = "compilation_config"
# A parser type that reads "None" and "" as None (vllm/engine/arg_utils.py optional_type@0.33.0;
# the recorded type names say which options and releases have it).
OPTIONAL_TYPE = "_optional_type("
NONE_WORDS = ("", "None")
# Parser types that read a JSON text with json.loads or pydantic's validate_json: a value that
# opens an object but is not JSON (single quotes, Python's repr of a dict) stops the server.
STRICT_JSON_TYPES = ("parse_dataclass", "loads", "_parse_type(loads)", "union_dict_and_str")
COMPILATION_CONFIG_INT_REJECTED = "0.9.2"  # `--compilation-config 3` fails validation from here
COMPILATION_LEVEL_GONE = "0.18.0"  # CompilationConfig.level no longer accepted (use mode)
COMPILATION_LEVEL = "compilation_config.level"
MAX_MODEL_LEN_AUTO = "0.14.0"  # --max-model-len auto (human_readable_int_or_auto)
KWARGS = "vllm-kwargs"  # a plan whose settings are EngineArgs keyword arguments (Ray Serve LLM engine_kwargs)
# What Ray Serve LLM raises for an engine_kwargs key that is neither an AsyncEngineArgs nor a
# FrontendArgs field of the installed vLLM, before vLLM parses anything
# (python/ray/llm/_internal/serve/engines/vllm/vllm_models.py VLLMEngineConfig.from_llm_config,
# ray-project/ray@b4061b5).
KWARGS_UNKNOWN = "Ray Serve LLM fails to start the deployment"
KWARGS_UNKNOWN_ERROR = "ValueError: Unknown engine argument: {key}"  # what it raises
BOOL_WORDS = ("true", "false")  # a separate word after a flag that takes none: a stray argument


class FlagInfo(NamedTuple):
    flag: str  # the full flag it resolved to
    dest: str  # the option it sets
    segment: dict  # the parser entry of that release (action, type, kind, choices, default, deprecated)
    abbreviation: bool = False  # written as a unique prefix of ``flag`` (argparse allow_abbrev)


@lru_cache(maxsize=None)
def parser_table() -> tuple[list[str], dict[str, list[tuple[int, int, str, dict]]], list[dict]]:
    """(releases, flag -> [(first index, last index, dest, entry)], parser entries) from the data
    that tools/gen_vllm_options.py wrote by running each release's own argument parser."""
    data = _parser_data()
    releases = data["releases"]
    index = {v: i for i, v in enumerate(releases)}
    flags: dict[str, list[tuple[int, int, str, dict]]] = {}
    for dest, segments in data["options"].items():
        for seg in segments:
            for f in seg["flags"]:
                flags.setdefault(f, []).append((index[seg["first"]], index[seg["last"]], dest, seg))
    parser = [dict(p, first_i=index[p["first"]], last_i=index[p["last"]]) for p in data["parser"]]
    return releases, flags, parser


@lru_cache(maxsize=None)
def parser_release(version: str) -> tuple[str, str] | None:
    """(the release whose parser judges ``version``, a note when it is not that exact release),
    or None before the first release in the data."""
    from sits_doctor.versions import V

    releases, _, _ = parser_table()
    ver = V(version)
    below = [r for r in releases if V(r) <= ver]
    if not below:
        return None
    rel = below[-1]
    if V(rel) == ver:
        return rel, ""
    if rel == releases[-1]:
        return rel, f"judged by the parser of vLLM {rel}, the newest release in the data"
    return rel, f"judged by the parser of vLLM {rel}, the nearest release below {version} in the data"


def normalize_flag(flag: str) -> str:
    """``--max_model_len`` → ``--max-model-len`` (FlexibleArgumentParser); short flags as they are."""
    return flag_of(flag[2:]) if flag.startswith("--") else flag


@lru_cache(maxsize=4096)
def lookup_flag(written: str, release: str) -> FlagInfo | None:
    """How ``release``'s parser reads the flag ``written`` (``--max_model_len``, ``-tp``,
    ``--compilation-config.mode``, an abbreviation), or None when it rejects it."""
    releases, flags, parser = parser_table()
    i = releases.index(release)
    entry = next(p for p in parser if p["first_i"] <= i <= p["last_i"])
    flag = normalize_flag(written) if entry.get("underscore_to_dash", True) else written
    base, dot, _ = flag.partition(".")
    if dot and not entry.get("dotted_json"):
        return None
    candidates = [base] if dot else [flag]
    if flag == "-O":  # FlexibleArgumentParser rewrites -O<n> (dash_O): to --optimization-level from 0.12
        if not entry.get("dash_O"):
            return None
        candidates = ["-O", "--optimization-level", "--compilation-config"]
    for f in candidates:
        for a, b, dest, seg in flags.get(f, ()):
            if a <= i <= b and (not dot or seg["kind"] == "json"):
                return FlagInfo(f, dest, seg)
    if dot:
        return None
    if entry.get("allow_abbrev") and flag.startswith("--"):
        matches = [f for f in flags_at(release) if f.startswith(flag)]
        if len(matches) == 1:
            (f,) = matches
            dest, seg = next((dest, seg) for a, b, dest, seg in flags[f] if a <= i <= b)
            return FlagInfo(f, dest, seg, abbreviation=True)
    return None


def written_options(plan):
    """(setting, flag) for each option as the parser will see it: command-line flags, and
    --config keys (which vLLM turns into ``--key``); not fields inside a JSON value, and not
    `key: false` lines of a --config file (SITS205 judges those)."""
    import re

    for key, setting in plan.settings.items():
        if setting.site is None:
            continue
        written = setting.raw_key
        if plan.kind == "vllm-yaml":
            if "." in key or setting.raw is False:
                continue
            yield setting, "--" + written
        elif plan.kind == KWARGS:  # engine arguments as keyword arguments: one per EngineArgs field
            if "." not in key:
                yield setting, "--" + key.replace("_", "-")
        elif written.startswith("-") or key.startswith((LOOKALIKE, UNREAD)):
            yield setting, "-O" if re.fullmatch(r"-O\d+", written) else written


BOOL_ACTIONS_WITHOUT_VALUE = frozenset({"store_true", "store_false", "BooleanOptionalAction", "EnableDisableAction"})


def flag_history(written: str) -> list[tuple[str, str]]:
    """The (first, last) release runs in which the flag is accepted (a dotted ``--x.field`` only
    where the parser reads dotted JSON fields)."""
    releases, flags, parser = parser_table()
    flag, dot, _ = normalize_flag(written).partition(".")
    runs = sorted((a, b) for a, b, _, _ in flags.get(flag, ()))
    if dot:
        dotted = {i for p in parser if p.get("dotted_json") for i in range(p["first_i"], p["last_i"] + 1)}
        runs = [(min(r), max(r)) for a, b in runs if (r := [i for i in range(a, b + 1) if i in dotted])]
    merged: list[list[int]] = []
    for a, b in runs:
        if merged and a <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(releases[a], releases[b]) for a, b in merged]


def deprecated_since(written: str, release: str) -> str:
    """The first release of the unbroken run of releases up to ``release`` whose parser marks
    the flag deprecated."""
    releases, flags, _ = parser_table()
    flag = normalize_flag(written).partition(".")[0]
    marked = {i for a, b, _, seg in flags.get(flag, ()) if seg.get("deprecated") for i in range(a, b + 1)}
    i = releases.index(release)
    while i - 1 in marked:
        i -= 1
    return releases[i]


def next_release(release: str) -> str | None:
    releases, _, _ = parser_table()
    i = releases.index(release)
    return releases[i + 1] if i + 1 < len(releases) else None


@lru_cache(maxsize=None)
def flags_at(release: str) -> list[str]:
    releases, flags, _ = parser_table()
    i = releases.index(release)
    return sorted(f for f, segs in flags.items() if any(a <= i <= b for a, b, _, _ in segs))
