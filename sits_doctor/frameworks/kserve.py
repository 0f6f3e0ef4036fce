"""What KServe passes to vLLM, by release: the Hugging Face server's own flags, and how the
LLMInferenceService controller starts ``vllm serve``.

**huggingfaceserver** (``python -m huggingfaceserver``, the ``kserve-huggingfaceserver`` runtime of
``modelFormat: huggingface``) builds one argparse parser from ``kserve.model_server.parser``
(``parents=[...]``) plus its own flags, reads them with ``parse_known_args()``, and picks a
backend: ``--backend`` is ``auto`` (the default), ``huggingface`` or ``vllm``; ``auto`` and
``vllm`` run vLLM when vLLM is installed and supports the model's architecture. With vLLM it adds
vLLM's own arguments to the same parser (``maybe_add_vllm_cli_parser`` → vLLM's
``make_arg_parser``), parses again, sets ``args.model = args.model_id or args.model_dir`` and
``args.revision = args.model_revision``, and builds ``AsyncEngineArgs.from_cli_args(args)``; so
every word that is not one of the flags below is a vLLM engine argument. Three consequences the
loader cannot see from a manifest:

- ``parse_known_args`` never rejects a word: an unknown or removed vLLM flag is ignored, not a
  startup failure.
- vLLM's ``FlexibleArgumentParser`` turns ``--a_b`` into ``--a-b`` only in ``parse_args``; KServe
  calls ``parse_known_args``, so an underscore spelling of a vLLM-only flag
  (``--gpu_memory_utilization``) is ignored too. KServe's own underscore flags work.
- ``VLLMModel.start_engine`` sets ``tensor_parallel_size = torch.cuda.device_count()`` whenever
  CUDA is there (``huggingfaceserver/vllm/vllm_model.py``, v0.15.0 … v0.20.0 and main).

Some KServe flags write the same ``dest`` as a vLLM engine argument, so they configure vLLM:
``--max_model_len`` and ``--max_length`` (``dest="max_model_len"``), ``--trust_remote_code``,
``--tokenizer_revision`` (:data:`FEEDS_VLLM`). ``--task``, ``--dtype`` and ``--max_log_len``
are added only when the Hugging Face backend runs (from v0.15.0; v0.13/v0.14 always had
``--task``): with vLLM they are vLLM's.

Sources, https://github.com/kserve/kserve, ``python/kserve/kserve/model_server.py`` (the
``parser.add_argument`` calls at module level) and ``python/huggingfaceserver/huggingfaceserver/
__main__.py`` (its ``parser.add_argument`` calls; which sit under ``else:`` of
``is_vllm_backend_enabled``), read at each tag below (commit in :data:`RELEASES`), and
``huggingfaceserver/__init__.py`` (``class Backend``: auto, huggingface, vllm) and
``huggingfaceserver/vllm/utils.py`` / ``vllm_model.py`` at main (aaac4e2, 2026-08-21).

**LLMInferenceService** (``serving.kserve.io/v1alpha1``, ``v1alpha2``): the controller merges the
object's spec over well-known ``LLMInferenceServiceConfig`` presets with a strategic merge patch
(``pkg/controller/v1alpha2/llmisvc/config_merge.go``: ``combineBaseRefsConfig`` picks
``config-llm-template``, or with ``spec.prefill`` the ``config-llm-prefill-template`` for the
prefill pool and ``config-llm-decode-template`` for the main one, or with ``worker`` and data
parallelism the ``*-worker-data-parallel`` presets; ``mergeSpecs``). In the presets
(``config/llmisvcconfig/*.yaml``) the container named ``main`` runs, from v0.18.0, ``/bin/bash -c
'... eval "exec vllm serve /mnt/models --served-model-name ... --port 8000 [--tensor-parallel-size
{{ .Spec.Parallelism.Tensor }}] ... ${VLLM_ADDITIONAL_ARGS} $@"' --``: the variable's words are
parsed again by ``eval`` and the container's ``args`` are ``$@``, both after KServe's own flags
(argparse: the last one wins). ``--tensor-parallel-size`` from ``spec.parallelism.tensor`` is in
the single-node preset from v0.20.0 (kserve#5782), in the data-parallel ones (with
``--data-parallel-size {{ or .Spec.Parallelism.Data 1 }}``, ``--data-parallel-size-local``,
``--enable-expert-parallel`` for ``expert: true``) since v0.16.0. v0.16.0's single-node preset ran
``command: [vllm, serve, /mnt/models]`` with the flags in ``args`` (an object's ``args`` replace
them); v0.17.0 moved them into ``command`` (an object's ``args`` follow). The model is downloaded
from ``spec.model.uri`` to ``/mnt/models``. Read at v0.16.0 (5b033a4), v0.17.0 (c71eba9), v0.18.0
(3a432a8), v0.20.0 (1fb7810) and main (aaac4e2).
"""

from __future__ import annotations

from typing import NamedTuple

REPO = "https://github.com/kserve/kserve"
MODEL_SERVER_PY = "python/kserve/kserve/model_server.py"
HF_SERVER_PY = "python/huggingfaceserver/huggingfaceserver/__main__.py"
HF_MODULE = "huggingfaceserver"  # python -m huggingfaceserver
HF_IMAGE = "huggingfaceserver"  # kserve/huggingfaceserver:<tag>[-gpu]: its entrypoint is the server
BACKEND_FLAG = "--backend"
BACKENDS = ("auto", "huggingface", "vllm")
DEFAULT_BACKEND = "auto"
VLLM_BACKENDS = ("auto", "vllm")  # auto: vLLM when it is installed and supports the architecture
MODEL_ID_FLAG = "--model_id"  # args.model = args.model_id or args.model_dir
MODEL_DIR = "/mnt/models"  # --model_dir's default, where the storage initializer puts storageUri

# The flags of ModelServer's parser (model_server.py), every release read.
_SERVER_0_13 = (
    "--http_port", "--grpc_port", "--workers", "--max_threads", "--max_asyncio_workers", "--enable_grpc",
    "--enable_docs_url", "--enable_latency_logging", "--configure_logging", "--log_config_file",
    "--access_log_format", "--model_name", "--predictor_host", "--protocol", "--predictor_protocol",
    "--predictor_use_ssl", "--predictor_request_timeout_seconds",
)
_SERVER_0_14 = _SERVER_0_13 + ("--grpc_max_send_message_length", "--grpc_max_receive_message_length")
_SERVER_0_15 = _SERVER_0_14 + ("--predictor_request_retries", "--enable_predictor_health_check")
_SERVER_0_17 = _SERVER_0_15 + ("--event-loop",)
_SERVER_0_18 = _SERVER_0_17 + ("--timeout-keep-alive",)

# huggingfaceserver's flags added whatever the backend (__main__.py).
_HF_0_13 = (
    "--model_dir", "--model_id", "--model_revision", "--tokenizer_revision", "--max_length",
    "--disable_lower_case", "--disable_special_tokens", "--trust_remote_code", "--tensor_input_names", "--task",
    "--backend", "--return_token_type_ids", "--return_probabilities",
)
_HF_0_14 = _HF_0_13 + ("--max_model_len", "--disable_log_requests", "--max_log_len", "--max-log-len")
_HF_0_15 = tuple(f for f in _HF_0_14 if f not in ("--task", "--max_log_len", "--max-log-len"))
_HF_0_16 = _HF_0_15 + ("--return_raw_logits",)
_HF_0_18 = _HF_0_16 + ("--return_offsets_mapping",)


class Release(NamedTuple):
    """The flags KServe's own parsers define in one release (they are never vLLM's)."""

    tag: str
    commit: str
    model_server: tuple[str, ...]  # kserve.model_server.parser
    hf_server: tuple[str, ...]  # huggingfaceserver, whatever the backend
    hf_backend_only: tuple[str, ...]  # added only when the Hugging Face backend runs: vLLM's otherwise


RELEASES: tuple[Release, ...] = (
    Release("v0.13.0", "1c51eeee174330b076e4171e6d71e9138f2510b3", _SERVER_0_13, _HF_0_13, ()),
    Release("v0.14.0", "7e4364246449715b902dc967167e38b38773c9cd", _SERVER_0_14, _HF_0_14, ()),
    Release("v0.15.0", "d20d4228a8b2956b800ad5a3e62c0578b5a5b97f", _SERVER_0_15, _HF_0_15,
            ("--task", "--max_log_len", "--max-log-len", "--dtype")),
    Release("v0.16.0", "5b033a4024429302440b72180472ae2d26b44086", _SERVER_0_15, _HF_0_16,
            ("--task", "--max_log_len", "--max-log-len", "--dtype")),
    Release("v0.17.0", "c71eba91631b976ff7b111f3061df9af86399e99", _SERVER_0_17, _HF_0_16,
            ("--task", "--max_log_len", "--max-log-len", "--dtype")),
    Release("v0.18.0", "3a432a84880407b15c63f458080258838eff2792", _SERVER_0_18, _HF_0_18,
            ("--task", "--max_log_len", "--max-log-len", "--dtype")),
    Release("v0.19.0", "b0eda63d2c105479140af8ec9149d992b7e44be5", _SERVER_0_18, _HF_0_18,
            ("--task", "--max_log_len", "--max-log-len", "--dtype")),
    Release("v0.20.0", "1fb781055dd1567164358233e1125142ca6ef1fe", _SERVER_0_18, _HF_0_18,
            ("--task", "--max_log_len", "--max-log-len", "--dtype")),
    Release("main", "aaac4e294dae2c7b1aa1886447793f3aa1c30912", _SERVER_0_18, _HF_0_18,
            ("--task", "--max_log_len", "--max-log-len", "--dtype")),
)

# Flags that take no value word (action="store_true"); every other KServe flag takes one.
STORE_TRUE = frozenset({
    "--enable_predictor_health_check", "--disable_lower_case", "--disable_special_tokens", "--trust_remote_code",
    "--return_token_type_ids", "--return_offsets_mapping", "--return_probabilities", "--return_raw_logits",
    "--disable_log_requests",
})

# KServe flags whose dest is a vLLM engine argument: with the vLLM backend they configure vLLM,
# under the vLLM option named here. They stay in the vLLM plan.
FEEDS_VLLM = {
    "--max_model_len": "--max_model_len",
    "--max_length": "--max_model_len",  # dest="max_model_len"
    "--trust_remote_code": "--trust_remote_code",
    "--tokenizer_revision": "--tokenizer_revision",
}

# Every flag a release's parsers define for themselves with the vLLM backend on (no flag was ever
# removed, so this is the newest release's list): they never reach vLLM's option checks.
OWN_FLAGS = frozenset(
    f for r in RELEASES for f in r.model_server + r.hf_server
    if f not in FEEDS_VLLM and f not in RELEASES[-1].hf_backend_only
)

# Why huggingfaceserver ignores a word instead of refusing to start (Plan.lenient).
LENIENT = ("KServe's huggingfaceserver reads its arguments with parse_known_args "
           "(huggingfaceserver/__main__.py), which ignores words it does not know")


def needs_flexible_parse(flag: str) -> bool:
    """Whether vLLM knows ``flag`` only through ``FlexibleArgumentParser.parse_args``'s rewriting
    (``_`` to ``-`` in the name, dotted ``--json-arg.key``), which parse_known_args skips
    (vllm/utils/argparse_utils.py@0.33.0): under huggingfaceserver such a flag is ignored."""
    if not flag.startswith("--") or flag in FEEDS_VLLM:
        return False
    head, dot, _ = flag[2:].partition(".")
    return bool(dot) or "_" in head


# What huggingfaceserver's VLLMModel.start_engine overrides with torch.cuda.device_count().
DEVICE_COUNT_OPTION = "tensor_parallel_size"
DEVICE_COUNT_NOTE = ("KServe huggingfaceserver sets tensor_parallel_size to torch.cuda.device_count() "
                     "(huggingfaceserver/vllm/vllm_model.py@v0.20.0)")

# LLMInferenceService
LLMISVC_MAIN_CONTAINER = "main"
# spec.parallelism field -> the vllm serve option the presets write from it; all but ``tensor``
# only in the data-parallel presets (chosen when the pool has a ``worker``). ``expert`` is a bool:
# ``--enable-expert-parallel`` when true.
LLMISVC_PARALLELISM = (
    ("tensor", "tensor_parallel_size"), ("data", "data_parallel_size"),
    ("dataLocal", "data_parallel_size_local"), ("expert", "enable_expert_parallel"),
)
SINGLE_NODE_PARALLELISM = frozenset({"tensor"})
BOOL_PARALLELISM = frozenset({"expert"})
ADDITIONAL_ARGS_ENV = "VLLM_ADDITIONAL_ARGS"
LLMISVC_CONFIG = "config/llmisvcconfig/config-llm-template.yaml"
