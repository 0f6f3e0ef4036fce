"""vLLM command lines inside docker-compose files (``services.<name>.command``)."""

from __future__ import annotations

from typing import Any

from sits_doctor.loaders.commands import image_setting, words
from sits_doctor.loaders.vllm import plan_from_command
from sits_doctor.plan import Plan, Provenance, Setting, Site
from sits_doctor.source import SourceDoc, join_pointer


def is_compose(data: Any) -> bool:
    services = data.get("services") if isinstance(data, dict) else None
    return isinstance(services, dict) and any(
        isinstance(s, dict) and ("image" in s or "command" in s or "build" in s) for s in services.values()
    )


def plans(doc: SourceDoc) -> list[Plan]:
    out = []
    for name, service in doc.data["services"].items():
        if not isinstance(service, dict):
            continue
        pointer = join_pointer("/services", name)
        tokens = words(doc, [(join_pointer(pointer, f), service[f]) for f in ("entrypoint", "command") if f in service])
        image = image_setting(doc, service.get("image"), join_pointer(pointer, "image"))
        env = _environment(doc, service.get("environment"), join_pointer(pointer, "environment"))
        plan = plan_from_command(
            doc, tokens, label=f"compose service {name}",
            anchor=Provenance.at(doc, pointer, key=False), image=image, env=env,
            entrypoint_kept=not service.get("entrypoint"), env_expands=False,
        )
        if plan is None:
            plan = _trtllm_serve(doc, tokens, label=f"compose service {name}",
                                                 anchor=Provenance.at(doc, pointer, key=False), env=env, image=image)
        if plan is not None:
            out.append(plan)
    return out


def _environment(doc: SourceDoc, env: Any, pointer: str) -> dict[str, Setting]:
    """``environment:`` as a mapping or as a list of ``KEY=VALUE``."""
    out: dict[str, Setting] = {}
    items: list[tuple[str, Any, str]] = []
    if isinstance(env, dict):
        items = [(str(k), v, join_pointer(pointer, k)) for k, v in env.items()]
    elif isinstance(env, list):
        for i, item in enumerate(env):
            if isinstance(item, str):
                key, _, value = item.partition("=")
                items.append((key, value if "=" in item else None, join_pointer(pointer, i)))
    for key, value, ptr in items:
        text = None if value is None else str(value)
        out[key] = Setting(
            key=key, raw_key=key, value=text, raw=value, prov=Provenance.at(doc, ptr),
            templated=text is None or "${" in text or text.startswith("$"),
            site=Site("env", doc, ptr),
        )
    return out


def _trtllm_serve(doc, tokens, **kwargs):
    """A ``trtllm-serve`` command among the words (sits_doctor.loaders.trtllm_serve), if any."""
    try:
        from sits_doctor.loaders import trtllm_serve
    except ImportError:  # pragma: no cover - a partial checkout
        return None
    return trtllm_serve.plan_from_tokens(doc, tokens, **kwargs)
