"""vLLM deployments: ``vllm serve --config`` YAML files and command lines found in wrappers."""

from __future__ import annotations

from typing import Any

from sits_doctor.frameworks import vllm as fw
from sits_doctor.loaders.commands import vllm_invocation
from sits_doctor.loaders.flatten import flatten
from sits_doctor.loaders.vllm_args import (
    Token, coerce, expand_nested, normalize_key, parse_args, resolve_vars, site_of,
)
from sits_doctor.plan import Plan, Provenance, Setting
from sits_doctor.source import SourceDoc

def is_vllm_yaml(data: Any) -> bool:
    """A mapping whose keys are mostly vLLM engine-argument names, one of them specific to vLLM."""
    if not isinstance(data, dict) or not data:
        return False
    keys = [normalize_key(str(k)).partition(".")[0] for k in data]
    known = [k for k in keys if k in fw.sniff_keys()]
    return any(not fw.is_generic(k) for k in known) and len(known) * 2 >= len(keys)


def plan_from_config_yaml(doc: SourceDoc) -> Plan:
    """A ``vllm serve --config cfg.yaml`` file: top-level keys are flag names without ``--``."""
    settings: dict[str, Setting] = {}
    for key, setting in flatten(doc, doc.data, normalize=normalize_key).items():
        value = coerce(key, setting.value) if not setting.templated else setting.value
        setting = setting.with_(value=value)
        settings[key] = setting
        if isinstance(value, dict) and not isinstance(setting.raw, dict):  # JSON string value
            settings.update(expand_nested(setting))
    return Plan(
        framework="vllm",
        kind="vllm-yaml",
        label=f"vllm serve --config {doc.path}",
        file=doc.path,
        anchor=Provenance.at(doc, "", key=False),
        settings=settings,
        model_ref=settings.get(fw.MODEL),
        doc=doc,
        entry="vllm serve --config",
        parser=fw.PARSER_SERVE,
    )


def plan_from_command(
    doc: SourceDoc,
    tokens: list[Token],
    *,
    label: str,
    anchor: Provenance,
    image: Setting | None = None,
    env: dict[str, Setting] | None = None,
    entrypoint_kept: bool = True,
    env_expands: bool = True,
    engine_args: str | None = None,
    parser: str = "",
) -> Plan | None:
    """A Plan for the vLLM invocation inside ``tokens``, or None if there is none.

    ``entrypoint_kept``: the image's own entrypoint runs (k8s without ``command``, compose without
    ``entrypoint``), so with a vLLM image the words are the server's arguments.
    ``env_expands``: ``env`` is what variables in the words expand to (Kubernetes expands ``$(VAR)``
    from the container's env, and so does a shell inside the container); compose interpolates
    ``${VAR}`` from the host's environment instead, which the file does not show.
    ``engine_args``: the words are engine arguments that an operator adds to the server command
    it writes itself (KubeAI ``spec.args``); the value says how the server is started, and
    ``parser`` which of vLLM's parsers reads them (``fw.PARSER_*``).
    """
    image_is_vllm = (
        entrypoint_kept and image is not None and "vllm" in str(image.value).rsplit("/", 1)[-1]
    )
    found = (list(tokens), engine_args, parser) if engine_args is not None else vllm_invocation(tokens, image_is_vllm)
    if found is None:
        return None
    args, how, parser = found
    args, unresolved = resolve_vars(args, env or {}) if env_expands else (args, 0)
    settings, positional = parse_args(args, doc)
    model_ref = settings.get(fw.MODEL)
    if model_ref is None and positional:
        first = positional[0]
        model_ref = Setting(
            key=fw.MODEL, raw_key=fw.MODEL, value=first.text, raw=first.text, prov=first.prov,
            templated=first.templated, site=site_of(doc, [first]),
        )
    args_site = None
    if args:
        anchor = args[-1].prov
        args_site = site_of(doc, args)
    return Plan(
        framework="vllm",
        kind="vllm-args",
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
        parser=parser,
        unchecked=unresolved,
        positional=len(positional),
    )
