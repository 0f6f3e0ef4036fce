"""``trtllm-serve`` command lines: the words of ``trtllm-serve [serve] MODEL [--flags]`` (or
``python -m tensorrt_llm.commands.serve ...``) to a Plan keyed by LLM-API field.

The words come from whatever wraps the command (a shell script, a container's command/args) as
:class:`~sits_doctor.loaders.vllm_args.Token`\\ s; a shell control operator ends the command. Each
option becomes a Setting under the LLM-API field it sets (``--tp_size`` → ``tensor_parallel_size``,
``--kv_cache_free_gpu_memory_fraction`` → ``kv_cache_config.free_gpu_memory_fraction``), or under
its click parameter name when it only configures the server (``--port`` → ``port``). A flag no
release has keeps its written name (``--max-batch-size``) so a rule can report it. Every Setting
records its words (:class:`~sits_doctor.plan.Site`), so a fix can remove or rewrite them.
Options are parsed as click parses them (sits_doctor.frameworks.trtllm_serve): ``--flag value``
or ``--flag=value``; an ``is_flag`` option takes no value; the last of repeated options wins.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from sits_doctor.frameworks import trtllm_serve as fw
from sits_doctor.loaders.commands import until_operator
from sits_doctor.loaders.vllm_args import Token, resolve_vars, site_of
from sits_doctor.plan import Plan, Provenance, Setting, Site
from sits_doctor.source import SourceDoc

KIND = "trtllm-serve-args"
# commands that name a program without running it
_NOT_RUNNING = frozenset("echo printf which command type whereis hash pgrep pkill kill killall grep".split())


def find_invocation(tokens: list[Token]) -> tuple[list[Token], str] | None:
    """The words after ``trtllm-serve [serve]`` (or ``python -m tensorrt_llm.commands.serve
    [serve]``) up to a shell operator, and how the server was started. None when the words run no
    ``serve`` (another subcommand such as ``disaggregated``, or no trtllm-serve at all)."""
    start = 0  # where the current command begins
    for i, tok in enumerate(tokens):
        if tok.operator:
            start = i + 1
            continue
        if tokens[start].text.rsplit("/", 1)[-1] in _NOT_RUNNING:
            continue  # `which trtllm-serve`, `pkill -f trtllm-serve`: the name, not a server
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok.text.rsplit("/", 1)[-1] == fw.COMMAND and not tok.text.startswith("-"):
            how, rest = fw.COMMAND, tokens[i + 1:]
        elif tok.text == "-m" and nxt is not None and nxt.text == fw.MODULE:
            how, rest = f"python -m {fw.MODULE}", tokens[i + 2:]
        else:
            continue
        args = until_operator(rest)
        if args and args[0].text == fw.SUBCOMMAND:
            return args[1:], f"{how} {fw.SUBCOMMAND}"
        if args and args[0].text in fw.OTHER_SUBCOMMANDS:
            return None
        return args, how
    return None


def plan_from_tokens(
    doc: SourceDoc,
    tokens: list[Token],
    *,
    label: str,
    anchor: Provenance,
    env: dict[str, Setting] | None = None,
    image: Setting | None = None,
    env_expands: bool = True,
) -> Plan | None:
    """A Plan for the ``trtllm-serve`` command inside ``tokens``, or None if there is none.

    ``env``: the environment the command runs with. ``env_expands`` (as for vLLM's
    ``plan_from_command``): variables in the words expand from ``env`` here, and words naming
    other variables stay unknown (``Plan.unchecked``); False when the caller has already expanded
    them (a shell script's loader, which knows every variable the script set, and counts the rest).
    """
    found = find_invocation(tokens)
    if found is None:
        return None
    args, how = found
    args, unresolved = resolve_vars(args, env or {}) if env_expands else (args, 0)
    settings, positional = parse_args(args, doc)
    model_ref = None
    if positional:
        first = positional[0]
        model_ref = Setting(key=fw.MODEL, raw_key=fw.MODEL, value=first.text, raw=first.text, prov=first.prov,
                            templated=first.templated, site=site_of(doc, [first]))
    args_site = None
    if args:
        anchor = args[-1].prov
        args_site = site_of(doc, args)
    return Plan(
        framework="trtllm",
        kind=KIND,
        label=f"{label} ({how})",
        file=doc.path,
        anchor=anchor,
        settings=settings,
        env=env or {},
        image=image,
        model_ref=model_ref,
        doc=doc,
        args_site=args_site,
        entry=how,
        unchecked=unresolved,
    )


def parse_args(tokens: list[Token], doc: SourceDoc | None = None) -> tuple[dict[str, Setting], list[Token]]:
    """Options (keyed by LLM-API field, see the module docstring) and positional words."""
    settings: dict[str, Setting] = {}
    positional: list[Token] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not _is_flag(tok.text):
            positional.append(tok)
            i += 1
            continue
        flag, eq, inline = tok.text.partition("=")
        option = fw.BY_FLAG.get(flag)
        used = [tok]
        templated = tok.templated
        if eq:
            value = inline
        elif option is not None and option.type == "flag":
            value = True
        elif i + 1 < len(tokens) and not _is_flag(tokens[i + 1].text):
            i += 1
            used.append(tokens[i])
            value = tokens[i].text
            templated = templated or tokens[i].templated
        else:
            value = True if option is None else None  # click: "Option '--x' requires an argument."
        key = fw.key_of(flag) or flag
        parsed = value if templated or option is None else _coerce(option, value)
        site = site_of(doc, used) if doc is not None else None
        if eq and site is not None:
            site = Site(site.kind, doc, site.pointer, site.words, True)
        if option is not None and option.type == "path" and key in settings:  # multiple=True: every value
            before = settings[key]
            parsed = [*before.value, parsed]
        elif option is not None and option.type == "path":
            parsed = [parsed]
        settings[key] = Setting(key=key, raw_key=flag, value=parsed, raw=value, prov=tok.prov,
                                templated=templated, site=site)
        i += 1
    return settings, positional


def extra_options_path(plan: Plan) -> str | None:
    """Where the ``--extra_llm_api_options``/``--config`` file of ``plan`` is, when the command
    line names it with a relative path: joined to the folder of the file holding the command (a
    script run from its own folder sees it there). None when there is no such option, when it is
    an absolute path or a variable, or when the command is not in a file."""
    s = plan.settings.get(fw.EXTRA_OPTIONS)
    if s is None or s.templated or not isinstance(s.value, str) or not s.value or plan.file is None:
        return None
    path = PurePosixPath(s.value)
    if path.is_absolute() or s.value.startswith("~"):
        return None
    return str(PurePosixPath(plan.file).parent / path)


def _is_flag(text: str) -> bool:
    return text.startswith("-") and text != "-" and not text[1:2].isdigit()


def _coerce(option: fw.ServeOption, value):
    """The value click would pass, or the text unchanged when click would refuse it."""
    if not isinstance(value, str):
        return value
    try:
        if option.type == "int":
            return int(value)
        if option.type == "float":
            return float(value)
    except ValueError:
        return value
    return value  # choices as written: 'trt' stays 'trt' (an alias of tensorrt from 1.1, ChoiceWithAlias)

