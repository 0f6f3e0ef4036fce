"""How fast is the static ``check``? Times the real CLI (a fresh interpreter per run, as a CI gate
or pre-commit hook would start it) on one file, next to yamllint on the same file in the same
run (the two alternate, so machine noise hits both alike), and on a directory of generated
configs; lists what the one-file run imports.

    python bench/cli_speed.py [--files 1000] [--repeats 21] [--out bench/results]

The CLI is timed from a fresh virtual environment with a regular (not editable) install of this
checkout and yamllint (``pip install . yamllint``, made once per run in a temporary folder): an
editable install's import hook adds about 40 ms to every start. Writes ``cli_speed.json`` and
``cli_speed.md`` under ``--out``, with the machine, Python and git commit they were measured on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ONE_FILE = REPO / "bench" / "data" / "serve.yaml"

HF = """{{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
 "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
 "max_position_embeddings": {mpe}, "torch_dtype": "bfloat16"}}
"""
VLLM = """model: ../models/m{m}
max-model-len: {mml}
gpu-memory-utilization: 0.9
swap-space: 4
enable-prefix-caching: false
compilation-config:
  cudagraph_mode: FULL_AND_PIECEWISE
"""
K8S = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm-{i}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.{minor}.0
          args: ["--model", "org/model-{i}", "--max-model-len", "{mml}", "-tp", "2", "--swap-space", "4"]
          env:
            - name: VLLM_ATTENTION_BACKEND
              value: FLASHINFER
---
apiVersion: v1
kind: Service
metadata:
  name: llm-{i}
"""
OGA = """{{"model": {{"type": "llama", "context_length": 4096, "decoder": {{"filename": "model.onnx",
 "session_options": {{"intra_op_num_thread": "4", "provider_options": [{{"cuda": {{"enable_cuda_graph": "1"}}}}]}}}}}},
 "search": {{"max_length": 4096, "past_present_share_buffer": true}}}}
"""
TRT = """use_cuda_graph: true
kv_cache_dtype: fp8
kv_cache_config:
  free_gpu_memory_fraction: 0.9
"""


def generate(root: Path, n: int) -> int:
    """Write ``n`` configs of mixed kinds under ``root``; return how many were written."""
    (root / "models").mkdir(parents=True)
    for m in range(10):
        d = root / "models" / f"m{m}"
        d.mkdir()
        (d / "config.json").write_text(HF.format(mpe=8192 * (m + 1)))
    written = 10
    kinds = ("vllm", "k8s", "oga", "trt")
    for i in range(n - written):
        kind = kinds[i % len(kinds)]
        folder = root / kind / f"{i // 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        if kind == "vllm":
            (folder / f"serve{i}.yaml").write_text(VLLM.format(m=i % 10, mml=4096 * (1 + i % 40)).replace("../models", "../../models"))
        elif kind == "k8s":
            (folder / f"deploy{i}.yaml").write_text(K8S.format(i=i, minor=8 + i % 26, mml=8192))
        elif kind == "oga":
            sub = folder / f"oga{i}"
            sub.mkdir()
            (sub / "genai_config.json").write_text(OGA.format())
        else:
            (folder / f"trt{i}.yaml").write_text(TRT)
        written += 1
    return written


BIN: Path = Path(sys.executable).parent  # replaced by the temporary venv's bin/ in main()


def timed(cmd: list[str], cwd: Path | None = None, ok=(0, 1)) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd or Path(tempfile.gettempdir()), capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}): {proc.stderr}")
    return elapsed


def cli(*args: str, cwd: Path | None = None) -> float:
    return timed([str(BIN / "sits-doctor"), *args], cwd)


def make_venv(root: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    subprocess.run([str(root / "bin" / "pip"), "install", "-q", str(REPO), "yamllint"], check=True)
    return root / "bin"


def imports_of_one_file_check() -> list[str]:
    code = (
        "import sys\n"
        "base = set(sys.modules)\n"
        "from sits_doctor.cli import main\n"
        f"try: main(['check', {str(ONE_FILE)!r}, '-q'])\n"
        "except SystemExit: pass\n"
        "print('\\n'.join(sorted({m.split('.')[0] for m in set(sys.modules) - base})))\n"
    )
    out = subprocess.run([str(BIN / "python"), "-c", code], capture_output=True, text=True,
                         cwd=tempfile.gettempdir()).stdout
    return [line for line in out.splitlines() if line and ":" not in line]


def machine() -> dict:
    from machine import cpu_name

    cpu = cpu_name()
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {
        "cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
        "platform": platform.platform(), "git": sha or "unknown",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = ap.parse_args()

    global BIN
    venv = tempfile.TemporaryDirectory()
    BIN = make_venv(Path(venv.name) / "venv")
    baseline = [cli("--version") for _ in range(args.repeats)]
    one, yl = [], []
    for _ in range(args.repeats):  # alternate, so that noise hits both alike
        one.append(cli("check", str(ONE_FILE), "-q"))
        yl.append(timed([str(BIN / "yamllint"), str(ONE_FILE)], ok=(0, 1)))
    with tempfile.TemporaryDirectory() as tmp:
        n = generate(Path(tmp), args.files)
        many = [cli("check", ".", "-q", cwd=Path(tmp)) for _ in range(max(3, args.repeats // 4))]
    yamllint_version = subprocess.run([str(BIN / "yamllint"), "--version"], capture_output=True, text=True).stdout.strip()
    result = {
        "machine": machine(),
        "one_file": {"file": str(ONE_FILE.relative_to(REPO)), "median_s": statistics.median(one), "runs_s": one},
        "yamllint_one_file": {"version": yamllint_version, "median_s": statistics.median(yl), "runs_s": yl},
        "ratio_to_yamllint": statistics.median(one) / statistics.median(yl),
        "startup_only": {"command": "sits-doctor --version", "median_s": statistics.median(baseline)},
        "directory": {"files": n, "median_s": statistics.median(many), "runs_s": many,
                      "files_per_s": n / statistics.median(many)},
        "imports_one_file": imports_of_one_file_check(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cli_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    m = result["machine"]
    md = [
        "# `sits-doctor check` wall time",
        "",
        f"Measured {m['date']} on {m['cpu']} ({m['cores']} cores), Python {m['python']}, "
        f"{m['platform']}, git {m['git']}, by `python bench/cli_speed.py`. Each run is a fresh "
        "interpreter (the `sits-doctor` entry point of a regular `pip install .` in a new venv), as in "
        "CI; times are medians of the runs listed in cli_speed.json; sits-doctor and yamllint runs "
        "alternate.",
        "",
        "| what | median wall time |",
        "|---|---|",
        f"| interpreter + CLI start (`--version`) | {result['startup_only']['median_s'] * 1000:.0f} ms |",
        f"| `check` one file ({result['one_file']['file']}) | {result['one_file']['median_s'] * 1000:.0f} ms |",
        f"| {yamllint_version} on the same file, same run | {result['yamllint_one_file']['median_s'] * 1000:.0f} ms |",
        f"| ratio sits-doctor / yamllint | {result['ratio_to_yamllint']:.2f} |",
        f"| `check` a directory of {n} generated configs | {result['directory']['median_s']:.2f} s "
        f"({result['directory']['files_per_s']:.0f} files/s) |",
        "",
        "Top-level modules the one-file check imports beyond interpreter start-up:",
        "",
        ", ".join(f"`{x}`" for x in result["imports_one_file"]),
        "",
        "None of torch, transformers, triton: "
        + ("yes" if not {"torch", "transformers", "triton"} & set(result["imports_one_file"]) else "NO"),
        "",
    ]
    (args.out / "cli_speed.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
