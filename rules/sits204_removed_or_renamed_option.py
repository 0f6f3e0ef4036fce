"""removed-or-renamed-option (SITS204)

## What it does
Reports options that the target framework version rejects at startup or silently ignores:
- **vLLM** engine arguments (command line, `--config` YAML, Kubernetes/compose/Helm wrappers)
  that the target version no longer has (`--swap-space` ≥0.18, `--calculate-kv-scales` ≥0.28,
  `--max-seq-len-to-capture` ≥0.11, `--cuda-graph-sizes` ≥0.13, `--task` ≥0.13, ...) or does not
  have yet (`--max-cudagraph-capture-size` <0.11.1), and the `VLLM_ATTENTION_BACKEND` environment
  variable, which vLLM ≥0.16 ignores.
- **TensorRT-LLM** LLM-API / `trtllm-serve` YAML keys from before 1.0 (`use_cuda_graph`,
  `kv_cache_dtype`, `pytorch_backend_config`, ...), which 1.x rejects (`extra="forbid"`).
- **transformers** `generation_config.json` `cache_implementation` values the target version
  rejects (`"mamba"` from 4.56, `"dynamic_full"` by 5.24, `"offloaded"` before 4.50, ...).
- **ORT GenAI** `genai_config.json` keys its strict parser rejects (`Unknown value`), top-level
  scalars it silently ignores, and `session_options` keys it passes to ONNX Runtime unchecked
  (a typo there is accepted and does nothing).

## Why it hurts
A rejected option is a crash at startup, after the image pull and the model download. An ignored
option is worse: the deployment starts and runs without what was asked for (the attention backend
that was pinned, the threads that were set), and nothing says so.

## Example
```yaml file=serve.yaml
model: meta-llama/Llama-3.1-8B-Instruct
swap-space: 16
max-seq-len-to-capture: 8192
```
Use instead:
```yaml file=serve.yaml
model: meta-llama/Llama-3.1-8B-Instruct
```

## Fix
Remove the option or rename it as the message says (safe for removed no-op options; a rename
keeps the meaning). The message names the replacement where the framework has one. No automatic
fix yet.

## How it is measured
Not measured: a predicted startup failure or an ignored setting, from the option tables below
and the target version (`--target`, the image tag, the installed package, or the newest version
known, in that order; the finding's evidence says which).

## Sources
- vLLM: presence of each flag in `vllm/engine/arg_utils.py` / `vllm/entrypoints/openai/cli_args.py`
  of the source releases 0.5.5 … 0.33.0 (last version with the flag, first without);
  `VLLM_ATTENTION_BACKEND` in `vllm/envs.py` (present 0.14.0, absent 0.16.0);
  `CompilationConfig.max_capture_size` `init=False` (`vllm/config/compilation.py@0.11.0`), gone in
  0.11.1, and `extra="forbid"` on `CompilationConfig` from 0.13.0; the table is checked against a
  scan of the flags in each source release (tests/data/vllm_flags.json, tools/scan_vllm_flags.py);
  shared/research/vllm-hf-facts.md §1, §1b, §1c.
- TensorRT-LLM: release notes 1.0 "API Changes" (`docs/source/release-notes.md`), v1.0.0rc2
  (#5014, `cuda_graph_config`), `tensorrt_llm/llmapi/llm_args.py` (`StrictBaseModel`,
  `extra="forbid"`); shared/research/trtllm-ortgenai-facts.md §3.
- transformers: `generation/configuration_utils.py` (`ALL_CACHE_IMPLEMENTATIONS`, and `"paged"`
  from 5.0; `validate()` runs in `GenerationConfig.__init__`) in the wheels 4.45.2, 4.50.0,
  4.53.0, 4.56.0, 5.0.0, 5.10.4 and 5.24.0; shared/research/vllm-hf-facts.md §7.
- ORT GenAI: `src/config.cpp`, `src/json.h` (microsoft/onnxruntime-genai @00a26d59), behaviour
  reproduced on the 0.18.0 wheel; shared/research/trtllm-ortgenai-facts.md §5.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Iterator

from sits_doctor.finding import Finding, Severity
from sits_doctor.plan import Plan, Provenance
from sits_doctor.rule import Rule
from sits_doctor.source import join_pointer
from sits_doctor.versions import V

RULE = Rule(
    code="SITS204",
    name="removed-or-renamed-option",
    summary="option the target version rejects at startup or silently ignores",
    severity=Severity.ERROR,
    frameworks=("vllm", "trtllm", "ortgenai", "hf"),
)


@dataclass(frozen=True)
class Change:
    key: str
    instead: str  # what to do instead
    removed: str | None = None  # first version without it
    deprecated: str | None = None  # first version that warns
    added: str | None = None  # first version with it


VLLM_CHANGES = (
    Change("worker_use_ray", "use --distributed-executor-backend ray", removed="0.7.0"),
    Change("speculative_model", "use --speculative-config '{\"model\": ...}'", removed="0.8.3"),
    Change("num_speculative_tokens", "use --speculative-config '{\"num_speculative_tokens\": ...}'", removed="0.8.3"),
    Change("use_v2_block_manager", "remove it (the v1 block manager is gone; it was a no-op)", removed="0.10.0"),
    Change("tokenizer_pool_size", "remove it", removed="0.10.0"),
    Change("tokenizer_pool_type", "remove it", removed="0.10.0"),
    Change("tokenizer_pool_extra_config", "remove it", removed="0.10.0"),
    Change("enable_reasoning", "use --reasoning-parser alone", removed="0.10.0"),
    Change("device", "remove it (the platform is detected)", removed="0.10.0"),
    Change("long_lora_scaling_factors", "remove it", removed="0.10.0"),
    Change("max_prompt_adapters", "remove it (prompt adapters were removed)", removed="0.10.0"),
    Change("enable_prompt_adapter", "remove it (prompt adapters were removed)", removed="0.10.2"),
    Change("num_scheduler_steps", "remove it (multi-step scheduling was removed)", removed="0.10.1"),
    Change("multi_step_stream_outputs", "remove it (multi-step scheduling was removed)", removed="0.10.1"),
    Change("preemption_mode", "remove it (V0-only)", removed="0.11.0"),
    Change("disable_async_output_proc", "remove it (V0-only)", removed="0.11.0"),
    Change("scheduler_delay_factor", "remove it (V0-only)", removed="0.11.0"),
    Change("max_seq_len_to_capture", "remove it; V1 sizes CUDA graphs by tokens per step "
           "(--cuda-graph-sizes on 0.11, --max-cudagraph-capture-size from 0.11.1)", removed="0.11.0"),
    Change("rope_scaling", "use --hf-overrides '{\"rope_scaling\": ...}'", removed="0.11.1"),
    Change("rope_theta", "use --hf-overrides '{\"rope_theta\": ...}'", removed="0.11.1"),
    Change("guided_decoding_backend", "use --structured-outputs-config.backend", deprecated="0.11.0", removed="0.12.0"),
    Change("guided_decoding_disable_fallback", "use --structured-outputs-config.disable_fallback",
           deprecated="0.11.0", removed="0.12.0"),
    Change("guided_decoding_disable_any_whitespace", "use --structured-outputs-config.disable_any_whitespace",
           deprecated="0.11.0", removed="0.12.0"),
    Change("guided_decoding_disable_additional_properties",
           "use --structured-outputs-config.disable_additional_properties", deprecated="0.11.0", removed="0.12.0"),
    Change("lora_extra_vocab_size", "remove it", removed="0.12.0"),
    Change("cuda_graph_sizes", "use --cudagraph-capture-sizes or --max-cudagraph-capture-size",
           deprecated="0.11.1", removed="0.13.0"),
    Change("task", "use --runner / --convert", deprecated="0.11.2", removed="0.13.0"),
    Change("disable_log_requests", "remove it (request logging is off by default; "
           "--enable-log-requests turns it on)", deprecated="0.10.1", removed="0.17.0"),
    Change("swap_space", "remove it (no CPU swap space in the V1 engine)", removed="0.18.0"),
    Change("calculate_kv_scales", "remove it; fp8 KV without checkpoint k/v scales uses scale 1.0",
           deprecated="0.20.0", removed="0.28.0"),
    Change("max_cudagraph_capture_size", "use --cuda-graph-sizes on this version", added="0.11.1"),
    Change("cudagraph_capture_sizes", "use --compilation-config '{\"cudagraph_capture_sizes\": [...]}'", added="0.11.1"),
    Change("enable_log_requests", "request logging is already on unless --disable-log-requests", added="0.10.1"),
    Change("runner", "use --task on this version", added="0.10.1"),
    Change("convert", "use --task on this version", added="0.10.1"),
    Change("structured_outputs_config", "use --guided-decoding-backend on this version", added="0.11.0"),
    Change("speculative_config", "use --speculative-model / --num-speculative-tokens on this version", added="0.8.2"),
)
# transformers' accepted `cache_implementation` values, read in the released wheels
# (generation/configuration_utils.py, ALL_CACHE_IMPLEMENTATIONS + "paged").
_HF_CACHE_BASE = {"static", "offloaded_static", "sliding_window", "hybrid", "mamba", "quantized"}
_HF_STATIC_ALIASES = {"sliding_window", "hybrid", "hybrid_chunked", "offloaded_hybrid", "offloaded_hybrid_chunked"}
HF_CACHE_IMPLEMENTATIONS = (
    ("4.45.2", frozenset(_HF_CACHE_BASE)),
    ("4.50.0", frozenset(_HF_CACHE_BASE | {"offloaded", "dynamic"})),
    ("4.53.0", frozenset(_HF_CACHE_BASE | {"offloaded", "dynamic", "hybrid_chunked", "offloaded_hybrid",
                                           "offloaded_hybrid_chunked"})),
    ("4.56.0", frozenset({"static", "offloaded_static", "dynamic", "dynamic_full", "offloaded", "quantized"}
                         | _HF_STATIC_ALIASES)),
    ("5.0.0", frozenset({"static", "offloaded_static", "dynamic", "dynamic_full", "offloaded", "quantized",
                         "paged"} | _HF_STATIC_ALIASES)),
    ("5.10.4", frozenset({"static", "offloaded_static", "dynamic", "dynamic_full", "offloaded", "quantized",
                          "paged"} | _HF_STATIC_ALIASES)),
    ("5.24.0", frozenset({"static", "offloaded_static", "dynamic", "offloaded", "quantized", "paged"}
                         | _HF_STATIC_ALIASES)),
)
# Pre-1.0 TensorRT-LLM LLM-API keys and their 1.x spelling (1.0 release notes; #5014).
TRTLLM_RENAMES: dict[str, str | None] = {
    "use_cuda_graph": "cuda_graph_config: {} to enable (the 1.x default), cuda_graph_config: null to disable",
    "cuda_graph_batch_sizes": "cuda_graph_config.batch_sizes",
    "cuda_graph_max_batch_size": "cuda_graph_config.max_batch_size",
    "cuda_graph_padding_enabled": "cuda_graph_config.enable_padding",
    "cuda_graph_config.padding_enabled": "cuda_graph_config.enable_padding",
    "kv_cache_dtype": "kv_cache_config.dtype",
    "mixed_sampler": None,  # 1.0 renamed it enable_mixed_sampler, which later 1.x releases no longer have
    "autotuner_enabled": "enable_autotuner",
    "pytorch_backend_config": "its fields at the top level (PyTorchConfig is no longer accepted)",
}


def check(plan: Plan, ctx) -> Iterator[Finding]:
    version = ctx.target.version
    if plan.framework == "vllm":
        yield from _vllm(plan, ctx)
    elif plan.framework == "trtllm" and plan.kind == "trtllm-llmapi" and V(version) >= V("1.0"):
        yield from _trtllm(plan, ctx)
    elif plan.framework == "ortgenai":
        yield from _ortgenai(plan, ctx)
    elif plan.framework == "hf":
        yield from _hf(plan, ctx)


def _vllm(plan: Plan, ctx) -> Iterator[Finding]:
    version = V(ctx.target.version)
    evidence = [f"target: {ctx.target}"]
    for change in VLLM_CHANGES:
        setting = plan.get(change.key)
        if setting is None:
            continue
        flag = f"--{change.key.replace('_', '-')}"
        if change.removed and version >= V(change.removed):
            yield RULE.finding(
                plan, setting,
                f"{flag} was removed in vLLM {change.removed}: vLLM {ctx.target.version} rejects it "
                "at startup (unrecognized arguments)",
                evidence=evidence, fix_hint=change.instead,
            )
        elif change.deprecated and version >= V(change.deprecated):
            until = f" and is gone in {change.removed}" if change.removed else ""
            yield RULE.finding(
                plan, setting, f"{flag} is deprecated since vLLM {change.deprecated}{until}",
                evidence=evidence, fix_hint=change.instead, severity=Severity.WARNING,
            )
        elif change.added and version < V(change.added):
            yield RULE.finding(
                plan, setting,
                f"{flag} arrived in vLLM {change.added}: vLLM {ctx.target.version} rejects it at startup",
                evidence=evidence, fix_hint=change.instead,
            )
    capture = plan.get("compilation_config.max_capture_size")
    if capture is not None:
        if version >= V("0.13.0"):
            message = (f"compilation_config.max_capture_size is not a field in vLLM {ctx.target.version}, "
                       "whose CompilationConfig forbids unknown fields: startup fails")
            severity = Severity.ERROR
        elif version >= V("0.11.1"):
            message = (f"compilation_config.max_capture_size is not a field in vLLM {ctx.target.version}: "
                       "it is silently ignored")
            severity = Severity.WARNING
        else:
            message = (f"compilation_config.max_capture_size is computed by vLLM {ctx.target.version} "
                       "(init=False): the value you set is silently ignored")
            severity = Severity.WARNING
        yield RULE.finding(plan, capture, message, evidence=evidence, severity=severity,
                           fix_hint="use max_cudagraph_capture_size (≥0.11.1) or cudagraph_capture_sizes")
    backend = plan.env.get("VLLM_ATTENTION_BACKEND")
    if backend is not None:
        if version >= V("0.16.0"):
            yield RULE.finding(
                plan, backend,
                f"VLLM_ATTENTION_BACKEND is ignored by vLLM {ctx.target.version}: the attention backend "
                "you pinned is not the one that runs",
                evidence=evidence, severity=Severity.WARNING,
                fix_hint=f"use --attention-backend {backend.value or 'NAME'} (or -ac.backend=NAME)",
            )
        elif version >= V("0.13.0"):
            yield RULE.finding(
                plan, backend,
                "VLLM_ATTENTION_BACKEND is deprecated since vLLM 0.13 and ignored from 0.16",
                evidence=evidence, severity=Severity.WARNING,
                fix_hint="use --attention-backend NAME",
            )


def _trtllm(plan: Plan, ctx) -> Iterator[Finding]:
    evidence = [f"target: {ctx.target}"]
    for old, new in TRTLLM_RENAMES.items():
        for key in (old, f"pytorch_backend_config.{old}"):
            setting = plan.get(key)
            if setting is None or (key != old and old == "pytorch_backend_config"):
                continue
            yield RULE.finding(
                plan, setting,
                f"{key} is a pre-1.0 LLM-API option: TensorRT-LLM {ctx.target.version} rejects unknown "
                "keys at startup (pydantic extra='forbid')",
                evidence=evidence,
                fix_hint=f"use {new}" if new else "remove it (1.0 renamed it enable_mixed_sampler, which later 1.x releases no longer have)",
            )


def _ortgenai(plan: Plan, ctx) -> Iterator[Finding]:
    from sits_doctor.schemas.ortgenai import ROOT, SESSION_OPTION_KEYS, schema_errors

    doc, data = plan.doc, plan.doc.data
    evidence = [f"target: {ctx.target}"]
    for error in schema_errors(doc):
        path = list(error.absolute_path)
        if error.validator == "additionalProperties" and error.schema.get("additionalProperties") is False:
            known = set(error.schema.get("properties", {}))
            for key in sorted(set(error.instance) - known):
                pointer = _pointer(path + [key])
                section = ":".join(str(p) for p in path) or "top level"
                hint = _did_you_mean(key, known)
                yield RULE.finding(
                    plan, Provenance.at(doc, pointer),
                    f'unknown key "{key}" in {section}: ORT GenAI fails to load the config '
                    f'(JSON Error: {section}: Unknown value "{key}")',
                    evidence=evidence, fix_hint=hint or "remove it",
                )
        elif error.validator == "not" and len(path) == 1:
            yield RULE.finding(
                plan, Provenance.at(doc, _pointer(path)),
                f'unknown top-level section "{path[0]}": ORT GenAI fails to load the config (Unknown value)',
                evidence=evidence, fix_hint=_did_you_mean(str(path[0]), set(ROOT["properties"])) or "remove it",
            )
    if isinstance(data, dict):
        for key, value in data.items():
            if key not in ROOT["properties"] and not isinstance(value, (dict, list)):
                yield RULE.finding(
                    plan, Provenance.at(doc, _pointer([key])),
                    f'top-level "{key}" is silently ignored by ORT GenAI (it reads only model, search, '
                    "speculative and engine)",
                    evidence=evidence, severity=Severity.WARNING,
                    fix_hint=_did_you_mean(key, set(ROOT["properties"]["search"]["properties"]), "search.")
                    or "move it into the section it belongs to, or remove it",
                )
    for pointer, options in _session_options(data, ""):
        for key, value in options.items():
            if key in SESSION_OPTION_KEYS or "." in key or not isinstance(value, str):
                continue  # known, or an ORT config entry ("session.x.y"), or a type error (SITS201)
            yield RULE.finding(
                plan, Provenance.at(doc, join_pointer(pointer, key)),
                f'session_options "{key}" is not an option ORT GenAI knows: it is passed to ONNX Runtime '
                "as a config entry unchecked, and an unknown entry does nothing",
                evidence=evidence, severity=Severity.WARNING,
                fix_hint=_did_you_mean(key, SESSION_OPTION_KEYS) or "check the spelling, or remove it",
            )


def _hf(plan: Plan, ctx) -> Iterator[Finding]:
    setting = plan.get("generation_config.cache_implementation")
    if setting is None or not isinstance(setting.value, str):
        return
    accepted = hf_cache_implementations(ctx.target.version)
    if accepted is None or setting.value in accepted:
        return
    yield RULE.finding(
        plan, setting,
        f'cache_implementation "{setting.value}" is not accepted by transformers {ctx.target.version}: '
        "loading this generation config raises ValueError (Invalid `cache_implementation`)",
        evidence=[f"target: {ctx.target}"],
        fix_hint=f"use one of {', '.join(sorted(accepted - _HF_STATIC_ALIASES))}",
    )


def hf_cache_implementations(version: str) -> frozenset[str] | None:
    """Values accepted at ``version``: sure only when the sampled releases around it agree.

    Between two sampled releases a value counts as accepted if either accepts it (we do not know
    where in between it changed); before the first sampled release nothing is judged.
    """
    ver = V(version)
    below = [(V(v), values) for v, values in HF_CACHE_IMPLEMENTATIONS if V(v) <= ver]
    above = [values for v, values in HF_CACHE_IMPLEMENTATIONS if V(v) > ver]
    if not below:
        return None
    sampled, values = below[-1]
    return values if sampled == ver or not above else values | above[0]


def _session_options(node: Any, pointer: str) -> Iterator[tuple[str, dict]]:
    if isinstance(node, dict):
        for key, value in node.items():
            child = join_pointer(pointer, key)
            if key == "session_options" and isinstance(value, dict):
                yield child, value
            else:
                yield from _session_options(value, child)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _session_options(value, join_pointer(pointer, i))


def _pointer(path: list) -> str:
    out = ""
    for p in path:
        out = join_pointer(out, p)
    return out


def _did_you_mean(key: str, known: set[str], prefix: str = "") -> str | None:
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
    return f'did you mean "{prefix}{close[0]}"?' if close else None
