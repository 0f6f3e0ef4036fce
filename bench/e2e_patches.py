"""End-to-end speed of the kernel patches on a Llama-3.1-8B-shaped model with random bf16 weights.

    python bench/e2e_patches.py --out DIR          # one GPU (bf16, ~60 GB with the twin); see below for time

Nothing is downloaded: the model is ``LlamaForCausalLM(config)`` from
fixtures/hf/llama-3.1-8b-instruct/config.json, initialised randomly on the GPU in bf16 under a
fixed seed. One run does, in order:

1. **Dispatch measurements** that the patches' routing tables are written from (into
   fixes/kernel_patches/*_dispatch.json, and DIR): attention per call shape — the causal_trim kernel
   against transformers' ``sdpa_attention_forward`` exactly as ``causal_trim.attention_forward``
   would call each (padded batches: the kernel's bounds path vs sdpa with the materialised mask),
   with the kernel's output checked against sdpa's on the real rows; RoPE (kernel vs
   transformers' ``apply_rotary_pos_emb``) per token count; the quantized products (activation
   quantization included) against the bf16 ``F.linear`` per row count, for the four projection
   shapes of a layer, checked against a float64 product of the same quantized operands.
   Times are host-inclusive: N calls back to back, then one synchronize, divided by N, median of
   5 — the cost a call adds to an eager forward, launch overhead included.
2. **End to end**, each row a fresh patch of the same model (the patches are verified against the
   unpatched model when applied): prefill of 4k and 16k tokens (``model(ids, logits_to_keep=1)``
   with a fresh DynamicCache, as generate's prefill), a left-padded batch of 8 prompts of mixed
   lengths, ``generate()`` at batch 1 and of a left-padded batch of 8 (greedy, no early stop).
   Prefill: with the twin (below), whole prefill calls of the row and of the twin in turn, ABBA,
   5 pairs (16k: 3) after warm-up pairs; the figure is the median of the per-pair ratios twin /
   row. Without the twin (``--no-twin``, or no generate column): median of 5 (16k: 3) against the
   unpatched rows' pooled median.
   generate: host-bound here, and the host's speed drifts within a second, so each row is timed
   against an unpatched copy of the same weights (the "twin"): by default the two generate()
   calls take turns token by token (``--ab step``; as greenlets in one thread when greenlet is
   installed, else as two threads: ``_Lockstep``, ``--switch``) and the
   figure is the twin's summed step time over the row's, with a 95% bootstrap interval over step
   pairs; ``--ab call`` times whole calls in turn instead (median of the per-pair ratios). One
   warm-up pair, then ``--gen-reps`` pairs. The unpatched row against its twin is the A/A control. ``--profile-tokens N`` adds per-decode-step counts
   (kernels, CUDA runtime calls, host syncs) from torch.profiler. Unpatched sdpa = 1.00x; eager
   for scale.
3. **act_calib accuracy**: logits of an evaluation batch against the unpatched model, with
   dynamic per-token scales and with static scales calibrated on a different batch.

Writes DIR/e2e.json and prints the tables (markdown).

Time on the lent H200 (2026-12-02): every row with ``--ab call --gen-new 32 --gen-reps 6``, 400 s.
With ``--ab step`` in its thread form each generate column took 70-92 s per row at 64 new tokens
and 5 pairs, so the default run would take an estimated 25-30 minutes (not run): split it with ``--rows`` / ``--columns`` to fit a
10-minute call.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402

try:
    import sits_doctor  # noqa: F401
    from sits_doctor.fixes import kernel_patches as kp
except ImportError:  # a bare checkout: make the package importable from the tree
    import importlib.util
    import types

    pkg = types.ModuleType("sits_doctor")
    pkg.__path__ = [str(REPO / "sits_doctor")]
    sys.modules["sits_doctor"] = pkg
    for sub, folder in (("fixes", "fixes"), ("kernels", "kernels")):
        spec = importlib.util.spec_from_file_location(f"sits_doctor.{sub}", REPO / folder / "__init__.py",
                                                      submodule_search_locations=[str(REPO / folder)])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[f"sits_doctor.{sub}"] = mod
        spec.loader.exec_module(mod)
    from sits_doctor.fixes import kernel_patches as kp

from sits_doctor.fixes.kernel_patches import act_calib, causal_trim, rope_hoist  # noqa: E402

CONFIG = REPO / "fixtures" / "hf" / "llama-3.1-8b-instruct" / "config.json"
PAD_PREFILL = [2048, 1792, 1536, 1280, 1024, 768, 512, 256]  # padded batch-8 prefill (left padding)
PAD_GEN = [512, 448, 384, 320, 256, 192, 128, 64]  # padded batch-8 generate
GEN_PROMPT, GEN_NEW = 512, 64
GEN_REPS = [5, 1]  # generate: timed pairs, warm-up pairs (--gen-reps)
PROFILE_PYTHON = [False]  # --profile-python
AB_METHOD = ["step"]  # --ab: "step" (lockstep, token by token) or "call" (whole generate() calls in turn)
SWITCH = [None]  # --switch: how the lockstep pair takes turns (None: greenlet if installed, else threads)
T0 = time.time()
LOG: list[str] = []


def log(msg: str) -> None:
    line = f"[{time.time() - T0:6.1f}s] {msg}"
    LOG.append(line)
    print(line, flush=True)


def sync():
    torch.cuda.synchronize()


def host_inclusive(fn, n=20, reps=5, warm=3) -> float:
    """µs per call: n calls back to back then a sync, median over reps."""
    for _ in range(warm):
        fn()
    sync()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        out.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(out)


def timed(fn, reps, warm) -> tuple[float, list[float]]:
    for _ in range(warm):
        fn()
    sync()
    ts = []
    for _ in range(reps):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), ts


# --------------------------------------------------------------------------------------------
# 1. dispatch measurements
# --------------------------------------------------------------------------------------------
class _Attn(torch.nn.Module):
    is_causal = True

    def __init__(self, groups):
        super().__init__()
        self.num_key_value_groups = groups


def _pad_mask(lengths, total, device):
    m = torch.zeros(len(lengths), total, dtype=torch.long, device=device)
    for i, n in enumerate(lengths):
        m[i, total - n:] = 1
    return m


def measure_attention(dev) -> list[dict]:
    Hq, Hk, D = 32, 8, 128
    mod = _Attn(Hq // Hk)
    rows = []
    cases = []
    for b, ks in ((1, (512, 2048, 4096, 16384)), (8, (512, 2048))):
        cases += [("prefill", False, b, k, None) for k in ks]
    for b, ks in ((2, (512, 2048)), (8, (512, 2048))):
        cases += [("prefill", True, b, k, None) for k in ks]
    for b, ks in ((1, (512, 4096, 16384)), (8, (512, 2048, 4096))):
        cases += [("decode", False, b, k, None) for k in ks]
    for b, ks in ((2, (512, 2048)), (8, (512, 2048, 4096))):
        cases += [("decode", True, b, k, None) for k in ks]
    cases.append(("chunk", False, 1, 8192, 512))
    g = torch.Generator(device=dev).manual_seed(0)
    for phase, padded, b, k, qlen in cases:
        sq = {"prefill": k, "decode": 1, "chunk": qlen}[phase]
        q = torch.randn(b, sq, Hq, D, device=dev, dtype=torch.bfloat16, generator=g).transpose(1, 2)
        kk = torch.randn(b, Hk, k, D, device=dev, dtype=torch.bfloat16, generator=g)
        vv = torch.randn(b, Hk, k, D, device=dev, dtype=torch.bfloat16, generator=g)
        mask = None
        if padded:  # mixed lengths down to a quarter of k, left padded (generate's layout)
            lengths = [max(1, k - (k * 3 // 4) * i // max(1, b - 1)) for i in range(b)]
            mask = causal_trim.mask_function(b, sq, k, k - sq, 0, attention_mask=_pad_mask(lengths, k, dev).bool(),
                                             device=dev)
            assert isinstance(mask, causal_trim.PaddedCausal), type(mask)
            mask.mask4d()  # built once per forward in a model: not part of the per-call cost
        res = {}
        for path in ("kernel", "sdpa"):
            mod.__dict__[causal_trim._POLICY_ATTR] = path
            fn = lambda: causal_trim.attention_forward(mod, q, kk, vv, mask, scaling=D ** -0.5)  # noqa: E731
            res[path] = host_inclusive(fn, n=5 if (phase == "prefill" and k >= 4096) else 20)
            res[path + "_out"] = fn()[0]
        err = None
        if padded or phase != "prefill" or k <= 4096:
            a, r = res.pop("kernel_out").float(), res.pop("sdpa_out").float()
            if padded:  # the real query rows only
                qb = mask.bounds_q.tolist()
                sel = torch.zeros(b, sq, dtype=torch.bool, device=dev)
                for i, (s0, s1) in enumerate(qb):
                    sel[i, s0:s1] = True
                a, r = a[sel], r[sel]
            err = float((a - r).abs().max() / r.abs().max().clamp_min(1e-6)) if r.numel() else 0.0
        res.pop("kernel_out", None)
        res.pop("sdpa_out", None)
        row = {"phase": phase, "padded": padded, "batch": b, "k_len": k, "q_len": sq,
               "kernel_us": round(res["kernel"], 1), "sdpa_us": round(res["sdpa"], 1), "max_rel_err": err}
        rows.append(row)
        log(f"attn {phase:7s} padded={padded!s:5s} B={b} q={sq} k={k}: kernel {res['kernel']:.1f} µs, "
            f"sdpa {res['sdpa']:.1f} µs, err {err}")
    return rows


def measure_rope(dev) -> list[dict]:
    from sits_doctor.kernels.rope import RopeCache, apply_rope_unchecked_
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    Hq, Hk, D = 32, 8, 128
    inv = 1.0 / (500000 ** (torch.arange(0, D, 2, device=dev).float() / D))
    ang = torch.arange(32768, device=dev).float()[:, None] * inv[None]
    cache = RopeCache(ang.cos(), ang.sin(), D, 1.0)
    rows = []
    for b, s in ((1, 1), (8, 1), (1, 64), (1, 512), (1, 4096)):
        q = torch.randn(b, s, Hq, D, device=dev, dtype=torch.bfloat16).transpose(1, 2)
        k = torch.randn(b, s, Hk, D, device=dev, dtype=torch.bfloat16).transpose(1, 2)
        pos = torch.arange(100, 100 + s, device=dev)[None].expand(b, s)
        c = torch.cat([cache.cos[pos]] * 2, -1).to(torch.bfloat16)
        sn = torch.cat([cache.sin[pos]] * 2, -1).to(torch.bfloat16)
        kern = host_inclusive(lambda: apply_rope_unchecked_(q, k, cache, pos))
        torch_ = host_inclusive(lambda: apply_rotary_pos_emb(q, k, c, sn))
        rows.append({"tokens": b * s, "kernel_us": round(kern, 1), "torch_us": round(torch_, 1)})
        log(f"rope tokens={b * s}: kernel {kern:.1f} µs, transformers {torch_:.1f} µs")
    return rows


def measure_gemm(dev) -> list[dict]:
    from sits_doctor.kernels import quant_gemm as qg
    from sits_doctor.kernels.act_quant import quantize_per_token

    shapes = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]  # qkv, o, gate|up, down
    ws = {}
    for n, k in shapes:
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02
        ws[(n, k)] = {"bf16": w}
        for dt in (torch.int8, torch.float8_e4m3fn):
            wq, s = quantize_per_token(w, dt)
            ws[(n, k)][dt] = (wq, s.reshape(1, -1).contiguous())
    variants = {
        "int8_triton": (torch.int8, qg.w8a8_gemm),
        "int8_int_mm": (torch.int8, qg.int_mm_gemm),
        "fp8_scaled_mm": (torch.float8_e4m3fn, qg.scaled_mm_gemm),
        "fp8_triton": (torch.float8_e4m3fn, qg.w8a8_gemm),
    }
    rows = []
    for m in (16, 64, 256, 1024, 4096, 16384):
        row = {"rows": m}
        xs = {(n, k): torch.randn(m, k, device=dev, dtype=torch.bfloat16) for n, k in shapes}
        row["bf16_us"] = round(sum(host_inclusive(lambda x=xs[s], w=ws[s]["bf16"]: F.linear(x, w))
                                   for s in shapes), 1)
        for name, (dt, fn) in variants.items():
            try:
                def call(s, fn=fn, dt=dt):
                    q, sa = quantize_per_token(xs[s], dt)
                    return fn(q, ws[s][dt][0], sa, ws[s][dt][1], None, torch.bfloat16)
                t = sum(host_inclusive(lambda s=s: call(s), n=10) for s in shapes)
                s0 = shapes[0]
                q, sa = quantize_per_token(xs[s0], dt)
                got = fn(q, ws[s0][dt][0], sa, ws[s0][dt][1], None, torch.float32)
                ref = qg.w8a8_reference(q.float(), ws[s0][dt][0].float(), sa, ws[s0][dt][1], None, torch.float64)
                err = float((got.double() - ref).abs().max() / ref.abs().max())
                row[name + "_us"], row[name + "_err"] = round(t, 1), err
            except Exception as exc:  # noqa: BLE001 - a backend that refuses a shape is a result
                row[name + "_us"], row[name + "_err"] = None, f"{type(exc).__name__}: {exc}"[:200]
        rows.append(row)
        log("gemm " + json.dumps(row))
    return rows


def write_tables(attn, rope, gemm, out: Path) -> dict:
    meta = {"device": torch.cuda.get_device_name(), "measured": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "by": "bench/e2e_patches.py", "note": "host-inclusive µs per call (N calls then one sync), median of 5"}
    attn, rope, gemm = attn or [], rope or [], gemm or []
    ct = dict(meta, margin=0.02, rule="kernel where kernel_us < sdpa_us * (1 - margin), else sdpa",
              entries=attn)
    lo = [r["tokens"] for r in rope if r["kernel_us"] >= r["torch_us"]]
    rh = dict(meta, min_tokens=(max(lo) + 1) if lo else 0, rows=rope,
              rule="tokens per call from which the kernel measured faster than transformers' math")
    modes = {}
    for mode, cands in ((("int8", ("int8_triton", "int8_int_mm")), ("fp8", ("fp8_scaled_mm", "fp8_triton")))
                        if gemm else ()):
        big = [r for r in gemm if r["rows"] >= 1024]

        def total(c):
            v = [r.get(c + "_us") for r in big]
            return math.inf if any(x is None for x in v) else sum(v)
        backend = min(cands, key=total)
        slower = [r["rows"] for r in gemm if (r.get(backend + "_us") or math.inf) >= r["bf16_us"]]
        modes[mode] = {"backend": backend.split("_", 1)[1], "min_rows": (max(slower) + 1) if slower else 0}
    ac = dict(meta, modes=modes, rows=gemm,
              rule="backend: fastest summed over rows >= 1024; min_rows: above the largest row count where "
                   "the quantized product (activation quantization included) was not faster than bf16")
    files = {"causal_trim_dispatch.json": ct, "rope_hoist_dispatch.json": rh, "act_calib_dispatch.json": ac}
    for name, data in list(files.items()):
        if not data.get("entries", data.get("rows", True)):  # not measured in this run: keep the committed one
            files[name] = json.loads((REPO / "fixes" / "kernel_patches" / name).read_text())
            continue
        text = json.dumps(data, indent=1) + "\n"
        (REPO / "fixes" / "kernel_patches" / name).write_text(text)
        (out / name).write_text(text)
    causal_trim.set_table(None)
    return files


# --------------------------------------------------------------------------------------------
# 2. end to end
# --------------------------------------------------------------------------------------------
def model_config(path: Path = CONFIG):
    """A transformers config from an HF config.json (its text model for a multimodal one, e.g.
    Gemma 3's ``text_config`` as ``gemma3_text``); sdpa attention."""
    from transformers import AutoConfig

    raw = json.loads(Path(path).read_text())
    if isinstance(raw.get("text_config"), dict):
        text = dict(raw["text_config"])
        mt = text.pop("model_type", None) or f"{raw.get('model_type')}_text"
        raw = text
    else:
        mt = raw.pop("model_type")
    for key in ("architectures", "torch_dtype", "dtype", "transformers_version", "quantization_config"):
        raw.pop(key, None)
    cfg = AutoConfig.for_model(mt, **raw)
    cfg._attn_implementation = "sdpa"
    return cfg


def build_model(dev, config_path: Path = CONFIG):
    from transformers import AutoModelForCausalLM

    cfg = model_config(config_path)
    torch.manual_seed(0)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(dev):
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    torch.set_default_dtype(prev)
    model.eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def inputs(dev, vocab):
    g = torch.Generator(device="cpu").manual_seed(1)
    ids = lambda b, s: torch.randint(3, vocab, (b, s), generator=g).to(dev)  # noqa: E731
    out = {"p4k": ids(1, 4096), "p16k": ids(1, 16384), "gen1": ids(1, GEN_PROMPT)}
    for key, lens in (("pad8", PAD_PREFILL), ("gen8", PAD_GEN)):
        s = max(lens)
        x = ids(8, s)
        m = _pad_mask(lens, s, dev)
        out[key] = (x * m, m)
    return out


COLUMNS = ("prefill_4k", "prefill_16k", "prefill_pad8", "generate_b1", "generate_pad8")


def _gen_fn(model, ids, mask=None, new=None):
    n = GEN_NEW if new is None else new
    kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
    return lambda streamer=None: model.generate(ids, attention_mask=mask if mask is not None else torch.ones_like(ids),
                                                streamer=streamer, **kw)


class _TurnStreamer:
    """A generate() streamer (``put``/``end``, transformers' BaseStreamer interface) that hands the
    host to the other generate() of a lockstep pair at every token and times its own turns.
    generate() calls ``put`` with the prompt before prefill, then once per new token (after
    ``.cpu()`` of the token: the step's device work is done); a turn is the time from taking the
    host back to the next ``put``, so turn 1 is prefill + first token and the rest are decode steps."""

    def __init__(self, pair: "_Lockstep", me: int):
        self.pair, self.me, self.t0, self.c0 = pair, me, None, None

    def put(self, value) -> None:
        if self.t0 is not None:
            self.pair.turns[self.me].append(time.perf_counter() - self.t0)
            # the thread's own CPU time in the turn: equal to the wall time when the turn only
            # computes, less when it waits (a lock, the GIL, the device)
            self.pair.turns_cpu[self.me].append(time.thread_time() - self.c0)
        self.pair.hand_over(self.me)
        self.t0, self.c0 = time.perf_counter(), time.thread_time()

    def end(self) -> None:
        self.pair.finished(self.me)


def _greenlet():
    try:
        import greenlet
    except ImportError:
        return None
    return greenlet


class _Lockstep:
    """Two generate() calls taking turns token by token: model 0's step 1, model 1's step 1,
    model 0's step 2, ... Each step of one is timed next to the same step of the other, tens of
    milliseconds apart, so the host's drifts in speed hit both alike. Only one runs at a time.

    ``switch="greenlet"`` (the default when greenlet is installed) runs both in the calling thread,
    as two greenlets; ``"thread"`` runs each in its own thread (they inherit the caller's CPU,
    ``--pin``). On the lent H200 the thread form made every step 2-4× slower than generate()
    alone, cause not found (bench/results/e2e-patches-h200-2026-12-02.md); the greenlet form keeps
    one OS thread, as generate() alone has."""

    def __init__(self, fns, first: int, switch: str | None = None):
        self.turns: tuple[list[float], list[float]] = ([], [])
        self.turns_cpu: tuple[list[float], list[float]] = ([], [])
        self.failed = False  # one generate() raised: the other runs on without waiting for turns
        self.switch = switch or ("greenlet" if _greenlet() else "thread")
        (self._greenlets if self.switch == "greenlet" else self._threads)(fns, first)

    # ---- one thread per generate() --------------------------------------------------------
    def _threads(self, fns, first):
        import threading

        self.sem = (threading.Semaphore(0), threading.Semaphore(0))
        self.done = [False, False]
        errors = []

        def work(i):
            try:
                if not self.sem[i].acquire(timeout=300):
                    raise RuntimeError("lockstep: never got the host")
                fns[i](streamer=_TurnStreamer(self, i))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(exc)
                self.failed = True
                self.sem[1 - i].release()

        threads = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        self.sem[first].release()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    # ---- both in this thread, as greenlets -------------------------------------------------
    def _greenlets(self, fns, first):
        greenlet = _greenlet()
        grad = torch.is_grad_enabled()  # generate()'s no_grad is entered and left interleaved
        self.lets = [greenlet.greenlet(lambda i=i: fns[i](streamer=_TurnStreamer(self, i))) for i in (0, 1)]
        try:
            self.lets[first].switch()  # returns when one of them has ended (or raised)
            for g in self.lets:  # the other is parked in its last put: let it finish
                if not g.dead:
                    g.switch()
        except BaseException:
            self.failed = True
            for g in self.lets:
                if not g.dead:
                    g.throw(greenlet.GreenletExit)  # unwinds its generate(); ends quietly
            raise
        finally:
            torch.set_grad_enabled(grad)

    def hand_over(self, me: int) -> None:
        if self.switch == "greenlet":
            other = self.lets[1 - me]
            if not self.failed and not other.dead:
                other.switch()
            return
        self.sem[1 - me].release()
        if not self.failed and not self.done[1 - me] and not self.sem[me].acquire(timeout=300):
            raise RuntimeError("lockstep: the other generate() stopped")

    def finished(self, me: int) -> None:
        if self.switch == "thread":
            self.done[me] = True  # set before the release: the other never waits for an ended one
            self.sem[1 - me].release()


def timed_ab(fn, twin_fn, reps, warm) -> dict:
    """``fn`` (the row's model) and ``twin_fn`` (an unpatched copy of the same weights) timed in
    turn, twin first in even pairs and second in odd ones (ABBA: a steady drift of the host hits
    both alike, and going first or second favours neither). Returns both sample lists and the
    median of the per-pair ratios twin / row (> 1: the row is faster)."""
    for _ in range(warm):
        twin_fn()
        fn()
    sync()
    ts, tw, cs, cw, steal = [], [], [], [], []
    for i in range(reps):
        pair = ((twin_fn, tw, cw), (fn, ts, cs))
        for f, acc, cpu in (pair if i % 2 == 0 else pair[::-1]):
            sync()
            st0 = _steal()
            c = time.thread_time()
            t = time.perf_counter()
            f()
            sync()
            acc.append(time.perf_counter() - t)
            cpu.append(time.thread_time() - c)
            steal.append(_steal() - st0)
    ratios = [a / b for a, b in zip(tw, ts)]
    cpu_ratios = [a / b for a, b in zip(cw, cs)]
    return {"s": statistics.median(ts), "all_s": ts, "twin_s": tw, "pair_ratios": ratios,
            "ab_ratio": statistics.median(ratios),
            # the main thread's CPU time: what the host spent, without time it was not running
            "cpu_s": cs, "twin_cpu_s": cw, "cpu_pair_ratios": cpu_ratios,
            "cpu_ab_ratio": statistics.median(cpu_ratios), "steal_ticks": steal}


def timed_lockstep(fn, twin_fn, reps, warm, seed=0) -> dict:
    """``fn`` (the row's model) and ``twin_fn`` (an unpatched copy of the same weights) generate in
    lockstep (``_Lockstep``); the twin goes first in even reps, the row in odd ones. Per rep: the
    sum of each one's turns; overall: twin turns / row turns summed over every rep (the tokens/s
    ratio, > 1: the row is faster), the median of the per-step ratios, and a 95% bootstrap
    interval of the overall ratio over step pairs."""
    import random

    for i in range(warm):
        _Lockstep((twin_fn, fn), first=i % 2, switch=SWITCH[0])
    sync()
    ts, tw, steps, cpu, wall = [], [], [], 0.0, 0.0
    for i in range(reps):
        sync()
        pair = _Lockstep((twin_fn, fn), first=i % 2, switch=SWITCH[0])
        sync()
        a, b = pair.turns
        cpu += sum(pair.turns_cpu[0]) + sum(pair.turns_cpu[1])
        wall += sum(a) + sum(b)
        if len(a) != len(b) or not a:
            raise RuntimeError(f"lockstep: {len(a)} turns against {len(b)}")
        tw.append(sum(a))
        ts.append(sum(b))
        steps.extend(zip(a, b))
    decode = [(a, b) for k, (a, b) in enumerate(steps) if k % len(pair.turns[0])]  # turn 1 holds prefill
    rng = random.Random(seed)

    def ci95(twin, row):
        """95% percentile-bootstrap interval of sum(twin) / sum(row), resampling the index."""
        n = len(twin)
        boot = sorted(sum(twin[i] for i in pick) / sum(row[i] for i in pick)
                      for pick in ([rng.randrange(n) for _ in range(n)] for _ in range(1000)))
        return [boot[25], boot[974]]

    return {"s": statistics.median(ts), "all_s": ts, "twin_s": tw,
            "pair_ratios": [a / b for a, b in zip(tw, ts)],
            "ab_ratio": sum(tw) / sum(ts),
            "ab_ci95": ci95([a for a, _ in steps], [b for _, b in steps]),
            # resampling whole calls: steps of one call share the host's speed of the moment, so
            # this interval does not assume the steps independent
            "ab_ci95_calls": ci95(tw, ts),
            "step_ratio_median": statistics.median(a / b for a, b in steps),
            "decode_ratio": sum(a for a, _ in decode) / sum(b for _, b in decode),
            "turns_per_call": len(pair.turns[0]), "turn_cpu_over_wall": cpu / wall, "method": "lockstep",
            "switch": pair.switch}


def _steal() -> int:
    """Steal time of all CPUs (USER_HZ ticks, /proc/stat): time the hypervisor ran something else."""
    try:
        with open("/proc/stat") as f:
            return int(f.readline().split()[8])
    except (OSError, IndexError, ValueError):
        return -1


@torch.no_grad()
def run_row(model, data, quick=False, prefill_only=False, twin=None, columns=COLUMNS) -> dict:
    from transformers import DynamicCache

    def prefill(ids, mask=None, m=model):
        if m is None:
            return None
        return lambda: m(input_ids=ids, attention_mask=mask, past_key_values=DynamicCache(config=m.config),
                         use_cache=True, logits_to_keep=1)

    cases = {
        "prefill_4k": lambda: (prefill(data["p4k"]), 5, 2, None, prefill(data["p4k"], m=twin)),
        "prefill_16k": lambda: (prefill(data["p16k"]), 3, 1, None, prefill(data["p16k"], m=twin)),
        "prefill_pad8": lambda: (prefill(*data["pad8"]), 5, 2, None, prefill(*data["pad8"], m=twin)),
        "generate_b1": lambda: (_gen_fn(model, data["gen1"]), GEN_REPS[0], GEN_REPS[1], GEN_NEW,
                                twin and _gen_fn(twin, data["gen1"])),
        "generate_pad8": lambda: (_gen_fn(model, *data["gen8"]), GEN_REPS[0], GEN_REPS[1], 8 * GEN_NEW,
                                  twin and _gen_fn(twin, *data["gen8"])),
    }
    res = {}
    for col in COLUMNS:
        if col not in columns:
            continue
        fn, reps, warm, tokens, twin_fn = cases[col]()
        if prefill_only and tokens:
            res[col] = {"error": "not run (prefill only)"}
            continue
        try:
            if twin_fn is not None:
                # prefill is one call: whole calls in turn (ABBA); generate per --ab
                step = tokens and AB_METHOD[0] == "step"
                res[col] = (timed_lockstep if step else timed_ab)(fn, twin_fn, reps, warm)
            else:
                med, ts = timed(fn, reps, warm)
                res[col] = {"s": med, "all_s": ts}
            if tokens:
                res[col]["tok_s"] = tokens / res[col]["s"]
        except torch.OutOfMemoryError as exc:
            res[col] = {"error": f"OOM: {str(exc)[:120]}"}
            torch.cuda.empty_cache()
        log(f"   {col}: {res[col].get('s', res[col].get('error'))}{_ab_note(res[col])}")
    return res


def _ab_note(r: dict) -> str:
    """The A/B part of a column's log line: whole calls in turn, lockstep, or none."""
    if "cpu_ab_ratio" in r:
        pairs = " ".join(f"{x:.3f}" for x in r["pair_ratios"])
        return (f" (A/B ratio {r['ab_ratio']:.3f}, pairs {pairs}, CPU time {r['cpu_ab_ratio']:.3f}, "
                f"steal {r['steal_ticks']})")
    if r.get("method") != "lockstep":
        return ""
    lo, hi = r["ab_ci95"]
    reps = " ".join(f"{x:.3f}" for x in r["pair_ratios"])
    return (f" (lockstep A/B {r['ab_ratio']:.3f}, 95% {lo:.3f}-{hi:.3f}, decode {r['decode_ratio']:.3f}, "
            f"step median {r['step_ratio_median']:.3f}, {r['switch']}, CPU/wall in turns "
            f"{r['turn_cpu_over_wall']:.2f}, reps {reps})")


_RUNTIME_CALLS = ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC",
                  "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpyAsync", "cudaStreamIsCapturing")


@torch.no_grad()
def decode_profile(model, data, tokens: int) -> dict:
    """What one decode step of ``generate()`` costs, from two profiled generate calls (2 and
    2 + ``tokens`` new tokens) of the padded batch of 8 and of batch 1: the difference divided by
    ``tokens`` is per step. Counts of CUDA runtime calls (launches, synchronisations) and of
    device kernels by name, host (self CPU) time per op; the profiler's own overhead inflates
    host times, so compare rows with each other, not with the timed columns."""
    from torch.profiler import ProfilerActivity, profile

    out = {}
    for col, args in (("generate_pad8", data["gen8"]), ("generate_b1", (data["gen1"],))):
        runs = []
        for new in (2, 2 + tokens):
            fn = _gen_fn(model, *args, new=new)
            fn()
            sync()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                t = time.perf_counter()
                fn()
                sync()
                wall = time.perf_counter() - t
            cpu, calls, kernels = {}, {}, {}
            for e in prof.key_averages():
                if e.device_type.name == "CUDA" or getattr(e, "self_device_time_total", 0) and e.cpu_time_total == 0:
                    kernels[e.key] = e.count
                    continue
                cpu[e.key] = (e.count, e.self_cpu_time_total)
                if e.key in _RUNTIME_CALLS:
                    calls[e.key] = e.count
            runs.append((wall, cpu, calls, kernels))
        (w0, c0, r0, k0), (w1, c1, r1, k1) = runs
        per = lambda a, b: (b - a) / tokens  # noqa: E731
        ops = {k: (per(c0.get(k, (0, 0))[0], v[0]), per(c0.get(k, (0, 0))[1], v[1])) for k, v in c1.items()}
        top = sorted(ops.items(), key=lambda kv: -kv[1][1])[:25]
        py = []
        for new in (2, 2 + tokens) if PROFILE_PYTHON[0] else ():  # Python view: cProfile, own time
            import cProfile
            import pstats

            fn = _gen_fn(model, *args, new=new)
            pr = cProfile.Profile()
            pr.enable()
            fn()
            sync()
            pr.disable()
            st = pstats.Stats(pr).stats  # {(file, line, name): (cc, nc, tottime, cumtime, callers)}
            py.append({f"{Path(k[0]).name}:{k[1]}:{k[2]}": (v[1], v[2]) for k, v in st.items()})
        pyops = {k: (per(py[0].get(k, (0, 0))[0], v[0]), per(py[0].get(k, (0, 0))[1], v[1]) * 1e6)
                 for k, v in py[1].items()} if py else {}
        out[col] = {
            "top_python_tottime_us_per_step": [(k, round(n, 2), round(us, 1)) for k, (n, us) in
                                               sorted(pyops.items(), key=lambda kv: -kv[1][1])[:30]],
            "wall_ms_per_step": per(w0, w1) * 1e3,
            "runtime_calls_per_step": {k: per(r0.get(k, 0), v) for k, v in r1.items()},
            "kernels_per_step": sum(per(k0.get(k, 0), v) for k, v in k1.items()),
            "top_kernels": sorted(((k, per(k0.get(k, 0), v)) for k, v in k1.items()), key=lambda kv: -kv[1])[:12],
            "top_self_cpu_us_per_step": [(k, round(n, 2), round(us, 1)) for k, (n, us) in top],
        }
        log(f"   profile {col}: {out[col]['wall_ms_per_step']:.2f} ms/step (profiled), "
            f"{out[col]['kernels_per_step']:.0f} kernels/step, calls {out[col]['runtime_calls_per_step']}")
    return out


@torch.no_grad()
def accuracy(model, dev, quant_rtol=None) -> dict:
    g = torch.Generator(device="cpu").manual_seed(7)
    calib = torch.randint(3, model.config.vocab_size, (4, 512), generator=g).to(dev)
    evalb = torch.randint(3, model.config.vocab_size, (4, 512), generator=g).to(dev)
    ref = model(input_ids=evalb).logits.float()
    out = {}
    for mode in ("int8", "fp8"):
        ps = kp.patch(model, ["act_calib"], options={"act_calib": {"mode": mode}}, rtol=quant_rtol)
        p = ps["act_calib"]
        try:
            got = model(input_ids=evalb).logits.float()
            dyn = _acc(got, ref)
            act_calib._reset(p)  # calibrate on the calibration batch only
            model(input_ids=calib)
            act_calib.freeze_static(p)
            got = model(input_ids=evalb).logits.float()
            stat = _acc(got, ref)
            out[mode] = {"verify_error": p.error, "dynamic": dyn, "static": stat}
        finally:
            kp.unpatch(ps)
        log(f"accuracy {mode}: {out[mode]}")
    return out


@torch.no_grad()
def selfcheck(model, dev) -> dict:
    """silu_mul_quant against its float64 reference on the GPU, and one decoder layer's MLP through
    act_calib (int8, fp8) against the bf16 MLP on a real hidden state of the model."""
    from sits_doctor.kernels.quant_gemm import silu_mul_quant, silu_mul_quant_reference

    out = {}
    y = torch.randn(300, 2 * 14336, device=dev, dtype=torch.bfloat16) * 3
    for dt in (torch.int8, torch.float8_e4m3fn):
        q, s = silu_mul_quant(y, 14336, dt)
        rq, rs = silu_mul_quant_reference(y, 14336, dt)
        out[f"silu_mul_quant_{dt}"] = {"codes_differ": float((q.float() != rq.float()).float().mean()),
                                       "max_code_diff": float((q.float() - rq.float()).abs().max()),
                                       "scale_rel_err": float(((s - rs).abs() / rs).max())}
    ids = torch.randint(3, model.config.vocab_size, (1, 2048), device=dev)
    h = model.model.embed_tokens(ids)
    mlp = model.model.layers[0].mlp
    x = model.model.layers[0].post_attention_layernorm(h)
    ref = mlp(x).float()
    for mode in ("int8", "fp8"):
        ps = kp.patch(model, ["act_calib"], options={"act_calib": {"mode": mode}}, rtol=1.0)
        try:
            got = mlp(x).float()
            out[f"mlp_layer0_{mode}_rel_err"] = float((got - ref).norm() / ref.norm())
        finally:
            kp.unpatch(ps)
    log("selfcheck " + json.dumps(out))
    return out


def _acc(got, ref):
    rel = float((got - ref).abs().max() / ref.abs().max())
    top1 = float((got.argmax(-1) == ref.argmax(-1)).float().mean())
    kl = float(F.kl_div(got.log_softmax(-1), ref.log_softmax(-1), log_target=True, reduction="batchmean")
               / got.shape[1])
    return {"max_rel_err": rel, "top1_agree": top1, "kl_per_token": kl}


ROWS = [
    ("sdpa", [], {}),
    ("causal_trim", ["causal_trim"], {}),
    ("rope_hoist", ["rope_hoist"], {}),
    ("both", ["causal_trim", "rope_hoist"], {}),
    # act_calib's defaults: the RMSNorms quantize for q|k|v and gate|up (fuse_norm)
    ("act_calib int8", ["act_calib"], {"act_calib": {"mode": "int8"}}),
    ("act_calib fp8", ["act_calib"], {"act_calib": {"mode": "fp8"}}),
    ("eager", None, {}),
    ("act_calib int8 static", ["act_calib"], {"act_calib": {"mode": "int8"}}),
    ("act_calib fp8 static", ["act_calib"], {"act_calib": {"mode": "fp8"}}),
    # what the norm fusion adds: each projection group quantizes its own input
    ("act_calib int8, norm unfused", ["act_calib"], {"act_calib": {"mode": "int8", "fuse_norm": False}}),
    ("act_calib fp8, norm unfused", ["act_calib"], {"act_calib": {"mode": "fp8", "fuse_norm": False}}),
    ("sdpa (repeat)", [], {}),
]
# rows run only when named in --rows: causal_trim applied and verified as usual, then every call
# routed to sdpa (the hook and mask path without the kernel: what routing itself costs)
EXTRA_ROWS = [
    ("causal_trim (all sdpa)", ["causal_trim"], {"causal_trim": {"dispatch": "sdpa"}}),
]


def env() -> dict:
    import transformers
    import triton

    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        drv = "unknown"
    return {"gpu": torch.cuda.get_device_name(), "driver": drv, "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "triton": triton.__version__,
            "transformers": transformers.__version__, "python": platform.python_version(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([Path(sys.argv[0]).as_posix()] + sys.argv[1:])}


def _pooled_baseline(results) -> dict:
    """The unpatched rows' samples pooled (the first row and the repeat at the end): the median of
    all of them is the 1.00x every ratio is taken against."""
    out = {}
    for c in ("prefill_4k", "prefill_16k", "prefill_pad8", "generate_b1", "generate_pad8"):
        samples = [t for name in ("sdpa", "sdpa (repeat)") for t in results.get(name, {}).get(c, {}).get("all_s", [])]
        if samples:
            med = statistics.median(samples)
            out[c] = {"s": med, "all_s": samples}
            tok = {"generate_b1": GEN_NEW, "generate_pad8": 8 * GEN_NEW}.get(c)
            if tok:
                out[c]["tok_s"] = tok / med
    return out


def table(results) -> str:
    base = results["sdpa (pooled)"] = _pooled_baseline(results)
    cols = ["prefill_4k", "prefill_16k", "prefill_pad8", "generate_b1", "generate_pad8"]
    head = "| patch | prefill 4k | prefill 16k | padded batch-8 prefill | generate b1 tok/s | generate padded b8 |"
    lines = [head, "|---|---|---|---|---|---|"]
    for name, res in results.items():
        if not isinstance(res, dict) or "prefill_4k" not in res:
            continue
        cells = []
        for c in cols:
            r, b = res.get(c, {}), base.get(c, {})
            if "s" not in r or ("s" not in b and "ab_ratio" not in r):
                cells.append(r.get("error", "n/a"))
                continue
            x = r["ab_ratio"] if "ab_ratio" in r else b["s"] / r["s"]
            val = f"{r['tok_s']:.1f} tok/s" if "tok_s" in r else f"{r['s'] * 1e3:.1f} ms"
            cells.append(f"{x:.2f}x ({val})")
        if name == "sdpa (pooled)":
            name = "unpatched sdpa (pooled first + repeat)"
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--budget-s", type=float, default=530.0, help="stop starting new rows after this")
    ap.add_argument("--micro", default="attention,rope,gemm",
                    help="dispatch measurements to redo (comma list; 'none': use the committed tables)")
    ap.add_argument("--exact-rtol", default="noise",
                    help="verification tolerance of causal_trim / rope_hoist: 'default' (the patches' own), "
                         "'noise' (max(default, 2x the unpatched bf16 model's own distance from its fp32 "
                         "evaluation on the probe)), or a number")
    ap.add_argument("--quant-rtol", type=float, default=None,
                    help="verification tolerance of act_calib (default: its own table)")
    ap.add_argument("--config", default=str(CONFIG),
                    help="HF config.json of the model to build with random weights (default: Llama-3.1-8B; "
                         "e.g. fixtures/hf/{mistral-7b-v0.1,qwen2.5-7b-instruct,gemma-3-12b-it-resaved}/config.json)")
    ap.add_argument("--columns", default=",".join(COLUMNS), help="end-to-end columns to run (comma list)")
    ap.add_argument("--rows", default="", help="end-to-end rows to run (comma list of names; default: "
                    "every row of ROWS; EXTRA_ROWS only when named)")
    ap.add_argument("--no-twin", action="store_true",
                    help="time generate alone, not in turn with an unpatched copy of the model")
    ap.add_argument("--pin", default="none",
                    help="pin the main thread to one CPU: 'none', 'last' (the highest allowed), or a number")
    ap.add_argument("--profile-tokens", type=int, default=0,
                    help="profile this many decode steps of generate per row (0: no profile)")
    ap.add_argument("--gen-reps", type=int, default=GEN_REPS[0], help="timed pairs per generate column")
    ap.add_argument("--gen-new", type=int, default=GEN_NEW,
                    help="new tokens per generate() call")
    ap.add_argument("--ab", choices=["step", "call"], default="step",
                    help="generate A/B against the twin: 'step' (the two generate() calls take turns token by "
                         "token; see --switch) or 'call' (whole calls in turn, ABBA)")
    ap.add_argument("--switch", choices=["auto", "greenlet", "thread"], default="auto",
                    help="--ab step: the two generate() calls as greenlets in this thread (auto, when greenlet "
                         "is installed) or as two threads")
    ap.add_argument("--profile-python", action="store_true", help="add a cProfile view to --profile-tokens")
    ap.add_argument("--no-selfcheck", action="store_true", help="skip the GPU self-check")
    ap.add_argument("--no-accuracy", action="store_true", help="skip the act_calib accuracy part")
    args = ap.parse_args()
    named = args.rows.split(",") if args.rows else []
    unknown = [n for n in named if n not in {r[0] for r in ROWS + EXTRA_ROWS}]
    if unknown:  # before the model is built
        sys.exit(f"--rows: unknown row(s) {unknown}; known: {[r[0] for r in ROWS + EXTRA_ROWS]}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    report = {"env": env()}
    log(json.dumps(report["env"]))

    def save():
        report["log"] = LOG
        (out / "e2e.json").write_text(json.dumps(report, indent=1, default=str))

    micro = set(args.micro.split(",")) - {"none", ""}
    if micro:
        report["attention"] = measure_attention(dev) if "attention" in micro else None
        report["rope"] = measure_rope(dev) if "rope" in micro else None
        report["gemm"] = measure_gemm(dev) if "gemm" in micro else None
        files = write_tables(report["attention"], report["rope"], report["gemm"], out)
        report["dispatch"] = {"rope_min_tokens": files["rope_hoist_dispatch.json"]["min_tokens"],
                              "act_calib": files["act_calib_dispatch.json"]["modes"]}
        log("dispatch " + json.dumps(report["dispatch"]))
        save()

    model = build_model(dev, Path(args.config))
    data = inputs(dev, model.config.vocab_size)
    columns = [c for c in args.columns.split(",") if c]
    GEN_REPS[0] = args.gen_reps
    globals()["GEN_NEW"] = args.gen_new  # read by _gen_fn, run_row and the table
    PROFILE_PYTHON[0] = args.profile_python
    AB_METHOD[0] = args.ab
    SWITCH[0] = None if args.switch == "auto" else args.switch
    if args.switch == "greenlet" and _greenlet() is None:
        sys.exit("--switch greenlet: greenlet is not importable by this python (see bench/README.md)")
    rows = [r for r in ROWS + EXTRA_ROWS if r[0] in named] if named else ROWS
    twin = None
    if not args.no_twin and any(c.startswith("generate") for c in columns):
        import copy

        twin = copy.deepcopy(model)  # unpatched for the whole run: the A of every generate A/B pair
    if args.pin != "none":  # the main thread only (Linux: pid 0 = the calling thread); CUDA's own
        # threads, started already, keep the other CPUs
        cpu = max(os.sched_getaffinity(0)) if args.pin == "last" else int(args.pin)
        os.sched_setaffinity(0, {cpu})
    report["setup"] = {"columns": columns, "rows": [r[0] for r in rows], "twin": twin is not None,
                       "pin": args.pin, "affinity": sorted(os.sched_getaffinity(0))}
    log("model built " + json.dumps(report["setup"]))
    probe = kp.make_probe(model)
    ref = kp.run_probe(model, probe)
    buffers = {n: b.detach().clone() for n, b in model.named_buffers()}  # inv_freq stays fp32
    model.float()
    ref32 = kp.run_probe(model, probe)
    model.to(torch.bfloat16)  # bf16 -> fp32 -> bf16 is exact: the same weights
    for n, b in model.named_buffers():
        b.data = buffers[n]
    del buffers
    noise = kp._core.compare(ref, ref32, 1.0)[0]
    n_unpadded = kp.run_probe(model, probe, padded=False).shape[0]
    noise_unpadded = kp._core.compare(ref[:n_unpadded], ref32[:n_unpadded], 1.0)[0]
    default = kp.DEFAULT_RTOL[torch.bfloat16]
    if args.exact_rtol == "noise":
        exact_rtol = max(default, 2 * noise)
    elif args.exact_rtol == "default":
        exact_rtol = None
    else:
        exact_rtol = float(args.exact_rtol)
    report["verification"] = {"bf16_vs_fp32_probe_error": noise, "bf16_vs_fp32_unpadded_part": noise_unpadded,
                              "exact_rtol": exact_rtol, "quant_rtol": args.quant_rtol}
    log("verification " + json.dumps(report["verification"]))
    del ref, ref32
    try:
        report["selfcheck"] = selfcheck(model, dev) if not args.no_selfcheck else "not run (--no-selfcheck)"
    except Exception as exc:  # noqa: BLE001
        report["selfcheck"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    results = {}
    report["e2e"] = results
    for name, names, options in rows:
        if time.time() - T0 > args.budget_s:
            results[name] = {"error": "skipped: time budget"}
            log(f"skip {name}")
            continue
        log(f"row {name}")
        ps = None
        try:
            if names is None:
                model.set_attn_implementation("eager")
            elif names:
                rtol = args.quant_rtol if names == ["act_calib"] else exact_rtol
                ps = kp.patch(model, names, options=options, probe=probe, rtol=rtol)
                results.setdefault("_verify", {})[name] = {p.name: p.error for p in ps.patches}
                if name.endswith("static"):
                    p = ps["act_calib"]
                    g = torch.Generator(device="cpu").manual_seed(7)
                    with torch.no_grad():  # with autograd on, the Linears take the plain path
                        model(input_ids=torch.randint(3, model.config.vocab_size, (4, 512), generator=g).to(dev))
                    report.setdefault("static_scales", {})[name] = act_calib.freeze_static(p)
            causal_trim.STATS.clear()
            # with the twin, every generate pair has its own unpatched sample: the repeat row at
            # the end only re-checks the prefill baseline
            results[name] = run_row(model, data, quick=name == "eager",
                                    prefill_only=name.endswith("static") or (twin is not None and name.endswith("(repeat)")),
                                    twin=twin, columns=columns)
            if args.profile_tokens and not name.endswith("static"):
                results[name]["profile"] = decode_profile(model, data, args.profile_tokens)
            results[name]["stats"] = dict(causal_trim.STATS) if "causal_trim" in (names or []) else None
            if ps is not None and "act_calib" in ps:
                st = ps["act_calib"].info["_state"]
                results[name]["act_calib_calls"] = {k: sum(v.values()) for k, v in st.items()}
            if ps is not None and "rope_hoist" in ps:
                h = ps["rope_hoist"].info["hoisted"]
                results[name]["rope_calls"] = {"kernel": h.calls, "torch_small": h.small, "syncs": h.syncs}
        except Exception as exc:  # noqa: BLE001 - a row that fails is reported, the rest still run
            results[name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            log(f"row {name} failed: {results[name]['error']}")
        finally:
            if ps is not None:
                kp.unpatch(ps)
            if names is None:
                model.set_attn_implementation("sdpa")
            torch.cuda.empty_cache()
        save()
    # the table first: a call cut during the accuracy part still leaves it (run 10 lost it so)
    report["table"] = table(results)
    save()
    print(report["table"], flush=True)
    if not args.no_accuracy and time.time() - T0 < args.budget_s + 30:
        try:
            report["accuracy"] = accuracy(model, dev, args.quant_rtol)
        except Exception as exc:  # noqa: BLE001
            report["accuracy"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        save()
    print(json.dumps(report.get("accuracy"), indent=1))


if __name__ == "__main__":
    main()
