"""The GPU catalog: what a card offers a server (memory, bandwidth, dense tensor TFLOPS) and
the names people give it.

The data is ``gpus.json`` beside this module, read on first use and cached. Each entry lists
``sources`` (public URLs) and a ``cite`` map naming, for every figure, the URLs it was read
from; ``notes`` say which figures were derived (a sparse figure halved, an accumulate mode
inferred) and which were left null and why. A figure nobody published stays null.

Memory comes in two kinds. ``memory_gb`` is the marketed size. ``memory_reported`` is what a
runtime printed for the card (CUDA deviceQuery, ``torch.cuda.get_device_properties``, a
PyTorch out-of-memory message, rocm-smi); ``memory_bytes`` is its exact value when it was
printed in bytes. :meth:`GpuModel.memory_bytes_effective` turns these into one number and
says how it got it.

Spellings: :func:`resolve` reads ``NAME``, ``NAMExN``, ``NAME:N`` or ``NxNAME``, matching
names case-insensitively with punctuation, spaces and the words NVIDIA, GeForce, Tesla, AMD and
Instinct ignored, so ``GeForce RTX 4090``, ``rtx-4090`` and ``NVIDIA-GeForce-RTX-4090`` are one
card. A few bare names are ambiguous and resolve to one documented choice:

- ``H100`` and ``H100-80GB`` mean the SXM5 80GB part (the HGX/DGX board most clouds rent);
- ``A100`` means the 40GB SXM4 part and ``A100-80GB`` the 80GB SXM4 part;
- ``V100`` means the 16GB SXM2 part;
- ``MI300`` means the MI300X GPU, not the MI300A APU whose memory its CPU cores share.

Where a bare name covers parts of different memory sizes the smaller is chosen, so a memory
check errs on the safe side. :func:`lookup` returns the note that says what was assumed;
:func:`resolve` returns just the card and the count. ``H200`` carries no note: it is also the
SXM part's driver name (``NVIDIA H200``), which normalizes to the same key.
:func:`by_product_label` reads the Kubernetes ``nvidia.com/gpu.product`` label, which GPU
feature discovery builds from the driver's device name (spaces become dashes);
:func:`by_node_label` also reads GKE's ``cloud.google.com/gke-accelerator`` values
(``nvidia-l4``, ``nvidia-tesla-a100``), whose names are GKE's own (``gke_accelerators`` in the
JSON, from Google's GPU documentation).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

DATA = Path(__file__).with_name("gpus.json")

# A card without a reported runtime total is estimated at this share of its marketed size
# read as GiB. Every reported total in the catalog is above it (the lowest, an L4 with ECC
# on, is 0.915); HBM parts report about 0.99, so the estimate errs low for them.
ESTIMATE_FRACTION = 0.90

_UNIT_BYTES = {"bytes": 1, "MiB": 2**20, "GiB": 2**30}
_IGNORED_WORDS = frozenset({"nvidia", "geforce", "tesla", "amd", "instinct"})
# The name is empty or ends in a non-blank: a lazy name followed by \s* would rescan a run of
# blanks from each of its characters (quadratic: a name padded with 20 000 spaces took 2 s).
_COUNT_SUFFIX = re.compile(r"^(?P<name>(?:.*?\S)??)\s*[x×*:]\s*(?P<count>[+-]?\d+)\s*$", re.IGNORECASE)
_COUNT_PREFIX = re.compile(r"^\s*(?P<count>[+-]?\d+)\s*[x×*]\s*(?P<name>.+)$", re.IGNORECASE)
_LABEL_SUFFIX = re.compile(r"(-MIG-.*|-SHARED)$", re.IGNORECASE)  # used on the label's last line only


class UnknownGpu(ValueError):
    """A GPU name the catalog does not know (the message names the closest spelling it does)."""


class MemoryBytes(NamedTuple):
    value: int
    estimate: bool  # True when derived from the marketed size, not printed by a runtime
    basis: str  # how the value was obtained, for messages


class GpuModel:
    """One catalog entry. Attributes mirror the JSON fields; figures may be None."""

    __slots__ = (
        "name", "vendor", "aliases", "architecture", "compute_capability", "memory_gb",
        "memory_bytes", "memory_reported", "memory_bandwidth_gbps", "bf16_tflops",
        "fp16_tflops", "fp8_tflops", "fp8", "sources", "cite", "notes",
    )

    def __init__(self, entry: dict):
        for field in self.__slots__:
            value = entry.get(field)
            setattr(self, field, tuple(value) if isinstance(value, list) else value)

    @property
    def cuda_capability(self) -> tuple[int, int] | None:
        """(major, minor) of an NVIDIA card; None for other vendors."""
        return capability(self.compute_capability) if self.vendor == "nvidia" else None

    def memory_bytes_effective(self) -> MemoryBytes:
        """Total device memory as the runtime reports it, or an estimate flagged as one."""
        if self.memory_bytes is not None:
            return MemoryBytes(self.memory_bytes, False, f"reported: {self.memory_reported['by']}")
        rep = self.memory_reported
        if rep is not None:
            value = int(round(rep["value"] * _UNIT_BYTES[rep["unit"]]))
            return MemoryBytes(value, False, f"reported as {rep['value']} {rep['unit']}: {rep['by']}")
        value = int(self.memory_gb * ESTIMATE_FRACTION * 2**30)
        return MemoryBytes(value, True, f"estimate: {ESTIMATE_FRACTION:.0%} of the marketed {self.memory_gb} GB read as GiB")

    def __repr__(self) -> str:
        return f"GpuModel({self.name!r})"


class Match(NamedTuple):
    gpu: GpuModel
    count: int
    note: str | None  # set when the spelling was ambiguous: which part was assumed, and why


def normalize(text: str) -> str:
    """The matching key of a spelling: lower case, vendor words and punctuation dropped."""
    words = re.split(r"[^0-9a-z]+", text.lower())
    return "".join(w for w in words if w and w not in _IGNORED_WORDS)


@lru_cache(maxsize=1)
def _catalog() -> dict:
    import json

    return json.loads(DATA.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _index() -> tuple[dict[str, GpuModel], dict[str, tuple[str, str]], dict[str, str]]:
    """(key -> model, key -> (model name, note) for ambiguous keys, key -> a spelling to show)."""
    doc = _catalog()
    models: dict[str, GpuModel] = {}
    shown: dict[str, str] = {}
    for entry in doc["gpus"]:
        model = GpuModel(entry)
        for spelling in (model.name, *model.aliases):
            key = normalize(spelling)
            other = models.get(key)
            if other is not None and other is not model:
                raise ValueError(f"gpus.json: {spelling!r} names both {other.name} and {model.name}")
            models[key] = model
            shown.setdefault(key, spelling)
    ambiguous: dict[str, tuple[str, str]] = {}
    for spelling, choice in doc["ambiguous"].items():
        key = normalize(spelling)
        ambiguous[key] = (choice["resolves_to"], choice["note"])
        shown.setdefault(key, spelling)
    return models, ambiguous, shown


def catalog() -> tuple[GpuModel, ...]:
    """Every entry, in file order."""
    models = _index()[0]
    names = [entry["name"] for entry in _catalog()["gpus"]]
    return tuple(models[normalize(n)] for n in names)


def get(name: str) -> GpuModel:
    """The entry with this canonical name (or any spelling of it), without a count."""
    return lookup(name).gpu


def find(name: str) -> GpuModel | None:
    """:func:`get`, or None for a name the catalog does not hold (a GPU given by its memory alone)."""
    try:
        return get(name)
    except ValueError:
        return None


def capability(text) -> tuple[int, int] | None:
    """A compute capability as written in the catalog ("8.6") as (8, 6); None for anything else
    (AMD's "gfx942", a missing value)."""
    if not isinstance(text, str):
        return None
    major, _, minor = text.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    return int(major), int(minor)


def _find(name: str) -> tuple[GpuModel, str | None] | None:
    models, ambiguous, _ = _index()
    key = normalize(name)
    if key in ambiguous:
        target, note = ambiguous[key]
        return models[normalize(target)], note
    if key in models:
        return models[key], None
    return None


def _unknown(text: str, *names: str) -> UnknownGpu:
    """The error for an unplaceable name, with the nearest known spelling of ``text`` or of one
    of the ``names`` it was split into (``"rtx 4080"`` reads as ``rt x 4080`` too)."""
    from sits_doctor.rule import closest

    shown = _index()[2]
    for name in (text, *names):
        near = closest(normalize(name), shown, cutoff=0.6)
        if near:
            return UnknownGpu(f"unknown GPU {text!r}; did you mean {shown[near]!r}?")
    return UnknownGpu(f"unknown GPU {text!r}; known GPUs: {', '.join(m.name for m in catalog())}")


def lookup(text: str) -> Match:
    """Parse ``NAME``, ``NAMExN``, ``NAME:N`` or ``NxNAME``: the card, the count, and a note when
    the name was ambiguous. Raises UnknownGpu for a name it cannot place and ValueError for a
    count that is not a positive integer."""
    if not isinstance(text, str) or not text.strip():
        raise UnknownGpu("empty GPU name; expected NAME or NAMExN, e.g. H100x8")
    raw = text.strip()
    candidates: list[tuple[str, str | None]] = [(raw, None)]
    for pattern in (_COUNT_SUFFIX, _COUNT_PREFIX):
        m = pattern.match(raw)
        if m:
            if pattern is _COUNT_SUFFIX and raw[m.end("name"):].lstrip()[:1].lower() == "x":
                # "MI300X8": the x may end the name rather than separate the count; tried first
                # so the card's own name wins over a shorter ambiguous one ("MI300").
                candidates.append((m["name"] + "x", m["count"]))
            candidates.append((m["name"], m["count"]))
    for name, count in candidates:
        found = _find(name)
        if found is None:
            continue
        n = 1 if count is None else int(count)
        if n < 1:
            raise ValueError(f"GPU count must be a positive integer, got {count!r} in {text!r}")
        return Match(found[0], n, found[1])
    raise _unknown(raw, *(name for name, _ in candidates[1:]))


def resolve(text: str) -> tuple[GpuModel, int]:
    """``(card, count)`` for a spelling such as ``H100x8``; see :func:`lookup` for the note."""
    match = lookup(text)
    return match.gpu, match.count


def by_product_label(label: str) -> GpuModel:
    """The card behind a Kubernetes ``nvidia.com/gpu.product`` label value such as
    ``NVIDIA-H100-80GB-HBM3`` (MIG and sharing suffixes such as ``-MIG-1g.10gb`` or
    ``-SHARED`` are ignored). Counts are not part of a label."""
    text = label.strip() if label else ""
    head, newline, last = text.rpartition("\n")  # ".*$" ends only on the last line: searched there alone
    base = head + newline + _LABEL_SUFFIX.sub("", last)
    found = _find(base) if base else None
    if found is None:
        raise _unknown(label or "")
    return found[0]


GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"  # GKE's node label naming the node pool's GPU


def by_gke_accelerator(value: str) -> tuple[GpuModel, str | None]:
    """The card behind a GKE ``cloud.google.com/gke-accelerator`` value (``nvidia-h100-mega-80gb``)
    and the note saying which part GKE means; UnknownGpu for a value the table lacks."""
    table = _catalog()["gke_accelerators"]["values"]
    entry = table.get(value.strip().lower()) if isinstance(value, str) else None
    if entry is None:
        from sits_doctor.rule import closest

        near = closest(str(value), table, cutoff=0.6)
        raise UnknownGpu(f"unknown GKE accelerator {value!r}" + (f"; did you mean {near!r}?" if near else ""))
    return get(entry["gpu"]), entry.get("note")


def by_node_label(label: str, value: str) -> tuple[GpuModel, str | None]:
    """The card a node label names: GKE's accelerator label or GPU feature discovery's
    ``nvidia.com/gpu.product`` (and any other card name), with a note on what was assumed."""
    if label == GKE_ACCELERATOR_LABEL:
        return by_gke_accelerator(value)
    return by_product_label(value), None


def smallest(names) -> tuple[int, GpuModel] | None:
    """Of several card names (any of which a scheduler may pick), the index and card with the
    least memory; None when one of them is not in the catalog (then the smallest is unknown)."""
    found = []
    for i, name in enumerate(names):
        model = find(name)
        if model is None:
            return None
        found.append((model.memory_bytes_effective().value, i, model))
    if not found:
        return None
    _, i, model = min(found, key=lambda t: (t[0], t[1]))
    return i, model
