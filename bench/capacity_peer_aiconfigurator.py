"""Peer baseline for the ``capacity`` ground truth: what NVIDIA's aiconfigurator predicts for every
real vLLM startup in ``tests/data/capacity/vllm_cases.yaml`` that it can express.

aiconfigurator is not a dependency of sits-doctor; run this from a throwaway virtual environment:

    python3 -m venv /tmp/aic && /tmp/aic/bin/pip install aiconfigurator
    /tmp/aic/bin/python bench/capacity_peer_aiconfigurator.py \
        [--cases tests/data/capacity/vllm_cases.yaml] [--out bench/results/capacity-aiconfigurator.json]

API used: ``aiconfigurator.sdk.memory.estimate_kv_cache`` (an alias of
``aiconfigurator_core.sdk.memory.estimate_kv_cache`` in aiconfigurator 0.12.0). It builds aic's own
backend memory model (weights + activations for ``max_num_tokens`` + a runtime overhead) for a
model it ships a config for, on a "system" it has performance data for, and returns the rank-local
KV budget ``capacity * fraction - non_kv`` (vLLM's fraction-of-total rule) and the token count that
budget holds. When the native build is not possible it can fall back to a config-only estimate
(``allow_naive_fallback``); this script does so with the config subset under
``tests/data/capacity/model_configs/`` and reports which path was used.

How a case is expressed (every assumption is written into the result next to the prediction):

* model: the hub id of the case's ``model_config`` file (its ``_source.hf_model_id``), else the
  case's ``model.hub_id``; cases with neither, or whose model aic does not ship, are skipped
  unless the naive fallback can use a config subset from this repository.
* GPU: aic has vLLM performance data only for some systems, so the GPU is mapped to the closest
  one of the same generation (``system_used``) and the case's own GPU memory is passed as
  ``gpu_memory_capacity_bytes_override`` -- the memory the source log shows when it shows one,
  else the SKU's nvidia-smi total from the table below (marked ``capacity_source: nominal``).
* ``gpu_memory_utilization``: the case's value, else vLLM's default 0.9 (marked assumed).
* ``max_num_tokens`` (aic's activation budget): the case's ``max_num_batched_tokens``, else 8192
  for the V1 engine and ``max(max_model_len, 2048)`` (2048 above 32768, where V0 turned chunked
  prefill on) for V0 -- vLLM's defaults, marked assumed.
* MoE layers are split like vLLM's default (``moe_tp_size = tensor_parallel_size``), or over
  experts when the case enables expert parallelism.
* ``max_model_len``: the case's, else the config's ``max_position_embeddings`` (marked assumed);
  a checkpoint recorded as FP8 whose only config read is the bf16 base model's gets
  ``gemm_quant_mode="fp8"`` (marked assumed).
* fit verdict: ``fits`` when the predicted tokens hold one ``max_model_len`` request,
  ``kv_insufficient`` when they do not, ``no_kv_memory`` when aic finds no KV budget at all.
  aic does not model CUDA-graph capture or other startup OOMs, so an observed OOM is compared
  with ``fits``.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import tempfile
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "capacity"

GIB = 1 << 30
MIB = 1 << 20

# (pattern on the case's GPU name, aic system with vLLM perf data, nvidia-smi total MiB of the SKU)
GPU_MAP = [
    (r"H100", "h100_sxm", 81559),
    (r"A100.*40", "a100_sxm", 40960),
    (r"A100", "a100_sxm", 81920),
    (r"\bA10\b", "a100_sxm", 23028),
    (r"RTX 3090", "a100_sxm", 24576),
    (r"\bT4\b", "a100_sxm", 15360),
    (r"RTX 4090", "l40s", 24564),
    (r"\bL40\b", "l40s", 46068),
    (r"\bL4\b", "l40s", 23034),
    (r"RTX 5090", "rtx_pro_6000_server", 32607),
]
VLLM_DB_VERSION = {"h100_sxm": "0.24.0", "a100_sxm": "0.14.0", "l40s": "0.24.0", "rtx_pro_6000_server": "0.24.0"}


def parse_mem_bytes(text):
    """'23.58GiB', '39.50GiB', '21.99 GiB per GPU' -> bytes; None for anything else."""
    if not isinstance(text, str):
        return None
    m = re.fullmatch(r"\s*([\d.]+)\s*GiB(\s+per GPU)?\s*", text)
    return int(float(m.group(1)) * GIB) if m else None


def express(case, known_models):
    """Turn a case into estimate_kv_cache arguments, or return (None, reason)."""
    model, hw, par, st = case["model"], case["hardware"], case["parallel"], case["settings"]
    assumed = {}
    hub_id = None
    cfg_file = model.get("model_config")
    if cfg_file:
        hub_id = json.loads((DATA / cfg_file).read_text())["_source"]["hf_model_id"]
        if hub_id != model.get("hub_id"):
            assumed["model"] = f"aic config {hub_id} used for {model.get('hub_id')}"
    elif model.get("hub_id") in known_models:
        hub_id = model["hub_id"]
    if hub_id is None:
        return None, "no model config: neither a config subset in this repository nor a model aic ships"
    gpu = hw.get("gpu")
    if not gpu:
        return None, "GPU not stated in the source"
    if "+" in gpu:
        return None, "heterogeneous GPUs (aic sizes one uniform rank)"
    for pattern, system, nominal_mib in GPU_MAP:
        if re.search(pattern, gpu):
            break
    else:
        return None, f"no aic system for GPU {gpu!r}"
    capacity = parse_mem_bytes(hw.get("gpu_memory_total"))
    capacity_source = "source log/text"
    if capacity is None:
        capacity, capacity_source = nominal_mib * MIB, f"nominal ({nominal_mib} MiB nvidia-smi total of the SKU)"
    tp = par.get("tensor_parallel_size")
    if tp is None:
        if hw.get("gpu_count") == 1:
            tp = 1
        else:
            return None, "tensor/pipeline split not stated"
    pp = par.get("pipeline_parallel_size") or 1
    gmu = st.get("gpu_memory_utilization")
    if gmu is None:
        gmu, assumed["gpu_memory_utilization"] = 0.9, "0.9 (vLLM default; not stated in the source)"
    mml = st.get("max_model_len")
    cfg = json.loads((DATA / cfg_file).read_text()) if cfg_file else {}
    if mml is None and "max_position_embeddings" in cfg:
        mml = cfg["max_position_embeddings"]
        assumed["max_model_len"] = f"{mml} (config max_position_embeddings; no flag in the source)"
    gemm_mode = None
    if "fp8" in str(model.get("quantization") or "") and "quantization_config" not in cfg:
        gemm_mode = "fp8"
        assumed["gemm_quant_mode"] = "fp8 (checkpoint is FP8 but the config read is the bf16 base model's)"
    mnt = st.get("max_num_batched_tokens")
    if mnt is None:
        if case.get("engine") == "V0" and isinstance(mml, int):
            mnt = 2048 if mml > 32768 else max(mml, 2048)
        else:
            mnt = 8192
        assumed["max_num_tokens"] = f"{mnt} (vLLM {case.get('engine') or 'V1'} default max_num_batched_tokens)"
    mbs = st.get("max_num_seqs")
    if not isinstance(mbs, int):
        mbs = 256
        assumed["max_batch_size"] = "256 (vLLM default max_num_seqs)"
    kv = st.get("kv_cache_dtype")
    kv_mode = "fp8" if isinstance(kv, str) and kv.startswith("fp8") else None
    ep = bool(par.get("enable_expert_parallel"))
    args = dict(
        model_path=hub_id, system=system, backend="vllm", backend_version=VLLM_DB_VERSION[system],
        max_num_tokens=int(mnt), max_batch_size=int(mbs),
        memory_fraction_kind="of_total", memory_fraction_value=float(gmu),
        tp_size=int(tp), pp_size=int(pp), moe_tp_size=1 if ep else int(tp), moe_ep_size=int(tp) if ep else 1,
        kvcache_quant_mode=kv_mode, gemm_quant_mode=gemm_mode, gpu_memory_capacity_bytes_override=int(capacity),
    )
    return dict(args=args, cfg_file=cfg_file, capacity_source=capacity_source, assumed=assumed, max_model_len=mml), None


def observed(case):
    o = case["outcome"]
    tokens = o.get("gpu_kv_cache_tokens")
    derived = o.get("gpu_kv_cache_tokens_derived")
    if tokens is None and isinstance(derived, dict):
        tokens = derived.get("value")
    return {
        "status": o["status"],
        "gpu_kv_cache_tokens": tokens,
        "available_kv_cache_gib": o.get("available_kv_cache_gib"),
    }


def run_case(case, known_models, estimate_kv_cache):
    spec, reason = express(case, known_models)
    result = {"observed": observed(case)}
    if spec is None:
        return result | {"ran": False, "reason": reason}
    args = spec["args"]
    with tempfile.TemporaryDirectory() as tmp:
        naive_dir = None
        if spec["cfg_file"]:
            cfg = json.loads((DATA / spec["cfg_file"]).read_text())
            cfg.pop("_source", None)
            naive_dir = Path(tmp)
            (naive_dir / "config.json").write_text(json.dumps(cfg))
        try:
            est = estimate_kv_cache(**args)
        except ValueError as exc:
            msg = str(exc)
            if msg.startswith("no KV budget"):
                est = None
                verdict = "no_kv_memory"
            elif naive_dir is not None and msg.startswith("unsupported model"):
                try:
                    est = estimate_kv_cache(**(args | {"model_path": str(naive_dir), "allow_naive_fallback": True}))
                except ValueError as exc2:
                    reason = f"native: {msg[:300]}; naive fallback: {str(exc2)[:300]}"
                    return result | {"ran": False, "reason": reason, "inputs": _inputs(spec)}
            else:
                return result | {"ran": False, "reason": msg[:500], "inputs": _inputs(spec)}
    pred = {}
    if est is not None:
        tokens = est["total_kv_size_tokens"]
        mml = spec["max_model_len"]
        verdict = None if not isinstance(mml, int) else ("fits" if tokens >= mml else "kv_insufficient")
        pred = {
            "kv_tokens": tokens,
            "kv_bytes": est["total_kv_size_bytes"],
            "kv_gib": round(est["total_kv_size_bytes"] / GIB, 3),
            "kv_bytes_per_token": est["kv_size_per_token_bytes"],
            "source": est["source"],
            "memory_breakdown_gib": {
                k.replace("_bytes", ""): round(v / GIB, 3) for k, v in (est.get("memory_breakdown") or {}).items()
            },
        }
    pred["fit_verdict"] = verdict
    obs_tokens = result["observed"]["gpu_kv_cache_tokens"]
    if obs_tokens and pred.get("kv_tokens") is not None:
        pred["predicted_over_observed_tokens"] = round(pred["kv_tokens"] / obs_tokens, 3)
    return result | {"ran": True, "inputs": _inputs(spec), "prediction": pred}


def _inputs(spec):
    a = dict(spec["args"])
    a["gpu_memory_capacity_gib"] = round(a.pop("gpu_memory_capacity_bytes_override") / GIB, 3)
    return {"estimate_kv_cache_args": a, "capacity_source": spec["capacity_source"], "assumed": spec["assumed"],
            "max_model_len": spec["max_model_len"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=Path, default=DATA / "vllm_cases.yaml")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "capacity-aiconfigurator.json")
    opts = ap.parse_args()
    logging.disable(logging.CRITICAL)  # aic logs every perf-database lookup

    from aiconfigurator.sdk.common import DefaultHFModels
    from aiconfigurator.sdk.memory import estimate_kv_cache

    cases = yaml.safe_load(opts.cases.read_text())
    results = {c["id"]: run_case(c, set(DefaultHFModels), estimate_kv_cache) for c in cases}
    versions = {}
    for dist in ("aiconfigurator", "aiconfigurator-core"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    out = {
        "tool": "aiconfigurator",
        "versions": versions,
        "api": "aiconfigurator.sdk.memory.estimate_kv_cache",
        "cases_file": str(opts.cases.relative_to(REPO)) if opts.cases.is_relative_to(REPO) else str(opts.cases),
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "summary": {
            "cases": len(results),
            "ran": sum(r["ran"] for r in results.values()),
            "skipped": sum(not r["ran"] for r in results.values()),
        },
        "results": results,
    }
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"{out['summary']} -> {opts.out}")


if __name__ == "__main__":
    main()
