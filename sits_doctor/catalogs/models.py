"""The model catalog: popular Hugging Face architectures, for when a serve config names a hub
model (``meta-llama/Llama-3.1-70B-Instruct``) and its config.json is not available offline.

The data is ``models.json`` beside this module, read on first use and cached. Each entry is keyed
by the exact hub id and holds:

- ``config``: a subset of the model's real config.json, with the keys that matter for memory
  math (shape, attention, MoE and MLA keys, dtype, rope scaling, sliding windows,
  ``quantization_config``, and nested ``text_config``/``vision_config`` for multimodal models),
  values verbatim. It is shaped like config.json, so the config.json reader consumes it as is.
- ``parameters``: ``total`` (and ``active`` for MoE models), the figure as ``stated``, its
  ``source``, and ``nominal``: true when the figure is a size label (``7B``, ``235B``) rather
  than a count. Labels can be well off the real count (Qwen2.5's "7B" has 7.6B parameters);
  compute from ``config`` when precision matters.
- ``sources``: the huggingface.co URL a user would open first, then where the values were
  actually read (huggingface.co was not reachable when the catalog was built): a repository that
  vendors the config (``owner/repo@commit:path``) or a stored copy of a Hugging Face page, and
  the copies that corroborate it. ``notes`` say which keys were left out and why.

Lookup is by exact id, case-insensitively; no revision suffixes, no fuzzy matching.
:func:`lookup_renamed` also follows the repositories Hugging Face renamed (:data:`RENAMED`; the
old id redirects to the new one on the Hub), in either direction, and says so.

Included (43): Llama 2 7B/13B/70B (``-hf``); Meta-Llama-3-8B-Instruct; Meta-Llama-3.1
8B/70B/405B (base) and Llama-3.1-8B/70B-Instruct; Llama-3.2-1B/3B-Instruct;
Llama-3.3-70B-Instruct; Llama-4 Scout and Maverick (Instruct); Mistral-7B-Instruct-v0.3;
Mixtral-8x7B-v0.1 and 8x22B-v0.1; Qwen2.5 7B/32B/72B (base) and 7B/14B/32B/72B-Instruct;
Qwen3 8B/32B/32B-FP8/30B-A3B/235B-A22B/235B-A22B-FP8 and Qwen3-Coder-480B-A35B-Instruct;
DeepSeek-V2-Lite, V3, R1, R1-Distill-Qwen-32B, R1-Distill-Llama-8B; gpt-oss-20b/120b;
Kimi-K2-Instruct; GLM-4.7; gemma-2-9b-it; phi-4; Phi-3-mini-4k-instruct.

Not included, because no copy of their config.json (or no parameter figure) could be verified
offline:

- Meta-Llama-3-70B(-Instruct), Llama-3.1-405B-Instruct, Llama-3.2-1B/3B base: no copy found
  (the Instruct/base siblings that are included were not assumed identical).
- Mistral-Small-24B-Instruct-2501: no copy found.
- Gemma 2 27B, Gemma 3 12B/27B: no copy naming the model found (Gemma 3's nested
  text_config/vision_config could not be read anywhere).
- Phi-3-medium: no copy found.
- DeepSeek-R1-Distill-Llama-70B: no copy found.
- GLM-4.5: no copy found (GLM-4.7, same family, is included from the official repository's page).
- MiniMax-M1, MiniMax-M2: no copy found. MiniMax-M2.5 (vendored by aiconfigurator) is left out
  because no parameter figure for it could be read.
- Kimi-K2-Thinking, GLM-4.7-FP8: the vendored copies are trimmed (no quantization_config), so
  the stored dtype would be wrong.
- nvidia/Llama-3.1-70B-Instruct-FP8: its quantization lives in hf_quant_config.json, which the
  catalog does not carry.
- Qwen3-VL, DeepSeek-V3.1/V3.2, GLM-5: configs were readable but no parameter figure was.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("models.json")


class CatalogModel:
    """One catalog entry. ``config`` is a fresh copy on every lookup; change it freely."""

    __slots__ = ("hub_id", "config", "parameters", "sources", "notes")

    def __init__(self, hub_id: str, config: dict[str, Any], parameters: dict[str, Any],
                 sources: list[str], notes: str | None = None):
        self.hub_id = hub_id
        self.config = config
        self.parameters = parameters
        self.sources = sources
        self.notes = notes

    @property
    def hub_url(self) -> str:
        """The huggingface.co page of the model's config.json."""
        return self.sources[0]

    @property
    def total_parameters(self) -> int:
        return int(self.parameters["total"])

    @property
    def active_parameters(self) -> int | None:
        """Parameters used per token (MoE models); None for dense models."""
        active = self.parameters.get("active")
        return None if active is None else int(active)

    def __repr__(self) -> str:
        return f"CatalogModel({self.hub_id!r})"


@lru_cache(maxsize=None)
def _data() -> dict[str, Any]:
    import json

    return json.loads(DATA.read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def _index() -> dict[str, str]:
    """Lower-cased id -> id as stored."""
    return {hub_id.lower(): hub_id for hub_id in _data()["models"]}


def known_ids() -> list[str]:
    """The catalog's hub ids, as spelled on the Hub, sorted case-insensitively."""
    return sorted(_data()["models"], key=str.lower)


def lookup(hub_id: str) -> CatalogModel | None:
    """The entry for ``hub_id`` (exact id, any case), or None."""
    if not isinstance(hub_id, str):
        return None
    stored = _index().get(hub_id.lower())
    if stored is None:
        return None
    entry = _data()["models"][stored]
    return CatalogModel(
        hub_id=stored,
        config=copy.deepcopy(entry["config"]),
        parameters=dict(entry["parameters"]),
        sources=list(entry["sources"]),
        notes=entry.get("notes"),
    )


# Repositories renamed on the Hub: old id -> current id (the old page redirects). Meta moved the
# Llama 3.1 repositories from ``Meta-Llama-3.1-*`` to ``Llama-3.1-*``, the names Llama 3.2 and later
# use; Llama 3 (``Meta-Llama-3-8B-Instruct``) kept its name. Sources: LiveCodeBench/LiveCodeBench#105
# and oumi-ai/oumi#1357 (the renames, each old page redirecting), snowflakedb/ArcticTraining#39
# (https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct/commit/38ff4e01a70559264c95945aa04b900a11e68422).
RENAMED: dict[str, str] = {
    f"meta-llama/Meta-Llama-3.1-{size}": f"meta-llama/Llama-3.1-{size}"
    for size in ("8B", "8B-Instruct", "70B", "70B-Instruct", "405B", "405B-Instruct", "405B-FP8",
                 "405B-Instruct-FP8")
}


_RENAMED_FROM = {o.lower(): o for o in RENAMED}  # old id, any case -> as written in RENAMED
_RENAMED_TO = {n.lower(): o for o, n in RENAMED.items()}  # current id, any case -> its old id


def lookup_renamed(hub_id: str) -> tuple[CatalogModel, str] | None:
    """The entry for a renamed repository written under its other name (old or current), with
    a sentence saying which name the catalog holds it under; None when neither is in the catalog."""
    if not isinstance(hub_id, str):
        return None
    key = hub_id.lower()
    old, new = _RENAMED_FROM, _RENAMED_TO
    if key in old:
        other = RENAMED[old[key]]
        why = f"{hub_id} was renamed {other} on the Hugging Face Hub"
    elif key in new:
        other = new[key]
        why = f"{hub_id} is the Hugging Face Hub's current name of {other}"
    else:
        return None
    entry = lookup(other)
    return (entry, why) if entry is not None else None
