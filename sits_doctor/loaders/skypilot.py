"""SkyPilot task YAML: the ``run:`` script starts the server, ``envs:`` are exported to it, and
``resources.accelerators`` (``H100:8``, ``{A100: 8}``) says which GPUs one node has and
``resources.image_id: docker:IMAGE`` the container the task runs in (its tag may pin the
version; so may a ``pip install vllm==X`` in ``run`` or ``setup``). SkyPilot
also sets ``SKYPILOT_NUM_GPUS_PER_NODE`` (the accelerator count) and ``SKYPILOT_NUM_NODES``
(``num_nodes``, default 1) for ``run``, which scripts pass as ``--tensor-parallel-size``.
Sources: https://docs.skypilot.co/en/latest/reference/yaml-spec.html (task YAML) and
https://docs.skypilot.co/en/stable/running-jobs/environment-variables.html (SkyPilot's variables).
"""

from __future__ import annotations

import re
from typing import Any

from sits_doctor.loaders.commands import split_shell
from sits_doctor.loaders.script import command_plans, pip_pin
from sits_doctor.plan import Plan, Provenance, Setting, Site
from sits_doctor.source import SourceDoc, join_pointer

TASK_KEYS = frozenset({"resources", "setup", "envs", "num_nodes", "file_mounts", "workdir", "service", "secrets"})
# One \s* before the optional count, inside it: two in a row split a run of blanks every way (quadratic).
_ACCELERATOR = re.compile(r"^\s*(?P<card>[A-Za-z0-9][A-Za-z0-9_.-]*?)(?:\s*:\s*(?P<count>\d+))?\s*$")


def is_skypilot_task(data: Any) -> bool:
    return (isinstance(data, dict) and isinstance(data.get("run"), str) and "apiVersion" not in data
            and bool(TASK_KEYS & data.keys()))


def plans(doc: SourceDoc) -> list[Plan]:
    data = doc.data
    envs: dict[str, Setting] = {}
    if isinstance(data.get("envs"), dict):
        for key, value in data["envs"].items():
            ptr = join_pointer("/envs", key)
            envs[key] = Setting(key=key, raw_key=key, value=None if value is None else str(value), raw=value,
                                prov=Provenance.at(doc, ptr), templated=value is None or ptr in doc.templated,
                                site=Site("mapping", doc, ptr))
    hardware = _accelerators(doc, data.get("resources"))
    envs.update(_native(doc, hardware, data.get("num_nodes", 1)))
    tokens = split_shell(doc, data["run"], "/run")
    plans = command_plans(doc, tokens, envs, what="SkyPilot run", hardware=hardware)
    # the last pip install before the server starts: `run` runs after `setup`
    pin = pip_pin(doc, data["run"], -1, "/run") or (
        pip_pin(doc, data["setup"], -1, "/setup") if isinstance(data.get("setup"), str) else None)
    image = _image(doc, data.get("resources"))
    for plan in plans:
        plan.pin = pin
        if image is not None and plan.image is None:
            plan.image = image
    return plans


DOCKER_PREFIX = "docker:"  # resources.image_id: docker:<image> runs the task in that container


def _image(doc: SourceDoc, resources: Any) -> Setting | None:
    """``resources.image_id: docker:vllm/vllm-openai:v0.10.0``: the container ``run`` runs in,
    whose tag may pin the version (a VM image id pins nothing)."""
    value = resources.get("image_id") if isinstance(resources, dict) else None
    if not isinstance(value, str) or not value.startswith(DOCKER_PREFIX):
        return None
    pointer = "/resources/image_id"
    image = value[len(DOCKER_PREFIX):].strip()
    return Setting(key="image", raw_key="image_id", value=image, raw=value, prov=Provenance.at(doc, pointer, key=False),
                   templated=pointer in doc.templated, site=Site("mapping", doc, pointer))


def _native(doc: SourceDoc, hardware: dict[str, Setting], nodes: Any) -> dict[str, Setting]:
    """The variables SkyPilot itself sets for ``run`` that a file can tell."""
    out = {}
    count = hardware.get("gpu_count")
    if count is not None and not count.templated:
        out["SKYPILOT_NUM_GPUS_PER_NODE"] = Setting(
            key="SKYPILOT_NUM_GPUS_PER_NODE", raw_key="SKYPILOT_NUM_GPUS_PER_NODE", value=count.value, raw=count.raw,
            prov=Provenance.derived(f"set by SkyPilot from accelerators ({count.prov})"))
    if isinstance(nodes, int) and not isinstance(nodes, bool):
        where = Provenance.at(doc, "/num_nodes") if "num_nodes" in doc.data else Provenance.default("SkyPilot's default")
        out["SKYPILOT_NUM_NODES"] = Setting(key="SKYPILOT_NUM_NODES", raw_key="SKYPILOT_NUM_NODES", value=str(nodes),
                                            raw=nodes, prov=Provenance.derived(f"set by SkyPilot from num_nodes ({where})"))
    return out


def _accelerators(doc: SourceDoc, resources: Any) -> dict[str, Setting]:
    """``accelerators: H100:8`` or ``{H100: 8}``; a set of alternatives (``{A10G: 1, L4: 1}``,
    ``[A100:1, H100:1]``: SkyPilot takes whichever it finds) is sized for its member with the
    least memory, and the value says so."""
    if not isinstance(resources, dict) or "accelerators" not in resources:
        return {}
    value, pointer = resources["accelerators"], "/resources/accelerators"
    members = _members(value, pointer)
    if not members:
        return {}
    note = None
    if len(members) == 1:
        (card, count, pointer), = members
    else:
        from sits_doctor.catalogs.gpus import smallest

        found = smallest([m[0] for m in members])
        if found is None:
            return {}  # a member the catalog does not know: which is smallest is unknown
        i, model = found
        card, count, pointer = members[i]
        listed = ", ".join(c if n is None else f"{c}:{n}" for c, n, _ in members)
        named = card if model.name == card else f"{card} ({model.name})"
        note = f"any of {listed}: sized for the one with the least memory, {named}"
    prov, site = Provenance.at(doc, pointer), Site("mapping", doc, pointer)
    out = {"gpu_product": Setting(key="gpu_product", raw_key="accelerators", value=str(card),
                                  raw=note if note else value, prov=prov, site=site,
                                  templated=pointer in doc.templated)}
    if count is not None:
        out["gpu_count"] = Setting(key="gpu_count", raw_key="accelerators", value=str(count), raw=value,
                                   prov=prov, site=site)
    return out


def _members(value: Any, pointer: str) -> list[tuple[str, Any, str]]:
    """(card, count or None, pointer) of each accelerator written: ``H100:8``, ``{H100: 8}``,
    ``{A10G:1, L4:1}`` (YAML reads ``A10G:1`` as a key without value), ``[A100:1, H100:1]``."""
    out: list[tuple[str, Any, str]] = []
    if isinstance(value, str):
        m = _ACCELERATOR.match(value)
        return [(m["card"], m["count"], pointer)] if m else []
    if isinstance(value, dict):
        items = [(str(k), v, join_pointer(pointer, k)) for k, v in value.items()]
    elif isinstance(value, list):
        items = [(v, None, join_pointer(pointer, i)) for i, v in enumerate(value)]
    else:
        return []
    for text, count, ptr in items:
        if not isinstance(text, str):
            return []
        m = _ACCELERATOR.match(text)
        if m is None:
            return []
        if m["count"] is not None:
            if count is not None:
                return []
            count = m["count"]
        out.append((m["card"], count, ptr))
    return out
