"""How close is the capacity prediction to what vLLM really allocated? Runs
``sits_doctor.capacity.predict_vllm`` on every real startup in tests/data/capacity/vllm_cases.yaml
that names enough to predict from (a model config — the case's own subset or the model catalog —
and the GPU's memory — the log's total or the GPU catalog), and compares with the logged
``GPU KV cache size`` / block count and the startup outcome. aiconfigurator's predictions for the
same cases (bench/results/capacity-aiconfigurator.json, bench/capacity_peer_aiconfigurator.py)
sit beside ours.

    python bench/capacity_accuracy.py [--out bench/results]

Writes capacity-accuracy.md and capacity-accuracy.json. Every assumption a case needed (an
unstated version, default utilization) is in the JSON and summarized in the table.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "tests" / "data" / "capacity"
sys.path.insert(0, str(REPO))

FAILED = ("failed_kv_insufficient", "failed_no_kv_memory")
# Cases whose logs set constants in sits_doctor/frameworks/vllm_memory.py (activation per token,
# non-torch memory): a prediction for them is in-sample and is not evidence of accuracy.
IN_SAMPLE = {"vllm-10517-llama31-8b-rtx3090-mml20000", "vllm-10517-llama31-8b-rtx3090-mml29000-fail",
             "vllm-17469-qwen3-30b-a3b-4xa10-tp4-v0.8.5"}
UNIT = {"gib": 2**30, "gb": 2**30, "mib": 2**20, "g": 2**30}  # logs print GiB; "80GB" names are not sizes


def load_cases() -> list[dict]:
    import yaml

    return yaml.safe_load((CASES / "vllm_cases.yaml").read_text(encoding="utf-8"))


def dims_of(case: dict):
    """(ModelDims, parameter count or None, where the config came from) or (None, None, why not)."""
    from sits_doctor.catalogs import models
    from sits_doctor.frameworks.transformers import model_dims
    from sits_doctor.loaders.hf import model_facts
    from sits_doctor.source import parse_json

    hub = case["model"]["hub_id"]
    entry = models.lookup(hub) if hub else None
    params = entry.total_parameters if entry is not None and not entry.parameters.get("nominal") else None
    rel = case["model"].get("model_config")
    if rel:
        data = json.loads((CASES / rel).read_text(encoding="utf-8"))
        data.pop("_source", None)
        where = f"case config {rel}"
    elif entry is not None:
        data, where = entry.config, f"model catalog {entry.hub_id}"
    else:
        return None, None, "no config of this checkpoint"
    doc = parse_json(json.dumps(data), where)
    return model_dims(model_facts(doc)), params, where


def memory_of(case: dict) -> tuple[float | None, str]:
    from sits_doctor.catalogs import gpus

    text = case["hardware"].get("gpu_memory_total")
    source = case["hardware"].get("gpu_memory_total_source") or ""
    if text and "log" in source.lower() or text and re.match(r"^\s*[\d.]+\s*(GiB|MiB)", str(text)):
        m = re.match(r"^\s*([\d.]+)\s*(GiB|MiB|GB|G)", str(text))
        if m:
            return float(m.group(1)) * UNIT[m.group(2).lower()], f"log: {text}"
    name = case["hardware"].get("gpu")
    if not name:
        return None, "no GPU named"
    try:
        match = gpus.lookup(str(name))
    except ValueError:
        return None, f"GPU {name!r} not in the catalog"
    mem = match.gpu.memory_bytes_effective()
    return float(mem.value), f"catalog {match.gpu.name} ({mem.basis})"


def version_of(case: dict) -> tuple[str, str | None]:
    from packaging.version import InvalidVersion, Version

    text = case.get("vllm_version")
    if text:
        try:
            v = Version(str(text))
            return f"{v.major}.{v.minor}.{v.micro}", None
        except InvalidVersion:
            pass
    assumed = "0.6.3" if case.get("engine") == "V0" else "0.10.0"
    return assumed, f"version not stated: {case.get('engine') or 'unknown'} engine log, taken as {assumed}"


def observed_tokens(case: dict) -> int | None:
    o = case["outcome"]
    if o.get("gpu_kv_cache_tokens"):
        return int(o["gpu_kv_cache_tokens"])
    derived = o.get("gpu_kv_cache_tokens_derived")
    return int(derived["value"]) if derived else None


def number(value):
    """A setting as the predictor takes it: numbers pass, prose ("several", "not shown") counts as unset."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def predict(case: dict) -> dict:
    from sits_doctor.capacity import predict_vllm

    row = {"id": case["id"], "model": case["model"]["hub_id"], "gpu": case["hardware"].get("gpu"),
           "status": case["outcome"]["status"], "logged_tokens": observed_tokens(case), "assumptions": []}
    dims, params, where = dims_of(case)
    if dims is None:
        row["skipped"] = where
        return row
    memory, mem_note = memory_of(case)
    if memory is None:
        row["skipped"] = mem_note
        return row
    version, vnote = version_of(case)
    s, par = case["settings"], case["parallel"]
    util = number(s.get("gpu_memory_utilization"))
    if util is None:
        util = 0.92 if tuple(int(x) for x in version.split(".")[:2]) >= (0, 20) else 0.90
        row["assumptions"].append(f"gpu_memory_utilization not stated: default {util}")
    row["assumptions"] += [a for a in (vnote,) if a] + [f"config: {where}", f"memory: {mem_note}"]
    pred = predict_vllm(
        dims, version=version, memory_bytes=memory, gpu_name=str(case["hardware"].get("gpu") or ""), utilization=util,
        tp=par.get("tensor_parallel_size") or 1, pp=par.get("pipeline_parallel_size") or 1,
        kv_dtype=s.get("kv_cache_dtype") or "auto", max_model_len=number(s.get("max_model_len")),
        max_num_batched_tokens=number(s.get("max_num_batched_tokens")), block_size=number(s.get("block_size")),
        max_num_seqs=number(s.get("max_num_seqs")),
        cuda_graphs=not s.get("enforce_eager"), params=params, params_note="model catalog" if params else "")
    if pred.missing:
        row["skipped"] = "; ".join(pred.missing)
        return row
    row.update(version=version, predicted=list(pred.tokens), startup_ok=pred.startup_ok,
               steps=list(pred.steps), assumptions=row["assumptions"] + list(pred.assumptions))
    if row["logged_tokens"]:
        row["error"] = pred.tokens[1] / row["logged_tokens"] - 1
    return row


def peer() -> dict:
    path = REPO / "bench" / "results" / "capacity-aiconfigurator.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data.get("results", {})


def peer_text(entry: dict) -> str:
    """aiconfigurator's KV tokens and its error against the log, or why it did not run."""
    if not entry:
        return ""
    if not entry.get("ran"):
        return "did not run"
    tokens = (entry.get("prediction") or {}).get("kv_tokens")
    logged = (entry.get("observed") or {}).get("gpu_kv_cache_tokens")
    if tokens is None:
        return "no token count"
    return f"{tokens}" + (f" ({tokens / logged - 1:+.0%})" if logged else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = ap.parse_args()
    rows = [predict(c) for c in load_cases()]
    aic = peer()
    tokens = [r for r in rows if "error" in r and r["id"] not in IN_SAMPLE]
    within = [r for r in tokens if abs(r["error"]) <= 0.10]
    failures = [r for r in rows if r["status"] in FAILED and "predicted" in r]
    called = [r for r in failures if r["startup_ok"] is False]
    started = [r for r in rows if r["status"] == "started" and "predicted" in r and r.get("startup_ok") is not None]
    false_alarms = [r for r in started if r["startup_ok"] is False]
    md = ["# Capacity prediction against real vLLM startups", "",
          "`python bench/capacity_accuracy.py` over tests/data/capacity/vllm_cases.yaml (sources in that folder's "
          "README). Predicted = KV-cache tokens per rank, low / estimate / high; error = estimate / logged − 1.", "",
          f"- in-sample cases (their logs set the pool model's constants; not counted below): "
          f"{', '.join(sorted(IN_SAMPLE))}",
          f"- token counts predicted out of sample: {len(tokens)}; within ±10%: {len(within)}"
          + (f" ({len(within) / len(tokens):.0%})" if tokens else ""),
          f"- logged startup failures predicted: {len(failures)}; called as failures: {len(called)}",
          f"- started cases with a verdict: {len(started)}; wrongly predicted to fail: {len(false_alarms)}",
          f"- cases skipped (nothing to predict from): {sum(1 for r in rows if 'skipped' in r)} of {len(rows)}", "",
          "| case | version | logged tokens | predicted (low / est / high) | error | startup: logged → predicted | aiconfigurator |",
          "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "skipped" in r:
            continue
        p = r["predicted"]
        err = f"{r['error']:+.0%}" if "error" in r else ""
        verdict = {True: "fits", False: "fails", None: "can't tell"}[r["startup_ok"]]
        other_text = peer_text(aic.get(r["id"], {}))
        mark = " (in-sample)" if r["id"] in IN_SAMPLE else ""
        md.append(f"| {r['id']}{mark} | {r['version']} | {r['logged_tokens'] or ''} | {p[0]} / {p[1]} / {p[2]} | {err} | "
                  f"{r['status']} → {verdict} | {other_text} |")
    md += ["", "## Skipped", ""] + [f"- {r['id']}: {r['skipped']}" for r in rows if "skipped" in r]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "capacity-accuracy.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    (args.out / "capacity-accuracy.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print("\n".join(md))


if __name__ == "__main__":
    main()
