"""act_calib: W8A8 projections with activations quantized per token at run time (or static scales).

Each target ``nn.Linear`` (default: the attention and MLP projections of the decoder layers) gets
an instance-level ``forward`` (an entry in its ``__dict__``; revert deletes it). Linears that read
one input form a *group* — q/k/v of an attention module, gate/up of an MLP — whose weights are
moved into one [N_q + N_k + N_v, K] buffer (each Linear's ``weight`` becomes a view of it; revert
gives each its own copy back), so the input is quantized once and multiplied once; the first
member called computes every member's output and the others take their slice (matched by the
input tensor's identity and version). Per group call:

  1. rows M = tokens. ``M < min_rows`` (decode, short chunks; the measured table below): the bf16
     product with the grouped weight — no quantization, one GEMM for q/k/v instead of three;
  2. else ``quantize_per_token(x)`` (Triton; int8 / fp8-e4m3 values and fp32 row scales), or with
     frozen static scales ``quantize_per_tensor(x, scale=...)``;
  3. the product on the tensor cores, scales in the epilogue (kernels/quant_gemm.py): ``"int8"``
     through the Triton W8A8 kernel or ``torch._int_mm`` + one scaling pass, ``"fp8"`` through
     ``torch._scaled_mm`` (row-wise scales) or the Triton kernel — whichever the table says;
  4. the batch absmax goes to the group's calibrator (one reduction of the row scales, folded
     into ``RuntimeCalibrator`` when read), for static-scale deployments (SITS005).

A gated MLP whose gate, up and down projections are all targets and whose activation is SiLU runs
as one unit: x quantized once → gate|up product → ``silu_mul_quant`` (silu(g)·u quantized per
token in one pass, from the int32 or bf16 product) → down product. The bf16 ``h`` is never stored.
With ``fuse_norm=True`` (the default; int8 / fp8; decoder layers of llama, mistral, qwen2 and
qwen3, whose ``input_layernorm`` output goes straight into q/k/v and ``post_attention_layernorm``'s
into gate/up): each of those two RMSNorms gets an instance-level ``forward`` that runs
``kernels.norm_quant.rms_norm_quant`` once — the quantized activation and its row scales for the
group that reads it, and the normalised activation in the model's dtype (``y_out``, what
transformers' ``LlamaRMSNorm`` returns) for everything else — and hands the quantized pair to the
group, which then skips its own quantization when the tensor it receives is that norm output
(identity and version). The norm is checked against transformers' formula on a random input at
install (a norm that computes something else, such as Gemma's ``1 + weight``, is left alone).
Calls with static scales, fewer rows than ``min_rows``, or inputs needing gradients take the
norm's own forward. ``info["fused_norms"]`` lists the norms it applied to; ``state["fused_norm"]``
counts the calls. On one H200 (Llama-3.1-8B dimensions, random bf16 weights,
``bench/e2e_patches.py``, run 11 in bench/results/e2e-patches-h200-2026-12-02.md) the fusion takes
act_calib's prefill from 1.28–1.31× to 1.39–1.44× the unpatched model (int8) and from 1.35–1.40×
to 1.45–1.60× (fp8); ``fuse_norm=False`` keeps each norm's own forward.

Modes: ``"fp8"`` (CUDA, compute capability ≥ 8.9), ``"int8"``, ``"dequant"`` (q·scale back to the
activation dtype, then the bf16 weight: the activation quantization alone; the CPU default),
``"auto"`` (fp8 where the GPU has it, else int8 on CUDA, else dequant). :func:`freeze_static`
switches a patch to the per-tensor static scales its calibrators hold (what SITS005 reports);
:func:`thaw` goes back to dynamic. This changes numerics: verification uses ``RTOL_BY_MODE``
(relative to the largest reference logit), looser than the exact patches'; ``patch.error`` is the
measured error. Verification runs every call through the quantized path (``min_rows`` 0); the
table's ``min_rows`` applies from then on. The calibrators are reset after verification.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from ._core import Patch, PatchRefused, UndoStack, apply_verified, model_device

NAME = "act_calib"
DEFAULT_TARGETS = r"(^|\.)(self_attn\.(q|k|v|o)_proj|mlp\.(gate|up|down)_proj)$"
MLP_TARGETS = r"(^|\.)mlp\.[^.]+$"
# max |patched - unpatched| / max |unpatched| over the probe logits, per mode (any model dtype).
# dequant: int8 per-token activations only (~7 bits per row, ≈0.4 % of a row's absmax per element);
# int8: W8A8, per-channel int8 weights on top; fp8-e4m3 keeps 3 mantissa bits (≈6 % per element).
RTOL_BY_MODE = {"dequant": 5e-2, "int8": 1e-1, "fp8": 1.5e-1}
RTOL = {dt: RTOL_BY_MODE["dequant"] for dt in (torch.float32, torch.float16, torch.bfloat16)}
MODES = ("auto", "fp8", "int8", "dequant")
GROUPS = ({"q_proj", "k_proj", "v_proj"}, {"gate_proj", "up_proj"})
DISPATCH_FILE = Path(__file__).with_name("act_calib_dispatch.json")
# used when the table file is absent; the committed file holds the H200 measurements
_DEFAULT_DISPATCH = {"int8": {"backend": "int_mm", "min_rows": 64},
                     "fp8": {"backend": "scaled_mm", "min_rows": 64}}
_FLUSH_EVERY = 1024


def load_dispatch(path: Path = DISPATCH_FILE) -> dict:
    table = {k: dict(v) for k, v in _DEFAULT_DISPATCH.items()}
    if path.exists():
        for mode, row in json.loads(path.read_text()).get("modes", {}).items():
            table.setdefault(mode, {}).update({k: row[k] for k in ("backend", "min_rows") if k in row})
    return table


def _fp8_capable(device: torch.device) -> bool:
    return (device.type == "cuda" and hasattr(torch, "_scaled_mm")
            and hasattr(torch, "float8_e4m3fn") and torch.cuda.get_device_capability(device) >= (8, 9))


def resolve_mode(mode: str, device: torch.device) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode != "auto":
        return mode
    if _fp8_capable(device):
        return "fp8"
    return "int8" if device.type == "cuda" else "dequant"


def _targets(model, pattern: str) -> list[tuple[str, nn.Linear]]:
    rx = re.compile(pattern)
    return [(n, m) for n, m in model.named_modules() if type(m) is nn.Linear and rx.search(n)]


def check(model, *, targets: str = DEFAULT_TARGETS, mode: str = "auto", backend: str | None = None,
          min_rows: int | None = None, fuse_norm: bool = True) -> None:
    if model.training:
        raise PatchRefused(NAME, "model is in training mode: the quantized forward has no backward")
    if not _targets(model, targets):
        raise PatchRefused(NAME, f"no nn.Linear module name matches {targets!r}")
    dev = model_device(model)
    resolved = resolve_mode(mode, dev)
    if dev.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise PatchRefused(NAME, "the model is on the CPU: Triton kernels run there only with "
                                 "TRITON_INTERPRET=1 (tests)")
    if resolved == "fp8" and dev.type == "cuda" and not _fp8_capable(dev):
        raise PatchRefused(NAME, f"mode 'fp8' needs torch._scaled_mm on a GPU with compute "
                                 f"capability >= 8.9; the model is on {dev}")
    if backend not in (None, "triton", "int_mm", "scaled_mm"):
        raise ValueError(f"backend must be triton, int_mm or scaled_mm, got {backend!r}")


class LazyCalibrator:
    """A ``RuntimeCalibrator`` fed one 0-d batch absmax per call, folded in when read.

    ``note(scales)`` costs one reduction over the row scales (absmax = max scale · QMAX, the rule
    of act_quant's kernels); the pending values are folded into the wrapped calibrator, in order,
    by ``flush()`` (automatically every 1024 notes and before every read), so the hot path neither
    synchronizes nor launches the calibrator's own eight small kernels per call."""

    def __init__(self, qmax: float):
        from sits_doctor.kernels.act_quant import RuntimeCalibrator

        self.cal = RuntimeCalibrator()
        self.qmax = qmax
        self._pending: list[torch.Tensor] = []

    def note(self, scales: torch.Tensor) -> None:
        self._pending.append(scales.amax())
        if len(self._pending) >= _FLUSH_EVERY:
            self.flush()

    def flush(self) -> "LazyCalibrator":
        if self._pending:
            vals = torch.stack(self._pending).float() * self.qmax
            self._pending = []
            for v in vals:
                self.cal.observe(v)
        return self

    def __getattr__(self, name):  # batches, running_absmax, max_seen, outliers, scale, ...
        if name in ("cal", "qmax", "_pending"):
            raise AttributeError(name)
        return getattr(self.flush().cal, name)


class Group:
    """Linears reading one input: one weight buffer, one quantization, one product per call."""

    def __init__(self, names, linears, mode, qdtype, dispatch, state):
        self.names = list(names)
        self.linears = list(linears)
        self.mode, self.qdtype, self.state = mode, qdtype, state
        self.backend = dispatch["backend"]
        self.min_rows = int(dispatch["min_rows"])
        w0 = self.linears[0].weight
        self.K = w0.shape[1]
        sizes = [lin.weight.shape[0] for lin in self.linears]
        self.bounds = []
        a = 0
        for n in sizes:
            self.bounds.append((a, a + n))
            a += n
        self.N = a
        if len(self.linears) > 1:
            self.w = torch.cat([lin.weight.detach() for lin in self.linears]).contiguous()
        else:
            self.w = w0.detach()
        biases = [lin.bias for lin in self.linears]
        self.bias = None
        if any(b is not None for b in biases):
            self.bias = torch.cat([b.detach() if b is not None else w0.new_zeros(lin.weight.shape[0])
                                   for b, lin in zip(biases, self.linears)])
        self.wq = self.ws = None
        if mode in ("int8", "fp8"):
            from sits_doctor.kernels.act_quant import QMAX, quantize_per_token

            self.wq, ws = quantize_per_token(self.w, qdtype)  # per output channel
            self.ws = ws.reshape(1, -1).contiguous()
        from sits_doctor.kernels.act_quant import QMAX

        self.cal = LazyCalibrator(QMAX[qdtype])
        self.static: torch.Tensor | None = None
        self._x = None
        self._ver = -1
        self._y = None
        self._served: set = set()
        self.pre = None  # (norm output, its version, q, scales) from a fused RMSNorm + quantization

    # -- weights re-homed into the group buffer (undone by restore_weights) --------------------
    def share_weights(self) -> None:
        if len(self.linears) > 1:
            for lin, (a, b) in zip(self.linears, self.bounds):
                lin.weight.data = self.w[a:b]

    def restore_weights(self) -> None:
        if len(self.linears) > 1:
            for lin in self.linears:
                lin.weight.data = lin.weight.data.clone()

    # -- the product ----------------------------------------------------------------------------
    def quantize(self, x2, x=None):
        """(q, row scales) of the rows ``x2`` of ``x``: those a fused norm already computed for this
        very tensor (``pre``, used once), else the per-token (or static) quantization."""
        from sits_doctor.kernels.act_quant import quantize_per_tensor, quantize_per_token

        pre, self.pre = self.pre, None
        if pre is not None and x is pre[0] and x._version == pre[1] and self.static is None:
            self.cal.note(pre[3])
            self.state["fused_norm"][self.names[0]] += 1
            return pre[2], pre[3]
        if self.static is not None:
            q, s = quantize_per_tensor(x2, self.qdtype, scale=self.static)
            return q, s.expand(x2.shape[0], 1).contiguous()
        q, s = quantize_per_token(x2, self.qdtype)
        self.cal.note(s)
        return q, s

    def gemm(self, q, s, wq, ws, bias, out_dtype):
        from sits_doctor.kernels import quant_gemm as qg

        if self.backend == "triton" or q.device.type != "cuda":
            return qg.w8a8_gemm(q, wq, s, ws, bias, out_dtype)
        if self.mode == "fp8":
            try:
                return qg.scaled_mm_gemm(q, wq, s, ws, bias, out_dtype)
            except RuntimeError:  # a shape cuBLASLt refuses: the Triton kernel
                self.state["fallbacks"]["scaled_mm"] += 1
                return qg.w8a8_gemm(q, wq, s, ws, bias, out_dtype)
        if q.shape[0] > 16 and q.shape[1] % 8 == 0 and wq.shape[0] % 8 == 0:
            return qg.int_mm_gemm(q, wq, s, ws, bias, out_dtype)
        self.state["fallbacks"]["int_mm"] += 1
        return qg.w8a8_gemm(q, wq, s, ws, bias, out_dtype)

    def compute(self, x):
        x2 = x.reshape(-1, self.K)
        M = x2.shape[0]
        if self.mode == "dequant":
            from sits_doctor.kernels.act_quant import quantize_per_token

            q, s = quantize_per_token(x2, torch.int8)
            self.cal.note(s)
            y = F.linear((q.float() * s).to(x.dtype), self.w, self.bias)
            self.state["dequant"][self.names[0]] += 1
        elif M < self.min_rows:
            y = F.linear(x2, self.w, self.bias)
            self.state["bf16"][self.names[0]] += 1
        else:
            q, s = self.quantize(x2, x)
            y = self.gemm(q, s, self.wq, self.ws, self.bias, x.dtype)
            self.state["fast"][self.names[0]] += 1
        return y.reshape(*x.shape[:-1], self.N)

    def run(self, i: int, x):
        lin = self.linears[i]
        if lin.training or (torch.is_grad_enabled() and x.requires_grad):
            # quantization has no gradient: training and attribution get the plain Linear
            self.state["fallbacks"]["autograd"] += 1
            return F.linear(x, lin.weight, lin.bias)
        if len(self.linears) == 1:
            return self.compute(x)
        a, b = self.bounds[i]
        if self._x is x and self._ver == x._version and i not in self._served:
            y = self._y
            self._served.add(i)
            if len(self._served) == len(self.linears):
                self._x = self._y = None
            return y[..., a:b]
        y = self.compute(x)
        self._x, self._ver, self._y, self._served = x, x._version, y, {i}
        return y[..., a:b]


def _is_silu(act) -> bool:
    try:
        t = torch.linspace(-4, 4, 9)
        return torch.allclose(act(t), F.silu(t))
    except Exception:  # noqa: BLE001 - anything that is not an elementwise function of one tensor
        return False


def _mlp_forward(mlp, gu: Group, down: Group):
    """gate|up product → silu·mul quantized per token in one pass → down product."""
    from sits_doctor.kernels import quant_gemm as qg

    n = gu.bounds[0][1]

    def forward(x):
        if mlp.training or (torch.is_grad_enabled() and x.requires_grad):
            gu.state["fallbacks"]["autograd"] += 1
            return type(mlp).forward(mlp, x)
        x2 = x.reshape(-1, gu.K)
        M = x2.shape[0]
        if M < gu.min_rows:
            y = F.linear(x2, gu.w, gu.bias)
            h = mlp.act_fn(y[:, :n]) * y[:, n:]
            gu.state["bf16"][gu.names[0]] += 1
            return F.linear(h, down.w, down.bias).reshape(*x.shape[:-1], -1)
        q, s = gu.quantize(x2, x)
        st = down.static
        if gu.backend == "int_mm" and gu.mode == "int8" and x.device.type == "cuda" and M > 16:
            # the int32 product goes straight into the epilogue: dequantized on load
            hq, hs = qg.silu_mul_quant(torch._int_mm(q, gu.wq.t()), n, gu.qdtype, sa=s, sw=gu.ws, static_scale=st)
        else:
            y = gu.gemm(q, s, gu.wq, gu.ws, gu.bias, x.dtype)
            hq, hs = qg.silu_mul_quant(y, n, gu.qdtype, static_scale=st)
        if st is None:  # with a static scale hs is that scale on every row
            down.cal.note(hs)
        out = down.gemm(hq, hs, down.wq, down.ws, down.bias, x.dtype)
        gu.state["fast"][gu.names[0]] += 1
        return out.reshape(*x.shape[:-1], -1)

    return forward


def _build_groups(model, layers, mode, qdtype, dispatch, state):
    by_parent: dict = {}
    for name, lin in layers:
        parent, _, leaf = name.rpartition(".")
        by_parent.setdefault(parent, []).append((leaf, name, lin))
    groups, mlps = [], []
    modules = dict(model.named_modules())
    for parent, items in by_parent.items():
        leaves = {leaf: (name, lin) for leaf, name, lin in items}
        used = set()
        for members in GROUPS:
            if members <= leaves.keys():
                order = sorted(members, key=lambda leaf: [x[0] for x in items].index(leaf))
                ls = [leaves[leaf][1] for leaf in order]
                if len({(lin.in_features, lin.weight.dtype, lin.weight.device) for lin in ls}) == 1:
                    groups.append(Group([leaves[leaf][0] for leaf in order], ls, mode, qdtype, dispatch, state))
                    used |= members
        for leaf, name, lin in items:
            if leaf not in used:
                groups.append(Group([name], [lin], mode, qdtype, dispatch, state))
        mlp = modules.get(parent)
        if (mode in ("int8", "fp8") and {"gate_proj", "up_proj", "down_proj"} <= leaves.keys()
                and "up_proj" in used and _is_silu(getattr(mlp, "act_fn", None))):
            gu = next(g for g in groups if leaves["gate_proj"][1] in g.linears)
            down = next(g for g in groups if g.linears == [leaves["down_proj"][1]])
            if gu.bias is None:
                mlps.append((parent, mlp, gu, down))
    return groups, mlps


FUSE_NORM_FAMILIES = frozenset({"llama", "mistral", "qwen2", "qwen3"})


def _norm_eps(norm):
    for attr in ("variance_epsilon", "eps"):
        v = getattr(norm, attr, None)
        if isinstance(v, float):
            return v
    return None


def _is_llama_rms_norm(norm, K: int) -> bool:
    """``norm`` is an RMSNorm over K with a weight, computing transformers' Llama formula (checked
    on a random input, so a ``1 + weight`` or a bias is told apart)."""
    w, eps = getattr(norm, "weight", None), _norm_eps(norm)
    if not isinstance(w, torch.Tensor) or w.dim() != 1 or w.shape[0] != K or eps is None:
        return False
    from sits_doctor.kernels.norm_quant import llama_rms_norm

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, K, generator=g).to(device=w.device, dtype=w.dtype) * 2
    with torch.no_grad():
        try:
            got = norm(x)
        except Exception:  # noqa: BLE001 - a module that cannot take [rows, K] is not one
            return False
        want = llama_rms_norm(x, w, eps)
    return isinstance(got, torch.Tensor) and got.shape == want.shape and torch.allclose(
        got.float(), want.float(), rtol=1e-2, atol=1e-5)


def _norm_pairs(model, groups, mlps) -> list[tuple[str, nn.Module, "Group"]]:
    """(norm name, RMSNorm, the group reading its output) for each Llama-style decoder layer:
    input_layernorm → the q|k|v group, post_attention_layernorm → the gate|up group."""
    if getattr(model.config, "model_type", None) not in FUSE_NORM_FAMILIES:
        return []
    by_linear = {id(lin): g for g in groups for lin in g.linears}
    out = []
    for name, layer in model.named_modules():
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        for norm_attr, owner, leaves in (("input_layernorm", attn, ("q_proj", "k_proj", "v_proj")),
                                         ("post_attention_layernorm", mlp, ("gate_proj", "up_proj"))):
            norm = getattr(layer, norm_attr, None)
            lins = [getattr(owner, leaf, None) for leaf in leaves] if owner is not None else []
            if norm is None or not lins or any(lin is None for lin in lins):
                continue
            g = by_linear.get(id(lins[0]))
            if g is None or len(g.linears) != len(lins) or any(by_linear.get(id(lin)) is not g for lin in lins):
                continue
            if _is_llama_rms_norm(norm, g.K):
                out.append((f"{name}.{norm_attr}" if name else norm_attr, norm, g))
    return out


def _norm_forward(norm, g: "Group"):
    """The RMSNorm's forward with the group's quantization fused in (see the module docstring)."""
    from sits_doctor.kernels.norm_quant import rms_norm_quant

    eps = _norm_eps(norm)

    def forward(x):
        if (g.static is not None or norm.training or x.shape[-1] != g.K
                or (torch.is_grad_enabled() and x.requires_grad)
                or x.numel() // g.K < g.min_rows or x.numel() == 0):
            return type(norm).forward(norm, x)
        y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        q, s = rms_norm_quant(x, norm.weight, eps, g.qdtype, y_out=y)
        g.pre = (y, y._version, q.reshape(-1, g.K), s.reshape(-1, 1))
        return y

    return forward


def install(model, *, targets: str = DEFAULT_TARGETS, mode: str = "auto", backend: str | None = None,
            min_rows: int | None = None, fuse_norm: bool = True):
    dev = model_device(model)
    resolved = resolve_mode(mode, dev)
    qdtype = torch.float8_e4m3fn if resolved == "fp8" else torch.int8
    table = load_dispatch()
    dispatch = dict(table.get(resolved, {"backend": "triton", "min_rows": 0}))
    if dev.type != "cuda":  # the CPU interpreter: the Triton kernels, every row count
        dispatch = {"backend": "triton", "min_rows": 0}
    if backend is not None:
        dispatch["backend"] = backend
    if min_rows is not None:
        dispatch["min_rows"] = int(min_rows)
    layers = _targets(model, targets)
    state = {"fast": Counter(), "bf16": Counter(), "dequant": Counter(), "fallbacks": Counter(),
             "fused_norm": Counter()}
    undo = UndoStack()
    try:
        groups, mlps = _build_groups(model, layers, resolved, qdtype, dispatch, state)
        for g in groups:
            g.share_weights()
            undo.push(g.restore_weights)
            for i, lin in enumerate(g.linears):
                lin.__dict__["forward"] = (lambda x, g=g, i=i: g.run(i, x))
                undo.push(lambda lin=lin: lin.__dict__.pop("forward", None))
        for _, mlp, gu, down in mlps:
            mlp.__dict__["forward"] = _mlp_forward(mlp, gu, down)
            undo.push(lambda mlp=mlp: mlp.__dict__.pop("forward", None))
        norms = _norm_pairs(model, groups, mlps) if fuse_norm and resolved in ("int8", "fp8") else []
        for _, norm, g in norms:
            norm.__dict__["forward"] = _norm_forward(norm, g)
            undo.push(lambda norm=norm: norm.__dict__.pop("forward", None))
        for g in groups:  # verification checks the quantized path at every row count
            g.min_rows = 0
    except BaseException:
        undo()
        raise
    calibrators = {name: g.cal for g in groups for name in g.names}
    info = {"mode": resolved, "layers": [n for n, _ in layers], "calibrators": calibrators,
            "groups": [g.names for g in groups], "fused_mlps": [p for p, *_ in mlps],
            "fused_norms": [n for n, *_ in norms],
            "dispatch": dispatch, "scales": "dynamic", "fast_calls": state["fast"],
            "bf16_calls": state["bf16"], "fallbacks": state["fallbacks"], "_state": state,
            "_groups": groups}
    return undo, info


def _reset(patch: Patch) -> None:
    from sits_doctor.kernels.act_quant import QMAX

    for g in patch.info["_groups"]:
        g.cal = LazyCalibrator(QMAX[g.qdtype])
        g.min_rows = int(patch.info["dispatch"]["min_rows"])
        g.pre = None
    patch.info["calibrators"] = {name: g.cal for g in patch.info["_groups"] for name in g.names}
    for c in patch.info["_state"].values():
        c.clear()


def reset_counts(patch: Patch) -> None:
    """Zero the call counters and the calibrators (the probes of patches applied after this one
    ran through it)."""
    _reset(patch)


def fallbacks(patch: Patch) -> dict[str, int]:
    """Calls that left the quantized path, per reason, since applied: ``autograd`` (training or
    inputs needing gradients: the plain Linear), ``int_mm`` / ``scaled_mm`` (a shape that backend
    refuses: the Triton W8A8 kernel instead)."""
    return dict(sorted(patch.info["fallbacks"].items()))


def freeze_static(patch: Patch) -> dict:
    """Quantize with per-tensor static scales from now on: each group's calibrated running absmax
    / QMAX (``RuntimeCalibrator.scale``), the deployment SITS005 describes. Returns {group: scale}."""
    if patch.info["mode"] not in ("int8", "fp8"):
        raise ValueError("static scales apply to the int8 and fp8 modes")
    out = {}
    for g in patch.info["_groups"]:
        if g.cal.batches == 0:
            raise RuntimeError(f"{g.names[0]}: no calibration batch observed; run the model first")
        g.static = g.cal.scale(g.qdtype).reshape(1).contiguous()
        out[g.names[0]] = float(g.static)
    patch.info["scales"] = "static"
    return out


def thaw(patch: Patch) -> None:
    """Back to dynamic per-token scales."""
    for g in patch.info["_groups"]:
        g.static = None
    patch.info["scales"] = "dynamic"


def summary(patch: Patch, dtype=torch.int8) -> list[dict]:
    """Per wrapped layer: batches seen, running absmax, max seen, outlier batches, static scale."""
    rows = []
    for name, cal in patch.info["calibrators"].items():
        cal.flush()
        row = {"layer": name, "batches": cal.batches, "outliers": cal.outliers}
        if cal.running_absmax is not None:
            row.update(running_absmax=float(cal.running_absmax), max_seen=float(cal.max_seen),
                       static_scale=float(cal.scale(dtype)))
        rows.append(row)
    return rows


def apply(model, *, targets: str = DEFAULT_TARGETS, mode: str = "auto", backend: str | None = None,
          min_rows: int | None = None, fuse_norm: bool = True, **kw) -> Patch:
    """Wrap the target Linears; verified on a probe batch with the looser act_calib tolerance."""
    tol = RTOL_BY_MODE[resolve_mode(mode, model_device(model))]
    table = {dt: tol for dt in (torch.float32, torch.float16, torch.bfloat16)}
    return apply_verified(model, NAME, check, install, rtol_table=table, after_verify=_reset,
                          targets=targets, mode=mode, backend=backend, min_rows=min_rows,
                          fuse_norm=fuse_norm, **kw)
