"""Fused RMSNorm + per-token quantization (kernels/norm_quant.py) on the GPU: correctness first,
then ours against the unfused pair and torch.compile's fusion of the same expression.

    python bench/norm_quant.py [--out DIR] [--quick] [--max-autotune] [--variants] [--jit-launch]

Cases: x [M, 4096] bf16 with M = 8192 (prefill) and 64, 8, 1 (decode), int8 and fp8-e4m3, with
and without a residual add. Implementations:

- ours: ``rms_norm_quant`` (one launch);
- unfused pair: ``torch_rms_norm`` under ``torch.compile`` (bf16 output, as a model's norm layer)
  followed by ``act_quant.quantize_per_token`` (two launches);
- torch.compile fused: ``torch_norm_quant`` (norm and quantization in one compiled function);
- device copy: ``dst.copy_(src)`` over the same number of bytes (read + write) as ours moves.

Times are medians of ``triton.testing.do_bench`` (CUDA events, L2 flushed between repetitions)
and of ``do_bench_cudagraph`` (replays of a captured graph: launch overhead removed, L2 not
flushed — at M = 8192 the 64 MiB input is larger than the L2, at decode sizes it sits in L2, as
it would right after the layer that produced it). TB/s counts the minimum traffic of the fused
operation: read x (and residual), write q (and the new residual), 4 B of scale per row, the
weight once. Writes a markdown table and a JSON next to it under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
import triton
from triton.testing import do_bench, do_bench_cudagraph

REPO = Path(__file__).resolve().parent.parent
try:  # an installed sits-doctor, else the checkout (the GPU machine runs from a copy)
    from sits_doctor.kernels import norm_quant as nq
except ImportError:  # pragma: no cover
    sys.path.insert(0, str(REPO))
    from kernels import norm_quant as nq  # type: ignore[no-redef]

K = 4096
EPS = 1e-6
I8, F8 = torch.int8, torch.float8_e4m3fn
TAG = {I8: "int8", F8: "fp8"}


def fused_bytes(M, K, residual):
    per_elem = (2 + 2 + 2 + 1) if residual else (2 + 1)
    return M * K * per_elem + M * 4 + K * 2


def median(fn, graph):
    if graph:
        return do_bench_cudagraph(fn, rep=100, return_mode="median")
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def compiled(fn, **kw):
    return torch.compile(fn, dynamic=False, **kw)


def self_check(dev):
    """Ours against the float64 reference (poisoned outputs), awkward and bench shapes; the peers
    are compared too (their mismatch is reported, not asserted: the unfused pair rounds the norm
    output to bf16 before quantizing)."""
    rows = []
    gen = torch.Generator(device=dev).manual_seed(1)
    cases = [(257, 4109, torch.bfloat16), (257, 4109, torch.float16), (33, 4109, torch.float32),
             (8192, 4096, torch.bfloat16), (1, 4096, torch.bfloat16), (3, 40000, torch.bfloat16)]
    for M, KK, in_dt in cases:
        for residual in (False, True):
            wide = torch.randn(M, KK + 64, device=dev, generator=gen).to(in_dt)
            x = wide[:, 32:32 + KK]  # non-contiguous rows
            x[0] *= 1e-3
            x[min(1, M - 1), 5] = 300.0
            w = (1 + 0.2 * torch.randn(KK, device=dev, generator=gen)).to(in_dt)
            r = torch.randn(M, KK, device=dev, generator=gen).to(in_dt) if residual else None
            for dt in (I8, F8):
                q = torch.empty(M, KK, dtype=dt, device=dev)
                q.view(torch.uint8).fill_(0x7F if dt == F8 else 0x80)
                s = torch.full((M, 1), float("nan"), device=dev)
                ok, poison = True, 0
                for _ in range(2):  # the second call takes the fast path (unless --jit-launch)
                    q.view(torch.uint8).fill_(0x7F if dt == F8 else 0x80)
                    s.fill_(float("nan"))
                    if r is not None:
                        r_in = r.clone()
                    got = nq.rms_norm_quant(x, w, EPS, dt, residual=r, out=(q, s))
                    res = nq.compare_with_reference(got, x, w, EPS, dt, residual=r)
                    poison += int((q.view(torch.uint8) == (0x7F if dt == F8 else 0x80)).sum())
                    ok = ok and res["ok"] and poison == 0
                    if r is not None:
                        ok = ok and torch.equal(r, r_in)  # the input residual is left alone
                rows.append({"case": f"{M}x{KK} {str(in_dt)[6:]} {TAG[dt]} res={residual}",
                             "ok": ok, "differ": res["differ"], "outside": res["outside"],
                             "n": res["n"], "scale_rel": res["scale_rel"], "poison": poison,
                             "first_bad": res["first_bad"]})
                if M == 8192:
                    peer = nq.torch_norm_quant(x.contiguous(), w, EPS, dt, r)
                    pres = nq.compare_with_reference(peer, x, w, EPS, dt, residual=r)
                    rows.append({"case": f"  torch eager fused expr, {TAG[dt]} res={residual}",
                                 "ok": None, "differ": pres["differ"], "outside": pres["outside"],
                                 "n": pres["n"], "scale_rel": pres["scale_rel"]})
    return rows


def host_us(fn, n=200):
    """Host time per call: n back-to-back calls without synchronizing (at decode sizes the GPU
    finishes each launch sooner than the host issues the next, so this is the launch path)."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def copy_bench(nbytes, dev, graph):
    src = torch.randint(0, 255, (nbytes // 2,), dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    return median(lambda: dst.copy_(src), graph)


def measure(dev, shapes, *, max_autotune: bool = False, with_variants: bool = False):
    """Ours, the unfused pair and torch.compile's fusion at M rows of K = 4096 bf16 for each M in
    ``shapes``, int8 and fp8, with and without a residual: (rows, launch variants). Each row has
    stream and CUDA-graph medians, host µs and a device copy of the same bytes. bench/kernels.py's
    full run calls this too, so its one run holds these rows beside the attention kernels'."""
    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 512)
    rows = []
    variants = []
    norm_c = compiled(nq.torch_rms_norm)
    fused_c = compiled(nq.torch_norm_quant)
    fused_ma = compiled(nq.torch_norm_quant, mode="max-autotune-no-cudagraphs") \
        if max_autotune else None
    for residual in (False, True):
        for M in shapes:
            x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
            w = (1 + 0.2 * torch.randn(K, device=dev)).to(torch.bfloat16)
            r = torch.randn(M, K, device=dev, dtype=torch.bfloat16) if residual else None
            nbytes = fused_bytes(M, K, residual)
            t_copy = {g: copy_bench(nbytes, dev, g) for g in (False, True)}
            src = torch.empty(nbytes // 2, dtype=torch.uint8, device=dev)
            dst = torch.empty_like(src)
            print(json.dumps({"M": M, "residual": residual,
                              "copy_host_us": host_us(lambda: dst.copy_(src))}), flush=True)
            del src, dst
            for dt in (I8, F8):
                impls = [
                    ("ours (fused)", lambda: nq.rms_norm_quant(x, w, EPS, dt, residual=r)),
                    ("unfused: compiled norm + act_quant", lambda: nq.unfused_pair(norm_c, x, w, EPS, dt, r)),
                    ("torch.compile fused", lambda: fused_c(x, w, EPS, dt, r)),
                ]
                if fused_ma is not None and M == 8192:
                    impls.append(("torch.compile max-autotune fused",
                                  lambda: fused_ma(x, w, EPS, dt, r)))
                case = f"M={M} K={K} bf16 {TAG[dt]}{' +residual' if residual else ''}"
                for name, fn in impls:
                    row = {"case": case, "impl": name, "M": M, "dtype": TAG[dt],
                           "residual": residual, "bytes": nbytes}
                    try:
                        fn()
                        torch.cuda.synchronize()
                        for g in (False, True):
                            t = median(fn, g)
                            row["graph_ms" if g else "ms"] = t
                            row["graph_TBps" if g else "TBps"] = nbytes / (t * 1e-3) / 1e12
                        row["host_us"] = host_us(fn)
                    except Exception as exc:  # noqa: BLE001 - report, don't stop the run
                        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                    row["copy_ms"], row["copy_graph_ms"] = t_copy[False], t_copy[True]
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            if with_variants and M in (8192, 64, 8, 1):
                combos = ([(1, 4, None), (1, 8, None), (2, 4, None), (2, 8, None), (4, 8, None),
                           (1, 4, 4), (1, 4, 8), (1, 4, 16), (1, 8, 4), (2, 8, 4)]
                          if M == 8192 else [(1, 2, None), (1, 4, None), (1, 8, None),
                                             (1, 16, None), (2, 8, None)])
                for bm, nw, pers in combos:
                    fn = (lambda bm=bm, nw=nw, pers=pers: nq.rms_norm_quant(
                        x, w, EPS, I8, residual=r, block_m=bm, num_warps=nw, persistent=pers))
                    fn()
                    v = {"M": M, "residual": residual, "block_m": bm, "num_warps": nw,
                         "persistent": pers, "ms": median(fn, False), "graph_ms": median(fn, True)}
                    v["graph_TBps"] = nbytes / (v["graph_ms"] * 1e-3) / 1e12
                    variants.append(v)
                    print("variant", json.dumps(v), flush=True)
            del x, w, r
            torch.cuda.empty_cache()
    return rows, variants


def target_lines(rows) -> list[str]:
    """Issue 11 item 3's targets from measured rows: ours ≥ 1.5× the unfused pair and ≥ 1.0×
    torch.compile fused, per case (ratio = peer time / ours; stream / CUDA graph)."""
    lines = []
    ours = {r["case"]: r for r in rows if r["impl"] == "ours (fused)"}
    for case, o in ours.items():
        for impl, target in (("unfused: compiled norm + act_quant", 1.5),
                             ("torch.compile fused", 1.0)):
            p = next((r for r in rows if r["case"] == case and r["impl"] == impl), None)
            if p is None or "ms" not in p or "ms" not in o:
                continue
            a, b = p["ms"] / o["ms"], p["graph_ms"] / o["graph_ms"]
            verdict = "met" if min(a, b) >= target else ("met under graph only" if b >= target
                                                           else "NOT met")
            lines.append(f"- {case} vs {impl}: {a:.2f}× / {b:.2f}× (≥{target}×): {verdict}")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--max-autotune", action="store_true",
                    help="also time torch.compile(mode='max-autotune-no-cudagraphs') at M=8192")
    ap.add_argument("--variants", action="store_true", help="time launch-parameter variants")
    ap.add_argument("--jit-launch", action="store_true",
                    help="turn off norm_quant's cached-launch fast path (on by default): every "
                         "launch then goes through Triton's JIT dispatch. With the fast path on, "
                         "the self-checks run it on every case's second launch and the host-time "
                         "breakdown times it beside the JIT path")
    ap.add_argument("--fast-launch", action="store_true", help=argparse.SUPPRESS)  # the default now
    args = ap.parse_args()
    nq._FAST["on"] = not args.jit_launch
    dev = torch.device("cuda")
    torch.manual_seed(0)

    checks = self_check(dev)
    for c in checks:
        print("check", c)
    all_ok = all(c["ok"] for c in checks if c["ok"] is not None)

    # ceiling: a large copy
    big = 1 << 30
    copy_tbs = 2 * big / (copy_bench(2 * big, dev, False) * 1e-3) / 1e12

    shapes = (8192, 64, 8, 1) if not args.quick else (8192, 8)
    rows, variants = measure(dev, shapes, max_autotune=args.max_autotune, with_variants=args.variants)

    # host time of our launcher with and without the cached-launch fast path (M=1, int8)
    x = torch.randn(1, K, device=dev, dtype=torch.bfloat16)
    w = torch.ones(K, device=dev, dtype=torch.bfloat16)
    fast_state = dict(nq._FAST)
    host = {"fast path state": fast_state}
    if nq._FAST["on"]:
        host["ours, fast path"] = host_us(lambda: nq.rms_norm_quant(x, w, EPS, I8))
        fast_state = dict(nq._FAST)  # it may have switched itself off
        host["fast path state"] = fast_state
    nq._FAST["on"] = False
    host["ours, JIT dispatch every call"] = host_us(lambda: nq.rms_norm_quant(x, w, EPS, I8))
    nq._FAST["on"] = fast_state["on"]
    q1, s1 = torch.empty(1, K, dtype=I8, device=dev), torch.empty(1, 1, device=dev)
    host["torch.empty x2 only"] = host_us(lambda: (torch.empty(1, K, dtype=I8, device=dev),
                                                   torch.empty(1, 1, device=dev)))
    host["act_quant.quantize_per_token (JIT dispatch)"] = host_us(
        lambda: nq.quantize_per_token(x, I8, out=(q1, s1)))
    host["torch copy_ (16 KB)"] = host_us(lambda: q1.copy_(q1))
    print("host breakdown", host, flush=True)
    write_report(args.out, rows, variants, checks, all_ok, copy_tbs, host)


def _env():
    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        drv = "unknown"
    return {
        "gpu": torch.cuda.get_device_name(), "driver": drv, "torch": torch.__version__,
        "cuda": torch.version.cuda, "triton": triton.__version__,
        "python": platform.python_version(), "git": os.environ.get("GIT_SHA", "unknown"),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "sms": torch.cuda.get_device_properties(0).multi_processor_count,
    }


def report_stem(env: dict) -> str:
    """``norm-quant-<gpu>-<date>``: the GPU's name without the vendor, and the run's UTC date
    (this was once a fixed name, so every run wrote 2026-12-01)."""
    gpu = env["gpu"].lower().removeprefix("nvidia").strip().replace(" ", "-") or "gpu"
    return f"norm-quant-{gpu}-{env['date'][:10]}"


def write_report(out_dir, rows, variants, checks, all_ok, copy_tbs, host=None):
    env = _env()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = report_stem(env)
    (out / f"{stem}.json").write_text(json.dumps(
        {"env": env, "copy_TBps": copy_tbs, "checks": checks, "rows": rows,
         "variants": variants, "host_breakdown": host}, indent=1, default=str))
    lines = [
        f"# Fused RMSNorm + per-token quantization on {env['gpu']}", "",
        f"{env['date']}; {env['gpu']} ({env['sms']} SMs), driver {env['driver']}; torch "
        f"{env['torch']} (CUDA {env['cuda']}), triton {env['triton']}, Python {env['python']}; "
        f"git {env['git']}. `python bench/norm_quant.py`. K = {K}, bf16 input, eps {EPS}.", "",
        f"Device copy ceiling in this run: {copy_tbs:.2f} TB/s (2 GiB moved, read + write).", "",
        f"Correctness on the GPU (vs float64 reference, poisoned outputs): "
        f"{'all passed' if all_ok else 'FAILURES'}.", "",
        "| check | ok | codes ≠ ref | outside tie bracket | max rel scale err |",
        "|---|---|---|---|---|",
    ]
    for c in checks:
        lines.append(f"| {c['case']} | {c['ok']} | {c['differ']}/{c['n']} | {c['outside']} | "
                     f"{c['scale_rel']:.1e} |")
    lines += ["", "Times: median ms (do_bench, L2 flushed) and under a CUDA graph (replay). "
              "'vs' columns: the row's time over ours (> 1: ours faster). '% copy': a device copy "
              "of the same bytes, time over this row's.", "",
              "| case | implementation | ms | TB/s | graph ms | graph TB/s | ours speedup | "
              "ours speedup (graph) | % of copy (graph) |",
              "|---|---|---|---|---|---|---|---|---|"]
    ours = {(r["case"]): r for r in rows if r["impl"] == "ours (fused)"}
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['case']} | {r['impl']} | error: {r['error'][:80]} | | | | | | |")
            continue
        o = ours.get(r["case"])
        sp = f"{r['ms'] / o['ms']:.2f}×" if o and "ms" in o else ""
        spg = f"{r['graph_ms'] / o['graph_ms']:.2f}×" if o and "graph_ms" in o else ""
        pc = f"{100 * r['copy_graph_ms'] / r['graph_ms']:.0f}%"
        lines.append(f"| {r['case']} | {r['impl']} | {r['ms']:.4f} | {r['TBps']:.2f} | "
                     f"{r['graph_ms']:.4f} | {r['graph_TBps']:.2f} | {sp if r['impl'] != 'ours (fused)' else ''} | "
                     f"{spg if r['impl'] != 'ours (fused)' else ''} | {pc} |")
    lines += ["", "Host time per call (µs; 200 calls back to back, no synchronization — the launch "
              "path in Python, which the plain do_bench column includes whenever it exceeds the "
              "GPU time of the L2 flush plus the kernel):", "",
              "| case | implementation | host µs |", "|---|---|---|"]
    for r in rows:
        if "host_us" in r:
            lines.append(f"| {r['case']} | {r['impl']} | {r['host_us']:.1f} |")
    if host:
        lines += ["", "Host time breakdown, M=1 int8 (µs per call): " + "; ".join(
            f"{k}: {v:.1f}" if isinstance(v, float) else f"{k}: {v}" for k, v in host.items())]
    lines += ["", "Targets: ours ≥ 1.5× the unfused pair and ≥ 1.0× torch.compile fused, per shape "
              "(ratio = peer time / ours; plain / graph):", ""]
    lines += target_lines(rows)
    if variants:
        lines += ["", "Launch variants of ours (int8):", "",
                  "| M | residual | block_m | num_warps | persistent/SM | ms | graph ms | graph TB/s |",
                  "|---|---|---|---|---|---|---|---|"]
        for v in variants:
            lines.append(f"| {v['M']} | {v['residual']} | {v['block_m']} | {v['num_warps']} | "
                         f"{v['persistent']} | {v['ms']:.4f} | {v['graph_ms']:.4f} | "
                         f"{v['graph_TBps']:.2f} |")
    text = "\n".join(lines) + "\n"
    (out / f"{stem}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
