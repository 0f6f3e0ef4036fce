"""Where an ONNX Runtime GenAI model runs and in what precision, read from what its folder says.

- **Device**: the decoder's ``session_options.provider_options``. ORT GenAI appends the providers
  in the order listed (``src/models/model.cpp``); with none, or only ``cpu``, the model runs on the
  CPU and its buffers come from system memory. Names are matched as ORT GenAI normalises them:
  case-insensitively, with or without the ``ExecutionProvider`` suffix.
- **Precision of the weights**: the names microsoft and the model builder give exports
  (``cpu-int4-rtn-block-32``, ``directml-int4-awq-block-128``, ``cuda-fp16``,
  ``phi3-mini-4k-instruct-cpu-int4-rtn-block-32-acc-level-4.onnx``, ``model_q4f16.onnx``): the
  decoder's file name, then the config's folder and the folder above it. ``awq``, ``rtn`` and
  ``gptq`` are 4-bit methods of the builder. Nothing in ``genai_config.json`` itself states it.
- **KV dtype**: the ONNX past inputs' type, which the builder sets from the export
  (``src/python/py/models/builder.py`` ``set_io_dtype``): fp32 exports and CPU int4/int8 exports
  have fp32 inputs, GPU fp16 / int4 exports fp16; the CUDA provider option
  ``kvCacheQuantizationBits`` ("4" / "8", since 0.15.0) quantizes it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

GPU_PROVIDERS = {"cuda": "CUDA", "dml": "DirectML", "webgpu": "WebGPU", "nvtensorrtrtx": "TensorRT-RTX",
                 "trt-rtx": "TensorRT-RTX", "tensorrt": "TensorRT", "rocm": "ROCm", "migraphx": "MIGraphX"}
CPU_PROVIDERS = {"cpu", "xnnpack"}
KV_QUANT_OPTION = "kvCacheQuantizationBits"
SUFFIX = "executionprovider"


class Device(NamedTuple):
    kind: str  # "gpu", "cpu" or "other" (an NPU or a provider whose memory sits-doctor does not know)
    provider: str | None  # the provider's name as written (None: no provider listed)
    source: str  # where that was read


class Precision(NamedTuple):
    name: str | None  # "int4", "int8", "fp16", "bf16", "fp32"; None: nothing says
    block: int | None  # int4 quantization block size, when a name states it
    source: str  # where that was read, or why nothing was


def provider_name(name: str) -> str:
    """A provider name as ORT GenAI compares it: lower case, without ``ExecutionProvider``."""
    low = name.strip().lower()
    return low[: -len(SUFFIX)] if low.endswith(SUFFIX) and len(low) > len(SUFFIX) else low


def device(providers, where: str) -> Device:
    """The device of a ``provider_options`` list (``None``: the key is absent)."""
    if not isinstance(providers, list):
        if providers is None:
            return Device("cpu", None, f"{where} is not set: ORT GenAI runs the model on the CPU")
        return Device("other", None, f"{where} is not a list")
    names = [next(iter(entry)) for entry in providers if isinstance(entry, dict) and len(entry) == 1]
    for name in names:
        if provider_name(name) in GPU_PROVIDERS:
            return Device("gpu", name, f"{where} lists {name} ({GPU_PROVIDERS[provider_name(name)]})")
    others = [n for n in names if provider_name(n) not in CPU_PROVIDERS]
    if others:
        return Device("other", others[0], f"{where} lists {others[0]}, whose memory is not known")
    listed = f"lists only {', '.join(names)}" if names else "is empty"
    return Device("cpu", names[0] if names else None, f"{where} {listed}: ORT GenAI runs the model on the CPU")


_TOKEN = re.compile(r"[a-z0-9]+")
_INT4_METHODS = {"awq", "rtn", "gptq", "q4", "q4f16", "int4"}


def precision(names: list[tuple[str, str]]) -> Precision:
    """The weights' precision from the first of ``(name, where)`` that states one."""
    for name, where in names:
        tokens = _TOKEN.findall(Path(name).name.lower().replace(".onnx", " "))
        block = None
        for i, tok in enumerate(tokens[:-1]):
            if tok == "block" and tokens[i + 1].isdigit():
                block = int(tokens[i + 1])
        found = None
        if _INT4_METHODS & set(tokens):
            found = "int4"
        elif "int8" in tokens or "q8" in tokens:
            found = "int8"
        elif {"fp16", "f16", "float16"} & set(tokens):
            found = "fp16"
        elif {"bf16", "bfloat16"} & set(tokens):
            found = "bf16"
        elif {"fp32", "f32", "float32"} & set(tokens):
            found = "fp32"
        if found is not None:
            return Precision(found, block if found == "int4" else None, f"{found} from {where} {name!r}")
    looked = ", ".join(f"{where} {name!r}" for name, where in names) or "no file or folder name"
    return Precision(None, None, f"nothing in {looked} names int4 / int8 / fp16 / bf16 / fp32")


def io_bytes(prec: Precision, dev: Device) -> tuple[float, float]:
    """Low and high bytes of one input/output element (the KV cache's dtype)."""
    if prec.name == "fp32":
        return 4.0, 4.0
    if prec.name in ("fp16", "bf16"):
        return 2.0, 2.0
    if prec.name in ("int4", "int8") and dev.kind == "cpu":
        return 4.0, 4.0
    if prec.name in ("int4", "int8") and dev.kind == "gpu":
        return 2.0, 2.0
    return 2.0, 4.0


def weight_bytes(prec: Precision, dev: Device) -> tuple[float, float]:
    """Low and high bytes of one quantized-layer parameter: int4 is half a byte plus, per block, a
    scale of the I/O dtype and a 4-bit zero point (MatMulNBits); unknown precision spans int4 … fp32."""
    if prec.name is None:
        return _int4(32, 2.0), 4.0
    if prec.name == "int4":
        low, high = io_bytes(prec, dev)
        block = prec.block or 32
        return _int4(block, low), _int4(block, high)
    if prec.name == "int8":
        return 1.0 + 2.0 / 32, 1.0 + 4.0 / 32
    return io_bytes(prec, dev)


def _int4(block: int, scale: float) -> float:
    return 0.5 + (scale + 0.5) / block


SIZE_CLASSES = ((1.0, "int4"), (1.6, "int8"), (3.0, "fp16"))  # bytes per parameter below which a size is that


def precision_from_size(size: float, params: float, where: str) -> Precision:
    """The precision the ONNX files' size implies for about ``params`` parameters."""
    per = size / params
    name = next((n for limit, n in SIZE_CLASSES if per < limit), "fp32")
    return Precision(name, None, f"{name} from the size of {where} ({size / 2**30:.2f} GiB for about "
                                 f"{params / 1e9:.2f} B parameters: {per:.2f} bytes each)")
