"""What ``trtllm-serve serve`` accepts, by release: its click options, their types and defaults,
and the LLM-API (``LlmArgs``) field each one feeds.

The command is ``@click.command("serve")`` in ``tensorrt_llm/commands/serve.py``; ``serve()``
hands the options to ``get_llm_args()``, whose ``llm_args`` dict names the LLM-API field each one
lands in, then loads ``--extra_llm_api_options`` (YAML) over them with
``update_llm_args_with_extra_dict`` — so the YAML wins over the command line. Since the
``DefaultGroup`` entry point (``main``), ``trtllm-serve MODEL`` is ``trtllm-serve serve MODEL``
(any first word that is not a subcommand means ``serve``). Click neither abbreviates nor turns
``-`` into ``_``: ``--max-batch-size`` is "No such option".

Sources, each read in full (the ``serve`` command's decorators and ``get_llm_args``):

- **0.18.2**: the release's generated reference page
  ``https://nvidia.github.io/TensorRT-LLM/0.18.2/commands/trtllm-serve.html`` (sphinx-click output
  of ``serve.py``: names and help only; defaults there are not shown). ``trtllm-serve [OPTIONS]
  MODEL``, no subcommands on that page.
- **0.20.0**: ``tensorrt_llm/commands/serve.py`` in Ataraksia/TensorRT-LLM@a451bf9, the ``HEAD``
  side of an unresolved merge whose ``tensorrt_llm/version.py`` ``HEAD`` side reads
  ``__version__ = "0.20.0"``.
- **1.1.0rc6**: the same file's ``upstream/main`` side (``version.py``: ``"1.1.0rc6"``).
- **1.1** (assumed): NVIDIA/TensorRT-LLM@4c05a74 ``tensorrt_llm/commands/serve.py``. Its release
  is not named in the snapshot; it has everything the 1.1.0rc6 side has plus
  ``--disagg_cluster_uri``/``--enable_chunked_prefill``/``--media_io_kwargs`` and none of the
  later aliases.
- **1.2** (assumed): NVIDIA/TensorRT-LLM@00209af ``tensorrt_llm/commands/serve.py``. Has the
  ``--config`` alias of ``--extra_llm_api_options`` (PR #9104, merged Nov 2025, "Add ``--config``
  alias ... across trtllm-serve, trtllm-eval, trtllm-bench") and the long parallelism names
  (``--tensor_parallel_size``/``--tp_size`` ...); lacks ``--hf_revision``/``--enable_attention_dp``
  (PR #12105, Mar 2026), so it predates that.

Not read: 0.19, 0.21, 1.0 and every release after the 00209af snapshot; which release first has
each option is only known to fall between two snapshots above.
"""

from __future__ import annotations

from typing import Any, NamedTuple

SERVE_PY = "tensorrt_llm/commands/serve.py"
COMMAND = "trtllm-serve"
MODULE = "tensorrt_llm.commands.serve"  # python -m: runs ``main`` (the DefaultGroup)
SUBCOMMAND = "serve"
# main's other subcommands (00209af): their words are not a ``serve`` command line
OTHER_SUBCOMMANDS = frozenset({"grpc", "disaggregated", "disaggregated_mpi_worker", "mm_embedding_serve"})
EXTRA_OPTIONS = "extra_llm_api_options"  # the key a --extra_llm_api_options / --config path is kept under
MODEL = "model"


class ServeOption(NamedTuple):
    """One click option of ``trtllm-serve serve`` (at the newest snapshot that has it)."""

    flags: tuple[str, ...]  # every spelling, the parameter's own name first
    dest: str  # click's parameter name (the ``serve()`` argument)
    type: str  # "int" | "float" | "str" | "choice" | "flag" (is_flag: takes no value) | "path" (multiple=True)
    default: Any  # click's default at the newest snapshot (see DEFAULTS_BEFORE for older ones)
    field: str | None  # the LLM-API key it sets (a dotted path into LlmArgs); None: the server's own
    note: str = ""


# Newest snapshot read (00209af) first; options that only older snapshots have come after.
OPTIONS: tuple[ServeOption, ...] = (
    ServeOption(("--tokenizer",), "tokenizer", "str", None, "tokenizer"),
    ServeOption(("--custom_tokenizer",), "custom_tokenizer", "str", None, "custom_tokenizer"),
    ServeOption(("--host",), "host", "str", "localhost", None),
    ServeOption(("--port",), "port", "int", 8000, None),
    ServeOption(("--backend",), "backend", "choice", "pytorch", "backend",
                "choices pytorch, tensorrt, _autodeploy; 'trt' is an alias of tensorrt (ChoiceWithAlias)"),
    ServeOption(("--custom_module_dirs",), "custom_module_dirs", "path", (), None, "multiple=True"),
    ServeOption(("--log_level",), "log_level", "choice", "info", None),
    ServeOption(("--max_beam_width",), "max_beam_width", "int", "BuildConfig.max_beam_width", "max_beam_width",
                "also build_config.max_beam_width"),
    ServeOption(("--max_batch_size",), "max_batch_size", "int", "BuildConfig.max_batch_size", "max_batch_size",
                "also build_config.max_batch_size"),
    ServeOption(("--max_num_tokens",), "max_num_tokens", "int", "BuildConfig.max_num_tokens", "max_num_tokens",
                "also build_config.max_num_tokens"),
    ServeOption(("--max_seq_len",), "max_seq_len", "int", "BuildConfig.max_seq_len", "max_seq_len",
                "also build_config.max_seq_len; None: deduced from the model config"),
    ServeOption(("--tensor_parallel_size", "--tp_size"), "tensor_parallel_size", "int", 1, "tensor_parallel_size"),
    ServeOption(("--pipeline_parallel_size", "--pp_size"), "pipeline_parallel_size", "int", 1, "pipeline_parallel_size"),
    ServeOption(("--context_parallel_size", "--cp_size"), "context_parallel_size", "int", 1, "context_parallel_size"),
    ServeOption(("--moe_expert_parallel_size", "--ep_size"), "moe_expert_parallel_size", "int", None,
                "moe_expert_parallel_size"),
    ServeOption(("--moe_cluster_parallel_size", "--cluster_size"), "moe_cluster_parallel_size", "int", None, None,
                "has no effect: get_llm_args() takes no such parameter, so it lands in **llm_args_extra_dict, "
                "which serve() discards (`llm_args, _ = get_llm_args(...)`) — 0.20.0, 4c05a74 and 00209af alike"),
    ServeOption(("--gpus_per_node",), "gpus_per_node", "int", None, "gpus_per_node",
                "None: torch.cuda.device_count()"),
    ServeOption(("--free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction"), "free_gpu_memory_fraction",
                "float", 0.9, "kv_cache_config.free_gpu_memory_fraction", "KvCacheConfig(free_gpu_memory_fraction=...)"),
    ServeOption(("--num_postprocess_workers",), "num_postprocess_workers", "int", 0, "num_postprocess_workers",
                "0.20.0 passes it as _num_postprocess_workers"),
    ServeOption(("--trust_remote_code",), "trust_remote_code", "flag", False, "trust_remote_code"),
    ServeOption(("--revision",), "revision", "str", None, "revision"),
    ServeOption(("--config", "--extra_llm_api_options"), EXTRA_OPTIONS, "str", None, None,
                "a YAML file of LLM-API fields loaded over the command line's (update_llm_args_with_extra_dict)"),
    ServeOption(("--reasoning_parser",), "reasoning_parser", "choice", None, "reasoning_parser",
                "0.20.0 passes it as _reasoning_parser"),
    ServeOption(("--tool_parser",), "tool_parser", "choice", None, None),
    ServeOption(("--metadata_server_config_file",), "metadata_server_config_file", "str", None, None),
    ServeOption(("--server_role",), "server_role", "str", None, None),
    ServeOption(("--fail_fast_on_attention_window_too_large",), "fail_fast_on_attention_window_too_large", "flag",
                False, "fail_fast_on_attention_window_too_large"),
    ServeOption(("--otlp_traces_endpoint",), "otlp_traces_endpoint", "str", None, "otlp_traces_endpoint"),
    ServeOption(("--disagg_cluster_uri",), "disagg_cluster_uri", "str", None, None),
    ServeOption(("--enable_chunked_prefill",), "enable_chunked_prefill", "flag", False, "enable_chunked_prefill"),
    ServeOption(("--media_io_kwargs",), "media_io_kwargs", "str", None, None, "a JSON string"),
    ServeOption(("--chat_template",), "chat_template", "str", None, None),
)
BY_DEST: dict[str, ServeOption] = {o.dest: o for o in OPTIONS}
BY_FLAG: dict[str, ServeOption] = {f: o for o in OPTIONS for f in o.flags}


class Release(NamedTuple):
    version: str  # the release the snapshot is (or is assumed to be)
    source: str
    flags: frozenset[str]
    assumed: bool = False  # the snapshot does not name its release


_V0_18 = frozenset(
    "--tokenizer --host --port --backend --max_beam_width --max_batch_size --max_num_tokens --max_seq_len "
    "--tp_size --pp_size --kv_cache_free_gpu_memory_fraction --trust_remote_code".split()
)
_V0_20 = _V0_18 | frozenset(
    "--log_level --ep_size --cluster_size --gpus_per_node --num_postprocess_workers --extra_llm_api_options "
    "--reasoning_parser".split()
)
_V1_1RC6 = _V0_20 | frozenset("--metadata_server_config_file --server_role --fail_fast_on_attention_window_too_large".split())
_V1_1 = _V1_1RC6 | frozenset("--disagg_cluster_uri --enable_chunked_prefill --media_io_kwargs".split())
_V1_2 = frozenset(BY_FLAG)

RELEASES: tuple[Release, ...] = (
    Release("0.18.2", "https://nvidia.github.io/TensorRT-LLM/0.18.2/commands/trtllm-serve.html", _V0_18),
    Release("0.20.0", f"Ataraksia/TensorRT-LLM@a451bf9 {SERVE_PY} (HEAD side; version.py 0.20.0)", _V0_20),
    Release("1.1.0rc6", f"Ataraksia/TensorRT-LLM@a451bf9 {SERVE_PY} (upstream/main side; version.py 1.1.0rc6)",
            _V1_1RC6),
    Release("1.1.0", f"NVIDIA/TensorRT-LLM@4c05a74 {SERVE_PY}", _V1_1, assumed=True),
    Release("1.2.0", f"NVIDIA/TensorRT-LLM@00209af {SERVE_PY}", _V1_2, assumed=True),
)

# Defaults that differ in older snapshots: (dest, value before the version, that version, source)
DEFAULTS_BEFORE: tuple[tuple[str, Any, str, str], ...] = (
    ("backend", None, "1.0",
     "0.20.0: click.Choice(['pytorch']), default None = the TensorRT engine path ('Default is cpp path'); "
     "1.1.0rc6 side: default 'pytorch' (1.0 notes: 'Change default backend to PyTorch in trtllm-serve')"),
)


def release_for(version: str) -> Release | None:
    """The newest snapshot read at or before ``version`` (None before 0.18.2: not read)."""
    from sits_doctor.versions import V

    found = None
    for release in RELEASES:
        if V(release.version) <= V(version):
            found = release
    return found


def same_series(release: Release, version: str) -> bool:
    """Whether ``release``'s snapshot speaks for ``version``: the same major.minor series, at or
    below it. A snapshot of another series (0.20.0 for 1.0.0, 1.2.0 for 1.3.0) does not: options
    come and go between series."""
    from sits_doctor.versions import V

    r, v = V(release.version), V(version)
    return (r.major, r.minor) == (v.major, v.minor) and r <= v


def flags_at(version: str) -> frozenset[str] | None:
    """The flags ``trtllm-serve serve`` accepts at ``version``, as far as the snapshots read say
    (a flag added between two snapshots counts from the later one)."""
    release = release_for(version)
    return release.flags if release is not None else None


def default_at(dest: str, version: str) -> Any:
    """An option's click default at ``version``."""
    from sits_doctor.versions import V

    for name, value, before, _ in DEFAULTS_BEFORE:
        if name == dest and V(version) < V(before):
            return value
    option = BY_DEST.get(dest)
    return option.default if option is not None else None


def key_of(flag: str) -> str | None:
    """The settings key a flag is kept under: its LLM-API field, else its click parameter name;
    None for a flag no snapshot has."""
    option = BY_FLAG.get(flag)
    if option is None:
        return None
    return option.field or option.dest
