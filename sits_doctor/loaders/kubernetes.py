"""vLLM command lines inside Kubernetes objects (Deployment, StatefulSet, LeaderWorkerSet, ...).

Containers are found wherever a ``containers:`` list of named containers sits, so workload kinds
we never heard of (KServe, RayService, LeaderWorkerSet's leader and worker templates) work too.
"""

from __future__ import annotations

from typing import Any, Iterator

from sits_doctor.loaders.commands import image_setting, words
from sits_doctor.loaders.vllm import plan_from_command
from sits_doctor.plan import Plan, Provenance, Setting, Site
from sits_doctor.source import SourceDoc, join_pointer


def is_kubernetes(data: Any) -> bool:
    return isinstance(data, dict) and "apiVersion" in data and "kind" in data


def plans(doc: SourceDoc) -> list[Plan]:
    data = doc.data
    name = (data.get("metadata") or {}).get("name", "?") if isinstance(data.get("metadata"), dict) else "?"
    out = []
    for pointer, container in _containers(data, ""):
        label = f"{data.get('kind')}/{name} container {container.get('name', '?')}"
        plan = container_plan(doc, container, pointer, label)
        if plan is not None:
            out.append(plan)
    return out


def _containers(node: Any, pointer: str) -> Iterator[tuple[str, dict]]:
    if isinstance(node, dict):
        for key, value in node.items():
            child = join_pointer(pointer, key)
            if key in ("containers", "initContainers") and isinstance(value, list):
                for i, c in enumerate(value):
                    if isinstance(c, dict) and ("image" in c or "command" in c or "args" in c):
                        yield join_pointer(child, i), c
            else:
                yield from _containers(value, child)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _containers(value, join_pointer(pointer, i))


def container_plan(doc: SourceDoc, container: dict, pointer: str, label: str) -> Plan | None:
    """The vLLM Plan of one container (``command`` + ``args``, ``image``, ``env``), if it runs vLLM."""
    tokens = words(doc, [(join_pointer(pointer, f), container[f]) for f in ("command", "args") if f in container])
    image = image_setting(doc, container.get("image"), join_pointer(pointer, "image"))
    env = env_list(doc, container.get("env"), join_pointer(pointer, "env"))
    anchor = Provenance.at(doc, pointer, key=False)
    return plan_from_command(doc, tokens, label=label, anchor=anchor, image=image, env=env,
                             entrypoint_kept=not container.get("command"))


def env_list(doc: SourceDoc, env: Any, pointer: str) -> dict[str, Setting]:
    """A container's ``env:`` list (``name``/``value``; ``valueFrom`` counts as unknown)."""
    out: dict[str, Setting] = {}
    if not isinstance(env, list):
        return out
    for i, item in enumerate(env):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        ptr = join_pointer(pointer, i)
        has_value = "value" in item
        value_ptr = join_pointer(ptr, "value") if has_value else ptr
        value = item.get("value")
        out[item["name"]] = Setting(
            key=item["name"], raw_key=item["name"], value=None if value is None else str(value),
            raw=value, prov=Provenance.at(doc, join_pointer(ptr, "name"), key=False),
            templated=not has_value or value_ptr in doc.templated,
            site=Site("env", doc, ptr),
        )
    return out
