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
On vLLM ≥0.28, `sits-doctor fix --unsafe-fixes` spells the key with dashes, so vLLM passes
`--no-<key>` and the option really turns off (unsafe: the server then behaves differently from
how it ran before, although as the file says). On older versions no spelling in the file works:
move the setting to the command line as `--no-<key>` (0.8.5 and later accept `--no-` for every
boolean engine option); the fix is shown, not applied.

## How it is measured
Not measured: the option's effective value is predicted from the version's config-file loader
and the option's default. A `false` whose default is also off is harmless and not reported; one
whose default is unknown for the target version is reported as info.

## Sources
- vLLM `load_config_file` (`vllm/utils/argparse_utils.py@0.28.0` and `@0.33.0`; `vllm/utils.py`
  in older releases): booleans become `--key` when true; for false, from 0.28 only,
  `--no-{key}` with the key as written, kept only if that exact flag exists
  (the probes of tools/gen_vllm_options.py confirm which `--no-` flags each release has).
- `vllm/utils.py@0.8.0` (the same from 0.6.6.post1 to 0.8.4): `false` for a StoreBoolean option
  (`enable_chunked_prefill`, `multi_step_stream_outputs`,
  `disable_logprobs_during_spec_decoding`) spelled as its dest (underscores) is passed on as
  `--key False`, so it works there.
- Defaults: `enable_prefix_caching` on for generative models and `enable_chunked_prefill` on in
  the V1 engine (default from 0.8: `vllm/engine/arg_utils.py@0.8.0`). `--no-` forms: BooleanOptionalAction for boolean config
  fields from 0.8.5 (`vllm/engine/arg_utils.py`).
"""

from __future__ import annotations

from typing import Iterator

from sits_doctor.finding import Finding, Safety, Severity
from sits_doctor.fixes import config as edit
from sits_doctor.frameworks import vllm as fw
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


def check(plan: Plan, ctx) -> Iterator[Finding]:
    if plan.kind != "vllm-yaml":
        return
    version = V(ctx.target.version)
    fixed_in = V(fw.YAML_FALSE_AS_NO_FLAG)
    serving = plan.facts.serving if plan.facts is not None else None
    for key, setting in plan.settings.items():
        if fw.default_off(key) or not fw.yaml_false_dropped(setting, ctx.target.version):
            continue
        on = fw.default_on(key, version)
        flag = f"--no-{key.replace('_', '-')}"
        effective = getattr(serving, _SERVING_FIELD.get(key, ""), None) if serving is not None else None
        evidence = [f"{key} = {effective}" if effective is not None else None, f"target: {ctx.target}"]
        evidence = [e for e in evidence if e]
        if version >= fixed_in:
            dashed = setting.raw_key.replace("_", "-")
            yield RULE.finding(
                plan, setting,
                f"`{setting.raw_key}: false` is silently dropped by {ctx.target.name}: {key} keeps its default",
                why=f"the config loader looks for the flag --no-{setting.raw_key}, which does not exist",
                evidence=evidence, fix_hint=f"spell it `{dashed}: false`",
                severity=Severity.WARNING if on else Severity.INFO,
                fixes=[edit.rename(setting, dashed, f"spell it {dashed} (the server then runs with "
                                   f"{key} off, as written)", Safety.UNSAFE)],
            )
        elif on:
            yield RULE.finding(
                plan, setting,
                f"`{setting.raw_key}: false` is silently dropped by {ctx.target.name}: "
                f"{key} stays on (its default)",
                evidence=evidence,
                fix_hint=f"pass {flag} on the command line, or upgrade to vLLM ≥{fw.YAML_FALSE_AS_NO_FLAG}",
                fixes=[edit.display(setting, f"pass {flag} on the command line",
                                    f"no spelling in a --config file turns it off on {ctx.target.name}")],
            )
        else:
            yield RULE.finding(
                plan, setting,
                f"`{setting.raw_key}: false` is silently dropped by {ctx.target.name}: "
                f"{key} keeps its default, whatever that is",
                evidence=evidence, severity=Severity.INFO,
                fix_hint=f"pass {flag} on the command line if the default is on, or upgrade to vLLM ≥{fw.YAML_FALSE_AS_NO_FLAG}",
            )


# The Serving fact that holds an option's effective value (its default once the line is dropped).
_SERVING_FIELD = {fw.PREFIX_CACHING: "prefix_caching", fw.CHUNKED_PREFILL: "chunked_prefill"}
