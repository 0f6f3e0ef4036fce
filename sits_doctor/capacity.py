"""Will it fit, and how many requests at once: the capacity prediction of one deployment.

Joins the memory arithmetic (:mod:`sits_doctor.memory`) with a framework's pool model
(:mod:`sits_doctor.frameworks.vllm_memory`, :mod:`sits_doctor.frameworks.trtllm_memory`). The
``capacity`` command, SITS001/SITS007 and the accuracy benchmarks all call :func:`predict_vllm` /
:func:`predict_trtllm`, so what they print is one computation. ORT GenAI's preallocation is in
:mod:`sits_doctor.frameworks.ortgenai_memory`.
"""

from __future__ import annotations

from typing import NamedTuple

from sits_doctor.facts import Serving, field_names, typed
from sits_doctor.frameworks.vllm import MAX_MODEL_LEN as MAX_LEN_KEY  # the JSON report names it as vLLM does
from sits_doctor.memory import GIB


class Prediction(NamedTuple):
    framework: str
    kv_bytes_per_token: float | None
    weights_bytes: float | None
    tokens: tuple[int, int, int] | None  # low, estimate, high (KV-cache tokens per rank)
    max_model_len: int | None
    max_concurrency: float | None  # estimate tokens / max_model_len
    startup_ok: bool | None  # None: cannot tell (missing facts, or the range straddles the need)
    startup_reason: str | None
    steps: tuple[str, ...]
    assumptions: tuple[str, ...]
    missing: tuple[str, ...] = ()
    parts: tuple[tuple[str, float], ...] = ()  # the pool's terms per rank in bytes (vllm_memory.Pool.parts)


def predict_vllm(dims, *, version: str, memory_bytes: float | None, gpu_name: str = "", utilization: float,
                 tp: int = 1, pp: int = 1, kv_dtype: str | None = "auto", max_model_len: int | None = None,
                 max_num_batched_tokens: int | None = None, chunked_prefill: bool | None = None,
                 block_size: int | None = None, cuda_graphs: bool = True, params: int | None = None,
                 params_note: str = "", kv_cache_memory_bytes: float | None = None,
                 max_num_seqs: int | None = None) -> Prediction:
    """The KV pool vLLM ``version`` would size for this model on this GPU, and whether one
    ``max_model_len`` request fits."""
    from sits_doctor import memory
    from sits_doctor.frameworks import vllm_memory

    from sits_doctor.versions import V

    assumptions = []
    hybrid_by_request = V(version) >= V(vllm_memory.HYBRID_TOKENS_BY_CONCURRENCY)
    kv, weights, steps, missing = _sizes(
        memory.kv_bytes_per_token(dims, kv_dtype, tp=tp, pp=pp, sliding_per_token=not hybrid_by_request),
        memory.weights_bytes(dims, params=params, params_note=params_note, mxfp4_padding=vllm_memory.MXFP4_PADDING),
        memory_bytes)
    if missing:
        return Prediction("vllm", kv.value if kv else None, weights.value if weights else None, None, max_model_len,
                          None, None, None, tuple(steps), tuple(assumptions), tuple(missing))
    if max_num_batched_tokens is None:
        max_num_batched_tokens, note = vllm_memory.batched_tokens_default(
            version, memory_bytes, gpu_name, max_model_len, chunked_prefill)
        assumptions.append(f"max_num_batched_tokens {max_num_batched_tokens}: {note}")
    if max_num_seqs is None:
        max_num_seqs, note = vllm_memory.seqs_default(version, memory_bytes, gpu_name)
        assumptions.append(f"max_num_seqs {max_num_seqs}: {note}")
    hidden = int(dims.hidden.value) if dims.hidden is not None else None
    inter = int(dims.intermediate.value) if dims.intermediate is not None else None
    p = vllm_memory.pool(version=version, memory_bytes=memory_bytes, utilization=utilization,
                         weights_bytes=weights.value, kv_bytes_per_token=kv.value,
                         batched_tokens=max_num_batched_tokens, hidden=hidden, intermediate=inter, tp=tp, pp=pp,
                         block_size=block_size, cuda_graphs=cuda_graphs, kv_cache_memory_bytes=kv_cache_memory_bytes,
                         vocab=int(dims.vocab.value) if dims.vocab is not None else None, max_num_seqs=max_num_seqs)
    steps += list(p.steps)
    assumptions += list(p.assumptions)
    ok, reason = (None, None)
    concurrency = None
    if max_model_len:
        need = _hybrid_need(dims, kv_dtype, tp, pp, max_model_len, max_num_batched_tokens, version)
        if need is not None:
            steps.append(need[3])
        ok, reason = vllm_memory.startup_check(
            max_model_len, p, version, **({} if need is None else
                                          {"need_bytes": need[0], "full_bytes_per_token": need[1], "fixed_bytes": need[2]}))
        concurrency = p.estimate / max_model_len
        if need is not None:  # windowed layers hold less than the request: the pool's bytes over one request's
            concurrency = p.estimate * p.kv_bytes_per_token / need[0]
    elif p.high <= 0:  # no room for a single block, whatever the length
        ok, reason = vllm_memory.startup_check(1, p, version)
    return Prediction("vllm", kv.value, weights.value, (p.low, p.estimate, p.high), max_model_len, concurrency, ok,
                      reason, tuple(steps), tuple(assumptions), parts=p.parts)


def _hybrid_need(dims, kv_dtype, tp, pp, length, batched, version):
    """What one request of ``length`` needs on a model mixing full-attention layers with layers
    that hold a bounded window (sliding-window layers, Llama 4's chunked-attention layers), once
    vLLM sizes those by their window: (bytes, full bytes per token, windowed bytes, the step as
    text); None for uniform models and older releases. A sliding layer holds at most window − 1 +
    the tokens of one step (SlidingWindowSpec.max_memory_usage_bytes), a chunked layer the chunk +
    the tokens of one step (ChunkedLocalAttentionSpec.max_memory_usage_bytes, vllm/v1/
    kv_cache_interface.py@v0.10.0), never more than the request."""
    from sits_doctor import memory
    from sits_doctor.frameworks import vllm_memory
    from sits_doctor.versions import V

    if V(version) < V(vllm_memory.SLIDING_CHECKED_BY_WINDOW):
        return None
    full, _ = memory.kv_bytes_per_token(dims, kv_dtype, tp=tp, pp=pp)
    every, _ = memory.kv_bytes_per_token(dims, kv_dtype, tp=tp, pp=pp, sliding_per_token=True)
    if full is None or every is None or every.value <= full.value:
        return None
    types = dims.layer_types.value if dims.layer_types is not None else None
    windows = []  # (layers, tokens held, what)
    sliding = dims.sliding_window.value if dims.sliding_window is not None else None
    chunk = dims.attention_chunk.value if dims.attention_chunk is not None else None
    if isinstance(types, list):
        n_sliding = sum(1 for t in types if t == "sliding_attention")
        n_chunked = sum(1 for t in types if t == memory.CHUNKED_LAYER_TYPE)
    else:
        n_sliding, n_chunked = 0, 0
    if n_sliding and isinstance(sliding, int) and not isinstance(sliding, bool):
        windows.append((n_sliding, min(sliding - 1 + (batched or 0), length),
                        f"(window {sliding} − 1 + {batched} batched) on the {n_sliding} sliding-window layers"))
    if n_chunked and isinstance(chunk, int) and not isinstance(chunk, bool):
        windows.append((n_chunked, min(chunk + (batched or 0), length),
                        f"(chunk {chunk} + {batched} batched) on the {n_chunked} chunked-attention layers"))
    if not windows:
        return None
    per_layer = (every.value - full.value) / sum(n for n, _, _ in windows)
    held_bytes = sum(n * per_layer * held for n, held, _ in windows)
    total = full.value * length + held_bytes
    parts = " + ".join(f"{held} tokens {what}" for _, held, what in windows)
    return total, full.value, held_bytes, (
        f"one request of {length} tokens needs {total / GIB:.2f} GiB = {length} × {full.value / 1024:.1f} KiB on the "
        f"full-attention layers + {parts}, at {per_layer / 1024:.1f} KiB per token and layer")


def for_plan(plan) -> dict:
    """The capacity of one deployment, in the shape of ``sits-doctor capacity --format json``,
    from its effective facts (the model, how it is served, and the GPU of ``--gpu``/``--gpu-memory``)."""
    facts = plan.facts
    gpu = facts.gpu if facts is not None else None
    assumptions = []
    memory_bytes = gpu.memory_gib * GIB if gpu is not None and gpu.memory_gib else None
    if gpu is not None:
        if gpu.note:
            assumptions.append(gpu.note)
        if gpu.estimate:
            assumptions.append(f"GPU memory {gib(memory_bytes)} is an estimate ({gpu.source}); pass --gpu-memory")
        assumptions.append(f"GPU memory per device: {gib(memory_bytes)} ({gpu.source})")
    out = {"path": plan.file, "framework": plan.framework, "model": plan.model.path if plan.model else None,
           "gpu": None if gpu is None else {"name": gpu.name, "count": gpu.count, "memory_bytes": memory_bytes},
           "kv_bytes_per_token": None, "weights_bytes": None, "kv_cache_tokens": None,
           MAX_LEN_KEY: None, "max_concurrency": None, "startup": {"ok": None, "reason": None},
           "assumptions": assumptions, "steps": []}
    pred = predict_plan(plan)
    if pred is None:
        out["assumptions"].append(f"capacity is modelled for vLLM so far; {plan.framework} is not yet")
        return out
    out.update({"kv_bytes_per_token": pred.kv_bytes_per_token, "weights_bytes": pred.weights_bytes,
                MAX_LEN_KEY: pred.max_model_len, "steps": list(pred.steps)})
    out["assumptions"] = assumptions + list(pred.assumptions) + [f"cannot compute: {m}" for m in pred.missing]
    if pred.tokens is not None:
        out["kv_cache_tokens"] = dict(zip(("low", "estimate", "high"), pred.tokens))
        out["max_concurrency"] = round(pred.max_concurrency, 2) if pred.max_concurrency is not None else None
        out["startup"] = {"ok": pred.startup_ok, "reason": pred.startup_reason}
    return out


def _sizes(kv_found, weights_found, memory_bytes):
    """KV bytes per token and weights (each a Value, or None), the steps that show them, and what is
    missing to size a pool — the inputs every framework's pool model starts from."""
    steps, missing = [], []
    (kv, why_kv), (weights, why_weights) = kv_found, weights_found
    for value, why, label in ((kv, why_kv, "KV per token"), (weights, why_weights, "weights")):
        if value is None:
            missing.append(why)
        else:
            steps.append(f"{label}: {value.prov}")
    if memory_bytes is None:
        missing.append("the GPU's memory (pass --gpu NAME[xN] or --gpu-memory SIZE)")
    return kv, weights, steps, missing


def predict_trtllm(dims, *, version: str, backend: str, memory_bytes: float | None, fraction: float | None,
                   max_seq_len: int | None, tp: int = 1, pp: int = 1, kv_dtype: str | None = "auto",
                   max_tokens: int | None = None, tokens_per_block: int | None = None,
                   max_num_tokens: int | None = None, max_batch_size: int | None = None,
                   cuda_graphs: bool = True, max_input_len: int | None = None, fail_fast: bool = False) -> Prediction:
    """The KV pool TensorRT-LLM ``version`` would size on this GPU, and whether one ``max_seq_len``
    sequence fits it — when it does not, TensorRT-LLM shrinks the attention window and logs it
    (:mod:`sits_doctor.frameworks.trtllm_memory`)."""
    from sits_doctor import memory
    from sits_doctor.frameworks import trtllm_memory

    kv, weights, steps, missing = _sizes(memory.kv_bytes_per_token(dims, kv_dtype, tp=tp, pp=pp, sliding_per_token=True),
                                         memory.weights_bytes(dims), memory_bytes)
    if missing:
        return Prediction("trtllm", kv.value if kv else None, weights.value if weights else None, None, max_seq_len,
                          None, None, None, tuple(steps), (), tuple(missing))

    def num(x):
        return int(x.value) if x is not None and isinstance(x.value, (int, float)) else None

    p = trtllm_memory.pool(
        version=version, backend=backend, memory_bytes=memory_bytes, weights_bytes=weights.value,
        kv_bytes_per_token=kv.value, fraction=fraction, max_tokens=max_tokens, tokens_per_block=tokens_per_block,
        max_num_tokens=max_num_tokens or trtllm_memory.MAX_NUM_TOKENS_DEFAULT,
        max_batch_size=max_batch_size or trtllm_memory.MAX_BATCH_SIZE_DEFAULT, hidden=num(dims.hidden),
        intermediate=num(dims.intermediate), vocab=num(dims.vocab), tp=tp, pp=pp, max_seq_len=max_seq_len,
        cuda_graphs=cuda_graphs)
    steps += list(p.steps)
    ok = reason = concurrency = None
    if max_seq_len:
        ok, reason = trtllm_memory.window_check(max_seq_len, p, version, backend, max_input_len=max_input_len,
                                                fail_fast=fail_fast)
        concurrency = p.estimate / max_seq_len
    return Prediction("trtllm", kv.value, weights.value, (p.low, p.estimate, p.high), max_seq_len, concurrency, ok,
                      reason, tuple(steps), tuple(p.assumptions))


def predict_plan(plan) -> Prediction | None:
    """:func:`predict_vllm` / :func:`predict_trtllm` on a plan's effective facts; None for other
    frameworks. The facts are typed (:func:`sits_doctor.facts.validated`): a sizing fact whose
    written value is invalid, or that comes from a variable the file does not set, makes the
    prediction say what it did not check instead of computing with a default."""
    facts = plan.facts
    serving = facts.serving if facts is not None else None
    if plan.framework == "trtllm" and serving is not None:
        return _predict_trtllm_plan(plan)
    if plan.framework != "vllm" or serving is None:
        return None
    gpu = facts.gpu

    from sits_doctor.frameworks.vllm import (
        GPU_MEMORY_UTILIZATION, MAX_MODEL_LEN, PIPELINE_PARALLEL, TENSOR_PARALLEL, sizing_unknown)

    # what the memory model cannot follow (a variable or template the file does not set, offloading),
    # as the memory rules say it; then the values written that are no value of their kind
    unread = [f"{why}: not checked" for why in sizing_unknown(plan)] + _invalid(serving, VLLM_SIZING, {
        Serving.tensor_parallel: TENSOR_PARALLEL, Serving.pipeline_parallel: PIPELINE_PARALLEL,
        Serving.memory_fraction: GPU_MEMORY_UTILIZATION, Serving.max_model_len: MAX_MODEL_LEN})
    if unread:
        return Prediction("vllm", None, None, None, None, None, None, None, (), (), tuple(unread))
    tp, pp = _v(serving.tensor_parallel, 1), _v(serving.pipeline_parallel, 1)
    pred = predict_vllm(
        facts.model, version=plan.target.version,
        memory_bytes=gpu.memory_gib * GIB if gpu is not None and gpu.memory_gib else None,
        gpu_name=gpu.name if gpu is not None else "", utilization=serving.memory_fraction.value,
        tp=tp, pp=pp,
        kv_dtype=_v(serving.kv_cache_dtype, "auto"),
        max_model_len=_v(serving.max_model_len),
        max_num_batched_tokens=_v(serving.max_num_batched_tokens), chunked_prefill=_v(serving.chunked_prefill),
        max_num_seqs=_v(serving.max_num_seqs), block_size=_v(serving.block_size),
        cuda_graphs=_v(serving.cuda_graphs, True), kv_cache_memory_bytes=_v(serving.kv_cache_bytes))
    ranks = tp * pp
    notes = tuple(f"{name} {x.value}: {x.prov.note}" for name, x in (
        (TENSOR_PARALLEL, serving.tensor_parallel), (PIPELINE_PARALLEL, serving.pipeline_parallel),
        (MAX_MODEL_LEN, serving.max_model_len), (GPU_MEMORY_UTILIZATION, serving.memory_fraction))
        if x is not None and x.prov.kind == "file" and x.prov.note)
    if notes:
        pred = pred._replace(assumptions=notes + pred.assumptions)
    if gpu is not None and gpu.count and ranks > gpu.count:
        pred = pred._replace(assumptions=pred.assumptions + (
            f"{ranks} ranks on {gpu.count} GPU(s) as given: each rank is taken to have a GPU of its own",))
    return pred


# The Serving facts each pool model reads: one that is invalid leaves the pool unsized.
_POOL = (Serving.max_model_len, Serving.max_num_seqs, Serving.max_num_batched_tokens, Serving.kv_cache_dtype,
         Serving.block_size, Serving.tensor_parallel, Serving.pipeline_parallel, Serving.memory_fraction,
         Serving.cuda_graphs)
VLLM_SIZING = field_names(*_POOL, Serving.chunked_prefill, Serving.kv_cache_bytes)
TRTLLM_SIZING = field_names(*_POOL, Serving.kv_cache_tokens, Serving.max_input_len)


def _v(x, default=None):
    """A typed fact's value, or ``default`` where nothing sets it."""
    return x.value if x is not None and x.value is not None else default


def _invalid(serving, fields: tuple[str, ...], names: dict) -> list[str]:
    """"<key as written> <value>: <why> (<where>): not checked" for each sizing fact whose written
    value is invalid (``names``: how to name a fact no setting wrote, by ``Serving.<field>``)."""
    named = {field_names(f)[0]: name for f, name in names.items()}
    out = []
    for field, x in serving.invalid:
        if field in fields:
            shown = x.setting.raw_key if x.setting is not None else named.get(field, field)
            out.append(f"{shown} {x.value!r} is {x.value.why} ({x.prov}): not checked")
    return out


def _predict_trtllm_plan(plan) -> Prediction:
    from sits_doctor.frameworks import trtllm as trt
    from sits_doctor.frameworks import trtllm_memory

    facts, serving = plan.facts, plan.facts.serving
    gpu, dims = facts.gpu, facts.model
    unread = _invalid(serving, TRTLLM_SIZING, {Serving.max_model_len: trt.MAX_SEQ_LEN,
                                               Serving.memory_fraction: trt.KV_FREE_FRACTION})
    if unread:
        return Prediction("trtllm", None, None, None, None, None, None, None, (), (), tuple(unread))
    version = plan.target.version
    engine = plan.kind == "trtllm-engine"
    backend = (trtllm_memory.TENSORRT if engine or plan.value(trt.BACKEND) in trt.TENSORRT_BACKENDS
               else trtllm_memory.PYTORCH if plan.value(trt.BACKEND) in trt.PYTORCH_BACKENDS
               else trtllm_memory.default_backend(version))
    length = _v(serving.max_model_len)
    assumptions = []
    positions = typed(_v(dims.max_positions), "count") if dims is not None else None
    if length is None and isinstance(positions, int):
        length = positions
        assumptions.append(f"max_seq_len not set: the model's {length} ({dims.max_positions.prov})")
    fraction = serving.memory_fraction
    pred = predict_trtllm(
        dims, version=version, backend=backend,
        memory_bytes=gpu.memory_gib * GIB if gpu is not None and gpu.memory_gib else None,
        fraction=fraction.value if fraction is not None and fraction.is_set else None,
        max_seq_len=length if length is not None and length > 0 else None,
        tp=_v(serving.tensor_parallel, 1), pp=_v(serving.pipeline_parallel, 1),
        kv_dtype=str(_v(serving.kv_cache_dtype, "auto")).lower(),
        max_tokens=_v(serving.kv_cache_tokens), tokens_per_block=_v(serving.block_size),
        max_num_tokens=_v(serving.max_num_batched_tokens), max_batch_size=_v(serving.max_num_seqs),
        cuda_graphs=_v(serving.cuda_graphs, True), max_input_len=_v(serving.max_input_len),
        fail_fast=plan.value(trt.FAIL_FAST_WINDOW) is True)
    return pred._replace(assumptions=tuple(assumptions) + pred.assumptions)


def gib(n: float | None) -> str:
    return "?" if n is None else f"{n / GIB:.2f} GiB"
