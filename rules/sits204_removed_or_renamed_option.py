"""removed-or-renamed-option (SITS204)

## What it does
Reports options that the target framework version rejects at startup or silently ignores:
- **vLLM** options (command line, `--config` YAML, Kubernetes/compose/Helm wrappers) judged by
  the target release's own argument parser: flags it no longer has (`--swap-space` ≥0.18,
  `--calculate-kv-scales` ≥0.28, `--max-seq-len-to-capture` ≥0.11, `--disable-log-requests`
  0.17–0.32 — 0.33 accepts it again as the generated opposite of `--enable-log-requests`), flags
  it does not have yet (`--max-cudagraph-capture-size` <0.11.1), flags no release has (a typo,
  with the closest real flag), deprecated flags, abbreviations argparse accepts only while they
  stay unique (`--max-num-seq`, info), `compilation_config.level` (gone in 0.18), and the
  `VLLM_ATTENTION_BACKEND` environment variable, which vLLM ≥0.16 ignores. Where the server reads
  its arguments with `parse_known_args` (KServe's huggingfaceserver), an unknown or removed flag is
  ignored rather than refused (warning), and so is a vLLM flag spelled with `_` or written dotted
  (`--x.y`): only vLLM's own `parse_args` rewrites those. Options a release parses and then does
  not act on (warning): `--swap-space` on 0.11–0.17.1, whose only engine (V1) keeps no swap
  space, and the LoRA limits (`--max-loras`, `--max-lora-rank`, `--max-cpu-loras`,
  `--fully-sharded-loras`) without `--enable-lora` — production-stack's chart writes
  `--max_loras` from `vllmConfig.maxLoras` whether or not the model spec sets `enableLoRA`.
  Ray Serve LLM refuses an `engine_kwargs` key vLLM's engine arguments lack itself, with
  `ValueError: Unknown engine argument`, before vLLM parses anything. A release pinned in the
  file (image tag, `pip install vllm==`) older than the oldest parser in the tables (0.6.0) gets
  one info finding saying its flags were not checked; the legacy `vllm.entrypoints.api_server`
  has a parser of its own, whose options are not judged.
- **TensorRT-LLM** LLM-API / `trtllm-serve` YAML keys from before 1.0 (`use_cuda_graph`,
  `kv_cache_dtype`, `pytorch_backend_config`, ...), which 1.x rejects (`extra="forbid"`), and, for
  the release series whose models were read (1.0.x, 1.1.x, 1.2.x), any key the models do not have
  (a command-line flag's name such as `kv_cache_free_gpu_memory_fraction` gets the field it feeds
  as the hint). A file that names no `backend` is judged as the PyTorch backend (trtllm-serve's
  default from 1.0); a key only the TensorRT backend's `TrtLlmArgs` has
  (`extended_runtime_perf_knob_config`) is then information that names the assumption, not an
  error. The `context_servers` / `generation_servers` sections of a `trtllm-serve disaggregated -c`
  file are judged as the LLM-API options their workers get (the top-level keys the disaggregated
  server reads itself, `num_instances`, `urls` and `router` are not options of the workers). A
  target outside the tables (0.x, a 1.0 release candidate, anything newer than 1.2) gets an info
  finding saying the keys were not checked. `trtllm-serve` command-line flags its click command
  does not have at the target (click refuses to start: "No such option"; click does not treat `-`
  and `_` alike, so `--max-batch-size` is not `--max_batch_size`) are errors when the target's
  own release series was read, and information when only another series' options were.
- **TensorRT-LLM** `trtllm-build` command lines in scripts (read as the engine they build, so the
  engine rules judge their `--context_fmha`, `--max_seq_len`, ... as they judge the engine's
  `config.json`): a flag none of the parser snapshots read has is information (not checked).
- **transformers** `generation_config.json` `cache_implementation` values the target version
  rejects (`"mamba"` from 4.56, `"dynamic_full"` by 5.24, `"offloaded"` before 4.50, ...).
- **ORT GenAI** `genai_config.json` keys the target release's strict parser rejects (`Unknown
  value`; a key a later release knows says from which), top-level scalars it silently ignores, and
  `session_options` keys it passes to ONNX Runtime unchecked (from 0.11.0: a typo there is
  accepted and does nothing; before, it is an unknown value). A target outside the releases the
  tables hold is judged as the nearest one, and said so.

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
`sits-doctor fix` removes a vLLM option the target no longer has, together with its value words
(safe where the option did nothing on the target or has no successor, e.g. `--swap-space` on the
V1 engine; unsafe where the intent is lost, e.g. `--speculative-model`), and renames one whose
successor takes the same value (`--guided-decoding-backend` → `--structured-outputs-config.backend`,
safe). TensorRT-LLM pre-1.0 keys move into other sections: the fix is shown, not applied.

## How it is measured
Not measured: a predicted startup failure or an ignored setting. vLLM flags are looked up in a
table made by running each release's own argument parser (65 releases, 0.6.0 … 0.34.0; a target
between two releases is judged by the nearest one below, and the evidence says so); the target
version comes from `--target`, the image tag, the installed package, or else the newest release
known (said to be assumed).

## Sources
- vLLM: the argument parser of every release on PyPI with a source distribution, 0.6.0 … 0.34.0
  (`vllm/engine/arg_utils.py` `EngineArgs.add_cli_args`, `vllm/entrypoints/openai/cli_args.py`
  `make_arg_parser`, `vllm/utils/argparse_utils.py` `FlexibleArgumentParser`@0.33.0, which adds
  `--disable-X` for `--enable-X`), run by tools/gen_vllm_options.py;
  `VLLM_ATTENTION_BACKEND` in `vllm/envs.py` (present 0.14.0, absent 0.16.0);
  `CompilationConfig.max_capture_size` `init=False` (`vllm/config/compilation.py@0.11.0`), gone in
  0.11.1, and `extra="forbid"` on `CompilationConfig` from 0.13.0.
- vLLM, options without effect: `vllm/config/cache.py@0.17.1` `CacheConfig.verify_with_parallel_config`
  (the only use of `swap_space` left), `vllm/worker/worker.py@0.10.2` (the V0 worker that sized CPU
  blocks from it; `vllm/worker/` holds only `worker_base.py` in 0.11.0), `EngineArgs._is_v1_supported_oracle`
  (0.10.2 still falls back to V0); `vllm/engine/arg_utils.py` `create_engine_config` (`LoRAConfig(...)
  if self.enable_lora else None`) @0.9.2, @0.10.0, @0.17.1, @0.33.0, @0.34.0. production-stack:
  `helm/templates/deployment-vllm-multi.yaml` (vllm-project/production-stack@a6c01db: `--enable-lora`
  only `if $modelSpec.enableLoRA`, `--max_loras` whenever `vllmConfig` has `maxLoras`).
- Ray Serve LLM: `python/ray/llm/_internal/serve/engines/vllm/vllm_models.py`
  `VLLMEngineConfig.from_llm_config` (ray-project/ray@b4061b5: a key in neither `FrontendArgs` nor
  `AsyncEngineArgs` raises `ValueError(f"Unknown engine argument: {key}")`).
- TensorRT-LLM: release notes 1.0 "API Changes" (`docs/source/release-notes.md`), v1.0.0rc2
  (#5014, `cuda_graph_config`), `tensorrt_llm/llmapi/llm_args.py@v1.0.0` (`StrictBaseModel`,
  `extra="forbid"`, the fields of every config class; read by tools/gen_trtllm_options.py).
- TensorRT-LLM `trtllm-serve --config` / `--extra_llm_api_options`: `tensorrt_llm/commands/serve.py`
  (NVIDIA/TensorRT-LLM@00209af, and a later main snapshot with `is_non_default_or_required`) loads
  the YAML with `yaml.safe_load` and merges it with `update_llm_args_with_extra_dict`, which renames
  no top-level key (`tensorrt_llm/llmapi/llm_args.py` at main@0004396: only `hf_revision` →
  `revision`, and deep merges of `kv_cache_config`/`telemetry_config`/`multimodal_config`), before
  `LLM(**llm_args)`; NVIDIA's own curated `examples/configs/curated/qwen3.yaml` moved its
  `kv_cache_free_gpu_memory_fraction` into `kv_cache_config.free_gpu_memory_fraction` (main@4b7d719).
- TensorRT-LLM disaggregated serving: `tensorrt_llm/llmapi/disagg_utils.py`@0228a71
  (`extract_disagg_cfg`, `extract_ctx_gen_cfgs`, `extract_router_config`) and `serve.py`@00209af
  (`disaggregated_mpi_worker`: `get_llm_args(**other_args)`); see sits_doctor/frameworks/trtllm_disagg.py.
- KServe: `python/huggingfaceserver/huggingfaceserver/__main__.py` (`parser.parse_known_args()`,
  kserve/kserve@aaac4e2 and the tags v0.13.0 … v0.20.0); vLLM's `FlexibleArgumentParser.parse_args`
  (`vllm/utils/argparse_utils.py@0.33.0`) is where `_` becomes `-` and `--x.y` is expanded.
- trtllm-serve: `tensorrt_llm/commands/serve.py` (click options) in the snapshots listed in
  `sits_doctor/frameworks/trtllm_serve.py` (0.18.2 docs page, 0.20.0, 1.1.0rc6, and two
  unnamed NVIDIA/TensorRT-LLM commits taken for 1.1.0 and 1.2.0).
- transformers: `generation/configuration_utils.py` (`ALL_CACHE_IMPLEMENTATIONS`, and `"paged"`
  from 5.0; `validate()` runs in `GenerationConfig.__init__`) in the wheels 4.45.2, 4.50.0,
  4.53.0, 4.56.0, 5.0.0, 5.10.4 and 5.24.0.
- ORT GenAI: `src/config.cpp`, `src/json.h` (microsoft/onnxruntime-genai @00a26d59); which keys
  each release knows from that release's own wheel (every onnxruntime-genai release on PyPI,
  0.3.0 … 0.18.0: `og.Config(folder)`, `og.Model(folder)` before 0.5) by
  tools/probe_ortgenai.py, and every verdict replayed on the same wheels.
"""

from __future__ import annotations

from typing import Any, Iterator

from sits_doctor.finding import Finding, Safety, Severity
from sits_doctor.fixes import config as edit
from sits_doctor.frameworks import transformers as tf
from sits_doctor.frameworks import trtllm as trt
from sits_doctor.frameworks import vllm as fw
from sits_doctor.loaders.vllm_args import LOOKALIKE, LOOKALIKE_DASHES, ascii_dashes
from sits_doctor.plan import Plan, Provenance, Setting
from sits_doctor.rule import Rule, closest
from sits_doctor.source import join_pointer
from sits_doctor.versions import V

RULE = Rule(
    code="SITS204",
    name="removed-or-renamed-option",
    summary="option the target version rejects at startup or silently ignores",
    severity=Severity.ERROR,
    frameworks=("vllm", "trtllm", "ortgenai", "hf"),
)


def check(plan: Plan, ctx) -> Iterator[Finding]:
    version = ctx.target.version
    if plan.framework == "vllm":
        yield from _vllm(plan, ctx)
    elif plan.framework == "trtllm" and plan.kind == "trtllm-llmapi":
        yield from _trtllm(plan, ctx)
    elif plan.framework == "trtllm" and plan.kind == "trtllm-serve-args":
        yield from _trtllm_serve(plan, ctx)
    elif plan.framework == "trtllm" and plan.kind == "trtllm-engine" and plan.entry:
        yield from _trtllm_build(plan, ctx)
    elif plan.framework == "ortgenai":
        yield from _ortgenai(plan, ctx)
    elif plan.framework == "hf":
        yield from _hf(plan, ctx)


def _vllm(plan: Plan, ctx) -> Iterator[Finding]:
    version = V(ctx.target.version)
    evidence = [f"target: {ctx.target}"]
    found = fw.parser_release(ctx.target.version)
    if found is not None:
        release, note = found
        parser_evidence = evidence + [note] if note else evidence
        for setting, flag in fw.written_options(plan):
            yield from _judge_flag(plan, ctx, setting, flag, release, parser_evidence)
    elif ctx.target.source != "--target" and any(True for _ in fw.written_options(plan)):
        # (a --target before the tables is said once, for the whole run)
        yield RULE.finding(
            plan, plan.pin or plan.image or plan.anchor,
            f"flags not checked: {ctx.target.name} is older than {fw.parser_table()[0][0]}, the oldest release "
            "whose parser the rules know",
            severity=Severity.INFO, evidence=evidence,
            fix_hint=f"check them against `vllm serve --help` of {ctx.target.version}")

    level = plan.get(fw.COMPILATION_LEVEL)
    if level is not None and version >= V(fw.COMPILATION_LEVEL_GONE):
        yield RULE.finding(
            plan, level,
            f"compilation_config.level is not a field in {ctx.target.name} (gone in {fw.COMPILATION_LEVEL_GONE}): "
            "startup fails with a validation error for CompilationConfig",
            evidence=evidence, fix_hint="use compilation_config.mode (or -O<n>)",
            fixes=[edit.rename(level, "mode", "rename level to mode")] if level.site is not None else [],
        )
    capture = plan.get(fw.COMPILATION_MAX_CAPTURE_SIZE)
    if capture is not None:
        if version >= V(fw.COMPILATION_CONFIG_FORBIDS_EXTRA):
            message = (f"compilation_config.max_capture_size is not a CompilationConfig field in {ctx.target.name}: "
                       "startup fails (unknown fields are forbidden)")
            severity = Severity.ERROR
        elif version >= V(fw.MAX_CAPTURE_SIZE_GONE):
            message = (f"compilation_config.max_capture_size is not a field in {ctx.target.name}: "
                       "it is silently ignored")
            severity = Severity.WARNING
        else:
            message = (f"compilation_config.max_capture_size is computed by {ctx.target.name} "
                       "(init=False): the value you set is silently ignored")
            severity = Severity.WARNING
        yield RULE.finding(plan, capture, message, evidence=evidence, severity=severity,
                           fix_hint="use max_cudagraph_capture_size (≥0.11.1) or cudagraph_capture_sizes")
    backend = plan.env.get(fw.ENV_ATTENTION_BACKEND)
    if backend is not None:
        if version >= V(fw.ATTENTION_BACKEND_ENV_IGNORED):
            yield RULE.finding(
                plan, backend,
                f"{fw.ENV_ATTENTION_BACKEND} is ignored by {ctx.target.name}: the attention backend "
                "you pinned is not the one that runs",
                evidence=evidence, severity=Severity.WARNING,
                fix_hint=f"use --attention-backend {backend.value or 'NAME'} (or -ac.backend=NAME)",
            )
        elif version >= V(fw.ATTENTION_BACKEND_ENV_DEPRECATED):
            yield RULE.finding(
                plan, backend,
                f"{fw.ENV_ATTENTION_BACKEND} is deprecated since vLLM {fw.ATTENTION_BACKEND_ENV_DEPRECATED} "
                f"and ignored from {fw.ATTENTION_BACKEND_ENV_IGNORED}",
                evidence=evidence, severity=Severity.WARNING,
                fix_hint="use --attention-backend NAME",
            )


def _unread(plan: Plan, setting: Setting, evidence: list[str], target=None) -> Finding:
    """A flag vLLM knows only through FlexibleArgumentParser.parse_args's rewriting, under a
    server that parses with parse_known_args (KServe's huggingfaceserver)."""
    name = setting.raw_key.partition("=")[0]
    head, dot, rest = name[2:].partition(".")
    dashed = "--" + head.replace("_", "-")
    if dot:
        why = "vLLM expands a dotted --x.y flag only in its own parse_args"
        hint = f"pass the whole JSON value: {dashed} '{{\"{rest}\": ...}}'"
        fixes = []
    else:
        why = "vLLM turns _ into - only in its own parse_args"
        hint = f"write it as {dashed}"
        fixes = [edit.rename(setting, dashed, f"write {dashed}", Safety.UNSAFE, target=target)]
    return RULE.finding(
        plan, setting,
        f"{name} has no effect: vLLM runs with its default",
        why=f"{plan.lenient}, and {why}",
        evidence=evidence, fix_hint=hint, fixes=fixes, severity=Severity.WARNING,
    )


def _judge_flag(plan: Plan, ctx, setting: Setting, flag: str, release: str, evidence: list[str]) -> Iterator[Finding]:
    info = fw.lookup_flag(flag, release)
    option = fw.OPTIONS.get(setting.key.partition(".")[0])
    hint = option.instead if option is not None else None
    shown = setting.raw_key if setting.raw_key.startswith("-") or plan.kind == fw.KWARGS else flag
    if info is None and setting.key.startswith(LOOKALIKE):
        plain = ascii_dashes(setting.raw_key)
        odd = next(c for c in setting.raw_key if c in LOOKALIKE_DASHES)
        if setting.raw_key[0] == odd:
            what = (f"starts with a look-alike dash (U+{ord(odd):04X}), not '-': vLLM reads it as a positional "
                    f"argument, not {plain}; {ctx.target.name} fails to start")
        else:
            what = (f"has a look-alike dash (U+{ord(odd):04X}) where '-' belongs: it is not {plain}; "
                    f"{ctx.target.name} rejects it at startup")
        yield RULE.finding(
            plan, setting, f"{setting.raw_key} {what}",
            evidence=evidence, fix_hint=f"write {plain} with ASCII hyphens", quote=_argparse(setting),
            fixes=[edit.rename(setting, plain, f"write {plain} with ASCII hyphens", target=ctx.target)],
        )
        return
    if setting.key.startswith(fw.UNREAD):
        yield _unread(plan, setting, evidence, ctx.target)
        return
    if info is None:
        runs = fw.flag_history(flag)
        # a lenient server (parse_known_args) drops the word and starts: the option has no effect
        rejected = fw.KWARGS_UNKNOWN if plan.kind == fw.KWARGS else f"{ctx.target.name} rejects it at startup"
        outcome = "ignored, so the option has no effect" if plan.lenient else rejected
        severity = Severity.WARNING if plan.lenient else None
        said = (None if plan.lenient else ("Ray Serve LLM", fw.KWARGS_UNKNOWN_ERROR.format(key=setting.raw_key))
                if plan.kind == fw.KWARGS else _argparse(setting))
        lenient = plan.lenient or None
        if not runs:
            if plan.parser not in fw.PARSERS_WITH_SERVE_OPTIONS and plan.kind != fw.KWARGS and not plan.lenient:
                return  # another entrypoint's parser (the legacy api_server) has other options
            close = _did_you_mean(fw.normalize_flag(flag), set(fw.flags_at(release)))
            yield RULE.finding(
                plan, setting, f"{shown} is not an option of vLLM {release}: {outcome}", why=lenient,
                evidence=evidence, severity=severity, quote=said,
                fix_hint=close or ("remove it, or check the spelling" if not ctx.target.assumed else
                                   f"check the spelling, or remove it if you run vLLM {release} or older; if the file "
                                   "is for a newer release, pin it with --target vllm==VERSION"),
            )
            return
        before = [r for r in runs if V(r[1]) < V(release)]
        after = [r for r in runs if V(r[0]) > V(release)]
        if before:
            gone = fw.next_release(before[-1][1])
            again = f" (accepted again from {after[0][0]})" if after else ""
            message = f"{shown} was removed in vLLM {gone}{again}: {outcome}"
            fixes = [_removal_fix(setting, option, ctx.target)] if option is not None else [
                edit.remove(setting, f"remove {setting.raw_key}")]
        else:
            message = f"{shown} arrived in vLLM {after[0][0]}: {outcome}"
            fixes = []
        yield RULE.finding(plan, setting, message, evidence=evidence, fix_hint=hint, fixes=fixes, severity=severity,
                           quote=said, why=lenient)
        return
    if info.abbreviation:
        full = info.flag if setting.raw_key.startswith("-") else info.flag[2:]
        yield RULE.finding(
            plan, setting,
            f"{shown} is an abbreviation of {info.flag}: a new vLLM option with the same prefix would stop startup",
            why="argparse accepts a unique prefix of a flag (allow_abbrev); once another option shares the prefix "
                "it is ambiguous and argparse exits",
            evidence=evidence, severity=Severity.INFO, fix_hint=f"write {full}",
            fixes=[edit.rename(setting, full, f"write {full}", target=ctx.target)],
        )
    ignored = fw.ignored_at(setting.key, release, plan) if "." not in setting.key else None
    if ignored is not None:
        yield RULE.finding(
            plan, setting, f"{shown} is accepted by {ctx.target.name} but has no effect"
            + (f" without {fw.flag_of(ignored.unless)}" if ignored.unless else ""), why=ignored.why,
            evidence=evidence + [f"source: {ignored.source}"], severity=Severity.WARNING,
            fix_hint=f"add {fw.flag_of(ignored.unless)}, or remove {shown}" if ignored.unless else hint,
            fixes=[] if ignored.unless or option is None else [_removal_fix(setting, option, ctx.target)],
        )
    if info.segment.get("deprecated"):
        later = [r for r in fw.flag_history(flag) if V(r[1]) >= V(release)]
        gone = fw.next_release(later[0][1]) if later else None
        until = f" and is gone in {gone}" if gone else ""
        since = fw.deprecated_since(flag, release)
        yield RULE.finding(
            plan, setting, f"{shown} is deprecated since vLLM {since}{until}",
            evidence=evidence, fix_hint=hint, severity=Severity.WARNING,
            fixes=[_removal_fix(setting, option, ctx.target)] if option is not None else [],
        )


PYDANTIC_EXTRA = ("pydantic", "Extra inputs are not permitted (the LLM-API models are extra='forbid')")


def _argparse(setting: Setting) -> tuple[str, str]:
    """What vLLM's argument parser prints for words it does not know (argparse's error)."""
    if setting.site is not None and setting.site.words:
        words = " ".join(w.text for w in setting.site.words)
    else:  # a --config YAML key: vLLM turns it into --key VALUE before parsing (a true flag alone)
        flag = setting.raw_key if setting.raw_key.startswith("-") else f"--{setting.raw_key}"
        words = flag if setting.raw is True else f"{flag} {setting.raw}"
    return "argparse", f"error: unrecognized arguments: {words}"


def _removal_fix(setting: Setting, option: fw.Option, target):
    """Removing an option that vLLM dropped: safe when it was a no-op or is now rejected
    outright and has no replacement that carries its value; a rename when one does."""
    if option.renamed_to:
        written = _spelled_like(setting, option.renamed_to)
        return edit.rename(setting, written, f"rename {setting.raw_key} to {written}", target=target)
    words = setting.site.words if setting.site is not None else ()
    title = f"remove {setting.raw_key}" + (" and its value" if len(words) > 1 else "")
    return edit.remove(setting, title, Safety.SAFE if option.drop == "safe" else Safety.UNSAFE)


def _spelled_like(setting: Setting, name: str) -> str:
    """``name`` written the way ``setting`` was: a flag or a key, dashes or underscores (only
    the part before the first dot; a nested field keeps its own spelling)."""
    written = setting.raw_key.lstrip("-")
    text = fw.flag_of(name, dashed="-" in written or "_" not in written)
    return text if setting.raw_key.startswith("-") else text[2:]


def _trtllm_serve(plan: Plan, ctx) -> Iterator[Finding]:
    """Flags the target's ``trtllm-serve serve`` click command does not have. Judged as an error
    only by a snapshot of the target's own release series; a snapshot of another series (the
    nearest one below) gives information, and a target before every snapshot is said unchecked."""
    from sits_doctor.frameworks import trtllm_serve as serve

    release = serve.release_for(ctx.target.version)
    if release is None:
        yield RULE.finding(
            plan, plan.anchor,
            f"the trtllm-serve flags were not checked: TensorRT-LLM {ctx.target.version} is older than "
            f"{serve.RELEASES[0].version}, the oldest trtllm-serve whose options were read",
            severity=Severity.INFO, evidence=[f"target: {ctx.target}"])
        return
    own = serve.same_series(release, ctx.target.version)
    evidence = [f"target: {ctx.target}", f"trtllm-serve options of {release.version}"
                f"{' (assumed)' if release.assumed else ''}: {release.source}"]
    missing = False
    for setting in plan.settings.values():
        flag = setting.raw_key.split("=", 1)[0]
        if not flag.startswith("--") or flag in release.flags or setting.site is None:
            continue
        missing = True
        when = "" if serve.key_of(flag) is None else " (other releases have it)"
        close = closest(flag, release.flags)
        if not own:
            yield RULE.finding(
                plan, setting,
                f"{flag} is not an option of trtllm-serve {release.version}{when}, the nearest release read "
                f"below {ctx.target.version}; {ctx.target.version}'s own options were not read, so whether it "
                "refuses to start was not checked",
                severity=Severity.INFO, evidence=evidence,
                fix_hint=f"did you mean {close}?" if close else "check it against your release's trtllm-serve --help")
            continue
        yield RULE.finding(
            plan, setting,
            f"{flag} is not an option of trtllm-serve {release.version}{when}: {ctx.target.name} refuses to start",
            quote=("click", f"Error: No such option: {flag}"),
            evidence=evidence, fix_hint=f"did you mean {close}?" if close else "remove it",
            fixes=[edit.rename(setting, close, f"rename {flag} to {close}", Safety.UNSAFE) if close
                   else edit.remove(setting, f"remove {flag}", Safety.UNSAFE)],
        )
    if not own and not missing and plan.settings:
        yield RULE.finding(
            plan, plan.anchor,
            f"trtllm-serve flags not checked against {ctx.target.version}'s own options (not read); trtllm-serve "
            f"{release.version}, the nearest release read below it, has every flag written",
            severity=Severity.INFO, evidence=evidence,
            fix_hint=f"nothing to change; check them against trtllm-serve --help of {ctx.target.version}")


def _trtllm_build(plan: Plan, ctx) -> Iterator[Finding]:
    """A trtllm-build flag no parser snapshot read has: information (which release each snapshot
    is was not established, so nothing is judged as a failure)."""
    from sits_doctor.frameworks import trtllm_build as build

    known = set(build.FLAGS) | build.OTHER_FLAGS
    for setting in plan.settings.values():
        flag = setting.raw_key
        if not flag.startswith("--") or flag in known:
            continue
        close = closest(flag, known)
        yield RULE.finding(
            plan, setting,
            f"{flag} is not a trtllm-build flag in the parser snapshots read: not checked for {ctx.target.name}",
            why="argparse refuses an unknown flag, so if this release lacks it too the build fails; which release "
                "each snapshot is was not established",
            severity=Severity.INFO, evidence=[f"target: {ctx.target}", f"trtllm-build options: {build.SOURCE}"],
            fix_hint=f"did you mean {close}?" if close else "check it against your release's trtllm-build --help")


def _trtllm(plan: Plan, ctx) -> Iterator[Finding]:
    from sits_doctor.loaders.trtllm_disagg import reported_elsewhere

    version = ctx.target.version
    evidence = [f"target: {ctx.target}"]
    release = trt.data_release(version)
    if release is None or V(version) < V(trt.LLMAPI_STRICT):
        if not reported_elsewhere(plan, Provenance(file=plan.file)):
            yield _trtllm_unchecked(plan, ctx)
    elif plan.doc is not None:
        backend = plan.value(trt.BACKEND)
        root = trt.root_class(backend, release)
        other = trt.root_class(trt.TENSORRT_BACKENDS[0], release) if backend is None else None
        data = {k: s.value for k, s in plan.settings.items() if "." not in k}
        if root is not None:
            for finding in _trtllm_unknown(plan, ctx, root, data, "", release, evidence, other):
                if not reported_elsewhere(plan, _prov(finding)):
                    yield finding
    if V(version) < V(trt.LLMAPI_STRICT):
        return
    for old, (hint, _new_key) in trt.PRE_1_0_KEYS.items():
        for key in (old, f"pytorch_backend_config.{old}"):
            setting = plan.get(key)
            if setting is None or (key != old and old == "pytorch_backend_config") or reported_elsewhere(plan, setting.prov):
                continue
            yield RULE.finding(
                plan, setting,
                f"{key} is a pre-1.0 LLM-API option: {ctx.target.name} refuses to start",
                quote=PYDANTIC_EXTRA,
                evidence=evidence,
                fix_hint=f"use {hint}" if hint else trt.MIXED_SAMPLER_GONE,
                fixes=[edit.display(setting, f"migrate {key}", "the 1.x option lives in another section")],
            )


def _prov(finding: Finding) -> Provenance:
    loc = finding.location
    return Provenance(file=loc.file, pointer=loc.pointer or "")


def _starter(plan: Plan, ctx, at: Setting | Provenance) -> tuple[str, str | None]:
    """Who refuses a bad LLM-API key: the target, or for a section of a disaggregated config its
    workers; and, for those, the command that builds their LLM from the section."""
    from sits_doctor.frameworks.trtllm_disagg import WORKER_ENTRY
    from sits_doctor.loaders.trtllm_disagg import workers

    reached = workers(plan, at.prov if isinstance(at, Setting) else at)
    if reached is None:
        return ctx.target.name, None
    return (f"the {reached} workers of {ctx.target.name}",
            f"{WORKER_ENTRY} builds each {reached} worker's LLM from its section")


def _trtllm_unchecked(plan: Plan, ctx) -> Finding:
    """Info: the target's LLM-API models are not in the tables, so no key was judged."""
    version, releases = ctx.target.version, trt.data_releases()
    newest = releases[-1]
    why = (f"newer than {newest}, the newest release read" if V(version) > V(newest)
           else "a release whose llm_args.py was not read")
    return RULE.finding(
        plan, plan.anchor,
        f"the LLM-API options of TensorRT-LLM {version} were not checked ({why}; the tables hold "
        f"{', '.join(releases)}): unknown keys are not reported",
        severity=Severity.INFO, evidence=[f"target: {ctx.target}"],
        fix_hint=f"pin a release the tables hold (--target trtllm=={newest}) to check against its models",
    )


def _trtllm_unknown(plan: Plan, ctx, class_name: str, data: dict, prefix: str, release: str,
                    evidence: list[str], other: str | None = None) -> Iterator[Finding]:
    """Keys that the release's LLM-API models do not have (they forbid unknown keys). ``other``:
    at the top level of a file that names no backend, the other backend's LlmArgs class; a key
    only it has is accepted there, so it is reported as information, with the assumption named."""
    from sits_doctor.frameworks import trtllm_disagg as disagg
    from sits_doctor.frameworks import trtllm_serve as serve

    found = trt.fields_of(class_name, release)
    if found is None:
        return
    fields, forbid = found
    if not prefix and plan.entry == disagg.WORKER_ENTRY:
        fields = fields | set(disagg.WORKER_PARAMS)  # get_llm_args() takes them by name
    other_fields = (trt.fields_of(other, release) or (set(), False))[0] if other else set()
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        setting = plan.get(dotted)
        if key in fields:
            if isinstance(value, dict):
                nested = trt.nested_class(class_name, key, value, release)
                if nested is not None:
                    yield from _trtllm_unknown(plan, ctx, nested, value, dotted + ".", release, evidence)
            continue
        if not forbid or dotted in trt.PRE_1_0_KEYS or key in trt.PRE_1_0_KEYS:
            continue  # the pre-1.0 keys have their own finding with the 1.x spelling
        where = setting or plan.anchor
        models = f"tensorrt_llm/llmapi/llm_args.py@v{release}"
        if key in other_fields:
            yield RULE.finding(
                plan, where,
                f"{dotted} is a TensorRT-backend option: under the PyTorch backend, assumed here, TensorRT-LLM "
                "refuses it",
                why=f"{other} has it in TensorRT-LLM {release}, {class_name} does not (pydantic extra='forbid'); "
                    f"PyTorch was assumed because {trt.ASSUMED_BACKEND_WHY}",
                severity=Severity.INFO,
                evidence=evidence + [f"fields of {class_name} and {other} in {models}"],
                fix_hint="say which backend runs: backend: tensorrt in the file (or trtllm-serve --backend "
                         "tensorrt) if it is meant for the TensorRT engine; else remove it",
            )
            if isinstance(value, dict):
                nested = trt.nested_class(other, key, value, release)
                if nested is not None:
                    yield from _trtllm_unknown(plan, ctx, nested, value, dotted + ".", release, evidence)
            continue
        assumed = [f"backend: {trt.ASSUMED_BACKEND} assumed ({trt.ASSUMED_BACKEND_WHY})"] if other else []
        flag = serve.BY_FLAG.get(f"--{key}") if not prefix else None
        moved = flag.field if flag is not None and flag.field != key else None  # a flag's name: its field
        close = closest(key, fields)
        if moved:
            hint = (f"--{key} is trtllm-serve's command-line flag; in the YAML its value goes to {moved} "
                    "(trtllm-serve loads the YAML as LLM-API fields and renames no key: update_llm_args_with_extra_dict)")
        elif close:
            hint = f'did you mean "{close}"?'
        elif ctx.target.assumed:  # a release newer than the tables may have it
            hint = (f"remove it if you run TensorRT-LLM {release} or older; if the file is for a newer release, "
                    "pin it with --target trtllm==VERSION")
        else:
            hint = "remove it"
        starter, how = _starter(plan, ctx, where)
        yield RULE.finding(
            plan, where,
            f'{dotted} is not a field of {class_name}: {starter} {"refuse" if how else "refuses"} to start', why=how,
            quote=PYDANTIC_EXTRA,
            evidence=evidence + assumed + [f"fields of {class_name} in {models}"],
            fix_hint=hint,
            fixes=[] if setting is None
            else [edit.display(setting, f"move {key} to {moved}", "the value belongs under another key")] if moved
            else [edit.rename(setting, close, f"rename {key} to {close} (a guess at the typo)", Safety.UNSAFE)]
            if close else [],
        )


def _ortgenai(plan: Plan, ctx) -> Iterator[Finding]:
    from sits_doctor.schemas.ortgenai import ROOT, SESSION_OPTION_KEYS, schema_errors

    from sits_doctor.frameworks.ortgenai_releases import (
        first_knowing, judged_as, passes_unknown_session_options, unknown_value_error)

    doc, data = plan.doc, plan.doc.data
    judged = judged_as(ctx.target.version)
    evidence = [f"target: {ctx.target}"] + ([f"judged as ORT GenAI {judged.release}: {judged.note}"] if judged.note else [])
    if judged.note and ctx.target.source != "--target":  # --target says it once for the run
        yield RULE.finding(plan, plan.anchor, f"ORT GenAI {ctx.target.version}: {judged.note}",
                           evidence=evidence, severity=Severity.INFO)
    for error in schema_errors(doc, ctx.target.version):
        path = list(error.absolute_path)
        if error.validator == "additionalProperties" and error.schema.get("additionalProperties") is False:
            known = set(error.schema.get("properties", {}))
            for key in sorted(set(error.instance) - known):
                pointer = _pointer(path + [key])
                section = ":".join(str(p) for p in path) or "top level"
                hint = _did_you_mean(key, known)
                since = first_knowing(".".join(str(p) for p in path + [key]))
                yield RULE.finding(
                    plan, Provenance.at(doc, pointer),
                    f'unknown key "{key}" in {section}: ORT GenAI {judged.release} fails to load the config'
                    + (f" (known from {since})" if since and since != judged.release else ""),
                    quote=(f"ORT GenAI {judged.release}", unknown_value_error(judged.release, path, key)),
                    evidence=evidence, fix_hint=hint or (f"upgrade to ORT GenAI {since} or later, or remove it"
                                                         if since else "remove it"),
                )
        elif error.validator == "not" and len(path) == 1:
            since = first_knowing(str(path[0]))
            yield RULE.finding(
                plan, Provenance.at(doc, _pointer(path)),
                f'unknown top-level section "{path[0]}": ORT GenAI {judged.release} fails to load the config'
                + (f" (known from {since})" if since else ""),
                quote=(f"ORT GenAI {judged.release}", unknown_value_error(judged.release, [], str(path[0]))),
                evidence=evidence, fix_hint=(f"upgrade to ORT GenAI {since} or later, or remove it" if since else
                                             _did_you_mean(str(path[0]), set(ROOT["properties"])) or "remove it"),
            )
    if isinstance(data, dict):
        for key, value in data.items():
            if key not in ROOT["properties"] and not isinstance(value, (dict, list)):
                yield RULE.finding(
                    plan, Provenance.at(doc, _pointer([key])),
                    f'top-level "{key}" is silently ignored by ORT GenAI (it reads only model, search, '
                    "speculative and engine)",
                    evidence=evidence, severity=Severity.WARNING,
                    fix_hint=_where_it_belongs(key, ROOT),
                )
    if not passes_unknown_session_options(judged.release):
        return  # that release's parser rejects unknown session options itself: errors above
    for pointer, options in _session_options(data, ""):
        for key, value in options.items():
            if key in SESSION_OPTION_KEYS or "." in key or not isinstance(value, str):
                continue  # known, or an ORT config entry ("session.x.y"), or a type error (SITS201)
            yield RULE.finding(
                plan, Provenance.at(doc, join_pointer(pointer, key)),
                f'session_options "{key}" is not an option ORT GenAI knows: it does nothing',
                why="ORT GenAI passes an unknown session option to ONNX Runtime as a config entry, unchecked, and "
                    "an entry ONNX Runtime does not know is ignored",
                evidence=evidence, severity=Severity.WARNING,
                fix_hint=_did_you_mean(key, SESSION_OPTION_KEYS) or "check the spelling, or remove it",
            )


def _hf(plan: Plan, ctx) -> Iterator[Finding]:
    setting = plan.get(tf.GENERATION_CACHE_KEY)
    if setting is None or not isinstance(setting.value, str):
        return
    accepted = tf.cache_implementations(ctx.target.version)
    if accepted is None or setting.value in accepted:
        return
    yield RULE.finding(
        plan, setting,
        f'cache_implementation "{setting.value}" is not accepted by {ctx.target.name}: loading the config raises '
        "ValueError",
        why="GenerationConfig.validate checks cache_implementation against the names the release knows "
            "(Invalid `cache_implementation`)",
        evidence=[f"target: {ctx.target}"],
        fix_hint=f"use one of {', '.join(sorted(accepted - tf.STATIC_CACHE_ALIASES))}",
    )


def _where_it_belongs(key: str, root: dict) -> str:
    """A hint for a top-level scalar: the section whose parser reads a key of that name."""
    decoder = root["properties"]["model"]["properties"]["decoder"]["properties"]
    for section, props in (("model.decoder", decoder), ("model", root["properties"]["model"]["properties"]),
                           ("search", root["properties"]["search"]["properties"])):
        if key in props:
            return f"move it under {section} (ORT GenAI reads it there)"
    return (_did_you_mean(key, set(root["properties"]["search"]["properties"]), "search.")
            or "move it into the section it belongs to, or remove it")


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
    close = closest(key, known)
    return f'did you mean "{prefix}{close}"?' if close else None