"""SITS204 removed-or-renamed-option: version boundaries and strict parsers.

vLLM boundaries: the last release with the flag and the first without, from the vLLM source
releases on PyPI (tests/data/vllm_flags.json, made by tools/scan_vllm_flags.py; the table itself is
checked against it below); shared/research/vllm-hf-facts.md §1, §1b, §1c.
TensorRT-LLM: shared/research/trtllm-ortgenai-facts.md §3 and the 1.0 release notes' API changes.
ORT GenAI: shared/research/trtllm-ortgenai-facts.md §5 (strict sections, top-level scalars ignored,
session_options passed through to AddConfigEntry), src/config.cpp.
"""

from __future__ import annotations

import harness
import pytest

from conftest import k8s_deployment, write
from sits_doctor import CheckOptions, check
from sits_doctor.finding import Severity

CODE = "SITS204"


def findings(tmp_path, monkeypatch, name: str, text: str, target: str):
    return harness.findings(tmp_path, monkeypatch, {name: text}, name, CODE, target)


def rendered(tmp_path, monkeypatch, name, text, target) -> list[str]:
    return [f.render() for f in findings(tmp_path, monkeypatch, name, text, target)]


def serve(tmp_path, monkeypatch, line: str, version: str) -> list[str]:
    """A ``vllm serve --config`` file whose option under test is on line 2."""
    text = f"model: ./m\n{line}\nserved-model-name: m\n"  # a vLLM-only key: generic ones alone don't make a vLLM file
    return rendered(tmp_path, monkeypatch, "serve.yaml", text, f"vllm=={version}")


# --- vLLM: removed flags at their boundary -------------------------------------------------------

# (YAML line, flag, last version with it, first version without it, fix hint)
REMOVED = [
    ("worker-use-ray: true", "--worker-use-ray", "0.6.6.post1", "0.7.0", "use --distributed-executor-backend ray"),
    ("speculative-model: org/draft", "--speculative-model", "0.8.2", "0.8.3", None),
    ("num-speculative-tokens: 4", "--num-speculative-tokens", "0.8.2", "0.8.3", None),
    ("use-v2-block-manager: true", "--use-v2-block-manager", "0.9.2", "0.10.0", None),
    ("tokenizer-pool-size: 2", "--tokenizer-pool-size", "0.9.2", "0.10.0", None),
    ("tokenizer-pool-type: ray", "--tokenizer-pool-type", "0.9.2", "0.10.0", None),
    ("enable-reasoning: true", "--enable-reasoning", "0.9.2", "0.10.0", "use --reasoning-parser alone"),
    ("device: cuda", "--device", "0.9.2", "0.10.0", None),
    ("num-scheduler-steps: 8", "--num-scheduler-steps", "0.10.0", "0.10.1", None),
    ("multi-step-stream-outputs: true", "--multi-step-stream-outputs", "0.10.0", "0.10.1", None),
    ("preemption-mode: swap", "--preemption-mode", "0.10.2", "0.11.0", None),
    ("disable-async-output-proc: true", "--disable-async-output-proc", "0.10.2", "0.11.0", None),
    ("scheduler-delay-factor: 0.5", "--scheduler-delay-factor", "0.10.2", "0.11.0", None),
    ("max-seq-len-to-capture: 8192", "--max-seq-len-to-capture", "0.10.2", "0.11.0", None),
    ("rope-theta: 1000000", "--rope-theta", "0.11.0", "0.11.1", "use --hf-overrides '{\"rope_theta\": ...}'"),
    ("guided-decoding-backend: xgrammar", "--guided-decoding-backend", "0.11.2", "0.12.0",
     "use --structured-outputs-config.backend"),
    ("lora-extra-vocab-size: 256", "--lora-extra-vocab-size", "0.11.2", "0.12.0", None),
    ("swap-space: 16", "--swap-space", "0.17.1", "0.18.0", "remove it (no CPU swap space in the V1 engine)"),
]


@pytest.mark.parametrize("line, flag, last, first, hint", REMOVED, ids=[r[1] for r in REMOVED])
def test_pass_removed_flag_on_last_version_with_it(tmp_path, monkeypatch, line, flag, last, first, hint):
    assert [f for f in serve(tmp_path, monkeypatch, line, last) if "[error]" in f] == []


@pytest.mark.parametrize("line, flag, last, first, hint", REMOVED, ids=[r[1] for r in REMOVED])
def test_fail_removed_flag_on_first_version_without_it(tmp_path, monkeypatch, line, flag, last, first, hint):
    found = findings(tmp_path, monkeypatch, "serve.yaml", f"model: ./m\n{line}\nserved-model-name: m\n", f"vllm=={first}")
    assert [f.render() for f in found] == [
        f"serve.yaml:2:1: SITS204 [error] {flag} was removed in vLLM {first}: vLLM {first} rejects it at "
        "startup"
    ]
    if hint:
        assert found[0].fix_hint == hint


# Flags §6 lists as removed that SITS204 does not know.
MISSING = [
    ("long-lora-scaling-factors: [4.0]", "--long-lora-scaling-factors", "0.9.2", "0.10.0"),
    ("max-prompt-adapters: 2", "--max-prompt-adapters", "0.9.2", "0.10.0"),
    ("enable-prompt-adapter: true", "--enable-prompt-adapter", "0.10.1", "0.10.2"),
    ("guided-decoding-disable-fallback: true", "--guided-decoding-disable-fallback", "0.11.2", "0.12.0"),
    ("guided-decoding-disable-any-whitespace: true", "--guided-decoding-disable-any-whitespace", "0.11.2", "0.12.0"),
    ("guided-decoding-disable-additional-properties: true", "--guided-decoding-disable-additional-properties",
     "0.11.2", "0.12.0"),
]


@pytest.mark.parametrize("line, flag, last, first", MISSING, ids=[m[1] for m in MISSING])
def test_pass_unlisted_removed_flag_on_last_version_with_it(tmp_path, monkeypatch, line, flag, last, first):
    assert [f for f in serve(tmp_path, monkeypatch, line, last) if "[error]" in f] == []


@pytest.mark.parametrize("line, flag, last, first", MISSING, ids=[m[1] for m in MISSING])
def test_fail_unlisted_removed_flag_on_first_version_without_it(tmp_path, monkeypatch, line, flag, last, first):
    found = serve(tmp_path, monkeypatch, line, first)
    assert len(found) == 1 and found[0].startswith(
        f"serve.yaml:2:1: SITS204 [error] {flag} was removed in vLLM {first}"), found


# --- vLLM: deprecated, then removed --------------------------------------------------------------


def test_pass_calculate_kv_scales_before_deprecation(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, "calculate-kv-scales: true", "0.18.1") == []


@pytest.mark.parametrize("version", ["0.19.0", "0.27.1"])
def test_fail_calculate_kv_scales_deprecated(tmp_path, monkeypatch, version):
    """0.19.0's parser already marks it deprecated (the research notes said 0.20 from fewer releases)."""
    assert serve(tmp_path, monkeypatch, "calculate-kv-scales: true", version) == [
        "serve.yaml:2:1: SITS204 [warning] --calculate-kv-scales is deprecated since vLLM 0.19.0 and is gone in 0.28.0"
    ]


def test_fail_calculate_kv_scales_removed(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, "calculate-kv-scales: true", "0.28.0") == [
        "serve.yaml:2:1: SITS204 [error] --calculate-kv-scales was removed in vLLM 0.28.0: vLLM 0.28.0 rejects "
        "it at startup"
    ]


def test_pass_cuda_graph_sizes_on_0_11_0(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, "cuda-graph-sizes: [8, 16]", "0.11.0") == []


def test_fail_cuda_graph_sizes_deprecated_from_0_11_1(tmp_path, monkeypatch):
    found = findings(tmp_path, monkeypatch, "serve.yaml", "model: ./m\ncuda-graph-sizes: [8, 16]\n", "vllm==0.11.1")
    assert [f.render() for f in found] == [
        "serve.yaml:2:1: SITS204 [warning] --cuda-graph-sizes is deprecated since vLLM 0.11.1 and is gone in 0.13.0"
    ]
    assert found[0].fix_hint == "use --cudagraph-capture-sizes or --max-cudagraph-capture-size"


def test_fail_cuda_graph_sizes_removed_on_0_13(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, "cuda-graph-sizes: [8, 16]", "0.13.0") == [
        "serve.yaml:2:1: SITS204 [error] --cuda-graph-sizes was removed in vLLM 0.13.0: vLLM 0.13.0 rejects it "
        "at startup"
    ]


# Boundaries as the releases' own parsers report them (sits_doctor/frameworks/data/vllm_options.json:
# --task's help says deprecated from 0.10.1; the research notes had 0.11.2 from fewer releases).
@pytest.mark.parametrize("version, expected", [
    ("0.10.0", []),
    ("0.10.1", ["serve.yaml:2:1: SITS204 [warning] --task is deprecated since vLLM 0.10.1 and is gone in 0.13.0"]),
    ("0.12.0", ["serve.yaml:2:1: SITS204 [warning] --task is deprecated since vLLM 0.10.1 and is gone in 0.13.0"]),
    ("0.13.0", ["serve.yaml:2:1: SITS204 [error] --task was removed in vLLM 0.13.0: vLLM 0.13.0 rejects it at "
                "startup"]),
])
def test_fail_or_pass_task_by_version(tmp_path, monkeypatch, version, expected):
    assert serve(tmp_path, monkeypatch, "task: generate", version) == expected


@pytest.mark.parametrize("version, expected", [
    ("0.10.0", []),
    ("0.16.0", ["serve.yaml:2:1: SITS204 [warning] --disable-log-requests is deprecated since vLLM 0.10.1 and is "
                "gone in 0.17.0"]),
    ("0.17.0", ["serve.yaml:2:1: SITS204 [error] --disable-log-requests was removed in vLLM 0.17.0 (accepted "
                "again from 0.33.0): vLLM 0.17.0 rejects it at startup"]),
    ("0.32.0", ["serve.yaml:2:1: SITS204 [error] --disable-log-requests was removed in vLLM 0.17.0 (accepted "
                "again from 0.33.0): vLLM 0.32.0 rejects it at startup"]),
    # 0.33.0's parser generates --disable-X for every --enable-X flag (the false error of the old scan)
    ("0.33.0", []),
])
def test_fail_or_pass_disable_log_requests_by_version(tmp_path, monkeypatch, version, expected):
    assert serve(tmp_path, monkeypatch, "disable-log-requests: true", version) == expected


# --- vLLM: flags that arrived later ---------------------------------------------------------------


def test_fail_max_cudagraph_capture_size_before_0_11_1(tmp_path, monkeypatch):
    found = findings(tmp_path, monkeypatch, "serve.yaml", "model: ./m\nmax-cudagraph-capture-size: 256\n",
                     "vllm==0.11.0")
    assert [f.render() for f in found] == [
        "serve.yaml:2:1: SITS204 [error] --max-cudagraph-capture-size arrived in vLLM 0.11.1: vLLM 0.11.0 "
        "rejects it at startup"
    ]
    assert found[0].fix_hint == "use --cuda-graph-sizes on this version"


def test_pass_max_cudagraph_capture_size_from_0_11_1(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, "max-cudagraph-capture-size: 256", "0.11.1") == []


# --- vLLM: the same boundaries on Kubernetes command lines ----------------------------------------

DEPLOYMENT = k8s_deployment('          image: vllm/vllm-openai:{tag}', '          args: ["--model", "./m", {args}]') + "{env}"
ATTENTION_ENV = """          env:
            - name: VLLM_ATTENTION_BACKEND
              value: FLASHINFER
"""


def k8s(tmp_path, monkeypatch, args: str, version: str, env: str = "", tag: str = "latest") -> list[str]:
    text = DEPLOYMENT.format(tag=tag, args=args, env=env)
    return rendered(tmp_path, monkeypatch, "k8s.yaml", text, f"vllm=={version}")


@pytest.mark.parametrize("args, written", [('"--swap-space", "4"', "--swap-space"), ('"--swap_space=4"', "--swap_space")])
def test_fail_swap_space_in_k8s_args(tmp_path, monkeypatch, args, written):
    assert k8s(tmp_path, monkeypatch, args, "0.18.0") == [
        f"k8s.yaml:11:36: SITS204 [error] {written} was removed in vLLM 0.18.0: vLLM 0.18.0 rejects it at "
        "startup"
    ]


def test_fail_swap_space_in_k8s_args_on_0_17_1_is_accepted_and_ignored(tmp_path, monkeypatch):
    """0.17.1 still parses --swap-space, but its V1 engine keeps no swap space (issue 26)."""
    (line,) = k8s(tmp_path, monkeypatch, '"--swap-space", "4"', "0.17.1")
    assert line.startswith("k8s.yaml:11:36: SITS204 [warning] --swap-space is accepted by vLLM 0.17.1 but has no effect")


def test_pass_swap_space_in_k8s_args_on_0_10_2(tmp_path, monkeypatch):
    """0.10.2 still has the V0 engine (and falls back to it), which uses the swap space."""
    assert k8s(tmp_path, monkeypatch, '"--swap-space", "4"', "0.10.2") == []


def test_fail_version_from_image_tag_when_no_target(tmp_path, monkeypatch):
    write(tmp_path, "k8s.yaml", DEPLOYMENT.format(tag="v0.18.0", args='"--swap-space", "4"', env=""))
    monkeypatch.chdir(tmp_path)
    report = check(["k8s.yaml"], CheckOptions(isolated=True, select=[CODE]))
    assert [f.render() for f in report.findings] == [
        "k8s.yaml:11:36: SITS204 [error] --swap-space was removed in vLLM 0.18.0: vLLM 0.18.0 rejects it at "
        "startup"
    ]


def test_pass_attention_backend_env_on_0_12(tmp_path, monkeypatch):
    assert k8s(tmp_path, monkeypatch, '"--enforce-eager"', "0.12.0", ATTENTION_ENV) == []


@pytest.mark.parametrize("version", ["0.13.0", "0.14.0"])
def test_fail_attention_backend_env_deprecated(tmp_path, monkeypatch, version):
    assert k8s(tmp_path, monkeypatch, '"--enforce-eager"', version, ATTENTION_ENV) == [
        "k8s.yaml:13:21: SITS204 [warning] VLLM_ATTENTION_BACKEND is deprecated since vLLM 0.13.0 and ignored from 0.16.0"
    ]


@pytest.mark.parametrize("version", ["0.16.0", "0.33.0"])
def test_fail_attention_backend_env_ignored(tmp_path, monkeypatch, version):
    text = DEPLOYMENT.format(tag="latest", args='"--enforce-eager"', env=ATTENTION_ENV)
    found = findings(tmp_path, monkeypatch, "k8s.yaml", text, f"vllm=={version}")
    assert [f.render() for f in found] == [
        f"k8s.yaml:13:21: SITS204 [warning] VLLM_ATTENTION_BACKEND is ignored by vLLM {version}: the attention "
        "backend you pinned is not the one that runs"
    ]
    assert found[0].fix_hint == "use --attention-backend FLASHINFER (or -ac.backend=NAME)"


# --- vLLM: compilation_config.max_capture_size ---------------------------------------------------
# ≤0.11: a computed field (init=False); 0.12: gone, CompilationConfig still ignores unknown keys
# (pydantic dataclass default extra="ignore"); from 0.13.0: @dataclass(config=ConfigDict(extra="forbid"))
# (vllm/config/compilation.py@0.13.0), so startup fails.

CAPTURE_JSON = "compilation-config: '{\"max_capture_size\": 256}'"


@pytest.mark.parametrize("version", ["0.11.1", "0.12.0"])
def test_fail_max_capture_size_not_a_field_from_0_11_1(tmp_path, monkeypatch, version):
    found = findings(tmp_path, monkeypatch, "serve.yaml", f"model: ./m\n{CAPTURE_JSON}\n", f"vllm=={version}")
    assert [f.render() for f in found] == [
        f"serve.yaml:2:1: SITS204 [warning] compilation_config.max_capture_size is not a field in vLLM {version}: it is silently ignored"
    ]
    assert found[0].fix_hint == "use max_cudagraph_capture_size (≥0.11.1) or cudagraph_capture_sizes"


def test_fail_max_capture_size_mapping_is_located_at_the_nested_key(tmp_path, monkeypatch):
    text = "model: ./m\ncompilation-config:\n  max_capture_size: 256\n"
    assert rendered(tmp_path, monkeypatch, "serve.yaml", text, "vllm==0.16.0") == [
        "serve.yaml:3:3: SITS204 [error] compilation_config.max_capture_size is not a CompilationConfig field in vLLM "
        "0.16.0: startup fails (unknown fields are forbidden)"
    ]


def test_fail_max_capture_size_dotted_k8s_flag(tmp_path, monkeypatch):
    found = k8s(tmp_path, monkeypatch, '"-cc.max_capture_size=256"', "0.16.0")
    assert found == [
        "k8s.yaml:11:36: SITS204 [error] compilation_config.max_capture_size is not a CompilationConfig field in vLLM "
        "0.16.0: startup fails (unknown fields are forbidden)"
    ]


@pytest.mark.parametrize("version", ["0.13.0", "0.14.0"])
def test_fail_max_capture_size_is_an_error_from_0_13(tmp_path, monkeypatch, version):
    found = findings(tmp_path, monkeypatch, "serve.yaml", f"model: ./m\n{CAPTURE_JSON}\n", f"vllm=={version}")
    assert [(f.code, f.severity, f.location.line) for f in found] == [(CODE, Severity.ERROR, 2)]


def test_fail_max_capture_size_ignored_on_0_11(tmp_path, monkeypatch):
    found = findings(tmp_path, monkeypatch, "serve.yaml", f"model: ./m\n{CAPTURE_JSON}\n", "vllm==0.11.0")
    assert [(f.code, f.severity, f.location.line) for f in found] == [(CODE, Severity.WARNING, 2)]


# --- TensorRT-LLM LLM-API YAML --------------------------------------------------------------------

PRE_1_0 = """
model: meta-llama/Llama-3.1-8B-Instruct
use_cuda_graph: true
cuda_graph_batch_sizes: [1, 2, 4]
cuda_graph_max_batch_size: 4
cuda_graph_padding_enabled: true
kv_cache_dtype: fp8
mixed_sampler: true
autotuner_enabled: false
print_iter_log: true
"""
PRE_1_0_EXPECTED = [
    (2, "use_cuda_graph", "use cuda_graph_config: {} to enable (the 1.x default), cuda_graph_config: null to disable"),
    (3, "cuda_graph_batch_sizes", "use cuda_graph_config.batch_sizes"),
    (4, "cuda_graph_max_batch_size", "use cuda_graph_config.max_batch_size"),
    (5, "cuda_graph_padding_enabled", "use cuda_graph_config.enable_padding"),
    (6, "kv_cache_dtype", "use kv_cache_config.dtype"),
    (7, "mixed_sampler", "remove it (1.0 renamed it enable_mixed_sampler, which later 1.x releases no longer have)"),
    (8, "autotuner_enabled", "use enable_autotuner"),
]


def test_fail_trtllm_pre_1_0_keys_on_1_0(tmp_path, monkeypatch):
    found = findings(tmp_path, monkeypatch, "extra.yaml", PRE_1_0, "trtllm==1.0.0")
    assert [f.render() for f in found] == [
        f"extra.yaml:{line}:1: SITS204 [error] {key} is a pre-1.0 LLM-API option: TensorRT-LLM 1.0.0 refuses "
        "to start"
        for line, key, _ in PRE_1_0_EXPECTED
    ]
    assert [f.fix_hint for f in found] == [hint for _, _, hint in PRE_1_0_EXPECTED]


@pytest.mark.parametrize("version", ["0.20.0", "0.21.0"])
def test_pass_trtllm_pre_1_0_keys_on_pre_1_0(tmp_path, monkeypatch, version):
    # no error: the keys are right for 0.x; that release's own LLM-API models were not read (info)
    assert rendered(tmp_path, monkeypatch, "extra.yaml", PRE_1_0, f"trtllm=={version}") == [
        f"extra.yaml:1:1: SITS204 [info] the LLM-API options of TensorRT-LLM {version} were not checked (a release "
        "whose llm_args.py was not read; the tables hold 1.0.0, 1.1.0, 1.2.0): unknown keys are not reported"]


def test_fail_trtllm_pytorch_backend_config_on_1_2(tmp_path, monkeypatch):
    text = """
    pytorch_backend_config:
      use_cuda_graph: true
      kv_cache_dtype: fp8
    kv_cache_config:
      free_gpu_memory_fraction: 0.8
    """
    found = findings(tmp_path, monkeypatch, "extra.yaml", text, "trtllm==1.2.0")
    assert [f.render() for f in found] == [
        "extra.yaml:1:1: SITS204 [error] pytorch_backend_config is a pre-1.0 LLM-API option: TensorRT-LLM 1.2.0 "
        "refuses to start",
        "extra.yaml:2:3: SITS204 [error] pytorch_backend_config.use_cuda_graph is a pre-1.0 LLM-API option: "
        "TensorRT-LLM 1.2.0 refuses to start",
        "extra.yaml:3:3: SITS204 [error] pytorch_backend_config.kv_cache_dtype is a pre-1.0 LLM-API option: "
        "TensorRT-LLM 1.2.0 refuses to start",
    ]
    assert found[0].fix_hint == "use its fields at the top level (PyTorchConfig is no longer accepted)"


def test_fail_trtllm_interim_padding_enabled(tmp_path, monkeypatch):
    text = "cuda_graph_config:\n  padding_enabled: true\n  max_batch_size: 8\n"
    found = findings(tmp_path, monkeypatch, "extra.yaml", text, "trtllm==1.0.0")
    assert [f.render() for f in found] == [
        "extra.yaml:2:3: SITS204 [error] cuda_graph_config.padding_enabled is a pre-1.0 LLM-API option: "
        "TensorRT-LLM 1.0.0 refuses to start"
    ]
    assert found[0].fix_hint == "use cuda_graph_config.enable_padding"


def test_pass_trtllm_1_x_spelling(tmp_path, monkeypatch):
    text = """
    cuda_graph_config:
      enable_padding: true
      max_batch_size: 8
    kv_cache_config:
      dtype: fp8
    enable_autotuner: true
    """
    assert rendered(tmp_path, monkeypatch, "extra.yaml", text, "trtllm==1.0.0") == []


# --- ORT GenAI genai_config.json ------------------------------------------------------------------

GENAI = """
{
  "model": {
    "type": "llama",
    "context_length": 4096,
    "contxt_length": 4096,
    "decoder": {
      "filename": "model.onnx",
      "kv_cache_dtype": "fp16",
      "num_hidden_layer": 16,
      "session_options": {
        "intra_op_num_thread": "4",
        "session.intra_op.allow_spinning": "0",
        "log_id": "x",
        "provider_options": [{"cuda": {"enable_cuda_graph": "0"}}]
      }
    }
  },
  "search": {"max_length": 4096, "temprature": 0.7, "enable_cuda_graphs": true},
  "runtime": {"threads": 4},
  "max_length": 2048,
  "comment": "made by hand"
}
"""


@pytest.fixture
def genai(tmp_path, monkeypatch):
    found = findings(tmp_path, monkeypatch, "genai_config.json", GENAI, "ortgenai==0.18.0")
    return {f.location.line: f for f in found}


def test_fail_ortgenai_unknown_model_key_with_did_you_mean(genai):
    f = genai[5]
    assert f.render() == (
        'genai_config.json:5:5: SITS204 [error] unknown key "contxt_length" in model: ORT GenAI 0.18.0 fails to '
        'load the config'
    )
    assert f.fix_hint == 'did you mean "context_length"?'


def test_fail_ortgenai_unknown_decoder_key_without_close_match(genai):
    f = genai[8]
    assert f.render() == (
        'genai_config.json:8:7: SITS204 [error] unknown key "kv_cache_dtype" in model:decoder: ORT GenAI 0.18.0 fails '
        'to load the config'
    )
    assert f.fix_hint == "remove it"


def test_fail_ortgenai_unknown_decoder_key_with_did_you_mean(genai):
    assert genai[9].render().startswith(
        'genai_config.json:9:7: SITS204 [error] unknown key "num_hidden_layer" in model:decoder:')
    assert genai[9].fix_hint == 'did you mean "num_hidden_layers"?'


def test_fail_ortgenai_unknown_search_keys(tmp_path, monkeypatch):
    found = findings(tmp_path, monkeypatch, "genai_config.json", GENAI, "ortgenai==0.18.0")
    search = [f for f in found if f.location.line == 18]
    assert [(f.render(), f.fix_hint) for f in search] == [
        ('genai_config.json:18:34: SITS204 [error] unknown key "temprature" in search: ORT GenAI 0.18.0 fails to '
         'load the config', 'did you mean "temperature"?'),
        ('genai_config.json:18:53: SITS204 [error] unknown key "enable_cuda_graphs" in search: ORT GenAI 0.18.0 '
         'fails to load the config', "remove it"),
    ]


def test_fail_ortgenai_unknown_top_level_object(genai):
    assert genai[19].render() == (
        'genai_config.json:19:3: SITS204 [error] unknown top-level section "runtime": ORT GenAI 0.18.0 fails '
        "to load the config"
    )
    assert genai[19].severity is Severity.ERROR
    assert 'ORT GenAI 0.18.0 prints: JSON Error: Unknown value "runtime"' in genai[19].evidence


def test_fail_ortgenai_unknown_top_level_scalar_is_ignored_warning(genai):
    assert genai[20].render() == (
        'genai_config.json:20:3: SITS204 [warning] top-level "max_length" is silently ignored by ORT GenAI '
        "(it reads only model, search, speculative and engine)"
    )
    assert genai[20].fix_hint == "move it under search (ORT GenAI reads it there)"
    assert genai[21].severity is Severity.WARNING
    assert genai[21].fix_hint == "move it into the section it belongs to, or remove it"


def test_fail_ortgenai_session_options_typo_warning(genai):
    f = genai[11]
    assert f.render() == (
        'genai_config.json:11:9: SITS204 [warning] session_options "intra_op_num_thread" is not an option '
        "ORT GenAI knows: it does nothing"
    )
    assert f.fix_hint == 'did you mean "intra_op_num_threads"?'


def test_pass_ortgenai_dotted_ort_config_entry_and_known_options(genai):
    # line 12: "session.intra_op.allow_spinning" (an ORT config entry); 13: log_id; 14: provider_options
    assert not {12, 13, 14} & set(genai)
    assert sorted(genai) == [5, 8, 9, 11, 18, 19, 20, 21]


def test_pass_ortgenai_clean_config(tmp_path, monkeypatch):
    text = """
    {"model": {"type": "phi3", "context_length": 4096, "decoder": {"filename": "model.onnx",
      "session_options": {"log_id": "x", "session.disable_prepacking": "1",
                          "provider_options": [{"cuda": {"enable_cuda_graph": "1"}}]}}},
     "search": {"max_length": 4096, "past_present_share_buffer": true},
     "engine": {"dynamic_batching": {"gpu_utilization_factor": 0.6, "max_batch_size": 16}}}
    """
    assert rendered(tmp_path, monkeypatch, "genai_config.json", text, "ortgenai==0.18.0") == []


# --- transformers generation_config.json cache_implementation ------------------------------

def _hf_cache(tmp_path, monkeypatch, value: str, version: str) -> list[str]:
    write(tmp_path, "m/config.json", '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", '
          '"num_hidden_layers": 2, "hidden_size": 64, "max_position_embeddings": 4096}')
    write(tmp_path, "m/generation_config.json", f'{{"max_new_tokens": 64,\n "cache_implementation": "{value}"}}')
    monkeypatch.chdir(tmp_path)
    report = check(["m"], CheckOptions(targets=[f"transformers=={version}"], isolated=True, select=["SITS204"]))
    assert not report.errors
    return [f.render() for f in report.findings]


@pytest.mark.parametrize("value, last_ok, first_rejecting", [
    ("mamba", "4.53.0", "4.56.0"),
    ("dynamic_full", "5.10.4", "5.24.0"),
])
def test_fail_cache_implementation_removed(tmp_path, monkeypatch, value, last_ok, first_rejecting):
    assert _hf_cache(tmp_path, monkeypatch, value, last_ok) == []
    assert _hf_cache(tmp_path, monkeypatch, value, first_rejecting) == [
        f'm/generation_config.json:2:2: SITS204 [error] cache_implementation "{value}" is not accepted by '
        f"transformers {first_rejecting}: loading the config raises ValueError"
    ]


@pytest.mark.parametrize("value, first_rejecting_or_none, first_ok", [
    ("offloaded", "4.45.2", "4.50.0"),
    ("paged", "4.56.0", "5.0.0"),
])
def test_fail_cache_implementation_too_new(tmp_path, monkeypatch, value, first_rejecting_or_none, first_ok):
    assert len(_hf_cache(tmp_path, monkeypatch, value, first_rejecting_or_none)) == 1
    assert _hf_cache(tmp_path, monkeypatch, value, first_ok) == []


def test_pass_cache_implementation_between_sampled_releases_is_not_judged(tmp_path, monkeypatch):
    # dynamic_full: accepted by 5.10.4, rejected by 5.24.0; where in between is not known
    assert _hf_cache(tmp_path, monkeypatch, "dynamic_full", "5.12.0") == []


def test_pass_cache_implementation_before_first_sampled_release(tmp_path, monkeypatch):
    assert _hf_cache(tmp_path, monkeypatch, "nonsense", "4.40.0") == []


def test_fail_cache_implementation_unknown_value(tmp_path, monkeypatch):
    (line,) = _hf_cache(tmp_path, monkeypatch, "nonsense", "5.24.0")
    assert '"nonsense" is not accepted' in line


# --- the vLLM table against the flags each source release defines --------------------------

def test_vllm_advice_is_for_options_whose_acceptance_changes():
    """The hand-written advice (``instead``) is for options some release rejects or deprecates,
    as the releases' own parsers say (data/vllm_options.json), and every renamed_to target is a
    flag of the newest release."""
    from sits_doctor.frameworks import vllm as fw

    releases, _, _ = fw.parser_table()
    advised = [o for o in fw.OPTIONS.values() if o.instead]
    assert len(advised) >= 30
    for option in advised:
        runs = fw.flag_history(option.flag)
        assert runs, option.flag
        always = runs == [(releases[0], releases[-1])]
        deprecated = any((info := fw.lookup_flag(option.flag, r)) is not None and info.segment["deprecated"]
                         for r in releases)
        assert not always or deprecated, f"{option.flag} is accepted unchanged by every release"
    for option in fw.OPTIONS.values():
        if option.renamed_to:
            assert fw.lookup_flag(fw.flag_of(option.renamed_to), releases[-1]) is not None, option.renamed_to


def test_ortgenai_legacy_top_level_dims_belong_under_decoder(tmp_path, monkeypatch):
    from sits_doctor import CheckOptions, check

    (tmp_path / "genai_config.json").write_text(
        '{"hidden_size": 3072, "model": {"type": "phi3", "context_length": 4096}}')
    monkeypatch.chdir(tmp_path)
    (f,) = check(["genai_config.json"], CheckOptions(isolated=True, select=["SITS204"])).findings
    assert f.fix_hint == "move it under model.decoder (ORT GenAI reads it there)"


def test_trtllm_unknown_keys_from_the_release_models(tmp_path, monkeypatch):
    """TensorRT-LLM 1.0.0's LLM-API models (data/trtllm_options.json) forbid unknown keys, nested
    ones included; the speculative config is judged by the class its decoding_type names."""
    text = ("kv_cache_config:\n  free_gpu_memory_fraction: 0.9\n  enable_blok_reuse: true\n"
            "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n  pytorch_weights_path: /m\n"
            "cuda_graph_config:\n  enable_padding: true\n")
    found = rendered(tmp_path, monkeypatch, "trt.yaml", text, "trtllm==1.0.0")
    assert found == [
        "trt.yaml:3:3: SITS204 [error] kv_cache_config.enable_blok_reuse is not a field of KvCacheConfig: "
        "TensorRT-LLM 1.0.0 refuses to start",
        "trt.yaml:7:3: SITS204 [error] speculative_config.pytorch_weights_path is not a field of "
        "EagleDecodingConfig: TensorRT-LLM 1.0.0 refuses to start",
    ]
    assert findings(tmp_path, monkeypatch, "trt.yaml", text, "trtllm==1.0.0")[0].fix_hint == \
        'did you mean "enable_block_reuse"?'
    # 1.2.0's models too (the data has 1.0.0, 1.1.0, 1.2.0); speculative_model_dir is a validation
    # alias of 1.2.0's speculative_model, so it is accepted there
    later = rendered(tmp_path, monkeypatch, "trt.yaml", text.replace("pytorch_weights_path", "speculative_model_dir"),
                     "trtllm==1.2.0")
    assert [line.split(": SITS204")[0] for line in later] == ["trt.yaml:3:3"]
    # a series the data does not cover is not judged (no guess from another release), and says so
    assert [line.split(" were not")[0] for line in rendered(tmp_path, monkeypatch, "trt.yaml", text, "trtllm==1.3.0")] \
        == ["trt.yaml:1:1: SITS204 [info] the LLM-API options of TensorRT-LLM 1.3.0"]


@pytest.mark.parametrize(("written", "meant"), [("\u2013\u2013swap-space", "--swap-space"),
                                                ("\u2014swap-space", "--swap-space")])
def test_fail_flag_written_with_a_look_alike_dash(tmp_path, monkeypatch, written, meant):
    found = findings(tmp_path, monkeypatch, "k8s.yaml",
                     k8s_deployment('          image: vllm/vllm-openai:v0.11.0',
                                    f'          args: ["--model", "m", "{written}", "4"]'), "vllm==0.11.0")
    (f,) = found
    assert f.message.startswith(f"{written} starts with a look-alike dash")
    assert f"not {meant};" in f.message
    assert f.fixes[0].edits[0].new == meant


# --- a server that parses with parse_known_args (KServe huggingfaceserver) --------------------------

KSERVE_HF = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llama
spec:
  predictor:
    model:
      modelFormat:
        name: huggingface
      args:
        - --model_name=llama
        - --model_id=meta-llama/Llama-3.1-8B-Instruct
        - {words}
"""


def _kserve(tmp_path, monkeypatch, words: str, version: str = "0.20.0"):
    return findings(tmp_path, monkeypatch, "isvc.yaml", KSERVE_HF.format(words=words), f"vllm=={version}")


def test_removed_flag_under_parse_known_args_is_ignored_not_fatal(tmp_path, monkeypatch):
    (f,) = _kserve(tmp_path, monkeypatch, "--swap-space=4")
    assert f.severity == Severity.WARNING and (f.location.line, f.location.col) == (13, 11)
    assert f.message == "--swap-space was removed in vLLM 0.18.0: ignored, so the option has no effect"
    assert f.evidence[0] == ("why: KServe's huggingfaceserver reads its arguments with parse_known_args "
                             "(huggingfaceserver/__main__.py), which ignores words it does not know")
    # the same word on vllm serve is a startup failure
    (g,) = serve(tmp_path, monkeypatch, "swap-space: 4", "0.20.0")
    assert "rejects it at startup" in g


def test_typo_under_parse_known_args_is_reported_as_ignored(tmp_path, monkeypatch):
    (f,) = _kserve(tmp_path, monkeypatch, "--max-num-seqz=8")
    assert f.severity == Severity.WARNING
    assert f.message == "--max-num-seqz is not an option of vLLM 0.20.0: ignored, so the option has no effect"
    assert f.evidence[0].startswith("why: KServe's huggingfaceserver reads its arguments with parse_known_args")


def test_underscore_spelling_under_parse_known_args_is_unread(tmp_path, monkeypatch):
    (f,) = _kserve(tmp_path, monkeypatch, "--gpu_memory_utilization=0.95")
    assert f.severity == Severity.WARNING
    assert f.message == "--gpu_memory_utilization has no effect: vLLM runs with its default"
    assert f.evidence[0].startswith("why: KServe's huggingfaceserver reads")
    assert f.evidence[0].endswith("and vLLM turns _ into - only in its own parse_args")
    assert f.fix_hint == "write it as --gpu-memory-utilization"
    (fix,) = f.fixes
    assert fix.safety.value == "unsafe" and [e.new for e in fix.edits] == ["--gpu-memory-utilization"]


def test_dotted_flag_under_parse_known_args_is_unread(tmp_path, monkeypatch):
    (f,) = _kserve(tmp_path, monkeypatch, "--compilation-config.mode=3")
    assert f.evidence[0].endswith("and vLLM expands a dotted --x.y flag only in its own parse_args")
    assert f.fix_hint == "pass the whole JSON value: --compilation-config '{\"mode\": ...}'" and f.fixes == ()


def test_dashed_flag_under_parse_known_args_is_fine(tmp_path, monkeypatch):
    assert _kserve(tmp_path, monkeypatch, "--gpu-memory-utilization=0.95") == []
    # KServe's own underscore flags that set a vLLM option are read (dest max_model_len)
    assert _kserve(tmp_path, monkeypatch, "--max_model_len=4096") == []
