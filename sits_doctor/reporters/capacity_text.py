"""``sits-doctor capacity`` as text: one block per deployment, the arithmetic a person reads in
ten seconds (weights, KV per token, pool, concurrency, verdict), then how each figure was found."""

from __future__ import annotations

from sits_doctor.capacity import MAX_LEN_KEY
from sits_doctor.frameworks.trtllm import MAX_SEQ_LEN as TRT_LENGTH_KEY
from sits_doctor.memory import GIB


def render(rows: list[dict]) -> str:
    if not rows:
        return "No serving deployment found (model configs alone have no KV pool to size)."
    return "\n\n".join(_one(r) for r in rows)


def _one(r: dict) -> str:
    gpu = r["gpu"] or {}
    name = gpu.get("name") or "GPU"
    where = f"{gpu.get('count', 1)}× {name}, {gpu['memory_bytes'] / GIB:.2f} GiB each" if gpu.get("memory_bytes") else "no GPU given"
    tokens = r["kv_cache_tokens"]
    start = r["startup"]
    trt = r["framework"] == "trtllm"
    verdict = {True: "starts: one max-length request fits",
               False: "WINDOW SHRUNK: one max_seq_len sequence does not fit" if trt else "FAILS AT STARTUP",
               None: "cannot tell"}[start["ok"]]
    length_key = TRT_LENGTH_KEY if trt else MAX_LEN_KEY
    lines = [f"{r['path']}  ({r['framework']}, model {r['model'] or 'unknown'}, {where})",
             _row("weights", f"{r['weights_bytes'] / GIB:.2f} GiB (all ranks)" if r["weights_bytes"] else "?"),
             _row("KV per token", f"{r['kv_bytes_per_token'] / 1024:.1f} KiB per rank" if r["kv_bytes_per_token"] else "?"),
             _row("KV pool", f"{tokens['estimate']} tokens per rank (range {tokens['low']}–{tokens['high']})" if tokens else "?"),
             _row(length_key, str(r[MAX_LEN_KEY] or "?")),
             _row("concurrency", f"{r['max_concurrency']}× at {length_key}" if r["max_concurrency"] is not None else "?"),
             _row("verdict", verdict)]
    if start["reason"]:
        lines.append(f"  {'TensorRT-LLM' if trt else 'vLLM'} would say: {start['reason']}")
    if r["steps"]:
        lines.append("  arithmetic:")
        lines += [f"    {s}" for s in r["steps"]]
    if r["assumptions"]:
        lines.append("  assumptions:")
        lines += [f"    - {a}" for a in r["assumptions"]]
    return "\n".join(lines)


def _row(label: str, value: str) -> str:
    return f"  {label:<14}{value}"
