"""Deployments of servers sits-doctor does not read (SGLang, TGI, Ollama, llama.cpp, Infinity) are
read, said to be "not checked", and never judged by vLLM's rules or given a vLLM target."""

from __future__ import annotations

import pytest
from pathlib import Path
from conftest import run_cli, write

from sits_doctor.engine import CheckOptions, check
from sits_doctor.loaders.foreign import servers_in

SGLANG_SCRIPT = """#!/bin/bash
set -e
MODEL=meta-llama/Llama-3.1-8B-Instruct
python3 -m sglang.launch_server --model-path "$MODEL" --tp 2 --mem-fraction-static 0.85 --port 30000
"""
RAY_SGLANG = """applications:
- name: llm_app
  route_prefix: /
  import_path: ray.serve.llm:build_openai_app
  args:
    llm_configs:
    - model_loading_config:
        model_id: qwen
        model_source: Qwen/Qwen2.5-7B-Instruct
      server_cls: ray.llm._internal.serve.engines.sglang.sglang_engine:SGLangServer
      engine_kwargs:
        tp_size: 1
        mem_fraction_static: 0.8
        max_model_len: 999999999
"""


def _check(tmp_path, name, text):
    write(tmp_path, name, text)
    return check([tmp_path / name], CheckOptions(isolated=True))


@pytest.mark.parametrize("name, text", [("serve.sh", SGLANG_SCRIPT), ("ray.yaml", RAY_SGLANG)])
def test_sglang_is_read_and_not_checked(tmp_path, name, text):
    report = _check(tmp_path, name, text)
    assert report.errors == [] and report.findings == [] and report.deployments == []
    assert report.exit_code == 0 and len(report.files_checked) == 1
    (notice,) = [n for n in report.notices if "not checked" in n.message]
    assert notice.message.startswith("runs SGLang: not checked")
    assert "vLLM's rules are not applied" in notice.message


def test_a_ray_serve_app_keeps_its_vllm_engines(tmp_path):
    """Only the SGLang engine is left out: a vLLM llm_config beside it is still checked."""
    text = RAY_SGLANG + """    - model_loading_config:
        model_id: llama
        model_source: meta-llama/Llama-3.1-8B-Instruct
      engine_kwargs:
        max_model_len: 8192
"""
    report = _check(tmp_path, "ray.yaml", text)
    assert [p.label for p in report.deployments] == ["Ray Serve LLM llama"]


def test_the_cli_says_it_and_exits_0(tmp_path):
    write(tmp_path, "serve.sh", SGLANG_SCRIPT)
    result = run_cli("check", "serve.sh", "--isolated", cwd=tmp_path)
    assert result.exit_code == 0
    assert "serve.sh: note: runs SGLang: not checked" in result.stderr
    assert "target: vLLM" not in result.stdout + result.stderr


@pytest.mark.parametrize("text, found", [
    ("docker run lmsysorg/sglang:v0.5.2 python3 -m sglang.launch_server --model-path x", ["SGLang"]),
    ("text-generation-launcher --model-id x", ["Text Generation Inference"]),
    ("image: ghcr.io/huggingface/text-generation-inference:3.0", ["Text Generation Inference"]),
    ("command: [ollama, serve]\nimage: ollama/ollama:0.5", ["Ollama"]),
    ("spec:\n  engine: OLlama\n", ["Ollama"]),
    ("llama-server -m model.gguf --port 8080", ["llama.cpp"]),
    ("spec:\n  engine: Infinity\n", ["Infinity"]),
    ("command: [python3, -m, dynamo.sglang, --model-path, m]", ["SGLang"]),
    ("args: ['python3 -m dynamo.vllm --model m --tensor-parallel-size 2']", ["NVIDIA Dynamo's vLLM worker"]),
    ("# we moved off sglang.launch_server last year\nvllm serve x\n", []),  # a comment is not a launch
    ("vllm serve Qwen/Qwen2.5-7B-Instruct", []),
    ("image: myorg/sglangish:1\nlmsysorg/sglanger", []),
])
def test_servers_in(text, found):
    assert servers_in(text) == found


def test_only_the_first_mebibyte_is_looked_at():
    from sits_doctor.loaders.foreign import TEXT_LIMIT

    launch = "sglang.launch_server"
    assert TEXT_LIMIT == 2**20
    assert servers_in(" " * (TEXT_LIMIT - len(launch)) + launch) == ["SGLang"]
    assert servers_in(" " * (TEXT_LIMIT - len(launch) + 1) + launch) == []  # cut inside the name


def test_a_slurm_batch_script_is_read_as_a_shell_script(tmp_path):
    text = "#!/bin/bash\n#SBATCH --gres=gpu:8\n" + SGLANG_SCRIPT.split("\n", 1)[1]
    report = _check(tmp_path, "serve.sbatch", text)
    assert report.errors == [] and any(n.message.startswith("runs SGLang") for n in report.notices)
    vllm = _check(tmp_path, "vllm.sbatch", "#!/bin/bash\n#SBATCH -N 1\nvllm serve m --swap-space 4\n")
    assert [p.kind for p in vllm.deployments] == ["vllm-args"]
    walked = check([tmp_path], CheckOptions(isolated=True))
    assert sorted(Path(f).name for f in walked.files_checked) == ["serve.sbatch", "vllm.sbatch"]
