"""What TensorRT-LLM accepts, by version: the one home of its LLM-API option names and of the
pre-1.0 spellings that 1.x rejects.

Sources: ``tensorrt_llm/llmapi/llm_args.py`` (``StrictBaseModel``: ``extra="forbid"``), the 1.0
release notes' "API Changes" (``docs/source/release-notes.md``) and v1.0.0rc2 (#5014,
``cuda_graph_config``) in NVIDIA/TensorRT-LLM.
"""

from __future__ import annotations

from functools import lru_cache



def _newest() -> str:
    return data_releases()[-1]  # the newest release whose LLM-API models data/trtllm_options.json holds


def __getattr__(name: str):
    """``NEWEST``: the newest release this module's knowledge covers, read off its data when first
    asked (not at import: every run imports this module, few need it)."""
    if name == "NEWEST":
        return _newest()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

LLMAPI_STRICT = "1.0"  # LLM-API options are pydantic StrictBaseModels: unknown keys fail at startup

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

# Pre-1.0 LLM-API keys and what 1.x takes instead: (hint, the 1.x key a value carries over to).
PRE_1_0_KEYS: dict[str, tuple[str | None, str | None]] = {
    "use_cuda_graph": ("cuda_graph_config: {} to enable (the 1.x default), cuda_graph_config: null to disable", None),
    "cuda_graph_batch_sizes": ("cuda_graph_config.batch_sizes", "cuda_graph_config.batch_sizes"),
    "cuda_graph_max_batch_size": ("cuda_graph_config.max_batch_size", "cuda_graph_config.max_batch_size"),
    "cuda_graph_padding_enabled": ("cuda_graph_config.enable_padding", "cuda_graph_config.enable_padding"),
    "cuda_graph_config.padding_enabled": ("cuda_graph_config.enable_padding", "cuda_graph_config.enable_padding"),
    "kv_cache_dtype": ("kv_cache_config.dtype", "kv_cache_config.dtype"),
    "mixed_sampler": (None, None),  # 1.0 renamed it enable_mixed_sampler, which later 1.x releases no longer have
    "autotuner_enabled": ("enable_autotuner", "enable_autotuner"),
    "pytorch_backend_config": ("its fields at the top level (PyTorchConfig is no longer accepted)", None),
}
MIXED_SAMPLER_GONE = "remove it (1.0 renamed it enable_mixed_sampler, which later 1.x releases no longer have)"


# --- effective serving facts (LLM-API YAML; engine config.json) -------------------------------
# option names (LlmArgs / BuildConfig / KvCacheConfig fields) the capacity rules read and write
MAX_SEQ_LEN = "max_seq_len"
BUILD_MAX_SEQ_LEN = "build_config.max_seq_len"  # an engine's, fixed at build time
MAX_INPUT_LEN = "max_input_len"
BUILD_MAX_INPUT_LEN = "build_config.max_input_len"
KV_MAX_TOKENS = "kv_cache_config.max_tokens"
KV_CACHE_DTYPE = "kv_cache_config.dtype"
KV_FREE_FRACTION = "kv_cache_config.free_gpu_memory_fraction"  # of the memory free after the model
BACKEND = "backend"
TENSORRT_BACKENDS = ("tensorrt", "trt")  # LlmArgs.backend values that run a built engine
PYTORCH_BACKENDS = ("pytorch", "_autodeploy")  # ... and the PyTorch runtime (the default from 1.0)
# When an LLM-API file sets no backend: trtllm-serve's --backend defaults to pytorch from 1.0
# (tensorrt_llm/commands/serve.py@00209af; 1.0 release notes "Change default backend to PyTorch in
# trtllm-serve"), and tensorrt_llm.LLM is the PyTorch LLM (llm_args.py: LlmArgs = TorchLlmArgs).
ASSUMED_BACKEND = "pytorch"
ASSUMED_BACKEND_WHY = ("the file sets no backend, and trtllm-serve's --backend defaults to pytorch from 1.0 "
                       "(tensorrt_llm/commands/serve.py; tensorrt_llm.LLM is the PyTorch LLM)")
FAIL_FAST_WINDOW = "fail_fast_on_attention_window_too_large"  # raise instead of shrinking the window (1.0+)
KV_FRACTION_DEFAULT = 0.9  # KvCacheConfig.free_gpu_memory_fraction (fraction of FREE memory) since 0.8.0
TOKENS_PER_BLOCK_DEFAULT = 32  # KvCacheConfig.tokens_per_block
LLM_ARGS = "tensorrt_llm/llmapi/llm_args.py"
# a pre-0.8 engine config.json (BuilderConfig.to_dict(), tensorrt_llm/builder.py): its build settings
LEGACY_ENGINE_BEFORE = "0.8"  # the first release whose engines have pretrained_config/build_config
LEGACY_BUILDER = "builder_config"
LEGACY_MAX_BATCH_SIZE = "builder_config.max_batch_size"
LEGACY_MAX_INPUT_LEN = "builder_config.max_input_len"
LEGACY_MAX_OUTPUT_LEN = "builder_config.max_output_len"  # no max_seq_len: the longest sequence is input + output
LEGACY_MAX_NUM_TOKENS = "builder_config.max_num_tokens"
LEGACY_TP = "builder_config.tensor_parallel"
LEGACY_PP = "builder_config.pipeline_parallel"
LEGACY_TOKENS_PER_BLOCK = "plugin_config.tokens_per_block"
LEGACY_PAGED_KV = "plugin_config.paged_kv_cache"


def is_legacy_engine(plan) -> bool:
    """A plan of a pre-0.8 engine config.json (``builder_config``/``plugin_config``)."""
    return plan.kind == "trtllm-engine" and LEGACY_BUILDER in plan.settings and "build_config" not in plan.settings


def effective(plan, target, model_dims=None):
    """The :class:`~sits_doctor.facts.Serving` of a TensorRT-LLM plan (LLM-API YAML, an engine's
    config.json), typed by :func:`sits_doctor.facts.validated`: the LLM API's pydantic models read
    numbers leniently (``"8192"`` and ``8192.0`` are 8192), so the values go in as written."""
    from sits_doctor.facts import Serving, Value, validated
    from sits_doctor.versions import V

    def default(value, note=LLM_ARGS):
        return Value.default(value, f"default of TensorRT-LLM {target.version} ({note})")

    def val(*keys, fallback=None):
        for key in keys:
            s = plan.settings.get(key)
            if s is not None and not s.templated:
                return Value.of(s)
        return fallback

    engine = plan.kind == "trtllm-engine"
    if engine and is_legacy_engine(plan):
        return validated(_legacy_engine(plan, val))
    pre = "build_config." if engine else ""
    graphs = None
    if not engine:
        cfg = plan.settings.get("cuda_graph_config")
        if cfg is not None:
            graphs = Value(cfg.value is not None, cfg.prov, cfg)
        elif V(target.version) >= V(LLMAPI_STRICT) and plan.value("backend") in (None, "pytorch"):
            graphs = default(True, LLM_ARGS + ": cuda_graph_config default_factory on the PyTorch backend")
    return validated(Serving(
        max_model_len=val(BUILD_MAX_SEQ_LEN if engine else MAX_SEQ_LEN),
        max_num_seqs=val(pre + "max_batch_size"),
        max_num_batched_tokens=val(pre + "max_num_tokens"),
        kv_cache_dtype=val(KV_CACHE_DTYPE, "pretrained_config.quantization.kv_cache_quant_algo"),
        block_size=val("kv_cache_config.tokens_per_block", "build_config.plugin_config.tokens_per_block",
                       fallback=None if engine else default(TOKENS_PER_BLOCK_DEFAULT)),
        tensor_parallel=val("tensor_parallel_size", "pretrained_config.mapping.tp_size"),
        pipeline_parallel=val("pipeline_parallel_size", "pretrained_config.mapping.pp_size"),
        memory_fraction=val(KV_FREE_FRACTION,
                            fallback=None if engine else default(KV_FRACTION_DEFAULT, "KvCacheConfig, a fraction of free memory")),
        cuda_graphs=graphs,
        prefix_caching=val("kv_cache_config.enable_block_reuse", fallback=None if engine else default(True)),
        kv_cache_tokens=val(KV_MAX_TOKENS),
        max_input_len=val(BUILD_MAX_INPUT_LEN if engine else MAX_INPUT_LEN),
    ))


def _legacy_engine(plan, val):
    """A pre-0.8 engine's serving facts: what its builder_config and plugin_config state. Its KV
    dtype is a bit of ``quant_mode`` whose position moved between releases (PER_GROUP was added
    before INT8_KV_CACHE/FP8_KV_CACHE in tensorrt_llm/quantization/mode.py), so it is not read."""
    from sits_doctor.facts import Serving, Value

    max_len = None
    inp, out = plan.settings.get(LEGACY_MAX_INPUT_LEN), plan.settings.get(LEGACY_MAX_OUTPUT_LEN)
    if (inp is not None and out is not None and not inp.templated and not out.templated
            and all(isinstance(s.value, int) and not isinstance(s.value, bool) for s in (inp, out))):
        max_len = Value.derived(inp.value + out.value,
                                f"max_input_len {inp.value} ({inp.prov}) + max_output_len {out.value} ({out.prov}): "
                                "a pre-0.8 engine has no max_seq_len")
    paged = plan.settings.get(LEGACY_PAGED_KV)
    return Serving(
        max_model_len=max_len,
        max_num_seqs=val(LEGACY_MAX_BATCH_SIZE),
        max_num_batched_tokens=val(LEGACY_MAX_NUM_TOKENS),
        kv_cache_dtype=None,
        block_size=val(LEGACY_TOKENS_PER_BLOCK) if paged is not None and paged.value is True else None,
        tensor_parallel=val(LEGACY_TP),
        pipeline_parallel=val(LEGACY_PP),
        memory_fraction=None,
        cuda_graphs=None,
        prefix_caching=None,
    )


# --- LLM-API fields per release (data/trtllm_options.json, tools/gen_trtllm_options.py) --------
OPTIONS_DATA = "trtllm_options.json"
DECODING_TYPE = "decoding_type"  # the discriminator of speculative_config's union


@lru_cache(maxsize=None)
def _data() -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).parent / "data" / OPTIONS_DATA).read_text(encoding="utf-8"))


def data_release(version: str) -> str | None:
    """The release in the data whose LLM-API models judge ``version``: the same major.minor
    series (the data holds only what could be read; other series are not judged)."""
    from sits_doctor.versions import V

    ver = V(version)
    for release in reversed(_data()["releases"]):
        r = V(release)
        if (r.major, r.minor) == (ver.major, ver.minor) and r <= ver:
            return release
    return None


def _segment(class_name: str, release: str) -> dict | None:
    from sits_doctor.versions import V

    for seg in _data()["classes"].get(class_name, ()):
        if V(seg["first"]) <= V(release) <= V(seg["last"]):
            return seg
    return None


def data_releases() -> list[str]:
    """The releases whose LLM-API models the data holds, oldest first."""
    return list(_data()["releases"])


def root_class(backend: str | None, release: str) -> str | None:
    """The LlmArgs class a file's top level is validated against: ``TrtLlmArgs`` for the
    TensorRT backend (``tensorrt`` or its alias ``trt``), else ``TorchLlmArgs``."""
    from sits_doctor.versions import V

    for seg in _data()["roots"].get("tensorrt" if backend in TENSORRT_BACKENDS else "pytorch", ()):
        if V(seg["first"]) <= V(release) <= V(seg["last"]):
            return seg["class"]
    return None


def fields_of(class_name: str, release: str) -> tuple[set[str], bool] | None:
    """(field names, forbids unknown keys) of a config class at ``release``."""
    seg = _segment(class_name, release)
    if seg is None:
        return None
    names = set(seg["fields"]) | {f["alias"] for f in seg["fields"].values() if f.get("alias")}
    names |= {a for f in seg["fields"].values() for a in (f.get("validation_alias") or ())}
    if "DecodingConfig" in class_name:
        names.add(DECODING_TYPE)  # read by DecodingBaseConfig.from_dict to pick the class
    return names, seg.get("extra") == "forbid"


def nested_class(class_name: str, field: str, value, release: str) -> str | None:
    """The config class a field holds at ``release`` (for a union, the one its ``decoding_type``
    names). The data maps ``Class.field`` to a class, a union list, or per-release segments of
    either."""
    from sits_doctor.versions import V

    mapping = _data()["field_class"]
    target = next((v for k, v in mapping.items() if k.split(".")[-1] == field
                   and k.split(".")[0] in (class_name, "BaseLlmArgs")), None)
    if isinstance(target, list) and target and isinstance(target[0], dict):
        target = next((seg["class"] for seg in target if V(seg["first"]) <= V(release) <= V(seg["last"])), None)
    if isinstance(target, list):
        kind = value.get(DECODING_TYPE) if isinstance(value, dict) else None
        return next((c for c in target if isinstance(kind, str) and c.lower().startswith(kind.lower())), None)
    return target
