"""``trtllm-build`` command lines (in launch scripts) to an engine-build Plan.

The plan is keyed like the engine ``config.json`` the command writes
(sits_doctor.frameworks.trtllm_build): ``--max_seq_len 8192`` is ``build_config.max_seq_len``,
``--context_fmha disable`` is ``build_config.plugin_config.context_fmha: false``, so the engine
rules read a build script as they read the engine. Every Setting keeps its words (a fix can
rewrite the value). Flags the tables do not list keep their written name and are not judged.
"""

from __future__ import annotations

from sits_doctor.frameworks import trtllm_build as fw
from sits_doctor.loaders.commands import until_operator
from sits_doctor.loaders.vllm_args import Token, resolve_vars, site_of
from sits_doctor.plan import Plan, Provenance, Setting, Site
from sits_doctor.source import SourceDoc

_NOT_RUNNING = frozenset("echo printf which command type whereis hash pgrep pkill kill killall grep".split())


def find_invocation(tokens: list[Token]) -> tuple[list[Token], str] | None:
    """The words after ``trtllm-build`` (or ``python -m tensorrt_llm.commands.build``) up to a
    shell operator, and how the build was started; None when no build runs."""
    start = 0
    for i, tok in enumerate(tokens):
        if tok.operator:
            start = i + 1
            continue
        if tokens[start].text.rsplit("/", 1)[-1] in _NOT_RUNNING:
            continue
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok.text.rsplit("/", 1)[-1] == fw.COMMAND:
            return until_operator(tokens[i + 1:]), fw.COMMAND
        if tok.text == "-m" and nxt is not None and nxt.text == fw.MODULE:
            return until_operator(tokens[i + 2:]), f"python -m {fw.MODULE}"
    return None


def plan_from_tokens(doc: SourceDoc, tokens: list[Token], *, label: str, anchor: Provenance,
                     env: dict[str, Setting] | None = None, image: Setting | None = None,
                     env_expands: bool = True) -> Plan | None:
    found = find_invocation(tokens)
    if found is None:
        return None
    args, how = found
    args, unresolved = resolve_vars(args, env or {}) if env_expands else (args, 0)
    settings = parse_args(args, doc)
    return Plan(
        framework="trtllm",
        kind=fw.KIND,
        label=f"{label} ({how}: the engine it builds)",
        file=doc.path,
        anchor=args[-1].prov if args else anchor,
        settings=settings,
        env=env or {},
        image=image,
        doc=doc,
        args_site=site_of(doc, args) if args else None,
        entry=how,
        unchecked=unresolved,
    )


def parse_args(tokens: list[Token], doc: SourceDoc | None = None) -> dict[str, Setting]:
    """Flags as engine config.json keys (see the module docstring); the last repeat wins."""
    settings: dict[str, Setting] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.text.startswith("--"):
            i += 1
            continue
        flag, eq, inline = tok.text.partition("=")
        used = [tok]
        templated = tok.templated
        if eq:
            value = inline
        elif flag in fw.STORE_TRUE:
            value = True
        elif i + 1 < len(tokens) and not tokens[i + 1].text.startswith("--"):
            i += 1
            used.append(tokens[i])
            value, templated = tokens[i].text, templated or tokens[i].templated
        else:
            value = None  # argparse: "expected one argument"
        known = fw.FLAGS.get(flag)
        key = known.key if known is not None else flag.lstrip("-")
        parsed = fw.convert(known, value) if known is not None and isinstance(value, str) and not templated else value
        site = site_of(doc, used) if doc is not None else None
        if eq and site is not None:
            site = Site(site.kind, doc, site.pointer, site.words, True)
        settings[key] = Setting(key=key, raw_key=flag, value=parsed, raw=value, prov=tok.prov,
                                templated=templated, site=site)
        i += 1
    return settings
