"""``sits-doctor capacity``: the issue's reference deployment (Llama-3.1-70B-Instruct on H100s,
no --max-model-len), as text and as JSON, from the bundled model and GPU catalogs."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli, write

MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama-70b
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args: ["--model", "meta-llama/Llama-3.1-70B-Instruct"{extra}]
"""
KEYS = {"path", "framework", "model", "gpu", "kv_bytes_per_token", "weights_bytes", "kv_cache_tokens",
        "max_model_len", "max_concurrency", "startup", "assumptions", "steps"}


@pytest.fixture
def proj(tmp_path, hermetic):
    write(tmp_path, "one.yaml", MANIFEST.format(extra=""))
    write(tmp_path, "tp4.yaml", MANIFEST.format(extra=', "--tensor-parallel-size", "4"'))
    return tmp_path


def test_70b_on_one_h100_fails_at_startup_with_the_arithmetic(proj):
    r = run_cli("capacity", "one.yaml", "--gpu", "H100", "--isolated", cwd=proj)
    assert r.exit_code == 1, r.stderr
    assert "verdict       FAILS AT STARTUP" in r.stdout
    assert "the weights alone (131.41 GiB per rank) exceed" in r.stdout
    assert "KV per token: 320.0 KiB/token/rank = 2 (K,V) · 8 KV heads · head_dim 128 · 2 B · 80 layers" in r.stdout
    assert "max_model_len 131072" in r.stdout  # derived from the model: the flag is not set


def test_70b_with_tp4_reports_the_concurrency(proj):
    r = run_cli("capacity", "tp4.yaml", "--gpu", "H100x4", "--isolated", "--format", "json", cwd=proj)
    assert r.exit_code == 0, r.stderr
    (d,) = json.loads(r.stdout)["deployments"]
    assert set(d) == KEYS
    assert d["kv_bytes_per_token"] == 80 * 1024  # max(1, 8 // 4) KV heads per rank
    assert d["gpu"] == {"name": "H100-SXM-80GB", "count": 4, "memory_bytes": d["gpu"]["memory_bytes"]}
    tokens = d["kv_cache_tokens"]
    assert 0 < tokens["low"] <= tokens["estimate"] <= tokens["high"]
    assert d["max_concurrency"] == round(tokens["estimate"] / 131072, 2) > 1
    assert d["startup"] == {"ok": True, "reason": None}


def test_gpu_memory_wins_over_the_catalog(proj):
    r = run_cli("capacity", "tp4.yaml", "--gpu", "H100x4", "--gpu-memory", "60GiB", "--isolated", "--format", "json",
                cwd=proj)
    (d,) = json.loads(r.stdout)["deployments"]
    assert d["gpu"]["memory_bytes"] == 60 * 2**30
    assert any("(--gpu-memory)" in a for a in d["assumptions"])


def test_without_a_gpu_it_says_what_is_missing(proj):
    r = run_cli("capacity", "tp4.yaml", "--isolated", "--format", "json", cwd=proj)
    (d,) = json.loads(r.stdout)["deployments"]
    assert d["kv_cache_tokens"] is None and d["startup"]["ok"] is None
    assert any("the GPU's memory" in a for a in d["assumptions"])


@pytest.mark.parametrize(("args", "needle"), [(["--gpu", "H900"], "--gpu unknown GPU"),
                                              (["--gpu-memory", "lots"], "expected a size such as 79.19GiB")])
def test_bad_gpu_arguments_exit_2(proj, args, needle):
    r = run_cli("capacity", "one.yaml", *args, cwd=proj)
    assert r.exit_code == 2 and needle in r.stderr


def test_trtllm_deployment_as_json_names_the_shrunk_window(tmp_path, hermetic):
    write(tmp_path, "llm_api.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\nmax_num_tokens: 8192\n"
                                    "max_seq_len: 131072\nkv_cache_config:\n  free_gpu_memory_fraction: 0.9\n")
    r = run_cli("capacity", "llm_api.yaml", "--gpu", "L4", "--target", "trtllm==1.0.0", "--isolated", "--format",
                "json", cwd=tmp_path)
    (d,) = json.loads(r.stdout)["deployments"]
    assert set(d) == KEYS and d["framework"] == "trtllm"
    assert d["max_model_len"] == 131072 and d["startup"]["ok"] is False
    assert d["startup"]["reason"].startswith("Attention window size 131072 exceeds upper bound ")
    text = run_cli("capacity", "llm_api.yaml", "--gpu", "L4", "--target", "trtllm==1.0.0", "--isolated", cwd=tmp_path)
    assert "verdict       WINDOW SHRUNK: one max_seq_len sequence does not fit" in text.stdout
    assert "TensorRT-LLM would say: Attention window size 131072" in text.stdout
