"""What this machine runs: ``sits-doctor inspect``.

Package versions come from the installed distributions' metadata (``importlib.metadata``), so a
framework is never imported to be reported on; torch is the one import, and only when it is
installed, because the GPUs, CUDA/cuDNN/ROCm builds and the attention backend choice are facts
only torch itself can give. The backend SDPA picks for a situation is asked from torch
(``torch._fused_sdp_choice``, the function ``scaled_dot_product_attention`` itself consults to
dispatch, aten/src/ATen/native/transformers/attention.cpp), on small tensors of that situation on
the device, not read from a table.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

# (what we report, distributions that provide it: the first one installed is reported)
PACKAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch", ("torch",)),
    ("triton", ("triton", "pytorch-triton-rocm", "pytorch-triton")),
    ("transformers", ("transformers",)),
    ("vllm", ("vllm",)),
    ("tensorrt_llm", ("tensorrt-llm", "tensorrt_llm")),
    ("onnxruntime", ("onnxruntime-gpu", "onnxruntime")),
    ("onnxruntime-genai", ("onnxruntime-genai-cuda", "onnxruntime-genai-directml", "onnxruntime-genai")),
    ("flash_attn", ("flash-attn", "flash_attn")),
    ("flashinfer", ("flashinfer-python", "flashinfer")),
    ("kernels", ("kernels",)),
)

# The situations whose SDPA backend is asked for: dtype x head_dim x how the mask is given.
DTYPES = ("bfloat16", "float16", "float32")
HEAD_DIMS = (64, 128, 256)
MASKS = {
    "causal": "is_causal=True, no mask (prefill, q_len == kv_len)",
    "bool-causal-q<kv": "explicit boolean bottom-right mask (chunked prefill / prefix reuse, what transformers passes)",
    "bool-padding": "explicit boolean mask (a padded batch)",
}


def packages() -> list[dict[str, Any]]:
    """Each package: installed or not, its version and the distribution that provides it."""
    from importlib import metadata

    out = []
    for name, dists in PACKAGES:
        found = None
        for dist in dists:
            try:
                found = (dist, metadata.version(dist))
                break
            except metadata.PackageNotFoundError:
                continue
        out.append({"name": name, "installed": found is not None,
                    "version": found[1] if found else None, "distribution": found[0] if found else None})
    return out


def report() -> dict[str, Any]:
    """Everything ``inspect`` prints, as plain data."""
    from importlib.util import find_spec

    out: dict[str, Any] = {
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "platform": platform.platform(),
        "packages": packages(),
        "torch": None,
        "gpus": [],
        "sdpa": None,
    }
    if find_spec("torch") is None:
        return out
    import torch

    out["torch"] = torch_build(torch)
    out["gpus"] = [gpu_entry(torch.cuda.get_device_properties(i), i) for i in range(_device_count(torch))]
    out["sdpa"] = sdpa_choices(torch, "cuda" if out["gpus"] else "cpu")
    return out


def _device_count(torch) -> int:
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except RuntimeError:  # a broken driver: torch raises instead of answering
        return 0


def torch_build(torch) -> dict[str, Any]:
    cudnn = None
    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except RuntimeError:
        pass
    return {"version": torch.__version__, "cuda": torch.version.cuda, "rocm": getattr(torch.version, "hip", None),
            "cudnn": cudnn, "cuda_available": bool(_device_count(torch))}


def gpu_entry(props, index: int) -> dict[str, Any]:
    """One device as torch reports it, and the catalog entry its name matches."""
    from sits_doctor.catalogs import gpus

    total = int(props.total_memory)
    entry: dict[str, Any] = {
        "index": index, "name": props.name, "compute_capability": f"{props.major}.{props.minor}",
        "memory_bytes": total, "memory_gib": round(total / 2**30, 2),
        "multiprocessors": getattr(props, "multi_processor_count", None),
        "catalog": None, "catalog_note": None,
    }
    try:
        match = gpus.lookup(props.name)
    except gpus.UnknownGpu as exc:
        entry["catalog_note"] = str(exc)
        return entry
    gpu = match.gpu
    entry["catalog"] = gpu.name
    notes = [match.note] if match.note else []
    if gpu.compute_capability and gpu.compute_capability != entry["compute_capability"]:
        notes.append(f"the catalog says compute capability {gpu.compute_capability}")
    known = gpu.memory_bytes_effective()
    if not known.estimate and abs(known.value - total) > 0.01 * total:
        notes.append(f"the catalog's {gpu.name} reports {known.value} bytes; this device {total}")
    entry["catalog_note"] = "; ".join(notes) or None
    return entry


def sdpa_choices(torch, device: str) -> dict[str, Any]:
    """The backend ``scaled_dot_product_attention`` picks on ``device`` for each situation."""
    choose = getattr(torch, "_fused_sdp_choice", None)
    if choose is None:
        return {"device": device, "asked": False, "why": f"torch {torch.__version__} has no _fused_sdp_choice",
                "situations": []}
    from torch.nn.attention import SDPBackend

    names = {int(b.value): name.lower() for name, b in SDPBackend.__members__.items()}
    rows = []
    for dtype in DTYPES:
        for head_dim in HEAD_DIMS:
            for mask in MASKS:
                q, k, v, attn_mask, causal = _situation(torch, device, getattr(torch, dtype), head_dim, mask)
                try:
                    picked = names.get(int(choose(q, k, v, attn_mask, 0.0, causal)), "unknown")
                except RuntimeError as exc:  # no backend can run it
                    picked = f"none ({str(exc).splitlines()[0]})"
                rows.append({"dtype": dtype, "head_dim": head_dim, "mask": mask, "backend": picked})
    return {"device": device, "asked": True, "why": None, "situations": rows}


def _situation(torch, device: str, dtype, head_dim: int, mask: str):
    """Small tensors of one situation: 1 sequence, 8 heads, 128 queries (64 over 128 keys for
    chunked prefill)."""
    q_len, kv_len = (64, 128) if mask == "bool-causal-q<kv" else (128, 128)
    q = torch.zeros(1, 8, q_len, head_dim, dtype=dtype, device=device)
    k = torch.zeros(1, 8, kv_len, head_dim, dtype=dtype, device=device)
    if mask == "causal":
        return q, k, k, None, True
    if mask == "bool-causal-q<kv":
        rows = torch.arange(q_len, device=device)[:, None] + (kv_len - q_len)
        attn_mask = (torch.arange(kv_len, device=device)[None, :] <= rows)[None, None]
        return q, k, k, attn_mask, False
    attn_mask = torch.ones(1, 1, q_len, kv_len, dtype=torch.bool, device=device)
    attn_mask[..., kv_len - 16:] = False  # the last 16 keys are padding
    return q, k, k, attn_mask, False


def render(data: dict[str, Any]) -> str:
    """The text form of :func:`report`."""
    py = data["python"]
    lines = [f"python        {py['version']} ({py['implementation']}) {py['executable']}",
             f"platform      {data['platform']}", "", "packages"]
    for p in data["packages"]:
        where = f"  [{p['distribution']}]" if p["installed"] and p["distribution"] != p["name"] else ""
        lines.append(f"  {p['name']:<18} {p['version'] if p['installed'] else 'not installed'}{where}")
    t = data["torch"]
    lines.append("")
    if t is None:
        lines.append("torch is not installed: GPUs and the SDPA backend were not inspected")
        return "\n".join(lines)
    build = [f"CUDA {t['cuda']}" if t["cuda"] else None, f"ROCm {t['rocm']}" if t["rocm"] else None,
             f"cuDNN {t['cudnn']}" if t["cudnn"] else None]
    lines.append(f"torch build   {t['version']}, " + (", ".join(b for b in build if b) or "CPU only"))
    lines.append("gpus" if data["gpus"] else "gpus          none visible to torch")
    for g in data["gpus"]:
        cat = f"catalog: {g['catalog']}" if g["catalog"] else "catalog: no entry"
        note = f" ({g['catalog_note']})" if g["catalog_note"] else ""
        lines.append(f"  [{g['index']}] {g['name']}  sm {g['compute_capability']}  {g['memory_gib']} GiB  "
                     f"{g['multiprocessors']} SMs  {cat}{note}")
    s = data["sdpa"]
    lines += ["", f"SDPA backend torch picks on {s['device']} (asked from torch._fused_sdp_choice)"]
    if not s["asked"]:
        lines.append(f"  not asked: {s['why']}")
        return "\n".join(lines)
    # each column as wide as its longest cell ("efficient_attention" is longer than any mask name)
    width = {m: max([len(m)] + [len(str(r["backend"])) for r in s["situations"] if r["mask"] == m]) for m in MASKS}
    lines.append(f"  {'dtype':<9} {'head_dim':>8}  " + "  ".join(f"{m:<{width[m]}}" for m in MASKS).rstrip())
    for dtype in DTYPES:
        for head_dim in HEAD_DIMS:
            row = {r["mask"]: r["backend"] for r in s["situations"] if r["dtype"] == dtype and r["head_dim"] == head_dim}
            lines.append(f"  {dtype:<9} {head_dim:>8}  " + "  ".join(f"{row[m]!s:<{width[m]}}" for m in MASKS).rstrip())
    lines += ["  masks: " + "; ".join(f"{m} = {d}" for m, d in MASKS.items())]
    return "\n".join(lines)
