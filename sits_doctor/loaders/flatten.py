"""Turn a positioned document (or part of one) into dotted-key ProjectSettings."""

from __future__ import annotations

from typing import Any, Callable

from sits_doctor.plan import Provenance, Setting, Site
from sits_doctor.source import SourceDoc, join_pointer


def flatten(
    doc: SourceDoc,
    node: Any,
    pointer: str = "",
    prefix: str = "",
    normalize: Callable[[str], str] = lambda k: k,
) -> dict[str, Setting]:
    """Every mapping key below ``node`` as a Setting keyed ``a.b.c`` (list items as ``a.0``).

    Containers are ProjectSettings too (so ``cuda_graph_config: null`` and ``kv_cache_config: {...}``
    are both visible); ``normalize`` maps each written key to the framework's name for it.
    """
    out: dict[str, Setting] = {}

    def walk(value: Any, ptr: str, key: str, raw_key: str, top: bool) -> None:
        if key:
            out[key] = Setting(
                key=key,
                raw_key=raw_key,
                value=value,
                raw=value,
                prov=Provenance.at(doc, ptr),
                templated=ptr in doc.templated,
                site=Site("mapping", doc, ptr),
            )
        if isinstance(value, dict):
            for k, v in value.items():
                nk = normalize(k) if top else k
                walk(v, join_pointer(ptr, k), f"{key}.{nk}" if key else nk, k, False)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, join_pointer(ptr, i), f"{key}.{i}" if key else str(i), str(i), False)

    walk(node, pointer, prefix, prefix, True)
    return out
