"""Kernel benchmark: correctness on the GPU first, then our kernels against the best peers on the
same GPU in the same run.

    python bench/kernels.py [--out DIR] [--quick]

Prints a table and writes ``kernels.json`` and ``kernels.md`` (GPU, driver, torch/triton
versions, git commit, shapes, medians) under ``--out`` (default: bench/results/). Timing:
``triton.testing.do_bench`` medians (CUDA events, warm-up first). FLOP and byte counts are the
useful work: causal attention counts only visible (query, key) pairs, 4·D FLOPs each.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch
import triton
from triton.testing import do_bench, do_bench_cudagraph

REPO = Path(__file__).resolve().parent.parent
try:  # an installed sits-doctor, else the checkout (the GPU machine runs from a copy of the repo)
    from sits_doctor.kernels import attention
except ImportError:  # pragma: no cover
    sys.path.insert(0, str(REPO))
    from kernels import attention  # type: ignore[no-redef]


def median_ms(fn, rep: int = 200, graph: bool = False) -> float:
    """Median ms; ``graph``: replay a CUDA graph of the call, so launch overhead (which a
    serving engine hides the same way) does not swamp microsecond kernels."""
    if graph:
        return do_bench_cudagraph(fn, rep=rep, return_mode="median")
    return do_bench(fn, warmup=50, rep=rep, return_mode="median")


def ceilings(dev) -> dict:
    n = 1 << 29  # 1 GiB of bf16 ... 2 bytes * 2^29
    src = torch.randn(n, device=dev, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    t = median_ms(lambda: dst.copy_(src))
    copy_tbs = 2 * src.numel() * 2 / (t * 1e-3) / 1e12
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    t = median_ms(lambda: a @ b)
    gemm = 2 * 8192**3 / (t * 1e-3) / 1e12
    del src, dst, a, b
    torch.cuda.empty_cache()
    return {"copy_TBps": copy_tbs, "gemm_bf16_TFLOPs": gemm}


def visible_pairs(sq: int, sk: int) -> int:
    """Number of (query, key) pairs bottom-right causal attention computes."""
    shift = sk - sq
    return sum(max(0, min(sk, i + shift + 1)) for i in range(sq))


def sdpa(q, k, v, *, backend=None, mask=None, causal=False, gqa=False):
    from torch.nn.attention import sdpa_kernel

    def call():
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=gqa)

    if backend is None:
        return call
    def with_backend():
        with sdpa_kernel(backend):
            return call()
    return with_backend


def check_attention(dev, dtype) -> list[dict]:
    """Relative error of ours vs a float64 reference and vs SDPA lower-right, on fresh inputs."""
    from torch.nn.attention.bias import causal_lower_right

    rows = []
    for b, hq, hk, sq, sk, d in ((1, 8, 2, 1000, 1000, 128), (2, 8, 8, 300, 2049, 64), (3, 32, 8, 1, 4097, 128)):
        q = torch.randn(b, hq, sq, d, device=dev, dtype=dtype)
        k = torch.randn(b, hk, sk, d, device=dev, dtype=dtype)
        v = torch.randn(b, hk, sk, d, device=dev, dtype=dtype)
        out = torch.full_like(q, float("nan"))
        out.copy_(attention.causal_attention(q, k, v))
        ref, _ = attention.causal_attention_reference(q, k, v)
        err = float((out.double() - ref.double()).norm() / ref.double().norm())
        with torch.no_grad():
            peer = torch.nn.functional.scaled_dot_product_attention(
                q, k.repeat_interleave(hq // hk, 1), v.repeat_interleave(hq // hk, 1),
                attn_mask=causal_lower_right(sq, sk))
        err_peer = float((out.double() - peer.double()).norm() / peer.double().norm())
        rows.append({"shape": [b, hq, hk, sq, sk, d], "dtype": str(dtype).removeprefix("torch."),
                     "rel_err_vs_fp64": err, "rel_err_vs_sdpa": err_peer, "finite": bool(torch.isfinite(out).all())})
        assert torch.isfinite(out).all() and err < (1e-5 if dtype == torch.float32 else 2e-2), rows[-1]
    return rows


def bench_attention(dev, dtype, quick: bool) -> list[dict]:
    from torch.nn.attention import SDPBackend
    from torch.nn.attention.bias import causal_lower_right

    rows = []
    seqs = (4096,) if quick else (4096, 16384)
    for s in seqs:
        b, h, d = 4, 32, 128
        q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=dtype) for _ in range(3))
        flops = 4 * b * h * d * visible_pairs(s, s)
        case = f"causal prefill B={b} H={h} D={d} S={s}"
        for name, fn in (
            ("causal_trim (ours)", lambda: attention.causal_attention(q, k, v)),
            ("SDPA default", sdpa(q, k, v, causal=True)),
            ("SDPA cuDNN", sdpa(q, k, v, causal=True, backend=SDPBackend.CUDNN_ATTENTION)),
            ("SDPA flash (FA2)", sdpa(q, k, v, causal=True, backend=SDPBackend.FLASH_ATTENTION)),
        ):
            rows.append(_time(case, name, fn, flops=flops))
        del q, k, v
    # chunked prefill: 512 new queries over 8192 keys, bottom-right causal
    b, h, d, sq, sk = 4, 32, 128, 512, 8192
    q = torch.randn(b, h, sq, d, device=dev, dtype=dtype)
    k, v = (torch.randn(b, h, sk, d, device=dev, dtype=dtype) for _ in range(2))
    flops = 4 * b * h * d * visible_pairs(sq, sk)
    case = f"chunked prefill B={b} H={h} D={d} q={sq} k={sk}"
    mask = causal_lower_right(sq, sk)
    for name, fn in (
        ("causal_trim (ours)", lambda: attention.causal_attention(q, k, v)),
        ("SDPA causal_lower_right", sdpa(q, k, v, mask=mask)),
    ):
        rows.append(_time(case, name, fn, flops=flops))
    del q, k, v
    # decode: one query over 8k / 32k keys, GQA 32/8
    for sk in (8192, 32768):
        for b in (1, 8, 64):
            if quick and b != 8:
                continue
            hq, hk, d = 32, 8, 128
            q = torch.randn(b, hq, 1, d, device=dev, dtype=dtype)
            k, v = (torch.randn(b, hk, sk, d, device=dev, dtype=dtype) for _ in range(2))
            nbytes = 2 * k.numel() * k.element_size() + 2 * q.numel() * q.element_size()
            case = f"decode B={b} Hq={hq} Hk={hk} D={d} k={sk} (CUDA graph)"
            for name, fn in (
                ("causal_trim (ours)", lambda: attention.causal_attention(q, k, v)),
                ("SDPA default (gqa)", sdpa(q, k, v, gqa=True)),
            ):
                rows.append(_time(case, name, fn, nbytes=nbytes, graph=True))
            del q, k, v
    return rows


def _time(case, name, fn, *, flops=None, nbytes=None, graph=False) -> dict:
    try:
        fn()
        torch.cuda.synchronize()
        t = median_ms(fn, graph=graph)
    except Exception as exc:  # a peer backend may refuse a shape; say so in the table
        return {"case": case, "impl": name, "ms": None, "error": f"{type(exc).__name__}: {exc}"[:200]}
    row = {"case": case, "impl": name, "ms": t}
    if flops:
        row["TFLOPs"] = flops / (t * 1e-3) / 1e12
    if nbytes:
        row["TBps"] = nbytes / (t * 1e-3) / 1e12
    return row


def extra_cases(dev, only: str | None = None) -> list[dict]:
    """rope_hoist and act_calib cases, from each kernel module's bench_cases()."""
    rows = []
    for mod_name in (only,) if only else ("rope", "act_quant"):
        try:
            try:
                mod = __import__(f"sits_doctor.kernels.{mod_name}", fromlist=["bench_cases"])
            except ImportError:
                mod = __import__(f"kernels.{mod_name}", fromlist=["bench_cases"])
            cases = mod.bench_cases(dev)
        except Exception as exc:
            rows.append({"case": mod_name, "impl": "-", "ms": None, "error": f"{type(exc).__name__}: {exc}"[:200]})
            continue
        for case in cases:
            name, ours, peer, nbytes = case[:4]
            rows.append(_time(name, f"{mod_name} (ours)", ours, nbytes=nbytes))
            peers = peer if isinstance(peer, (list, tuple)) else [("peer", peer)]
            for peer_name, fn in peers:
                rows.append(_time(name, peer_name, fn, nbytes=nbytes))
        for name, fn, nbytes in getattr(mod, "bench_variants", lambda d: [])(dev):
            rows.append(_time(f"{mod_name} variant", name, fn, nbytes=nbytes))
    return rows


def self_checks(dev) -> list[dict]:
    """Kernel modules' own device checks (exact byte comparisons the CPU cannot make)."""
    out = []
    for mod_name in ("act_quant",):
        try:
            mod = __import__(f"sits_doctor.kernels.{mod_name}", fromlist=["device_selfcheck"])
        except ImportError:
            mod = __import__(f"kernels.{mod_name}", fromlist=["device_selfcheck"])
        for name, ok, detail in mod.device_selfcheck(dev):
            out.append({"check": f"{mod_name}: {name}", "ok": ok, "detail": detail})
    return out


def targets(rows: list[dict], ceil: dict) -> list[str]:
    """The issue's targets, computed from this run's rows: measured ratio, and met or not."""
    def find(case_prefix, impl):
        for r in rows:
            if r["case"].startswith(case_prefix) and r["impl"] == impl and r.get("ms"):
                return r
        return None

    lines = []

    def ratio(label, num, den, key, goal):
        if num is None or den is None:
            lines.append(f"- {label}: not measured")
            return
        value = num[key] / den[key] if key != "ms" else den["ms"] / num["ms"]
        lines.append(f"- {label}: {value:.2f}× (target ≥{goal}×): {'met' if value >= goal else 'NOT met'}")

    for s in ("S=4096", "S=16384"):
        case = f"causal prefill B=4 H=32 D=128 {s}"
        ours = find(case, "causal_trim (ours)")
        ratio(f"causal_trim vs SDPA cuDNN, {s}", ours, find(case, "SDPA cuDNN"), "TFLOPs", 1.0)
        ratio(f"causal_trim vs SDPA flash (FA2), {s}", ours, find(case, "SDPA flash (FA2)"), "TFLOPs", 1.1)
    case = "chunked prefill"
    ratio("causal_trim vs SDPA causal_lower_right, chunked prefill", find(case, "causal_trim (ours)"),
          find(case, "SDPA causal_lower_right"), "TFLOPs", 1.7)
    rope_case = "rope q[1,32,8192,128]+k[1,8,8192,128] bfloat16 auto"
    rope = find(rope_case, "rope (ours)")
    if rope:
        frac = rope["TBps"] / ceil["copy_TBps"]
        lines.append(f"- rope_hoist: {frac:.0%} of copy bandwidth (target ≥85%): {'met' if frac >= 0.85 else 'NOT met'}")
    ratio("rope_hoist vs transformers-style eager", rope, find(rope_case, "peer"), "ms", 5.0)
    for tag in ("int8", "fp8e4m3"):
        case = f"per-token {tag} quant 8192x4096 bf16"
        ours = find(case, "act_quant (ours)")
        if ours:
            frac = ours["TBps"] / ceil["copy_TBps"]
            lines.append(f"- act_calib {tag}: {frac:.0%} of copy bandwidth (target ≥85%): {'met' if frac >= 0.85 else 'NOT met'}")
        ratio(f"act_calib {tag} vs torch.compile", ours, find(case, "torch.compile"), "ms", 1.5)
    return lines


def environment() -> dict:
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    return {
        "gpu": torch.cuda.get_device_name(), "nvidia_smi": smi, "torch": torch.__version__,
        "triton": triton.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "python": platform.python_version(), "git": sha or "unknown",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def table(rows: list[dict]) -> str:
    lines = ["| case | implementation | median ms | TFLOP/s | TB/s | note |", "|---|---|---|---|---|---|"]
    for r in rows:
        ms = f"{r['ms']:.4f}" if r.get("ms") is not None else "-"
        tf = f"{r['TFLOPs']:.0f}" if r.get("TFLOPs") else ""
        tb = f"{r['TBps']:.2f}" if r.get("TBps") else ""
        lines.append(f"| {r['case']} | {r['impl']} | {ms} | {tf} | {tb} | {r.get('error', '')} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=["rope", "act_quant"], help="time one kernel module's cases only")
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    env = environment()
    ceil = ceilings(dev)
    if args.only:
        rows = extra_cases(dev, args.only)
        print(f"copy {ceil['copy_TBps']:.2f} TB/s\n" + table(rows))
        print("\n".join(targets(rows, ceil)))
        return
    checks = check_attention(dev, torch.bfloat16) + check_attention(dev, torch.float32)
    selfchecks = self_checks(dev)
    rows = bench_attention(dev, torch.bfloat16, args.quick) + extra_cases(dev)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kernels.json").write_text(json.dumps({"env": env, "ceilings": ceil, "checks": checks, "selfchecks": selfchecks, "rows": rows}, indent=2))
    md = [
        f"# Kernel benchmark on {env['gpu']}",
        "",
        f"{env['date']}; {env['nvidia_smi']}; torch {env['torch']} (CUDA {env['cuda']}, cuDNN {env['cudnn']}), "
        f"triton {env['triton']}, Python {env['python']}, git {env['git']}. `python bench/kernels.py`; "
        "medians of triton.testing.do_bench. bf16.",
        "",
        f"Ceilings measured in this run: device copy {ceil['copy_TBps']:.2f} TB/s (read+write), "
        f"bf16 GEMM 8192³ {ceil['gemm_bf16_TFLOPs']:.0f} TFLOP/s.",
        "",
        "Correctness of causal_trim on the GPU (relative error; shape = B, Hq, Hk, Sq, Sk, D): "
        + "; ".join(f"{c['dtype']} {c['shape']}: {c['rel_err_vs_fp64']:.1e} vs fp64, {c['rel_err_vs_sdpa']:.1e} vs SDPA" for c in checks),
        "",
        "Targets (issue 3), from this run:",
        "",
        *targets(rows, ceil),
        "",
        "Device self-checks: " + "; ".join(f"{c['check']}: {'ok' if c['ok'] else 'FAILED (' + c['detail'] + ')'}" for c in selfchecks),
        "",
        table(rows),
        "",
    ]
    (args.out / "kernels.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
