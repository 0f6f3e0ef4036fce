"""Hardware-counter profile of our kernels (attention, and the fused RMSNorm + quantization) beside their peers, with Nsight Compute.

    python bench/profile_kernels.py --out DIR            # runs ncu on itself, writes DIR/profile.*
    python bench/profile_kernels.py --summarize RAW.csv  # the summary table from a saved raw page

What it answers: where a kernel's time goes (which pipe is busy, what its warps wait on), for the
targets of issue 11 that timing alone left open. The cases are the benchmark's (bench/kernels.py):
causal prefill B=4 H=32 S=4096 D=128 bf16 (ours, ours with exp2=split, SDPA cuDNN, SDPA FA2),
decode B=1 Hq=32 Hk=8 k=8192 (ours, SDPA default), chunked prefill q=512 over k=8192 (ours,
SDPA causal_lower_right), then prefill at D=64 and D=256 (ours, cuDNN) and decode at batch 8
(ours, SDPA); the last three, and ours with lazy rescaling and the Hopper TMA kernel with
``warp_specialize=True`` at D=128, were added after the first 2026-12-02 run. Last, the fused RMSNorm + int8
quantization at M=8 with a residual beside the unfused pair and torch.compile's fusion (added
after the second). Each is called until Triton has tuned it, then once inside
``cudaProfilerStart``/``Stop``, so ncu (``--profile-from-start off``) sees only those launches.

ncu replays each kernel once per counter pass with clock control off (the device tool's METHOD.md:
leave the clocks alone), so the durations it reports are of one replay, not a benchmark median.
Writes ``profile.csv`` (ncu's raw page: every metric of every profiled kernel), ``profile.md``
(the summary below) and ``profile-cases.json`` (which case launched which kernels, in order).
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# the summary's columns: (heading, metric); pipes and stalls are added by pattern below
HEADLINE = (
    ("µs", "gpu__time_duration.sum"),
    ("SM %", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("DRAM %", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("issue %", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    ("warps/SM %", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    ("regs", "launch__registers_per_thread"),
    ("smem KB", "launch__shared_mem_per_block"),
    ("grid", "launch__grid_size"),
)
PIPE = re.compile(r"^sm__(inst_executed_pipe_|pipe_)(\w+?)_?(cycles_active)?\.avg\.pct_of_peak_sustained_active$")
STALL = re.compile(r"^smsp__average_warps?_issue_stalled_(\w+)_per_issue_active\.ratio$")


def _ncu() -> str:
    found = shutil.which("ncu") or sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu")) or \
        sorted(glob.glob("/usr/local/cuda*/bin/ncu"))
    if not found:
        raise SystemExit("ncu (Nsight Compute) not found on PATH or under /opt/nvidia/nsight-compute")
    return found if isinstance(found, str) else found[-1]


def target(cases_out: Path) -> None:
    """The profiled program: tune every case, then launch each once between profiler start/stop."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    sys.path.insert(0, str(REPO))
    from kernels import attention
    from kernels import norm_quant as nq

    dev, dt = "cuda", torch.bfloat16
    torch.manual_seed(0)
    f = torch.nn.functional.scaled_dot_product_attention

    def with_backend(backend, fn):
        def call():
            with sdpa_kernel(backend):
                return fn()
        return call

    q, k, v = (torch.randn(4, 32, 4096, 128, device=dev, dtype=dt) for _ in range(3))
    dq = torch.randn(1, 32, 1, 128, device=dev, dtype=dt)
    dk, dv = (torch.randn(1, 8, 8192, 128, device=dev, dtype=dt) for _ in range(2))
    cq = torch.randn(4, 32, 512, 128, device=dev, dtype=dt)
    ck, cv = (torch.randn(4, 32, 8192, 128, device=dev, dtype=dt) for _ in range(2))
    lower_right = causal_lower_right(512, 8192)
    q64, k64, v64 = (torch.randn(4, 32, 4096, 64, device=dev, dtype=dt) for _ in range(3))
    q256, k256, v256 = (torch.randn(4, 32, 4096, 256, device=dev, dtype=dt) for _ in range(3))
    bq = torch.randn(8, 32, 1, 128, device=dev, dtype=dt)
    bk, bv = (torch.randn(8, 8, 8192, 128, device=dev, dtype=dt) for _ in range(2))
    # the fused RMSNorm + quantization cell that missed its target (ours against the unfused pair:
    # 1.44x at M=8, int8, with a residual, 2026-12-02) beside both peers
    nx, nr = (torch.randn(8, 4096, device=dev, dtype=dt) for _ in range(2))
    nw = (1 + 0.2 * torch.randn(4096, device=dev)).to(dt)
    norm_c = torch.compile(nq.torch_rms_norm, dynamic=False)
    fused_c = torch.compile(nq.torch_norm_quant, dynamic=False)
    cases = [
        ("prefill S=4096 D=128: causal_trim", lambda: attention.causal_attention(q, k, v)),
        ("prefill S=4096 D=128: causal_trim exp2=split",
         lambda: attention._attention(q, k, v, prefill={"exp2": "split"})),
        ("prefill S=4096 D=128: causal_trim rescale=lazy",
         lambda: attention._attention(q, k, v, prefill={"rescale": "lazy"})),
        ("prefill S=4096 D=128: causal_trim Hopper TMA 128x128 w8 s2 warp_specialize=True",
         lambda: attention._attention(q, k, v, prefill={"use": True, "block_m": 128, "block_n": 128, "num_warps": 8,
                                                         "num_stages": 2, "warp_specialize": True})),
        ("prefill S=4096 D=128: SDPA cuDNN",
         with_backend(SDPBackend.CUDNN_ATTENTION, lambda: f(q, k, v, is_causal=True))),
        ("prefill S=4096 D=128: SDPA FA2",
         with_backend(SDPBackend.FLASH_ATTENTION, lambda: f(q, k, v, is_causal=True))),
        ("decode B=1 k=8192: causal_trim", lambda: attention.causal_attention(dq, dk, dv)),
        ("decode B=1 k=8192: SDPA default", lambda: f(dq, dk, dv, enable_gqa=True)),
        ("chunked q=512 k=8192: causal_trim", lambda: attention.causal_attention(cq, ck, cv)),
        ("chunked q=512 k=8192: SDPA causal_lower_right", lambda: f(cq, ck, cv, attn_mask=lower_right)),
        ("prefill S=4096 D=64: causal_trim", lambda: attention.causal_attention(q64, k64, v64)),
        ("prefill S=4096 D=64: SDPA cuDNN",
         with_backend(SDPBackend.CUDNN_ATTENTION, lambda: f(q64, k64, v64, is_causal=True))),
        ("prefill S=4096 D=256: causal_trim", lambda: attention.causal_attention(q256, k256, v256)),
        ("prefill S=4096 D=256: SDPA cuDNN",
         with_backend(SDPBackend.CUDNN_ATTENTION, lambda: f(q256, k256, v256, is_causal=True))),
        ("decode B=8 k=8192: causal_trim", lambda: attention.causal_attention(bq, bk, bv)),
        ("decode B=8 k=8192: SDPA default", lambda: f(bq, bk, bv, enable_gqa=True)),
        ("norm_quant M=8 int8 +residual: ours", lambda: nq.rms_norm_quant(nx, nw, 1e-6, torch.int8, residual=nr)),
        ("norm_quant M=8 int8 +residual: unfused pair (compiled norm, then act_quant)",
         lambda: nq.unfused_pair(norm_c, nx, nw, 1e-6, torch.int8, nr)),
        ("norm_quant M=8 int8 +residual: torch.compile fused", lambda: fused_c(nx, nw, 1e-6, torch.int8, nr)),
    ]
    kept = []
    for name, fn in cases:  # tune and warm outside the profiled range; a case that fails is left out, said so
        try:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
        except Exception as exc:  # an opt-in variant the installed Triton cannot build, say
            print(f"left out {name!r}: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr, flush=True)
            continue
        kept.append((name, fn))
    cases = kept
    order = []
    torch.cuda.profiler.start()
    for name, fn in cases:
        fn()
        torch.cuda.synchronize()
        order.append(name)
    torch.cuda.profiler.stop()
    # which tile the autotuner chose for each prefill key (it tunes under ncu too, and may choose
    # otherwise than a bench/kernels.py run did)
    tuned = {str(k): str(c) for k, c in (getattr(attention._causal_trim_fwd, "cache", None) or {}).items()}
    cases_out.write_text(json.dumps({"cases": order, "autotuned": tuned}, indent=1))


def _num(s: str) -> float | None:
    try:
        return float(s.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def summarize(raw_csv: Path, cases: list[str] | None = None) -> str:
    """One block per profiled kernel: headline metrics, the busiest pipes, the largest stalls.
    ``cases`` labels the kernels by launch order when one case's kernels are known (else by name)."""
    with raw_csv.open(newline="") as fh:
        rows = list(csv.reader(fh))
    header, units, data = rows[0], rows[1], rows[2:]
    col = {name: i for i, name in enumerate(header)}
    lines = ["| # | kernel | " + " | ".join(h for h, _ in HEADLINE) + " | busiest pipes (% of peak, active) | top stalls (cycles per issue) |",
             "|---|---|" + "---|" * len(HEADLINE) + "---|---|"]
    for r in data:
        def val(metric):
            i = col.get(metric)
            return _num(r[i]) if i is not None and i < len(r) else None
        cells = []
        for head, metric in HEADLINE:
            x = val(metric)
            unit = units[col[metric]] if metric in col else ""
            if x is not None and head == "µs":
                x *= {"ns": 1e-3, "nsecond": 1e-3, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}.get(unit, 1.0)
            if x is not None and head == "smem KB":
                x = x / 1024 if unit in ("byte", "") else x
            cells.append("–" if x is None else (f"{x:.0f}" if x >= 100 or head in ("regs", "grid") else f"{x:.1f}"))
        pipes = sorted(((val(n), PIPE.match(n).group(2) + (" (cycles)" if PIPE.match(n).group(3) else ""))
                        for n in col if PIPE.match(n) and val(n) is not None), reverse=True)[:5]
        stalls = sorted(((val(n), STALL.match(n).group(1)) for n in col if STALL.match(n) and val(n) is not None),
                        reverse=True)[:5]
        name = r[col["Kernel Name"]] if "Kernel Name" in col else "?"
        ident = r[col["ID"]] if "ID" in col else "?"
        lines.append(f"| {ident} | {name[:60]} | " + " | ".join(cells) + " | "
                     + ", ".join(f"{p} {x:.0f}" for x, p in pipes) + " | "
                     + ", ".join(f"{s} {x:.2f}" for x, s in stalls) + " |")
    if cases:
        lines += ["", "Cases in launch order (each launches one or more of the kernels above, in order):", ""]
        lines += [f"{i + 1}. {c}" for i, c in enumerate(cases)]
    return "\n".join(lines) + "\n"


def _cases(saved) -> list[str]:
    """The case names of a profile-cases.json: a list (2026-12-02's run) or {"cases": [...], ...}."""
    return saved["cases"] if isinstance(saved, dict) else saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="folder for profile.csv / profile.md / profile-cases.json")
    ap.add_argument("--summarize", type=Path, help="print the summary of a saved raw-page CSV")
    ap.add_argument("--target", type=Path, help=argparse.SUPPRESS)  # the profiled run (internal)
    ap.add_argument("--set", default="full", help="ncu section set (default: full)")
    a = ap.parse_args(argv)
    if a.target:
        target(a.target)
        return 0
    if a.summarize:
        cases_file = a.summarize.with_name("profile-cases.json")
        cases = _cases(json.loads(cases_file.read_text())) if cases_file.exists() else None
        print(summarize(a.summarize, cases))
        return 0
    if not a.out:
        ap.error("give --out DIR (or --summarize RAW.csv)")
    a.out.mkdir(parents=True, exist_ok=True)
    rep = Path("/tmp/sits-profile")
    cases_file = a.out / "profile-cases.json"
    cmd = [_ncu(), "--profile-from-start", "off", "--clock-control", "none", "--set", a.set,
           "--export", str(rep), "--force-overwrite", sys.executable, __file__, "--target", str(cases_file)]
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if proc.returncode:
        return proc.returncode
    raw = subprocess.run([_ncu(), "--import", f"{rep}.ncu-rep", "--page", "raw", "--csv"],
                         capture_output=True, text=True, check=True).stdout
    (a.out / "profile.csv").write_text(raw)
    cases = _cases(json.loads(cases_file.read_text())) if cases_file.exists() else None
    text = summarize(a.out / "profile.csv", cases)
    (a.out / "profile.md").write_text(text)
    print(text)
    details = subprocess.run([_ncu(), "--import", f"{rep}.ncu-rep", "--page", "details"],
                             capture_output=True, text=True).stdout
    (a.out / "profile-details.txt").write_text(details)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
