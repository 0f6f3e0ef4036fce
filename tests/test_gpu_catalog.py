"""The GPU catalog: its data holds together and carries its sources, and the resolver reads the
spellings people write in configs, CLIs and Kubernetes labels."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import jsonschema
import pytest

from sits_doctor.catalogs import gpus
from sits_doctor.catalogs.gpus import UnknownGpu, by_product_label, lookup, normalize, resolve

DOC = json.loads(gpus.DATA.read_text(encoding="utf-8"))
ENTRIES = DOC["gpus"]
FIGURES = ("compute_capability", "memory_gb", "memory_bandwidth_gbps", "bf16_tflops", "fp16_tflops", "fp8_tflops", "fp8")

_url = {"type": "string", "pattern": r"^https?://\S+$"}
_tflops = {"type": ["number", "null"], "exclusiveMinimum": 0}
SCHEMA = {
    "type": "object",
    "required": ["schema", "about", "ambiguous", "gpus"],
    "properties": {
        "ambiguous": {
            "type": "object",
            "additionalProperties": {
                "type": "object", "required": ["resolves_to", "note"], "additionalProperties": False,
                "properties": {"resolves_to": {"type": "string"}, "note": {"type": "string", "minLength": 20}},
            },
        },
        "gpus": {
            "type": "array", "minItems": 22,
            "items": {
                "type": "object", "additionalProperties": False,
                "required": ["name", "vendor", "aliases", "architecture", "compute_capability", "memory_gb", "memory_bytes",
                             "memory_reported", "memory_bandwidth_gbps", "bf16_tflops", "fp16_tflops", "fp8_tflops", "fp8",
                             "sources", "cite", "notes"],
                "properties": {
                    "name": {"type": "string", "pattern": r"^[A-Z0-9][A-Za-z0-9-]*$"},
                    "vendor": {"enum": ["nvidia", "amd"]},
                    "aliases": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
                    "architecture": {"type": "string"},
                    "compute_capability": {"type": "string", "pattern": r"^(\d+\.\d+|gfx\d+[a-z]?)$"},
                    "memory_gb": {"type": "number", "exclusiveMinimum": 0},
                    "memory_bytes": {"type": ["integer", "null"], "exclusiveMinimum": 0},
                    "memory_reported": {
                        "oneOf": [
                            {"type": "null"},
                            {"type": "object", "additionalProperties": False,
                             "required": ["value", "unit", "as_printed", "by", "source"],
                             "properties": {"value": {"type": "number", "exclusiveMinimum": 0},
                                            "unit": {"enum": ["bytes", "MiB", "GiB"]},
                                            "as_printed": {"type": "string", "minLength": 5},
                                            "by": {"type": "string", "minLength": 5}, "source": _url}},
                        ],
                    },
                    "memory_bandwidth_gbps": {"type": "number", "exclusiveMinimum": 0},
                    "bf16_tflops": _tflops, "fp16_tflops": _tflops, "fp8_tflops": _tflops,
                    "fp8": {"type": "boolean"},
                    "sources": {"type": "array", "minItems": 1, "uniqueItems": True, "items": _url},
                    "cite": {"type": "object", "propertyNames": {"enum": list(FIGURES)},
                             "additionalProperties": {"type": "array", "minItems": 1, "items": _url}},
                    "notes": {"type": "string", "minLength": 20},
                },
            },
        },
    },
}

REQUIRED_CARDS = {
    "A10", "A10G", "L4", "L40", "L40S", "A100-SXM-40GB", "A100-SXM-80GB", "A100-PCIe-80GB", "H100-PCIe-80GB",
    "H100-SXM-80GB", "H100-NVL-94GB", "H20-96GB", "H200-SXM-141GB", "B200-180GB", "GB200", "RTX-3090", "RTX-4090",
    "RTX-5090", "V100-SXM2-16GB", "V100-SXM2-32GB", "T4", "MI300X", "MI325X", "DGX-SPARK-GB10",
}


# --- the data --------------------------------------------------------------------------------

def test_catalog_matches_the_schema():
    jsonschema.validate(DOC, SCHEMA)


def test_the_schema_rejects_an_entry_without_sources():
    bad = copy.deepcopy(DOC)
    bad["gpus"][0]["sources"] = []
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SCHEMA)


def test_required_cards_are_present():
    assert REQUIRED_CARDS <= {e["name"] for e in ENTRIES}
    assert len(gpus.catalog()) == len(ENTRIES) >= 22


def test_names_are_unique():
    names = [e["name"] for e in ENTRIES]
    assert len(names) == len(set(names))


def test_no_spelling_names_two_cards():
    owner: dict[str, str] = {}
    for e in ENTRIES:
        for spelling in (e["name"], *e["aliases"]):
            key = normalize(spelling)
            assert owner.setdefault(key, e["name"]) == e["name"], f"{spelling!r}: {owner[key]} and {e['name']}"
    for spelling, choice in DOC["ambiguous"].items():
        assert normalize(spelling) not in owner, f"ambiguous {spelling!r} is also an alias of {owner.get(normalize(spelling))}"
        assert choice["resolves_to"] in {e["name"] for e in ENTRIES}


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["name"])
def test_every_figure_cites_a_listed_source(entry):
    for field in FIGURES:
        if entry[field] is not None:
            assert entry["cite"].get(field), f"{entry['name']}.{field} has no cited source"
    for field, urls in entry["cite"].items():
        assert entry[field] is not None, f"{entry['name']} cites {field} but leaves it null"
        assert set(urls) <= set(entry["sources"])
    rep = entry["memory_reported"]
    if rep is not None:
        assert rep["source"] in entry["sources"]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["name"])
def test_memory_bytes_is_the_report_when_printed_in_bytes(entry):
    rep = entry["memory_reported"]
    if rep is not None and rep["unit"] == "bytes":
        assert entry["memory_bytes"] == rep["value"]
        assert str(rep["value"]) in rep["as_printed"]
    else:
        assert entry["memory_bytes"] is None


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["memory_reported"]], ids=lambda e: e["name"])
def test_reported_memory_is_a_bit_under_the_marketed_size(entry):
    reported = gpus.get(entry["name"]).memory_bytes_effective()
    assert not reported.estimate
    ratio = reported.value / (entry["memory_gb"] * 2**30)
    assert 0.9 < ratio <= 1.0, ratio


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["fp8_tflops"] and e["bf16_tflops"]], ids=lambda e: e["name"])
def test_fp8_is_twice_bf16_so_no_sparse_figure_slipped_in(entry):
    assert 1.9 <= entry["fp8_tflops"] / entry["bf16_tflops"] <= 2.1


def test_fp8_tflops_only_where_fp8_exists():
    for e in ENTRIES:
        if e["fp8_tflops"] is not None:
            assert e["fp8"], e["name"]


def test_fp8_support_by_generation():
    assert gpus.get("A100").fp8 is False
    assert gpus.get("A100-80GB").fp8 is False
    assert gpus.get("A10G").fp8 is False
    assert gpus.get("H100").fp8 is True
    assert gpus.get("L4").fp8 is True
    assert gpus.get("MI300X").fp8 is True


def test_known_figures():
    h100 = gpus.get("H100-SXM")
    assert (h100.memory_gb, h100.memory_bandwidth_gbps, h100.bf16_tflops, h100.fp8_tflops) == (80, 3350, 989.5, 1979)
    assert gpus.get("H100-PCIe").memory_bandwidth_gbps == 2000
    assert gpus.get("A100-PCIe-80GB").memory_bandwidth_gbps < gpus.get("A100-SXM4-80GB").memory_bandwidth_gbps
    assert gpus.get("MI300X").compute_capability == "gfx942"
    assert gpus.get("RTX 5090").compute_capability == "12.0"
    # Volta and Turing have no BF16 tensor mode: the FP16 figure stands alone.
    for name in ("V100-16GB", "V100-32GB", "T4"):
        card = gpus.get(name)
        assert card.bf16_tflops is None and card.fp16_tflops > 0


# --- memory ----------------------------------------------------------------------------------

def test_reported_bytes_are_used_as_is():
    assert gpus.get("H100-SXM").memory_bytes_effective() == (85045477376, False, "reported: CUDA deviceQuery, driver CUDA 12.7")


def test_rounded_reports_are_converted_not_estimated():
    h200 = gpus.get("H200-SXM").memory_bytes_effective()
    assert h200.value == 143156 * 2**20 and not h200.estimate


def test_missing_reports_are_estimated_and_say_so():
    est = gpus.get("H100-PCIe").memory_bytes_effective()
    assert est.estimate and "estimate" in est.basis
    assert est.value == int(80 * gpus.ESTIMATE_FRACTION * 2**30)


def test_the_estimate_never_exceeds_a_reported_total():
    """ESTIMATE_FRACTION is a floor: applied to any card that does have a report, it lands below it."""
    for card in gpus.catalog():
        if card.memory_reported is not None:
            floor = card.memory_gb * gpus.ESTIMATE_FRACTION * 2**30
            assert floor < card.memory_bytes_effective().value, card.name


# --- spellings -------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "name", "count"), [
    ("H100", "H100-SXM-80GB", 1),
    ("h100-80gb", "H100-SXM-80GB", 1),
    ("H100-SXM", "H100-SXM-80GB", 1),
    ("h100_sxm5", "H100-SXM-80GB", 1),
    ("H100 PCIe", "H100-PCIe-80GB", 1),
    ("H100-NVL", "H100-NVL-94GB", 1),
    ("RTX4090", "RTX-4090", 1),
    ("rtx-4090", "RTX-4090", 1),
    ("GeForce RTX 4090", "RTX-4090", 1),
    ("A100-40GB", "A100-SXM-40GB", 1),
    ("A100", "A100-SXM-40GB", 1),
    ("A100-80GB", "A100-SXM-80GB", 1),
    ("H100-80GBx4", "H100-SXM-80GB", 4),
    ("H100x8", "H100-SXM-80GB", 8),
    ("H100 x 8", "H100-SXM-80GB", 8),
    ("8xH100", "H100-SXM-80GB", 8),
    ("H200:8", "H200-SXM-141GB", 8),
    ("NVIDIA H100 80GB HBM3", "H100-SXM-80GB", 1),
    ("NVIDIA-H100-80GB-HBM3", "H100-SXM-80GB", 1),
    ("Tesla-T4", "T4", 1),
    ("NVIDIA-A100-SXM4-80GB", "A100-SXM-80GB", 1),
    ("mi300x", "MI300X", 1),
    ("MI300Xx8", "MI300X", 8),
    ("MI300X8", "MI300X", 8),
    ("L40", "L40", 1),
    ("L40S", "L40S", 1),
    ("A10", "A10", 1),
    ("a10g", "A10G", 1),
    ("B200x8", "B200-180GB", 8),
    ("V100-32GB", "V100-SXM2-32GB", 1),
    ("DGX Spark", "DGX-SPARK-GB10", 1),
    ("4x4090", "RTX-4090", 4),
])
def test_resolve(text, name, count):
    card, n = resolve(text)
    assert (card.name, n) == (name, count)


@pytest.mark.parametrize(("text", "says"), [
    ("H100", "SXM5"), ("H100x8", "SXM5"), ("h100-80gb", "PCIe"), ("A100", "40GB"), ("A100-80GB", "PCIe"),
    ("V100", "16GB"), ("MI300", "MI300A"),
])
def test_ambiguous_spellings_come_with_a_note(text, says):
    note = lookup(text).note
    assert note and says in note


@pytest.mark.parametrize("text", ["H100-SXM", "A100-40GB", "RTX 4090", "MI300X8", "NVIDIA-H100-80GB-HBM3"])
def test_exact_spellings_have_no_note(text):
    assert lookup(text).note is None


@pytest.mark.parametrize("text", ["H100x0", "H100x-1", "H100:0", "0xH100"])
def test_counts_must_be_positive(text):
    with pytest.raises(ValueError, match="positive integer"):
        resolve(text)


@pytest.mark.parametrize(("text", "hint"), [
    ("foo", "known GPUs: A10"),
    ("", "empty GPU name"),
    ("   ", "empty GPU name"),
    ("H1000", "did you mean 'H100'"),
    ("rtx 4080", "did you mean 'RTX-4090'"),
    ("mi400x", "did you mean 'MI300X'"),
])
def test_unknown_names_say_what_is_known(text, hint):
    with pytest.raises(UnknownGpu, match=hint):
        resolve(text)


def test_unknown_gpu_is_a_value_error():
    assert issubclass(UnknownGpu, ValueError)


# Label values as GPU feature discovery writes them (the driver's device name with spaces
# replaced by dashes), for device names printed in the sources each entry cites.
@pytest.mark.parametrize(("label", "name"), [
    ("NVIDIA-H100-80GB-HBM3", "H100-SXM-80GB"),
    ("NVIDIA-H100-NVL", "H100-NVL-94GB"),
    ("NVIDIA-A100-SXM4-40GB", "A100-SXM-40GB"),
    ("A100-SXM4-40GB", "A100-SXM-40GB"),
    ("NVIDIA-A100-SXM4-80GB", "A100-SXM-80GB"),
    ("NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", "A100-SXM-80GB"),
    ("A100-SXM4-40GB-MIG-1g.5gb-SHARED", "A100-SXM-40GB"),
    ("Tesla-T4", "T4"),
    ("NVIDIA-L4", "L4"),
    ("NVIDIA-L40S", "L40S"),
    ("NVIDIA-A10", "A10"),
    ("NVIDIA-H200", "H200-SXM-141GB"),
    ("NVIDIA-H20", "H20-96GB"),
    ("NVIDIA-B200", "B200-180GB"),
    ("NVIDIA-GB10", "DGX-SPARK-GB10"),
    ("NVIDIA-GeForce-RTX-4090", "RTX-4090"),
    ("NVIDIA-GeForce-RTX-3090", "RTX-3090"),
])
def test_by_product_label(label, name):
    assert by_product_label(label).name == name


def test_by_product_label_unknown():
    with pytest.raises(UnknownGpu, match="NVIDIA-Z9000"):
        by_product_label("NVIDIA-Z9000")


def test_importing_the_module_does_not_read_the_data():
    probe = (
        "import sits_doctor.catalogs.gpus as g; "
        "assert g._catalog.cache_info().currsize == 0; "
        "g.resolve('H100'); assert g._catalog.cache_info().currsize == 1"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
