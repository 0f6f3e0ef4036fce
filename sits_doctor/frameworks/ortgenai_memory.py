"""ONNX Runtime GenAI's KV cache, as it allocates it: with ``past_present_share_buffer`` the
whole ``max_length`` buffer at Generator creation (src/models/kv_cache.cpp), else step by step.
The one home of the genai_config.json keys that size it."""

from __future__ import annotations

from typing import NamedTuple

from sits_doctor.memory import GIB


class Preallocation(NamedTuple):
    """ORT GenAI's KV buffer: allocated whole, for ``max_length`` tokens, when the Generator is made."""

    kv_bytes: float | None  # None: the config does not preallocate (or its shape is unknown)
    weights_bytes: float | None  # the decoder's .onnx (+ external data) files beside the config
    max_length: int | None
    per_token: float | None  # bytes of one more token of max_length
    steps: tuple[str, ...]
    assumptions: tuple[str, ...]


def predict_ortgenai(plan) -> Preallocation:
    """``past_present_share_buffer: true`` makes ORT GenAI allocate
    ``2 · layers · batch·beams · kv_heads · max_length · head_size · dtype`` bytes up front
    (src/models/kv_cache.cpp; https://onnxruntime.ai/docs/genai/howto/past-present-share-buffer.html,
    whose formula leaves out the 2 · layers · dtype factors)."""
    def val(key, default=None):
        s = plan.settings.get(key)
        return s.value if s is not None and not s.templated and s.value is not None else default

    steps, assumptions = [], []
    serving = plan.facts.serving if plan.facts is not None else None
    length = serving.max_model_len.value if serving is not None and serving.max_model_len is not None else None
    from sits_doctor.frameworks.ortgenai import SHARE_BUFFER

    share = val(SHARE_BUFFER, False) is True
    beams = _pos_int(val("search.num_beams", 1)) or 1
    batch = _pos_int(val("search.batch_size", 1)) or 1
    layers = _pos_int(val("model.decoder.num_hidden_layers"))
    heads = _pos_int(val("model.decoder.num_attention_heads"))
    kv = _pos_int(val("model.decoder.num_key_value_heads")) or heads
    head = _pos_int(val("model.decoder.head_size"))
    hidden = _pos_int(val("model.decoder.hidden_size"))
    if head is None and hidden and heads:
        head = hidden // heads
    providers = [k for k in plan.settings if ".provider_options." in k and k.count(".") == 5]
    cpu_only = not any(p.split(".")[-1] in ("cuda", "dml", "webgpu", "nvtensorrtrtx", "trt-rtx") for p in providers)
    dtype = 4 if cpu_only else 2
    assumptions.append("KV dtype taken as " + ("fp32 (no GPU execution provider: a CPU export)" if cpu_only
                                                else "fp16 (the model builder's GPU exports)"))
    filename = val("model.decoder.filename")
    weights = _onnx_weights(plan, filename)
    if weights is not None:
        steps.append(f"weights: {weights / GIB:.2f} GiB (the decoder's ONNX files beside the config)")
    elif layers and hidden:
        vocab = _pos_int(val("model.vocab_size")) or 0
        name = str(filename or "").lower()
        per = 0.5 + 1 / 16 if "int4" in name else 1.0 + 1 / 64 if "int8" in name else dtype
        params = 12 * layers * hidden * hidden + vocab * hidden
        weights = params * per
        steps.append(f"weights ≈ {weights / GIB:.2f} GiB = (12 · {layers} layers · {hidden}² + {vocab} vocab · {hidden}) "
                     f"parameters · {per:.2f} B")
        assumptions.append("weights estimated from hidden_size and num_hidden_layers (the ONNX files are not beside the "
                           "config); bytes per parameter from the file name (int4 / int8) or the KV dtype")
    if None in (layers, kv, head, length) or not isinstance(length, int):
        return Preallocation(None, weights, None, None, tuple(steps), tuple(assumptions + [
            "the decoder's shape or max_length is not stated"]))
    per_token = 2 * layers * batch * beams * kv * head * dtype
    if not share or beams > 1:
        why = "past_present_share_buffer is not true" if not share else "num_beams > 1 turns the shared buffer off"
        steps.append(f"no preallocation: {why}; the KV cache grows (and is copied) step by step")
        return Preallocation(None, weights, length, per_token, tuple(steps), tuple(assumptions))
    total = per_token * length
    steps.append(f"KV preallocated = 2 · {layers} layers · {batch * beams} sequence(s) · {kv} KV heads · "
                 f"max_length {length} · head_size {head} · {dtype} B = {total / GIB:.2f} GiB")
    return Preallocation(total, weights, length, per_token, tuple(steps), tuple(assumptions))


def _pos_int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _onnx_weights(plan, filename) -> float | None:
    """Bytes of the decoder's ONNX file and its external-data file(s) when they sit beside the config."""
    from pathlib import Path

    if not isinstance(filename, str) or not filename:
        return None
    folder = Path(plan.file).parent
    try:
        model = folder / filename
        if not model.is_file():
            return None
        total = model.stat().st_size
        for extra in folder.glob(Path(filename).name + "*.data"):
            total += extra.stat().st_size
        data = folder / (Path(filename).name + ".data")
        if not data.is_file() and (folder / (Path(filename).stem + ".onnx_data")).is_file():
            total += (folder / (Path(filename).stem + ".onnx_data")).stat().st_size
        return float(total)
    except OSError:
        return None
