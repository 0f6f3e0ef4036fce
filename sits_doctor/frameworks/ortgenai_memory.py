"""ONNX Runtime GenAI's KV cache, as it allocates it: with ``past_present_share_buffer`` the
whole ``max_length`` buffer at Generator creation (src/models/kv_cache.cpp), else step by step.
The one home of the genai_config.json keys that size it."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from sits_doctor.frameworks.ortgenai_precision import (KV_QUANT_OPTION, Device, Precision, device, io_bytes,
                                                      precision, precision_from_size, weight_bytes)
from sits_doctor.memory import GIB


class Preallocation(NamedTuple):
    """ORT GenAI's KV buffer: allocated whole, for ``max_length`` tokens, when the Generator is made.
    Sizes are (low, high) in bytes: equal when the precision is read, apart when it is not."""

    kv_bytes: tuple[float, float] | None  # None: the config does not preallocate (or its shape is unknown)
    weights_bytes: tuple[float, float] | None  # the decoder's .onnx (+ external data) files, or an estimate
    max_length: int | None
    per_token: tuple[float, float] | None  # bytes of one more token of max_length
    device: Device
    precision: Precision
    weights_measured: bool  # the weights are the files beside the config, not an estimate
    steps: tuple[str, ...]
    assumptions: tuple[str, ...]


def predict_ortgenai(plan) -> Preallocation:
    """``past_present_share_buffer: true`` makes ORT GenAI allocate
    ``2 · layers · batch·beams · kv_heads · max_length · head_size · dtype`` bytes up front
    (src/models/kv_cache.cpp; https://onnxruntime.ai/docs/genai/howto/past-present-share-buffer.html,
    whose formula leaves out the 2 · layers · dtype factors)."""
    from sits_doctor.frameworks.ortgenai import PROVIDER_OPTIONS, SHARE_BUFFER

    def val(key, default=None):
        s = plan.settings.get(key)
        return s.value if s is not None and not s.templated and s.value is not None else default

    steps, assumptions = [], []
    serving = plan.facts.serving if plan.facts is not None else None
    length = serving.max_model_len.value if serving is not None and serving.max_model_len is not None else None
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
    data = plan.doc.data if plan.doc is not None else None
    providers = _at(data, PROVIDER_OPTIONS)
    dev = device(providers, ".".join(PROVIDER_OPTIONS))
    filename = val("model.decoder.filename")
    folder = Path(plan.file).parent
    names = [(str(filename), "the decoder file")] if isinstance(filename, str) and filename else []
    names += [(p.name, "the folder") for p in (folder.resolve(), folder.resolve().parent) if p.name]
    prec = precision(names)
    weights_file = _onnx_weights(plan, filename)
    params = 12 * layers * hidden * hidden + (_pos_int(val("model.vocab_size")) or 0) * hidden if layers and hidden else None
    if prec.name is None and weights_file is not None and params:
        prec = precision_from_size(weights_file, params, "the decoder's ONNX files")
    io = io_bytes(prec, dev)  # the ONNX inputs' and outputs' type: the embeddings' too
    quant = _kv_quant_bits(providers)
    if quant is not None:
        kv_bytes = (quant / 8, quant / 8)
        assumptions.append(f"KV dtype: {quant}-bit (provider option {KV_QUANT_OPTION} \"{quant}\")")
    else:
        kv_bytes = io
        assumptions.append(f"KV dtype: {_bytes_text(io)} per element (the ONNX past inputs' type; precision: {prec.source}; "
                           f"device: {dev.source})")
    measured = weights_file is not None
    if measured:
        weights = (weights_file, weights_file)
        steps.append(f"weights: {weights_file / GIB:.2f} GiB (the decoder's ONNX files beside the config)")
    elif layers and hidden:
        vocab = _pos_int(val("model.vocab_size")) or 0
        per = weight_bytes(prec, dev)
        layer_params, embed_params = 12 * layers * hidden * hidden, vocab * hidden
        weights = tuple(layer_params * p + embed_params * e for p, e in zip(per, io))
        steps.append(f"weights ≈ {_range_gib(weights)} GiB = 12 · {layers} layers · {hidden}² parameters · "
                     f"{_bytes_text(per)} + {vocab} vocab · {hidden} embeddings · {_bytes_text(io)}")
        assumptions.append("weights estimated from hidden_size and num_hidden_layers (the ONNX files are not beside the "
                           f"config); their precision: {prec.source}")
    else:
        weights = None
    if None in (layers, kv, head, length) or not isinstance(length, int):
        return Preallocation(None, weights, None, None, dev, prec, measured, tuple(steps), tuple(assumptions + [
            "the decoder's shape or max_length is not stated"]))
    per_token = tuple(2 * layers * batch * beams * kv * head * b for b in kv_bytes)
    if not share or beams > 1:
        why = "past_present_share_buffer is not true" if not share else "num_beams > 1 turns the shared buffer off"
        steps.append(f"no preallocation: {why}; the KV cache grows (and is copied) step by step")
        return Preallocation(None, weights, length, per_token, dev, prec, measured, tuple(steps), tuple(assumptions))
    total = (per_token[0] * length, per_token[1] * length)
    steps.append(f"KV preallocated = 2 · {layers} layers · {batch * beams} sequence(s) · {kv} KV heads · "
                 f"max_length {length} · head_size {head} · {_bytes_text(kv_bytes)} = {_range_gib(total)} GiB")
    return Preallocation(total, weights, length, per_token, dev, prec, measured, tuple(steps), tuple(assumptions))


def _at(data, path: tuple[str, ...]):
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def _kv_quant_bits(providers) -> int | None:
    """The KV cache's bits from ``kvCacheQuantizationBits`` ("4" / "8") of a listed provider."""
    for entry in providers if isinstance(providers, list) else ():
        for options in entry.values() if isinstance(entry, dict) else ():
            bits = options.get(KV_QUANT_OPTION) if isinstance(options, dict) else None
            if bits in ("4", "8"):
                return int(bits)
    return None


def _bytes_text(pair: tuple[float, float]) -> str:
    low, high = pair
    return f"{low:.3g} B" if low == high else f"{low:.3g}–{high:.3g} B"


def _range_gib(pair: tuple[float, float]) -> str:
    low, high = pair
    return f"{low / GIB:.2f}" if low == high else f"{low / GIB:.2f}–{high / GIB:.2f}"


def _pos_int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _onnx_weights(plan, filename) -> float | None:
    """Bytes of the decoder's ONNX file and its external-data file(s) when they sit beside the config."""
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
