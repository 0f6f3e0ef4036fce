"""value-rejected-by-parser (SITS201)

## What it does
Reports values the framework's parser refuses, so the deployment fails to start:
- **vLLM**, judged with the target release's own argument parser: a value for a flag that takes
  none (`--enable-chunked-prefill=false` and `--enable-chunked-prefill false` from 0.8.5, where
  it became a BooleanOptionalAction), a number that is not one, a value outside the option's
  choices (`--block-size 24` before 0.18), an integer `--compilation-config 3` (from 0.9.2),
  `--max-model-len 8k` before 0.8.4 (size suffixes arrived with `human_readable_int`),
  `--max-model-len auto` before 0.14, and a `--max-model-len` that is no number at all (`12abc`,
  or more digits than Python's int conversion takes, which the parser refuses the same way).
  The API server's own parser (`make_arg_parser`, used by `python -m
  vllm.entrypoints.openai.api_server` and by KAITO's runtime, which passes each `vllm:` entry as
  `--KEY str(VALUE)`) has an optional positional `model_tag` from 0.10.0: the first stray word
  (`--enable-chunked-prefill True`) lands there and the server starts (info; a stray `False`
  leaves the flag on: warning); only a second stray word is an unrecognized argument. A launch
  script's variable after such a flag (`--enforce-eager $EAGER`) that the script sets somewhere
  it cannot be read (`EAGER="$3"`) is a warning naming where it is set: a word there fails.
- **Triton TensorRT-LLM backend** `config.pbtxt`: a missing or unknown `gpt_model_type` (the
  model fails to load), and a parameter value the backend cannot convert (`"O.9"` for
  `kv_cache_free_gpu_mem_fraction`, `"yes"` for a bool): the backend logs a warning and quietly
  uses its default instead, and a number followed by more (`"0,85"`), of which it reads only the
  leading part (`std::stof`: 0) without a word (warnings).
- **ORT GenAI** `genai_config.json`: a missing or zero `model.context_length`; provider options must be JSON
strings (`"enable_cuda_graph": "1"`, not `true`), integers must be integral numbers, booleans
must be JSON booleans, `null` is never accepted for a known key, and enumerations
(`graph_optimization_level`) must be spelled exactly.

## Why it hurts
ORT GenAI refuses the whole config at model load (`JSON Error: ... Expected a string but saw a
bool`), after the model files were copied to the device. A value that looks reasonable to a
person (`true`, `4096.5`, `"8"`) stops the service.

## Example
```json file=genai_config.json
{"model": {"type": "llama", "context_length": 4096, "decoder": {"filename": "model.onnx",
  "session_options": {"provider_options": [{"cuda": {"enable_cuda_graph": true}}]}}}}
```
Use instead:
```json file=genai_config.json
{"model": {"type": "llama", "context_length": 4096, "decoder": {"filename": "model.onnx",
  "session_options": {"provider_options": [{"cuda": {"enable_cuda_graph": "1"}}]}}}}
```

## Fix
Write the value with the type the parser expects (safe: the same meaning, spelled the way the
parser reads it). `sits-doctor fix` does it where the right value is unambiguous: a provider
option `true`/`1` becomes `"1"`, a suffixed `max_model_len` its plain number.

## How it is measured
Not measured: a predicted startup failure, from the options each vLLM release's parser
declares (type, action, choices) and a JSON Schema of what each ORT GenAI release's parser accepts;
both are checked against the real parsers' verdicts on probe inputs (tests replay every probe).

## Sources
- microsoft/onnxruntime-genai `src/config.cpp`, `src/json.h` (@00a26d59): typed getters,
  `SafeDoubleToInt`, provider options as strings, "model context_length is 0 or was not set";
  replayed on the wheels 0.5.2 … 0.18.0.
- triton-inference-server/tensorrtllm_backend `inflight_batcher_llm/src/model_state.cc` and
  `model_instance_state.cc` at v0.18.0 (`GetParameter<T>`: `std::stoi`/`std::stof`, a `catch`
  that warns and keeps the default; `gpt_model_type` read without one).
- vLLM `vllm/engine/arg_utils.py@0.8.4`: `human_readable_int` becomes the type of
  `--max-model-len`, `human_readable_int_or_auto`@0.14.0; `BooleanOptionalAction` for boolean
  config fields @0.8.5 (`StoreBoolean`, which took a value, before); `CompilationConfig`
  validation of the `--compilation-config` value @0.9.2 — each verdict from running that
  release's parser (tools/gen_vllm_options.py).
- vLLM `vllm/entrypoints/openai/cli_args.py` `make_arg_parser`: `parser.add_argument("model_tag",
  type=str, nargs="?")` in the v0.10.0 and v0.10.2 sdists, absent in v0.9.2; the api_server
  module never reads it, `vllm serve` takes it as the model (`vllm/entrypoints/cli/serve.py`).
  KAITO: kaito-project/kaito `presets/workspace/inference/vllm/inference_api.py`
  (`KAITOArgumentParser.parse_args`: `runtime_args.append(f"--{key}")`, `str(value)`, then
  `make_arg_parser(...).parse_args`; the model comes from `set_defaults`, not a positional).
"""

from __future__ import annotations

import re
from typing import Iterator

from sits_doctor.finding import Finding, Safety, Severity
from sits_doctor.fixes import config as edit
from sits_doctor.fixes.config_versions import portable
from sits_doctor.frameworks import vllm as fw
from sits_doctor.loaders.vllm_args import parse_human_int
from sits_doctor.plan import Plan, Provenance
from sits_doctor.rule import Rule, closest
from sits_doctor.source import join_pointer
from sits_doctor.versions import V

RULE = Rule(
    code="SITS201",
    name="value-rejected-by-parser",
    summary="value of a type the framework's strict config parser rejects: load failure",
    severity=Severity.ERROR,
    frameworks=("ortgenai", "vllm", "trtllm"),
)
_WANTED = {"integer": "an integer", "array": "an array", "object": "an object"}
_JSON_TYPES = {bool: "bool", int: "number", float: "number", str: "string", type(None): "null", dict: "object", list: "array"}


def check(plan: Plan, ctx) -> Iterator[Finding]:
    if plan.framework == "vllm":
        yield from _vllm(plan, ctx)
    elif plan.framework == "ortgenai":
        yield from _ortgenai(plan, ctx)
    elif plan.kind == "triton-pbtxt":
        yield from _triton(plan, ctx)


def _triton(plan: Plan, ctx) -> Iterator[Finding]:
    from sits_doctor.frameworks import triton

    source = f"{triton.BACKEND_REPO}@{triton.SOURCE_TAG} {triton.MODEL_INSTANCE_STATE}"
    model_type = plan.get("gpt_model_type")
    if model_type is None:
        yield RULE.finding(plan, plan.anchor, "gpt_model_type is not set: the TensorRT-LLM backend fails to load "
                           "the model (it reads this parameter without a fallback)", evidence=[source],
                           fix_hint=f"add parameters gpt_model_type: one of {', '.join(triton.GPT_MODEL_TYPES)}")
    elif not model_type.templated and model_type.raw not in triton.GPT_MODEL_TYPES:
        yield RULE.finding(plan, model_type, f"gpt_model_type {model_type.raw!r} is not a batching mode the backend "
                           "knows: the model fails to load", evidence=[source],
                           fix_hint=f"one of {', '.join(triton.GPT_MODEL_TYPES)}")
    for key, setting in plan.settings.items():
        param = triton.PARAMETERS.get(key)
        if param is None or setting.templated or not isinstance(setting.raw, str) or key == "gpt_model_type":
            continue
        try:
            value = triton.convert(key, setting.raw)
        except ValueError:
            default = "no value (unset)" if param.default is None else repr(param.default)
            yield RULE.finding(
                plan, setting,
                f"{key} {setting.raw!r} is not a{'n' if param.kind in ('int', 'uint') else ''} {param.kind} the backend "
                f"can read: it logs a warning and quietly uses {default} instead",
                severity=Severity.WARNING, evidence=[source], fix_hint=f"write a {param.kind} ({param.meaning})")
            continue
        tail = triton.ignored_tail(key, setting.raw)
        if tail:
            yield RULE.finding(
                plan, setting,
                f"{key} {setting.raw!r}: the backend reads only the number before {tail!r} and uses {value!r}",
                severity=Severity.WARNING, evidence=[source], fix_hint=f"write a plain {param.kind} ({param.meaning})")


def _vllm(plan: Plan, ctx) -> Iterator[Finding]:
    yield from _vllm_max_model_len(plan, ctx)
    found = fw.parser_release(ctx.target.version)
    if found is None:
        return
    release, note = found
    evidence = [f"target: {ctx.target}"] + ([note] if note else [])
    judged = []
    for setting, flag in fw.written_options(plan):
        if setting.templated or (setting.key == fw.MAX_MODEL_LEN and isinstance(setting.raw, str)):
            continue  # suffixes and "auto": _vllm_max_model_len
        info = fw.lookup_flag(flag, release)
        if info is not None:
            judged.append((setting, info))
    absorbed = _absorbed_stray_word(plan, release, judged)
    for setting, info in judged:
        if setting is absorbed:
            yield _absorbed(plan, ctx, setting, info, evidence)
        else:
            yield from _vllm_value(plan, ctx, setting, info, evidence, release)


def _stray(setting, info) -> bool:
    """A flag that takes no value, written with its value as a separate word."""
    return (info.segment["kind"] == "bool" and info.segment["action"] in fw.BOOL_ACTIONS_WITHOUT_VALUE
            and setting.site is not None and len(setting.site.words) == 2)


def _absorbed_stray_word(plan: Plan, release: str, judged: list):
    """The setting whose stray value word the server parser's optional positional ``model_tag``
    takes (``make_arg_parser``, ``nargs="?"``, from vLLM 0.10.0): the first stray word in argument
    order, where the parser is the API server module's (``python -m
    vllm.entrypoints.openai.api_server``, and KAITO's runtime, which builds that parser and never
    reads ``model_tag``) and no positional word took it. ``vllm serve`` reads ``model_tag`` as the
    model, so there the word is no harmless extra."""
    if plan.parser != fw.PARSER_API_SERVER or V(release) < V(fw.SERVER_PARSER_MODEL_TAG):
        return None
    if plan.positional:
        return None  # a positional word (the model) already fills model_tag
    strays = [s for s, info in judged if _stray(s, info)]
    return min(strays, key=lambda s: (s.prov.line, s.prov.col), default=None)


def _absorbed(plan: Plan, ctx, setting, info, evidence) -> Finding:
    value = str(setting.raw)
    on = value.strip().lower() == "true"
    head = f"{info.flag} takes no value; the stray word {value!r} lands in model_tag: {ctx.target.name} starts"
    why = (f"the server parser's optional positional model_tag (make_arg_parser, vLLM ≥{fw.SERVER_PARSER_MODEL_TAG}) "
           "takes one word that no flag took, and this server does not read it")
    if on:
        return RULE.finding(
            plan, setting, head, why=why + "; a second such word would be an unrecognized argument",
            severity=Severity.INFO, evidence=evidence,
            fix_hint="nothing to change for this entry; keep it the only one whose flag takes no value")
    return RULE.finding(
        plan, setting, head + f" with {info.flag} set: {value!r} does not turn it off", why=why,
        severity=Severity.WARNING, evidence=evidence,
        fix_hint=f"remove the entry to keep the default, or set the option where the flag can be written alone",
        fixes=[edit.remove(setting, f"remove {setting.raw_key}", Safety.UNSAFE)])


def _vllm_value(plan: Plan, ctx, setting, info, evidence, release: str) -> Iterator[Finding]:
    """Values the release's parser rejects: an explicit value for a flag that takes none, a
    number that is not one, a value outside the choices, an integer compilation config."""
    seg, shown = info.segment, info.flag
    value = setting.raw
    inline = setting.site is not None and setting.site.inline
    if seg["kind"] == "bool":
        if plan.kind == "vllm-yaml" and isinstance(value, str) and seg["action"] in fw.BOOL_ACTIONS_WITHOUT_VALUE:
            word = value.strip().lower()
            as_bool = {"true": True, "false": False}.get(word)
            yield RULE.finding(
                plan, setting,
                f"`{setting.raw_key}: {value!r}` is a string, a separate word after {shown}: "
                f"{ctx.target.name} fails to start",
                why=f"vLLM's config loader passes a string after the flag, which takes none: unrecognized arguments: "
                    f"{value}, or, when the model is not a positional argument, {value!r} taken as the model name",
                evidence=evidence, fix_hint=f"write {word} without quotes" if as_bool is not None else "write true or false",
                fixes=[edit.replace_value(setting, as_bool, f"write {word} (a YAML boolean)")] if as_bool is not None else (),
            )
            return
        off_flag = portable([f for f in seg["flags"] if f.startswith(("--no-", "--disable-"))], release)
        separate = setting.site is not None and len(setting.site.words) == 2
        if separate and seg["action"] in fw.BOOL_ACTIONS_WITHOUT_VALUE and value is True:
            # `--enforce-eager $EAGER`: a variable word the file does not resolve follows the flag
            word = setting.site.words[1].text
            if setting.prov.kind == "file" and setting.prov.note:
                yield RULE.finding(
                    plan, setting,
                    f"{shown} takes no value, and {word} after it is a separate word: where it expands to one, "
                    f"{ctx.target.name} refuses to start",
                    why=f"{setting.prov.note}; argparse refuses the extra word (unrecognized arguments), and only an "
                        "empty, unquoted expansion leaves the flag alone",
                    severity=Severity.WARNING, evidence=evidence,
                    fix_hint=f"write {shown} alone, or put the whole flag in the variable",
                    fixes=[edit.display(setting, f"write {shown} alone", "the variable's value is not known here")])
            return
        if separate and seg["action"] in fw.BOOL_ACTIONS_WITHOUT_VALUE:
            on = str(value).strip().lower() == "true"
            word = shown if on else off_flag
            message = f"{shown} takes no value: {ctx.target.name} refuses to start (unrecognized arguments: {value})"
            if setting.site.kind == "helm":  # a mapping entry the wrapper always writes as --KEY VALUE
                yield RULE.finding(
                    plan, setting, message + "; this entry is always passed as two words, the flag and the value",
                    evidence=evidence, fix_hint="remove the entry: a flag that takes no value cannot be set from here",
                    fixes=[edit.remove(setting, f"remove {setting.raw_key}", Safety.UNSAFE)],
                )
                return
            yield RULE.finding(
                plan, setting, message,
                evidence=evidence, fix_hint=f"write {word} alone" if word else f"remove {value}",
                fixes=[edit.display(setting, f"write {word} alone", "the flag and its value are two words")] if word else (),
            )
            return
        if inline and seg["action"] in fw.BOOL_ACTIONS_WITHOUT_VALUE:
            on = str(value).strip().lower() not in ("false", "0", "no", "off")
            word = shown if on else off_flag
            yield RULE.finding(
                plan, setting,
                f"argument {shown}: ignored explicit argument {str(value)!r}: {ctx.target.name} refuses to start "
                "(the flag takes no value)",
                evidence=evidence, fix_hint=f"write {word}" if word else f"drop ={value}",
                fixes=[edit.rewrite_word(setting, word, f"write {word}", target=ctx.target)] if word else (),
            )
        return
    if plan.kind == "vllm-yaml" and value is True and seg.get("nargs") in (None, "?", 1):
        yield RULE.finding(
            plan, setting,
            f"`{setting.raw_key}: true` becomes {shown} with no value (vLLM's config loader writes only the flag "
            f"for true): {ctx.target.name} refuses to start (argument {shown}: expected one argument)",
            evidence=evidence, fix_hint=f"write the {seg['kind']} value {setting.raw_key} takes",
        )
        return
    if isinstance(value, (list, dict)) or value is None or isinstance(value, bool):
        return
    text = str(value).strip()
    parser_type = str(seg.get("type") or "")
    if text in fw.NONE_WORDS and parser_type.startswith(fw.OPTIONAL_TYPE):
        return  # read as None: the option keeps its default
    if seg["kind"] == "json" and text.startswith("{") and _inner_type(parser_type) in fw.STRICT_JSON_TYPES:
        import json

        try:
            json.loads(text)
        except ValueError as err:
            yield RULE.finding(
                plan, setting,
                f"argument {shown}: {_quoted(text)} is not JSON ({err.args[0].split(':')[0]}): "
                f"{ctx.target.name} refuses to start",
                evidence=evidence, fix_hint="write the value as JSON (double-quoted keys and strings)",
            )
            return
    if seg["kind"] == "human_int" and not isinstance(parse_human_int(value), int):
        yield RULE.finding(
            plan, setting, f"argument {shown}: invalid int value: {_quoted(text)}: {ctx.target.name} refuses to start",
            evidence=evidence, fix_hint="write a whole number (or a size like 32k)")
        return
    if seg["kind"] in ("int", "float"):
        try:
            (int if seg["kind"] == "int" else float)(text)
        except ValueError:
            yield RULE.finding(
                plan, setting, f"argument {shown}: invalid {seg['kind']} value: {_quoted(text)}: {ctx.target.name} "
                               "refuses to start", evidence=evidence, fix_hint=f"write a plain {seg['kind']}")
            return
    choices = seg.get("choices")
    if choices and text not in [str(c) for c in choices]:
        yield RULE.finding(
            plan, setting,
            f"argument {shown}: invalid choice: {_quoted(text)} (choose from {', '.join(map(str, choices))}): "
            f"{ctx.target.name} refuses to start",
            evidence=evidence, fix_hint=_closest_choice(text, choices),
        )
    if (info.dest == fw.COMPILATION_CONFIG and "." not in setting.key and shown != "-O"
            and not setting.raw_key.startswith("-O") and re.fullmatch(r"-?\d+", text)
            and V(ctx.target.version) >= V(fw.COMPILATION_CONFIG_INT_REJECTED)):
        yield RULE.finding(
            plan, setting,
            f"{shown} {text}: {ctx.target.name} wants a JSON object here (from {fw.COMPILATION_CONFIG_INT_REJECTED}); "
            "startup fails with a validation error for CompilationConfig",
            evidence=evidence, fix_hint=f"write -O{text} (the optimization level) or --compilation-config "
                                        f"'{{\"mode\": {text}}}'",
        )


def _inner_type(parser_type: str) -> str:
    """``_optional_type(parse_dataclass)`` → ``parse_dataclass``."""
    return parser_type[len(fw.OPTIONAL_TYPE):-1] if parser_type.startswith(fw.OPTIONAL_TYPE) else parser_type


def _quoted(text: str, limit: int = 60) -> str:
    """The value as argparse quotes it, cut to ``limit`` characters (a 5000-digit number stays readable)."""
    return repr(text if len(text) <= limit else text[:limit - 3] + "...")


def _closest_choice(text: str, choices) -> str:
    close = closest(text, [str(c) for c in choices], cutoff=0.6)
    return f"did you mean {close!r}?" if close else "use one of the choices"


def _vllm_max_model_len(plan: Plan, ctx) -> Iterator[Finding]:
    setting = fw.max_model_len_setting(plan)
    if setting is None or setting.templated or not isinstance(setting.raw, str):
        return
    text = setting.raw.strip()
    if text == "auto" and V(ctx.target.version) < V(fw.MAX_MODEL_LEN_AUTO):
        yield RULE.finding(
            plan, setting,
            f"max_model_len 'auto' is read from vLLM {fw.MAX_MODEL_LEN_AUTO} on: {ctx.target.name} refuses to start "
            "(argument --max-model-len: invalid value 'auto')",
            evidence=[f"target: {ctx.target}"], fix_hint="leave max_model_len unset (vLLM derives it from the model)",
        )
        return
    number = parse_human_int(text)
    if text == "auto" or (isinstance(number, int) and re.fullmatch(r"-?\d+", text)):
        return
    if not isinstance(number, int):  # "12abc", a number past Python's int limit, "1.5x"
        yield RULE.finding(
            plan, setting,
            f"max_model_len {_quoted(text)} is not a number {ctx.target.name} reads: it refuses to start "
            "(argument --max-model-len: invalid value)",
            evidence=[f"target: {ctx.target}"], fix_hint="write a whole number (or a size like 32k)",
        )
        return
    if re.fullmatch(r"\d+(\.\d+)?[kmgKMG]", text) and V(ctx.target.version) < V(fw.HUMAN_INT):
        number = setting.value
        yield RULE.finding(
            plan, setting,
            f"max_model_len {_quoted(text)} uses a size suffix, which {ctx.target.name} does not read "
            f"(from {fw.HUMAN_INT}): startup fails (argument --max-model-len: invalid int value)",
            evidence=[f"target: {ctx.target}"],
            fix_hint=f"write it as a plain number: {number}",
            fixes=[edit.replace_value(setting, number, f"write {number}")] if isinstance(number, int) else (),
        )


def _ortgenai(plan: Plan, ctx) -> Iterator[Finding]:
    from sits_doctor.frameworks.ortgenai_releases import judged_as
    from sits_doctor.schemas.ortgenai import schema_errors

    judged = judged_as(ctx.target.version)  # the probed release whose parser speaks for the target
    who = f"ORT GenAI {judged.release}" + (" (assumed)" if ctx.target.assumed else "")
    evidence = [f"target: {ctx.target}"] + ([f"judged as ORT GenAI {judged.release}: {judged.note}"] if judged.note else [])
    for error in schema_errors(plan.doc, ctx.target.version):
        if error.validator in ("required", "minimum") and "context_length" in str(error.message) + str(
                list(error.absolute_path)):
            at = Provenance.at(plan.doc, "/model" if error.validator == "required" else "/model/context_length")
            yield RULE.finding(
                plan, at,
                f"model context_length is 0 or was not set: {who} fails to load the config",
                evidence=evidence,
                fix_hint="set model.context_length to the model's maximum sequence length",
            )
            continue
        if error.validator not in ("type", "enum"):
            continue
        pointer = ""
        for p in error.absolute_path:
            pointer = join_pointer(pointer, p)
        name = str(error.absolute_path[-1]) if error.absolute_path else "value"
        saw = _JSON_TYPES.get(type(error.instance), type(error.instance).__name__)
        if error.validator == "enum":
            message = f"{name} = {_short(error.instance)} is not one of the {len(error.validator_value)} values it takes"
        else:
            wanted = error.validator_value
            wanted = [wanted] if isinstance(wanted, str) else wanted
            if wanted == ["integer"] and isinstance(error.instance, float):
                message = f"{name} = {error.instance!r} is not an integer"
            else:
                expected = " or ".join(_WANTED.get(w, f"a {w}") for w in wanted)
                article = "an" if saw[:1] in "aeiou" else "a"
                message = f"{name}: expected {expected} but saw {article} {saw} ({_short(error.instance)})"
        setting = plan.get(".".join(str(p) for p in error.absolute_path))
        fix = None
        if setting is not None and error.validator_value == "string" and isinstance(error.instance, (bool, int, float)):
            text = str(int(error.instance)) if isinstance(error.instance, bool) else str(error.instance)
            fix = edit.replace_value(setting, text, f'write "{text}" (a string)')
        yield RULE.finding(
            plan, Provenance.at(plan.doc, pointer),
            f"{message}: {who} fails to load the config",
            evidence=evidence,
            fix_hint=_hint(error),
            fixes=[fix],
        )


def _short(value) -> str:
    import json

    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _hint(error) -> str | None:
    if error.validator_value == "string" and isinstance(error.instance, (bool, int, float)):
        if isinstance(error.instance, bool):
            return f'write "{int(error.instance)}" (a string)'
        return f'write "{error.instance}" (a string)'
    if error.validator == "enum":
        return f"use one of {', '.join(str(v) for v in error.validator_value)}"
    return None
