"""Loaders and provenance, through the Python API: every way a vLLM / TRT-LLM / ORT GenAI / HF
config is written turns into the same normalized Plan, and every Setting points at the line and
column (1-based) where it was written.

Shapes follow shared/research/vllm-hf-facts.md §2 (how vLLM reads its command line and --config
YAML) and the production-stack Helm chart / LeaderWorkerSet notes (deployment-vllm-multi.yaml).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import LLAMA_8B, k8s_deployment, write
from sits_doctor.loaders import LoadResult, load_paths
from sits_doctor.plan import Plan

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def load(root: Path, name: str, text: str) -> LoadResult:
    result = load_paths([write(root, name, text)])
    assert not result.errors, [str(e) for e in result.errors]
    return result


def plan_of(root: Path, name: str, text: str) -> Plan:
    (plan,) = load(root, name, text).plans
    return plan


def at(plan: Plan, key: str) -> tuple[object, int, int]:
    """(value, line, col) of a setting."""
    s = plan.settings[key]
    return s.value, s.prov.line, s.prov.col


def values(plan: Plan) -> dict[str, object]:
    return {k: s.value for k, s in plan.settings.items()}


# --- vLLM --config YAML -------------------------------------------------------------------------

VLLM_YAML = """
model: meta-llama/Llama-3.1-8B-Instruct
max-model-len: 8k
tensor_parallel_size: 2
gpu-memory-utilization: 0.9
enable-prefix-caching: yes
enforce_eager: off
served-model-name: [llama, default]
compilation-config:
  cudagraph_mode: FULL_AND_PIECEWISE
  level: 3
hf-overrides: '{"rope_theta": 1000000, "max_position_embeddings": 65536}'
speculative-config.num_speculative_tokens: 3
"""


def test_vllm_yaml_keys_values_and_positions(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "serve.yaml", VLLM_YAML)
    assert (plan.framework, plan.kind) == ("vllm", "vllm-yaml")
    assert plan.model_ref is not None and plan.model_ref.value == "meta-llama/Llama-3.1-8B-Instruct"
    assert (plan.model_ref.prov.line, plan.model_ref.prov.col) == (1, 1)
    # dash and underscore spellings give one normalized key; the written key is kept
    assert at(plan, "max_model_len") == (8000, 2, 1)
    assert plan.settings["max_model_len"].raw == "8k"
    assert plan.settings["max_model_len"].raw_key == "max-model-len"
    assert at(plan, "tensor_parallel_size") == (2, 3, 1)
    assert at(plan, "gpu_memory_utilization") == (0.9, 4, 1)
    assert at(plan, "served_model_name") == (["llama", "default"], 7, 1)
    assert plan.image is None and plan.env == {}


def test_vllm_yaml_11_booleans(tmp_path: Path) -> None:
    """vLLM reads --config with PyYAML (YAML 1.1): yes/off/On/NO are booleans."""
    plan = plan_of(tmp_path, "serve.yaml", VLLM_YAML + "trust-remote-code: On\ndisable-log-stats: NO\n")
    assert at(plan, "enable_prefix_caching") == (True, 5, 1)
    assert at(plan, "enforce_eager") == (False, 6, 1)
    assert plan.settings["trust_remote_code"].value is True
    assert plan.settings["disable_log_stats"].value is False


def test_vllm_yaml_nested_mapping(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "serve.yaml", VLLM_YAML)
    assert plan.settings["compilation_config"].value == {"cudagraph_mode": "FULL_AND_PIECEWISE", "level": 3}
    assert at(plan, "compilation_config.cudagraph_mode") == ("FULL_AND_PIECEWISE", 9, 3)
    assert at(plan, "compilation_config.level") == (3, 10, 3)


def test_vllm_yaml_json_string_option(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "serve.yaml", VLLM_YAML)
    assert plan.settings["hf_overrides"].value == {"rope_theta": 1000000, "max_position_embeddings": 65536}
    assert plan.settings["hf_overrides"].raw.startswith("{")
    assert at(plan, "hf_overrides.max_position_embeddings") == (65536, 11, 1)


def test_vllm_yaml_compilation_config_as_json_string(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "serve.yaml", "model: m\ncompilation-config: '{\"cudagraph_mode\": \"PIECEWISE\"}'\n")
    assert at(plan, "compilation_config.cudagraph_mode") == ("PIECEWISE", 2, 1)


def test_vllm_yaml_dotted_key(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "serve.yaml", VLLM_YAML)
    assert at(plan, "speculative_config.num_speculative_tokens") == (3, 12, 1)
    # only the part before the first dot is normalized
    plan = plan_of(tmp_path, "b.yaml", "model: m\ncompilation_config.cudagraph_mode: FULL\n")
    assert at(plan, "compilation_config.cudagraph_mode") == ("FULL", 2, 1)


def test_vllm_yaml_without_model_key(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "serve.yaml", "max-model-len: 4096\ntensor-parallel-size: 2\n")
    assert plan.kind == "vllm-yaml"
    assert plan.model_ref is None
    assert values(plan) == {"max_model_len": 4096, "tensor_parallel_size": 2}


def test_vllm_yaml_dash_and_underscore_duplicates_last_wins(tmp_path: Path) -> None:
    """vLLM turns both into --max-model-len / --max_model_len; argparse keeps the last."""
    plan = plan_of(tmp_path, "serve.yaml", "model: m\nmax-model-len: 4096\nmax_model_len: 2048\n")
    assert at(plan, "max_model_len") == (2048, 3, 1)


def test_content_sniffing_ignores_file_names(tmp_path: Path) -> None:
    assert plan_of(tmp_path, "docker-compose.yaml", "model: m\nmax-model-len: 4096\n").kind == "vllm-yaml"
    assert plan_of(tmp_path, "foo.json", LLAMA_8B).kind == "hf-config"
    assert plan_of(tmp_path, "genai_config.json", LLAMA_8B).kind == "hf-config"
    assert plan_of(tmp_path, "weird.yml", "kv_cache_config:\n  free_gpu_memory_fraction: 0.8\n").kind == "trtllm-llmapi"


# --- Kubernetes -------------------------------------------------------------------------------

K8S_ARGS = k8s_deployment(
    '          image: vllm/vllm-openai:v0.10.2',
    '          command: ["vllm", "serve"]',
    '          args:',
    '            - meta-llama/Llama-3.1-8B-Instruct',
    '            - --max-model-len=16384',
    '            - --gpu-memory-utilization',
    '            - "0.85"',
    '            - -tp',
    '            - "2"',
    '            - -O3',
    '            - --no-enable-prefix-caching',
    '            - --enforce-eager',
    '            - --compilation-config.cudagraph_mode=PIECEWISE',
    '          env:',
    '            - name: HF_TOKEN',
    '              valueFrom:',
    '                secretKeyRef: {name: hf, key: token}',
    '            - name: VLLM_ATTENTION_BACKEND',
    '              value: FLASHINFER',
    '---',
    'apiVersion: v1',
    'kind: Service',
    'metadata:',
    '  name: llm',
    'spec:',
    '  ports: [{port: 8000}]',
)


def test_k8s_args_list(tmp_path: Path) -> None:
    result = load(tmp_path, "k8s.yaml", K8S_ARGS)
    (plan,) = result.plans  # the Service document adds no plan
    assert result.files_checked == [plan.file]
    assert (plan.framework, plan.kind) == ("vllm", "vllm-args")
    assert "Deployment/llm" in plan.label and "vllm" in plan.label
    assert plan.model_ref.value == "meta-llama/Llama-3.1-8B-Instruct"
    assert (plan.model_ref.prov.line, plan.model_ref.prov.col) == (13, 15)
    assert at(plan, "max_model_len") == (16384, 14, 15)  # --flag=value
    assert at(plan, "gpu_memory_utilization") == (0.85, 15, 15)  # --flag value
    assert at(plan, "tensor_parallel_size") == (2, 17, 15)  # -tp
    assert at(plan, "optimization_level") == (3, 19, 15)  # -O3
    assert at(plan, "enable_prefix_caching") == (False, 20, 15)  # --no-X
    assert at(plan, "enforce_eager") == (True, 21, 15)
    assert at(plan, "compilation_config.cudagraph_mode") == ("PIECEWISE", 22, 15)
    assert "model" not in plan.settings  # positional model is the model_ref only


def test_k8s_image_and_env(tmp_path: Path) -> None:
    (plan,) = load(tmp_path, "k8s.yaml", K8S_ARGS).plans
    assert plan.image.value == "vllm/vllm-openai:v0.10.2"
    assert (plan.image.prov.line, plan.image.prov.col) == (10, 18)
    assert set(plan.env) == {"HF_TOKEN", "VLLM_ATTENTION_BACKEND"}
    assert plan.env["VLLM_ATTENTION_BACKEND"].value == "FLASHINFER"
    assert not plan.env["VLLM_ATTENTION_BACKEND"].templated
    assert plan.env["HF_TOKEN"].templated  # valueFrom: unknown value
    assert plan.env["HF_TOKEN"].value is None


def test_k8s_second_document_positions(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n" + K8S_ARGS.lstrip("\n").split("---")[0]
    (plan,) = load(tmp_path, "k8s.yaml", text).plans
    assert plan.settings["max_model_len"].prov.doc_index == 1
    assert at(plan, "max_model_len") == (16384, 18, 15)  # lines count from the top of the file


K8S_HEAD = """
apiVersion: apps/v1
kind: {kind}
metadata: {{name: llm}}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: {image}
"""


def k8s(kind: str = "Deployment", image: str = "python:3.11") -> str:
    return K8S_HEAD.format(kind=kind, image=image)


def test_k8s_statefulset_shell_string(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "sts.yaml", k8s("StatefulSet") + """
          command:
            - sh
            - -c
            - "pip install -q foo && vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 32768 -tp 4 && echo never"
    """)
    assert "StatefulSet/llm" in plan.label
    assert plan.model_ref.value == "Qwen/Qwen2.5-7B-Instruct"
    assert at(plan, "max_model_len") == (32768, 14, 74)
    assert at(plan, "tensor_parallel_size") == (4, 14, 96)
    assert set(plan.settings) == {"max_model_len", "tensor_parallel_size"}  # stops at &&


def test_k8s_block_scalar_script_positions(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "deploy.yaml", k8s() + """
          command: ["/bin/bash", "-c"]
          args:
            - |
              set -e
              exec vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --port 8000
    """)
    assert plan.model_ref.value == "meta-llama/Llama-3.1-8B-Instruct"
    assert (plan.model_ref.prov.line, plan.model_ref.prov.col) == (15, 31)
    assert at(plan, "max_model_len") == (8192, 15, 64)
    assert at(plan, "port") == (8000, 15, 85)


def test_k8s_folded_scalar_script(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "deploy.yaml", k8s() + """
          command:
            - /bin/sh
            - -c
            - >
              vllm serve m
              --max-model-len 4096
              --enforce-eager
    """)
    assert at(plan, "max_model_len") == (4096, 16, 15)
    assert at(plan, "enforce_eager") == (True, 17, 15)


def test_k8s_python_module_entrypoint(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "deploy.yaml", k8s(image="nvcr.io/acme/llm:1") + """
          command: ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "X", "--max-model-len", "2048"]
        - name: sidecar
          image: busybox
          command: ["sleep", "infinity"]
    """)
    assert "api_server" in plan.label
    assert plan.model_ref.value == "X"
    assert at(plan, "model") == ("X", 11, 76)  # a setting points at its flag
    assert at(plan, "max_model_len") == (2048, 11, 92)


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.8.5", "docker.io/vllm/vllm-openai:latest"])
def test_k8s_image_entrypoint_args_are_engine_flags(tmp_path: Path, image: str) -> None:
    plan = plan_of(tmp_path, "deploy.yaml", k8s(image=image) + """
          args: ["--model", "Qwen/Qwen2-7B", "--max-model-len", "8k", "--max-num-seqs", "64"]
    """)
    assert "entrypoint" in plan.label
    assert plan.model_ref.value == "Qwen/Qwen2-7B"
    assert values(plan) == {"model": "Qwen/Qwen2-7B", "max_model_len": 8000, "max_num_seqs": 64}
    assert plan.image.value == image


def test_k8s_without_vllm_has_no_plan(tmp_path: Path) -> None:
    result = load_paths([write(tmp_path, "deploy.yaml", k8s(image="nginx:1") + "          args: ['--port', '80']\n")])
    assert result.plans == []
    assert len(result.errors) == 1 and "no container runs vLLM" in result.errors[0].message


def test_leaderworkerset_leader_and_worker(tmp_path: Path) -> None:
    result = load(tmp_path, "lws.yaml", """
        apiVersion: leaderworkerset.x-k8s.io/v1
        kind: LeaderWorkerSet
        metadata:
          name: vllm
        spec:
          leaderWorkerTemplate:
            size: 2
            leaderTemplate:
              spec:
                containers:
                  - name: vllm-leader
                    image: vllm/vllm-openai:latest
                    command:
                      - sh
                      - -c
                      - "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader --ray_cluster_size=2;
                         python3 -m vllm.entrypoints.openai.api_server --port 8080 --model meta-llama/Meta-Llama-3.1-405B-Instruct --tensor-parallel-size 8 --pipeline_parallel_size 2"
            workerTemplate:
              spec:
                containers:
                  - name: vllm-worker
                    image: vllm/vllm-openai:latest
                    command: [vllm, serve, meta-llama/Meta-Llama-3.1-405B-Instruct, --headless, -tp, "8"]
        """)
    leader, worker = result.plans
    assert "LeaderWorkerSet/vllm container vllm-leader" in leader.label
    assert leader.model_ref.value == "meta-llama/Meta-Llama-3.1-405B-Instruct"
    assert at(leader, "tensor_parallel_size") == (8, 17, 124)
    assert at(leader, "pipeline_parallel_size") == (2, 17, 149)  # underscore spelling
    assert "ray_cluster_size" not in leader.settings  # belongs to the script before ';'
    assert "vllm-worker" in worker.label
    assert values(worker) == {"headless": True, "tensor_parallel_size": 8}


def test_k8s_command_and_args_both_lists(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "deploy.yaml", k8s() + """
          command: ["/usr/local/bin/vllm", "serve"]
          args: ["m", "--max_model_len", "1024", "--dtype", "bfloat16"]
    """)
    assert plan.model_ref.value == "m"
    assert values(plan) == {"max_model_len": 1024, "dtype": "bfloat16"}


def test_k8s_shell_c_split_between_command_and_args(tmp_path: Path) -> None:
    result = load_paths([write(tmp_path, "deploy.yaml", k8s() + """
          command: ["/bin/sh"]
          args: ["-c", "vllm serve m --max-model-len 4096"]
    """)])
    assert not result.errors, [str(e) for e in result.errors]
    (plan,) = result.plans
    assert at(plan, "max_model_len") == (4096, 12, 38)


def test_k8s_script_newline_ends_the_vllm_command(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "deploy.yaml", k8s() + """
          command: ["/bin/bash", "-c"]
          args:
            - |
              vllm serve m --max-model-len 4096
              python3 warmup.py --max-num-seqs 1
    """)
    assert values(plan) == {"max_model_len": 4096}


def test_k8s_script_backslash_continuation(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "deploy.yaml", k8s() + """
          command: ["/bin/bash", "-c"]
          args:
            - |
              vllm serve m \\
                --served-model-name llama \\
                --max-model-len \\
                4096
    """)
    assert values(plan) == {"served_model_name": ["llama"], "max_model_len": 4096}


def test_k8s_dependent_env_var_in_shell_string(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "deploy.yaml", k8s("LeaderWorkerSet") + """
          command: ["sh", "-c", "vllm serve m --pipeline-parallel-size $(LWS_GROUP_SIZE) --max-model-len 4096"]
    """)
    assert plan.settings["pipeline_parallel_size"].templated
    assert at(plan, "max_model_len") == (4096, 11, 90)


def test_k8s_dependent_env_var_in_args_list_is_templated(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "deploy.yaml", k8s() + """
          command: ["vllm", "serve", "m", "--pipeline-parallel-size", "$(LWS_GROUP_SIZE)", "--max-model-len", "${LEN}"]
    """)
    assert plan.settings["max_model_len"].templated
    assert plan.settings["pipeline_parallel_size"].templated


def test_shell_variable_values_are_templated(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "deploy.yaml", k8s() + """
          command: ["sh", "-c", "vllm serve $MODEL --max-model-len ${MAX_LEN} -tp 2"]
    """)
    assert plan.model_ref.templated
    assert plan.settings["max_model_len"].templated
    assert plan.value("max_model_len") is None
    assert plan.value("tensor_parallel_size") == 2


# --- docker compose -----------------------------------------------------------------------------


def test_compose_command_string_and_env_list(tmp_path: Path) -> None:
    result = load(tmp_path, "compose.yaml", """
        services:
          vllm:
            image: vllm/vllm-openai:v0.9.2
            command: --model meta-llama/Llama-3.1-8B --max-model-len 8192 -tp 2
            environment:
              - HF_TOKEN=${HF_TOKEN}
              - VLLM_USE_V1=1
              - BARE
          web:
            image: nginx
        """)
    (plan,) = result.plans  # nginx runs no vLLM
    assert "compose service vllm" in plan.label
    assert plan.image.value == "vllm/vllm-openai:v0.9.2"
    assert plan.model_ref.value == "meta-llama/Llama-3.1-8B"
    assert at(plan, "max_model_len") == (8192, 4, 46)
    assert at(plan, "tensor_parallel_size") == (2, 4, 67)
    assert plan.env["VLLM_USE_V1"].value == "1" and not plan.env["VLLM_USE_V1"].templated
    assert (plan.env["VLLM_USE_V1"].prov.line, plan.env["VLLM_USE_V1"].prov.col) == (7, 9)
    assert plan.env["HF_TOKEN"].templated and plan.env["BARE"].templated


def test_compose_command_list_and_env_map(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "compose.yml", """
        services:
          llm:
            image: registry.local/llm:3
            entrypoint: ["vllm", "serve"]
            command: ["m", "--max-model-len", "4096", "--enable-prefix-caching"]
            environment:
              VLLM_USE_V1: "0"
              HF_HOME: /data
        """)
    assert plan.model_ref.value == "m"
    assert at(plan, "max_model_len") == (4096, 5, 20)
    assert at(plan, "enable_prefix_caching") == (True, 5, 47)
    assert {k: v.value for k, v in plan.env.items()} == {"VLLM_USE_V1": "0", "HF_HOME": "/data"}


# --- Helm production-stack values ---------------------------------------------------------------

HELM_VALUES = """
servingEngineSpec:
  runtimeClassName: ""
  modelSpec:
    - name: llama
      repository: lmcache/vllm-openai
      tag: v0.3.1
      modelURL: meta-llama/Llama-3.1-8B-Instruct
      enableLoRA: true
      vllmConfig:
        maxModelLen: 16384
        tensorParallelSize: 2
        gpuMemoryUtilization: 0.95
        extraArgs: ["--gpu-memory-utilization", "0.4", "--max-num-seqs", "32"]
      env:
        - name: VLLM_LOGGING_LEVEL
          value: DEBUG
    - name: disabled
      enabled: false
      repository: vllm/vllm-openai
      modelURL: other/model
    - name: chunked
      repository: vllm/vllm-openai
      modelURL: m2
      vllmConfig:
        enablePrefixCaching: true
        enableChunkedPrefill: false
"""


def test_helm_values_model_spec(tmp_path: Path) -> None:
    llama, chunked = load(tmp_path, "values.yaml", HELM_VALUES).plans  # disabled spec: no plan
    assert "helm modelSpec llama" in llama.label
    assert llama.image.value == "lmcache/vllm-openai:v0.3.1"
    assert llama.model_ref.value == "meta-llama/Llama-3.1-8B-Instruct"
    assert (llama.model_ref.prov.line, llama.model_ref.prov.col) == (7, 17)
    assert at(llama, "max_model_len") == (16384, 10, 9)
    assert llama.settings["max_model_len"].raw_key == "--max-model-len"
    assert at(llama, "tensor_parallel_size") == (2, 11, 9)
    assert llama.settings["enable_lora"].value is True
    # extraArgs are appended after the mapped flags: the last --gpu-memory-utilization wins
    assert at(llama, "gpu_memory_utilization") == (0.4, 13, 21)
    assert at(llama, "max_num_seqs") == (32, 13, 56)
    # enablePrefixCaching absent but vllmConfig present: the chart emits --no-enable-prefix-caching
    assert at(llama, "enable_prefix_caching") == (False, 9, 7)
    assert llama.env["VLLM_LOGGING_LEVEL"].value == "DEBUG"
    assert values(chunked)["enable_prefix_caching"] is True
    assert values(chunked)["enable_chunked_prefill"] is False
    assert chunked.image.value == "vllm/vllm-openai:latest"


def test_helm_values_without_vllm_config(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "values.yaml", """
        servingEngineSpec:
          modelSpec:
            - name: plain
              repository: vllm/vllm-openai
              tag: v0.10.0
              modelURL: m
        """)
    assert plan.model_ref.value == "m"
    assert "enable_prefix_caching" not in plan.settings  # no vllmConfig: the chart emits no flag
    assert plan.image.value == "vllm/vllm-openai:v0.10.0"


# --- TensorRT-LLM and ORT GenAI -----------------------------------------------------------------

TRT_ENGINE = """
{
  "version": "0.12.0",
  "pretrained_config": {"architecture": "LlamaForCausalLM", "dtype": "float16",
                        "max_position_embeddings": 8192, "num_hidden_layers": 32, "hidden_size": 4096},
  "build_config": {"max_input_len": 1024, "max_seq_len": 2048, "max_batch_size": 8}
}
"""


def test_trtllm_engine_config_is_not_an_hf_config(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "engine/config.json", TRT_ENGINE)
    assert (plan.framework, plan.kind) == ("trtllm", "trtllm-engine")
    assert at(plan, "build_config.max_seq_len") == (2048, 5, 43)
    assert at(plan, "pretrained_config.dtype") == ("float16", 3, 61)


def test_trtllm_engine_config_states_the_models_shape() -> None:
    from sits_doctor.frameworks.transformers import model_dims

    (plan,) = load_paths([str(FIXTURES / "trtllm" / "good_engine_llama31_8b_fp8_v1.0.json")]).plans
    d = model_dims(plan.model)
    shape = (d.architecture.value, d.layers.value, d.heads.value, d.kv_heads.value, d.head_dim.value, d.vocab.value)
    assert shape == ("LlamaForCausalLM", 32, 32, 8, 128, 128256)
    assert d.head_dim.prov.pointer == "/pretrained_config/head_size"  # TensorRT-LLM's name for it
    assert (d.quantization.value, d.weight_scheme.value) == ("FP8", "fp8")


def test_trtllm_llmapi_yaml(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "extra-llm-api-config.yml", """
        backend: pytorch
        max_num_tokens: 8192
        kv_cache_config:
          free_gpu_memory_fraction: 0.85
          enable_block_reuse: false
        cuda_graph_config:
          max_batch_size: 64
        """)
    assert (plan.framework, plan.kind) == ("trtllm", "trtllm-llmapi")
    assert at(plan, "kv_cache_config.free_gpu_memory_fraction") == (0.85, 4, 3)
    assert at(plan, "kv_cache_config.enable_block_reuse") == (False, 5, 3)
    assert at(plan, "cuda_graph_config.max_batch_size") == (64, 7, 3)


def test_trtllm_llmapi_yaml_vs_vllm_yaml(tmp_path: Path) -> None:
    # vLLM spellings with dashes are never LLM-API files, even with a shared key
    assert plan_of(tmp_path, "a.yaml", "max-num-seqs: 8\nmax_num_tokens: 4\nmodel: m\n").framework == "vllm"
    assert plan_of(tmp_path, "b.yaml", "model: m\ntensor_parallel_size: 2\nkv_cache_config: {dtype: fp8}\n").framework == "trtllm"


def test_ortgenai_config(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "genai_config.json", """
        {
          "model": {
            "type": "llama",
            "context_length": 4096,
            "decoder": {
              "filename": "model.onnx",
              "session_options": {"provider_options": [{"cuda": {"enable_cuda_graph": "1"}}]}
            }
          },
          "search": {"max_length": 4096}
        }
        """)
    assert (plan.framework, plan.kind) == ("ortgenai", "ortgenai-config")
    key = "model.decoder.session_options.provider_options.0.cuda.enable_cuda_graph"
    assert at(plan, key) == ("1", 7, 58)  # a key's position
    assert at(plan, "search.max_length") == (4096, 10, 14)


# --- Hugging Face -------------------------------------------------------------------------------


def test_hf_config_with_generation_config_sidecar(tmp_path: Path) -> None:
    write(tmp_path, "model/config.json", LLAMA_8B)
    write(tmp_path, "model/generation_config.json",
          '{\n  "max_new_tokens": 256,\n  "temperature": 0.6,\n  "transformers_version": "4.45.0"\n}\n')
    write(tmp_path, "model/tokenizer.json", '{"version": "1.0"}')
    write(tmp_path, "model/tokenizer_config.json", '{"model_max_length": 131072}')
    result = load_paths([tmp_path / "model"])
    assert not result.errors
    (plan,) = result.plans  # the sidecar is consumed, not a plan of its own
    assert (plan.framework, plan.kind) == ("hf", "hf-config")
    assert result.files_checked == [plan.file]
    assert result.skipped == 2  # tokenizer files are never configs
    assert plan.model is not None and plan.model.generation is not None
    assert plan.model.text_pointer == ""
    assert at(plan, "generation_config.max_new_tokens") == (256, 2, 3)
    assert plan.settings["generation_config.max_new_tokens"].prov.file.endswith("generation_config.json")
    assert at(plan, "max_position_embeddings") == (131072, 8, 3)
    fact = plan.model.fact("max_position_embeddings")
    assert (fact.value, fact.prov.line, fact.prov.col) == (131072, 8, 3)


def test_generation_config_alone_is_its_own_plan(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "generation_config.json", '{"max_new_tokens": 64, "do_sample": true}')
    assert plan.kind == "hf-generation-config"


def test_hf_multimodal_text_config(tmp_path: Path) -> None:
    cfg = {
        "architectures": ["LlavaForConditionalGeneration"],
        "model_type": "llava",
        "text_config": {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
                        "max_position_embeddings": 4096},
        "vision_config": {"hidden_size": 1024},
    }
    plan = plan_of(tmp_path, "foo.json", json.dumps(cfg, indent=2))
    assert plan.kind == "hf-config"
    assert plan.model.text_pointer == "/text_config"
    fact = plan.model.fact("max_position_embeddings")
    assert fact.value == 4096
    assert (fact.prov.line, fact.prov.col) == (10, 5)
    assert fact.prov.pointer == "/text_config/max_position_embeddings"


def test_mlc_chat_config_is_not_taken_for_a_transformers_config(tmp_path):
    """MLC LLM's mlc-chat-config.json has model_type and vocab_size at the top, like a transformers
    config.json, but also its own keys (model_config, conv_template, context_window_size)."""
    from sits_doctor.loaders import load_paths

    path = tmp_path / "mlc-chat-config.json"
    path.write_text('{"model_type": "llama", "vocab_size": 32000, "context_window_size": 4096, '
                    '"conv_template": {"name": "llama-2"}, "model_config": {"hidden_size": 4096}}')
    result = load_paths([tmp_path])
    assert result.plans == []
    assert [why for _, why in result.skipped_files] == ["not a recognized config"]


@pytest.mark.parametrize("cluster", ["-c", "-ec", "-lc", "-xc", "-exc"])
def test_shell_flag_clusters_ending_in_c_run_the_next_item_as_a_script(tmp_path, cluster):
    """`bash -ec "..."` and friends (issue "Reliability": only an exact -c was read)."""
    from conftest import k8s_deployment
    from sits_doctor.loaders import load_paths

    path = tmp_path / "k8s.yaml"
    path.write_text(k8s_deployment("          image: vllm/vllm-openai:v0.11.0",
                                   "          command: [bash]",
                                   f'          args: ["{cluster}", "vllm serve m --swap-space 4"]'), encoding="utf-8")
    (plan,) = load_paths([path]).plans
    assert plan.get("swap_space").value == 4.0


def test_variables_expand_from_the_containers_env(tmp_path):
    """Kubernetes expands $(VAR) from the container's env, and a shell in the container expands
    ${VAR} and ${VAR:-default}; a variable the env does not set (or sets from a secret) stays
    unknown and is counted (issue "Reliability")."""
    from conftest import k8s_deployment
    from sits_doctor.loaders import load_paths

    path = tmp_path / "k8s.yaml"
    path.write_text(k8s_deployment(
        "          image: vllm/vllm-openai:v0.11.0",
        "          env:",
        '            - {name: MAX_LEN, value: "8192"}',
        "            - {name: SWAP, valueFrom: {secretKeyRef: {name: s, key: k}}}",
        '          command: ["sh", "-c"]',
        "          args: ['vllm serve m --max-model-len ${MAX_LEN} --max-num-seqs ${SEQS:-64} --swap-space ${SWAP} --block-size $(B)']",
    ), encoding="utf-8")
    result = load_paths([path])
    (plan,) = result.plans
    assert plan.get("max_model_len").value == 8192 and not plan.get("max_model_len").templated
    assert plan.get("max_num_seqs").value == 64
    assert plan.get("swap_space").templated and plan.get("block_size").templated
    assert plan.unchecked == 2
    assert any("2 command-line word(s) use variables" in n.message for n in result.notices)


def test_compose_variables_are_not_taken_from_the_service_environment(tmp_path):
    """compose interpolates ${VAR} from the host's environment, not from `environment:`."""
    from sits_doctor.loaders import load_paths

    path = tmp_path / "compose.yaml"
    path.write_text("services:\n  v:\n    image: vllm/vllm-openai:v0.11.0\n    environment: {LEN: '8192'}\n"
                    "    command: --model m --max-model-len ${LEN}\n", encoding="utf-8")
    (plan,) = load_paths([path]).plans
    assert plan.get("max_model_len").templated


@pytest.mark.parametrize("data, read", [
    ({"model_type": "llama"}, True),  # transformers loads it with LlamaConfig's defaults
    ({"model_type": "qwen2", "torch_dtype": "bfloat16"}, True),
    ({"model_type": "not_a_transformers_type"}, False),
    ({"model_type": 7}, False),
    ({"architectures": ["LlamaForCausalLM"]}, False),  # no model_type and no shape: nothing to size
])
def test_a_config_with_only_a_known_model_type_is_a_model_config(tmp_path, data, read):
    import json

    from sits_doctor.engine import CheckOptions, check

    (tmp_path / "config.json").write_text(json.dumps(data))
    report = check([tmp_path / "config.json"], CheckOptions(isolated=True))
    assert bool(report.deployments) is read
    if read:
        dims = report.deployments[0].facts.model
        assert dims.layers.value > 0 and "default of transformers" in str(dims.layers.prov)


def test_a_quant_config_alone_says_the_checkpoint_is_not_checked(tmp_path):
    """A lone hf_quant_config.json (a repository root with no config.json) is no '0 findings'."""
    from sits_doctor.engine import CheckOptions, check

    (tmp_path / "hf_quant_config.json").write_text(
        '{"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": null}}')
    report = check([tmp_path], CheckOptions(isolated=True))
    assert report.findings == [] and not report.errors
    assert any("without a config.json beside it" in n.message for n in report.notices)
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')  # beside a config.json it is read with it
    assert not any("without a config.json" in n.message for n in check([tmp_path], CheckOptions(isolated=True)).notices)
