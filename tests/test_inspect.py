"""`sits-doctor inspect`: versions from the installed distributions, GPUs and their catalog entries,
and the SDPA backend asked from torch itself."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest

from sits_doctor import environment
from sits_doctor.cli import run


def test_package_versions_are_the_installed_distributions(capsys):
    assert run(["inspect", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    by_name = {p["name"]: p for p in data["packages"]}
    assert list(by_name) == [name for name, _ in environment.PACKAGES]
    for name, dists in environment.PACKAGES:
        installed = []
        for dist in dists:
            try:
                installed.append((dist, metadata.version(dist)))
            except metadata.PackageNotFoundError:
                pass
        p = by_name[name]
        if installed:
            assert (p["installed"], p["distribution"], p["version"]) == (True, *installed[0]), name
        else:
            assert (p["installed"], p["version"], p["distribution"]) == (False, None, None), name


def test_the_first_installed_distribution_of_a_package_is_reported(monkeypatch):
    versions = {"onnxruntime": "1.20.0", "pytorch-triton-rocm": "3.1.0"}

    def version(dist):
        if dist not in versions:
            raise metadata.PackageNotFoundError(dist)
        return versions[dist]

    monkeypatch.setattr(metadata, "version", version)
    got = {p["name"]: (p["version"], p["distribution"]) for p in environment.packages()}
    assert got["onnxruntime"] == ("1.20.0", "onnxruntime") and got["triton"] == ("3.1.0", "pytorch-triton-rocm")
    assert got["torch"] == (None, None)


def test_inspect_imports_only_torch_of_what_it_reports_on():
    code = ("import sys\nfrom sits_doctor.cli import run\nrun(['inspect', '--format', 'json'])\n"
            "print([m for m in ('transformers', 'vllm', 'tensorrt_llm', 'onnxruntime', 'flash_attn', 'flashinfer', "
            "'kernels', 'triton') if m in sys.modules], file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stderr.strip().splitlines()[-1] == "[]"


def test_without_torch_nothing_is_asked_of_a_device(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    data = environment.report()
    assert data["torch"] is None and data["gpus"] == [] and data["sdpa"] is None
    assert environment.render(data).endswith("torch is not installed: GPUs and the SDPA backend were not inspected")


def _props(name, major, minor, total):
    return SimpleNamespace(name=name, major=major, minor=minor, total_memory=total, multi_processor_count=132)


def test_a_gpu_is_matched_to_its_catalog_entry():
    from sits_doctor.catalogs import gpus

    h200 = gpus.get("H200")
    known = h200.memory_bytes_effective().value
    entry = environment.gpu_entry(_props("NVIDIA H200", 9, 0, known), 0)
    assert (entry["catalog"], entry["compute_capability"], entry["catalog_note"]) == (h200.name, "9.0", None)
    # a device that disagrees with its entry says so
    odd = environment.gpu_entry(_props("NVIDIA H200", 8, 0, known // 2), 1)
    assert odd["catalog"] == h200.name
    assert "compute capability 9.0" in odd["catalog_note"] and f"this device {known // 2}" in odd["catalog_note"]
    unknown = environment.gpu_entry(_props("Imaginary GPU 9000", 9, 0, 1 << 30), 2)
    assert unknown["catalog"] is None and unknown["catalog_note"].startswith("unknown GPU 'Imaginary GPU 9000'")


torch = pytest.importorskip("torch")


def test_sdpa_backend_is_what_torch_runs_on_cpu():
    """On CPU, torch runs its flash kernel for every dtype, mask and head size we ask about (the
    CPU flash kernel takes fp32/bf16/fp16 and masks: shared research §6); forcing that backend
    with sdpa_kernel must then work for each situation, and it is what is reported."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    data = environment.sdpa_choices(torch, "cpu")
    assert data["asked"] and len(data["situations"]) == len(environment.DTYPES) * len(environment.HEAD_DIMS) * 3
    for row in data["situations"]:
        q, k, v, mask, causal = environment._situation(torch, "cpu", getattr(torch, row["dtype"]), row["head_dim"],
                                                       row["mask"])
        backend = getattr(SDPBackend, row["backend"].upper())
        with sdpa_kernel([backend]):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    assert {r["backend"] for r in data["situations"]} == {"flash_attention"}


def test_situations_have_the_shapes_they_name():
    q, k, _, mask, causal = environment._situation(torch, "cpu", torch.float32, 64, "bool-causal-q<kv")
    assert (q.shape[2], k.shape[2], causal) == (64, 128, False)
    # bottom-right: the last query sees every key, the first sees the first 65
    assert mask[0, 0, -1].all() and int(mask[0, 0, 0].sum()) == 65
    _, _, _, pad, _ = environment._situation(torch, "cpu", torch.float32, 64, "bool-padding")
    assert int(pad[0, 0, 0].sum()) == 112
    assert environment._situation(torch, "cpu", torch.float32, 64, "causal")[3:] == (None, True)


def test_text_report_lists_every_situation(capsys):
    assert run(["inspect"]) == 0
    out = capsys.readouterr().out
    assert "SDPA backend torch picks on" in out and "torch build" in out
    for dtype in environment.DTYPES:
        assert sum(line.split()[:1] == [dtype] for line in out.splitlines()) == len(environment.HEAD_DIMS)


def test_sdpa_table_columns_line_up_with_long_backend_names():
    """The H200's own answers (recorded by `sits-doctor inspect --format json` there): fp32 picks
    efficient_attention, longer than the mask names; every cell still starts under its header."""
    data = json.loads((Path(__file__).resolve().parents[1] / "bench" / "results" / "inspect-h200-2026-12-01.json").read_text())
    lines = environment.render(data).splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("  dtype"))
    starts = [lines[head].index(m) for m in environment.MASKS]
    rows = lines[head + 1:head + 1 + len(environment.DTYPES) * len(environment.HEAD_DIMS)]
    assert any("efficient_attention" in r for r in rows)
    for r in rows:
        cells = [r[s:].split()[0] for s in starts]
        assert all(c.endswith("_attention") or c in ("math", "overrideable", "error") for c in cells), r
        assert all(s == 0 or r[s - 1] == " " for s in starts), r


def test_render_states_each_recorded_fact():
    """Every package, the torch build, each GPU and every SDPA cell of a report appear in its
    text, in the right row; a distribution under another name is named; 'not asked' says why."""
    data = json.loads((Path(__file__).resolve().parents[1] / "bench" / "results" / "inspect-h200-2026-12-01.json").read_text())
    data["packages"][-1] = {"name": "kernels", "installed": True, "version": "0.4.0", "distribution": "hf-kernels"}
    data["packages"][3] = {"name": "vllm", "installed": False, "version": None, "distribution": None}
    text = environment.render(data)
    lines = text.splitlines()
    assert "  kernels            0.4.0  [hf-kernels]" in lines
    assert "  vllm               not installed" in lines and "  torch              2.11.0" in lines
    assert "torch build   2.11.0+cu130, CUDA 13.0, cuDNN 91900" in lines
    rocm = environment.render({**data, "torch": {**data["torch"], "cuda": None, "cudnn": None, "rocm": "6.2"}})
    assert "torch build   2.11.0+cu130, ROCm 6.2" in rocm.splitlines()
    cpu = environment.render({**data, "torch": {**data["torch"], "cuda": None, "cudnn": None}})
    assert "torch build   2.11.0+cu130, CPU only" in cpu.splitlines()
    for s in data["sdpa"]["situations"]:
        row = next(line for line in lines if line.split()[:2] == [s["dtype"], str(s["head_dim"])])
        assert row.split()[2 + list(environment.MASKS).index(s["mask"])] == s["backend"], (s, row)
    # a distinct backend name in every cell, of a different length per column
    cells = [{**s, "backend": f"b{i}" + "_" * (18 + 3 * list(environment.MASKS).index(s["mask"])) + "x"}
             for i, s in enumerate(data["sdpa"]["situations"])]
    lines = environment.render({**data, "sdpa": {**data["sdpa"], "situations": cells}}).splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("  dtype"))
    starts = [lines[head].index(m) for m in environment.MASKS]
    for s in cells:
        row = next(line for line in lines if line.split()[:2] == [s["dtype"], str(s["head_dim"])])
        col = list(environment.MASKS).index(s["mask"])
        assert row[starts[col]:].split()[0] == s["backend"], (s, row)
    skipped = {**data, "sdpa": {**data["sdpa"], "asked": False, "why": "no CUDA device"}}
    assert environment.render(skipped).endswith("  not asked: no CUDA device")
