"""yaml-false-dropped (SITS205)

## What it does
Finds `key: false` in a `vllm serve --config` YAML file that vLLM silently drops: every such
line when the target vLLM is 0.27 or older (they turn `true` into `--key` and pass nothing for
`false`), and from 0.28 the lines spelled with underscores (`enable_prefix_caching: false`):
0.28 passes `--no-<key>` built from the key as written, and `--no-enable_prefix_caching` is not
a flag, so it is dropped too. The option keeps its default; when that default is on (prefix
caching, chunked prefill), the setting you wrote does nothing.

## Why it hurts
`enable-prefix-caching: false` reads as "off" and the server runs with prefix caching on: a
benchmark or an A/B test compares the wrong thing, and memory behaves unlike the config says.
Nothing is logged.

## Example
```yaml file=serve.yaml target=vllm==0.10.2
model: meta-llama/Llama-3.1-8B-Instruct
enable-prefix-caching: false
```
Use instead: (vLLM ≤0.27: say it on the command line, which beats the file)
```yaml file=serve.yaml target=vllm==0.10.2
model: meta-llama/Llama-3.1-8B-Instruct
```
and run `vllm serve --config serve.yaml --no-enable-prefix-caching`, or upgrade to vLLM ≥0.28,
which turns `false` into `--no-key`.

## Fix
Move the setting to the command line as `--no-<key>` (0.8.5 and later accept `--no-` for every
boolean engine option), or, on vLLM ≥0.28, spell the key with dashes. No automatic fix yet.

## How it is measured
Not measured: the option's effective value is predicted from the version's config-file loader
and the option's default. A `false` whose default is also off is harmless and not reported; one
whose default is unknown for the target version is reported as info.

## Sources
- vLLM `load_config_file` (`vllm/utils/argparse_utils.py@0.28.0` and `@0.33.0`; `vllm/utils.py`
  in older releases): booleans become `--key` when true; for false, from 0.28 only,
  `--no-{key}` with the key as written, kept only if that exact flag exists
  (shared/research/vllm-hf-facts.md §2).
- `vllm/utils.py@0.8.0` (the same from 0.6.6.post1 to 0.8.4): `false` for a StoreBoolean option
  (`enable_chunked_prefill`, `multi_step_stream_outputs`,
  `disable_logprobs_during_spec_decoding`) spelled as its dest (underscores) is passed on as
  `--key False`, so it works there.
- Defaults: `enable_prefix_caching` on for generative models and `enable_chunked_prefill` on in
  the V1 engine (default from 0.8; §1). `--no-` forms: BooleanOptionalAction for boolean config
  fields from 0.8.5 (`vllm/engine/arg_utils.py`).
"""

from __future__ import annotations

from typing import Iterator

from sits_doctor.finding import Finding, Severity
from sits_doctor.plan import Plan
from sits_doctor.rule import Rule
from sits_doctor.versions import V

RULE = Rule(
    code="SITS205",
    name="yaml-false-dropped",
    summary="vLLM silently drops `key: false` from --config YAML (any key ≤0.27, underscored keys after); the default stays on",
    severity=Severity.WARNING,
    frameworks=("vllm",),
)

FIXED_IN = "0.28.0"
# 0.6.6.post1 ... 0.8.4 pass `--key False` for options parsed with StoreBoolean when the YAML key
# equals the option's dest (the underscore spelling), instead of dropping it.
STORE_BOOLEAN = frozenset({"enable_chunked_prefill", "multi_step_stream_outputs", "disable_logprobs_during_spec_decoding"})
STORE_BOOLEAN_VERSIONS = ("0.6.6", "0.8.5")
# Options that are on by default (from the V1 engine, default in 0.8): a dropped false keeps them on.
DEFAULT_ON = {"enable_prefix_caching": "0.8.0", "enable_chunked_prefill": "0.8.0"}
# Options that are off by default in every version: a dropped false changes nothing.
DEFAULT_OFF = frozenset(
    """enforce_eager trust_remote_code disable_log_stats enable_lora
    calculate_kv_scales enable_auto_tool_choice disable_custom_all_reduce disable_sliding_window
    enable_expert_parallel enable_sleep_mode skip_tokenizer_init enable_prompt_embeds
    enable_log_requests async_scheduling enable_eplb""".split()
)


def check(plan: Plan, ctx) -> Iterator[Finding]:
    if plan.kind != "vllm-yaml":
        return
    version = V(ctx.target.version)
    for key, setting in plan.settings.items():
        if "." in key or setting.raw is not False or key in DEFAULT_OFF:
            continue
        if version >= V(FIXED_IN) and "_" not in setting.raw_key:
            continue  # 0.28+ passes --no-<key>, but only for the dashed spelling
        low, high = STORE_BOOLEAN_VERSIONS
        if key in STORE_BOOLEAN and setting.raw_key == key and V(low) <= version < V(high):
            continue  # passed on as --key False
        on_since = DEFAULT_ON.get(key)
        flag = f"--no-{key.replace('_', '-')}"
        evidence = [f"target: {ctx.target}"]
        if on_since is not None and version >= V(on_since):
            evidence.insert(0, f"{key} = on (default of vLLM {ctx.target.version}: V1 engine, from {on_since})")
        if version >= V(FIXED_IN):
            yield RULE.finding(
                plan, setting,
                f"`{setting.raw_key}: false` is silently dropped by vLLM {ctx.target.version}: it looks "
                f"for the flag --no-{setting.raw_key}, which does not exist; {key} keeps its default",
                evidence=evidence, fix_hint=f"spell it `{setting.raw_key.replace('_', '-')}: false`",
                severity=Severity.WARNING if on_since else Severity.INFO,
            )
        elif on_since is not None and version >= V(on_since):
            yield RULE.finding(
                plan, setting,
                f"`{setting.raw_key}: false` is silently dropped by vLLM {ctx.target.version}: "
                f"{key} stays on (its default)",
                evidence=evidence,
                fix_hint=f"pass {flag} on the command line, or upgrade to vLLM ≥{FIXED_IN}",
            )
        else:
            yield RULE.finding(
                plan, setting,
                f"`{setting.raw_key}: false` is silently dropped by vLLM {ctx.target.version}: "
                f"{key} keeps its default, whatever that is",
                evidence=evidence, severity=Severity.INFO,
                fix_hint=f"pass {flag} on the command line if the default is on, or upgrade to vLLM ≥{FIXED_IN}",
            )
