"""act_calib: quantize the input activations of ``nn.Linear`` layers per token, and calibrate them.

Each target Linear (default: the MLP projections, ``*.mlp.*`` Linears) gets an instance-level
``forward`` (an entry in its ``__dict__``; the module tree, parameters and state_dict are not
touched; revert deletes the entry) that, per call:

  1. ``RuntimeCalibrator.observe(x)`` — running absmax with an outlier guard, one per layer
     (``patch.info["calibrators"][qualified_name]``), for static-scale deployments (SITS005);
  2. ``quantize_per_token(x, dtype)`` (Triton kernel) → int8 / fp8-e4m3 values and fp32 row scales;
  3. the product, by ``mode``:
       * ``"fp8"``  — ``torch._scaled_mm`` with per-output-channel fp8 weights and row-wise scales
         (CUDA, compute capability ≥ 8.9);
       * ``"int8"`` — ``torch._int_mm`` with per-output-channel int8 weights (W8A8), rescaled in fp32;
       * ``"dequant"`` — ``q * scale`` back to the activation dtype, then the original fp weight
         (measures the activation quantization alone; the CPU default);
       * ``"auto"`` — fp8 where the GPU has it, else int8 on CUDA, else dequant.
     A shape the fast path refuses (``_int_mm`` on CUDA wants M > 16 and K, N multiples of 8;
     ``_scaled_mm`` multiples of 16) takes the dequant path for that call (``info["fallbacks"]``).

This changes numerics: verification uses ``RTOL_BY_MODE`` below (relative to the largest reference
logit), looser than the exact patches', and ``patch.error`` reports the measured error — it is a
measurement, not a promise of equality. The calibrators are reset after verification, so they
hold only the traffic that follows.
"""

from __future__ import annotations

import os
import re
from collections import Counter

import torch
from torch import nn
from torch.nn import functional as F

from ._core import Patch, PatchRefused, UndoStack, apply_verified, model_device

NAME = "act_calib"
DEFAULT_TARGETS = r"(^|\.)mlp\.[^.]+$"
# max |patched - unpatched| / max |unpatched| over the probe logits, per mode (any model dtype).
# dequant: int8 per-token activations only (~7 bits per row, ≈0.4 % of a row's absmax per element);
# int8: W8A8, per-channel int8 weights on top; fp8-e4m3 keeps 3 mantissa bits (≈6 % per element).
# Measured on random-init Llamas (2 layers, CPU fp32 and H200 bf16/fp16): dequant 4e-3,
# int8 4e-3..3e-2, fp8 1e-2..4.5e-2.
RTOL_BY_MODE = {"dequant": 5e-2, "int8": 1e-1, "fp8": 1.5e-1}
RTOL = {dt: RTOL_BY_MODE["dequant"] for dt in (torch.float32, torch.float16, torch.bfloat16)}
MODES = ("auto", "fp8", "int8", "dequant")


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


def check(model, *, targets: str = DEFAULT_TARGETS, mode: str = "auto") -> None:
    if model.training:
        raise PatchRefused(NAME, "model is in training mode: the quantized forward has no backward")
    if not _targets(model, targets):
        raise PatchRefused(NAME, f"no nn.Linear module name matches {targets!r}")
    dev = model_device(model)
    resolved = resolve_mode(mode, dev)
    if dev.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise PatchRefused(NAME, "the model is on the CPU: Triton kernels run there only with "
                                 "TRITON_INTERPRET=1 (tests)")
    if resolved == "fp8" and not _fp8_capable(dev):
        raise PatchRefused(NAME, f"mode 'fp8' needs torch._scaled_mm on a GPU with compute "
                                 f"capability >= 8.9; the model is on {dev}")


def _fits(mode: str, M: int, K: int, N: int, device: torch.device) -> bool:
    if mode == "int8":
        return device.type != "cuda" or (M > 16 and K % 8 == 0 and N % 8 == 0)
    if mode == "fp8":
        return M % 16 == 0 and K % 16 == 0 and N % 16 == 0
    return True


def _make_forward(lin: nn.Linear, name: str, mode: str, state: dict):
    from sits_doctor.kernels.act_quant import quantize_per_token

    qdtype = torch.float8_e4m3fn if mode == "fp8" else torch.int8
    w = lin.weight.detach()
    wq = ws = None
    if mode in ("int8", "fp8"):
        wq, ws = quantize_per_token(w, qdtype)  # per output channel: W is [N, K], rows = channels
        ws = ws.reshape(1, -1)  # [1, N]
    bias = lin.bias

    def forward(x):
        if lin.training or (torch.is_grad_enabled() and x.requires_grad):
            # quantization has no gradient: training and attribution get the plain Linear
            state["fallbacks"][name] += 1
            return F.linear(x, lin.weight, bias)
        state["calibrators"][name].observe(x)
        q, s = quantize_per_token(x, qdtype)  # q like x, s [..., 1] fp32
        K, N = x.shape[-1], w.shape[0]
        q2, s2 = q.reshape(-1, K), s.reshape(-1, 1)
        if mode != "dequant" and _fits(mode, q2.shape[0], K, N, x.device):
            if mode == "int8":
                y = torch._int_mm(q2, wq.t()).float() * s2 * ws
                y = y.to(x.dtype)
                if bias is not None:
                    y = y + bias
            else:
                y = torch._scaled_mm(q2, wq.t(), scale_a=s2, scale_b=ws, bias=bias,
                                     out_dtype=x.dtype)
            state["fast"][name] += 1
            return y.reshape(*x.shape[:-1], N)
        if mode != "dequant":
            state["fallbacks"][name] += 1
        xd = (q.float() * s).to(x.dtype)
        return F.linear(xd, lin.weight, bias)

    return forward


def install(model, *, targets: str = DEFAULT_TARGETS, mode: str = "auto"):
    from sits_doctor.kernels.act_quant import RuntimeCalibrator

    resolved = resolve_mode(mode, model_device(model))
    layers = _targets(model, targets)
    state = {"calibrators": {n: RuntimeCalibrator() for n, _ in layers},
             "fast": Counter(), "fallbacks": Counter()}
    undo = UndoStack()
    try:
        for name, lin in layers:
            lin.__dict__["forward"] = _make_forward(lin, name, resolved, state)
            undo.push(lambda lin=lin: lin.__dict__.pop("forward", None))
    except BaseException:
        undo()
        raise
    info = {"mode": resolved, "layers": [n for n, _ in layers], "calibrators": state["calibrators"],
            "fast_calls": state["fast"], "fallbacks": state["fallbacks"], "_state": state}
    return undo, info


def _reset(patch: Patch) -> None:
    from sits_doctor.kernels.act_quant import RuntimeCalibrator

    state = patch.info["_state"]
    for n in state["calibrators"]:
        state["calibrators"][n] = RuntimeCalibrator()
    state["fast"].clear()
    state["fallbacks"].clear()


def summary(patch: Patch, dtype=torch.int8) -> list[dict]:
    """Per wrapped layer: batches seen, running absmax, max seen, outlier batches, static scale."""
    rows = []
    for name, cal in patch.info["calibrators"].items():
        row = {"layer": name, "batches": cal.batches, "outliers": cal.outliers}
        if cal.running_absmax is not None:
            row.update(running_absmax=float(cal.running_absmax), max_seen=float(cal.max_seen),
                       static_scale=float(cal.scale(dtype)))
        rows.append(row)
    return rows


def apply(model, *, targets: str = DEFAULT_TARGETS, mode: str = "auto", **kw) -> Patch:
    """Wrap the target Linears; verified on a probe batch with the looser act_calib tolerance."""
    tol = RTOL_BY_MODE[resolve_mode(mode, model_device(model))]
    table = {dt: tol for dt in (torch.float32, torch.float16, torch.bfloat16)}
    return apply_verified(model, NAME, check, install, rtol_table=table, after_verify=_reset,
                          targets=targets, mode=mode, **kw)
