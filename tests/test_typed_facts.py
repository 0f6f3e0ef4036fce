"""Typed facts (issue 27 item 5): a written value that is no value of its kind never reaches the
memory arithmetic.

Once a GPU is known the memory rules (SITS001, SITS007) and ``capacity`` compute with the
deployment's Serving facts. Those are typed in one step (``sits_doctor.facts.validated``, which
every framework's ``effective`` returns through): each field holds a value of its kind or an
``Invalid`` that keeps what was written. SITS201 reports what the framework's parser rejects;
the memory rules say which written value they did not check, at its position. The inputs below
are the committed fixtures with one value changed, as a typo or a template leaves it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, run_cli, write

LLAMA = FIXTURES / "vllm" / "good_llama31_8b_chat.yaml"
TRT = FIXTURES / "trtllm" / "gpu-l4" / "bad_llmapi_llama31_8b_full_context.yaml"
STACK = FIXTURES / "helm" / "good_production_stack_values.yaml"
SKY = FIXTURES / "skypilot" / "bad_serve_llama_h100.yaml"


def _vllm(old: str, new: str) -> str:
    text = LLAMA.read_text().replace("../hf/llama-3.1-8b-instruct", str(FIXTURES / "hf" / "llama-3.1-8b-instruct"))
    assert re.search(old, text, re.M), old
    return re.sub(old, new, text, count=1, flags=re.M)


def _edit(path: Path, old: str, new: str) -> str:
    text = path.read_text()
    assert re.search(old, text, re.M), old
    return re.sub(old, new, text, count=1, flags=re.M)


# (file name, its text, --gpu, what the memory rule says it did not check)
TYPOS = [
    pytest.param("serve.yaml", lambda: _vllm(r"^gpu-memory-utilization: .*$", "gpu-memory-utilization: abc"), "H100",
                 "gpu-memory-utilization 'abc' is not a number (serve.yaml:8:1)", id="vllm-gpu_memory_utilization-abc"),
    pytest.param("serve.yaml", lambda: _vllm(r"^max-num-seqs: .*$", "max-num-seqs: abc"), "H100",
                 "max-num-seqs 'abc' is not an integer (serve.yaml:9:1)", id="vllm-max_num_seqs-abc"),
    pytest.param("serve.yaml", lambda: _vllm(r"^max-num-seqs: .*$", "tensor-parallel-size: abc"), "H100",
                 "tensor-parallel-size 'abc' is not an integer (serve.yaml:9:1)", id="vllm-tensor_parallel_size-abc"),
    pytest.param("serve.yaml", lambda: _vllm(r"^max-num-seqs: .*$", "pipeline-parallel-size: .inf"), "H100",
                 "pipeline-parallel-size 'inf' is not an integer (serve.yaml:9:1)", id="vllm-pipeline_parallel_size-inf"),
    pytest.param("serve.yaml", lambda: _vllm(r"^max-num-batched-tokens: .*$", "max-num-batched-tokens: ''"), "L4",
                 "max-num-batched-tokens '' is not an integer (serve.yaml:10:1)", id="vllm-max_num_batched_tokens-empty"),
    pytest.param("serve.yaml", lambda: _vllm(r"^gpu-memory-utilization: .*$", "gpu-memory-utilization: .nan"), "L4",
                 "gpu-memory-utilization nan is not a finite number (serve.yaml:8:1)", id="vllm-gpu_memory_utilization-nan"),
    pytest.param("llm.yaml", lambda: _edit(TRT, r"free_gpu_memory_fraction: .*$", "free_gpu_memory_fraction: ''"), "L4",
                 "free_gpu_memory_fraction '' is not a number (llm.yaml:7:3)", id="trtllm-free_gpu_memory_fraction-empty"),
    pytest.param("llm.yaml", lambda: _edit(TRT, r"^max_num_tokens: .*$", "max_num_tokens: .inf"), "L4",
                 "max_num_tokens inf is not an integer (llm.yaml:4:1)", id="trtllm-max_num_tokens-inf"),
    pytest.param("llm.yaml", lambda: TRT.read_text() + "  tokens_per_block: NaN\n", "H100",
                 "tokens_per_block 'NaN' is not an integer (llm.yaml:8:3)", id="trtllm-tokens_per_block-NaN"),
    pytest.param("values.yaml", lambda: _edit(STACK, r"gpuMemoryUtilization: .*$", "gpuMemoryUtilization: .nan"), "H100",
                 "--gpu_memory_utilization nan is not a finite number (values.yaml:19:9)", id="production-stack-nan"),
    pytest.param("sky.yaml", lambda: _edit(SKY, r"accelerators: .*$", "accelerators: {H100: abc}"), None,
                 "--tensor-parallel-size 'abc' is not an integer (sky.yaml:17:5)", id="skypilot-accelerator-count-abc"),
]


def _clean(r) -> str:
    out = r.stdout + r.stderr
    assert r.exit_code != 3 and "internal error" not in out and "Traceback" not in out, out
    return out


@pytest.mark.parametrize("name, text, gpu, unchecked", TYPOS)
def test_a_typo_once_a_gpu_is_known_is_not_checked_instead_of_an_internal_error(tmp_path, hermetic, name, text, gpu,
                                                                                unchecked):
    write(tmp_path, name, text())
    gpu_args = ("--gpu", gpu) if gpu else ()
    out = _clean(run_cli("check", "--isolated", *gpu_args, name, cwd=tmp_path))
    (line,) = [ln for ln in out.splitlines() if "SITS001 [info] cannot size the KV cache" in ln]
    assert unchecked + ": not checked" in line, line
    capacity = _clean(run_cli("capacity", "--isolated", *gpu_args, name, cwd=tmp_path))
    assert "cannot compute: " + unchecked in capacity, capacity


def _written(tmp_path, text: str, *args: str):
    """The effective facts of the one deployment in ``text`` (a vLLM launch script)."""
    from sits_doctor.engine import CheckOptions, check

    path = write(tmp_path, "serve.sh", text)
    targets = [a for a in args if a.startswith(("vllm==", "trtllm=="))]
    report = check([str(path)], CheckOptions(isolated=True, debug=True, gpu="H100", targets=targets))
    assert not report.internal_errors, report.internal_errors
    (plan,) = report.deployments
    return plan.facts.serving, report


SCRIPT = "vllm serve {model} --max-model-len 8192 --max-num-batched-tokens {tokens}\n"


def test_human_ints_follow_the_release_parser(tmp_path, hermetic):
    """``--max-num-batched-tokens 8k``: human_readable_int from vLLM 0.9.1 (the parser tables), so
    8000 there; a plain int before, which refuses it (SITS201) and leaves the pool unsized."""
    model = FIXTURES / "hf" / "llama-3.1-8b-instruct"
    serving, report = _written(tmp_path, SCRIPT.format(model=model, tokens="8k"), "vllm==0.9.1")
    assert serving.max_num_batched_tokens.value == 8000
    assert not [f for f in report.findings if f.code == "SITS201"]
    serving, report = _written(tmp_path, SCRIPT.format(model=model, tokens="8K"))  # the newest release: 8 × 1024
    assert serving.max_num_batched_tokens.value == 8192
    serving, report = _written(tmp_path, SCRIPT.format(model=model, tokens="8k"), "vllm==0.9.0")
    assert serving.max_num_batched_tokens.valid is False and serving.max_num_batched_tokens.value.written == "8k"
    codes = {f.code: f.message for f in report.findings}
    assert "invalid int value: '8k'" in codes["SITS201"]
    assert "--max-num-batched-tokens '8k' is not an integer" in codes["SITS001"] and "not checked" in codes["SITS001"]


def test_coerce_reads_with_the_parser_table():
    """Before the target is known a loader reads a value as the newest release that has the option
    does; with a release, as that release's parser does."""
    from sits_doctor.loaders.vllm_args import coerce

    assert coerce("max_num_batched_tokens", "8k") == 8000
    assert coerce("max_num_batched_tokens", "8k", "0.9.1") == 8000
    assert coerce("max_num_batched_tokens", "8k", "0.9.0") == "8k"
    assert coerce("kv_cache_memory_bytes", "2g") == 2 * 10**9 and coerce("kv_cache_memory_bytes", "2G") == 2 * 2**30
    assert coerce("gpu_memory_utilization", "", "0.34.0") is None  # _optional_type(float): "" is None
    assert coerce("gpu_memory_utilization", "", "0.33.0") == ""  # plain float: no value (SITS201)


# --- the validated-facts step ----------------------------------------------------------------------

@pytest.mark.parametrize("value, kind, expected", [
    (8192, "count", 8192), ("8192", "count", 8192), (8192.0, "count", 8192), (" 12 ", "count", 12),
    (0.9, "number", 0.9), ("0.9", "number", 0.9), (1, "number", 1.0), (True, "bool", True), ("fp8", "text", "fp8"),
    (None, "count", None),
])
def test_typed_keeps_values_of_their_kind(value, kind, expected):
    from sits_doctor.facts import typed

    got = typed(value, kind)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("value, kind, why", [
    ("abc", "count", "not an integer"), ("", "count", "not an integer"), (1.5, "count", "not an integer"),
    (math.inf, "count", "not an integer"), (math.nan, "count", "not an integer"), (True, "count", "not a number"),
    (0, "count", "below 1"), (-1, "count", "below 1"), (2**63, "count", "past"), ("9" * 30, "count", "not an integer"),
    ([1], "count", "not a number"), ({"a": 1}, "number", "not a number"), ("abc", "number", "not a number"),
    ("", "number", "not a number"), (math.nan, "number", "not a finite number"), ("-inf", "number", "not a finite number"),
    (10**400, "number", "not a finite number"), (False, "number", "not a number"), ("yes", "bool", "not true or false"),
    (5, "text", "not a name"),
])
def test_typed_says_why_a_value_is_invalid(value, kind, why):
    from sits_doctor.facts import Invalid, typed

    got = typed(value, kind)
    assert isinstance(got, Invalid) and got.why.startswith(why) and got.written is value


HOSTILE = st.one_of(
    st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
    st.sampled_from(["abc", "", "8k", "8K", "1e400", ".inf", "nan", "NaN", "-1", "0", "1.5", "true", "None", "9" * 5000]),
    st.text(max_size=8), st.lists(st.integers(), max_size=2),
)
VLLM_KEYS = ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size", "tensor_parallel_size",
             "pipeline_parallel_size", "data_parallel_size", "gpu_memory_utilization", "kv_cache_memory_bytes",
             "enforce_eager", "enable_chunked_prefill", "kv_cache_dtype")
TRT_KEYS = ("max_seq_len", "max_batch_size", "max_num_tokens", "tensor_parallel_size", "pipeline_parallel_size",
            "max_input_len", "kv_cache_config.free_gpu_memory_fraction", "kv_cache_config.tokens_per_block",
            "kv_cache_config.max_tokens", "kv_cache_config.dtype")


def _yaml(key: str, value) -> str:
    import json

    head, _, field = key.partition(".")
    text = json.dumps(value) if not (isinstance(value, float) and not math.isfinite(value)) else (
        ".nan" if math.isnan(value) else ".inf" if value > 0 else "-.inf")
    return f"{head}:\n  {field}: {text}\n" if field else f"{key}: {text}\n"


def _assert_typed(serving) -> None:
    from sits_doctor.facts import SERVING_KINDS, Invalid, typed

    for name, kind in SERVING_KINDS.items():
        x = getattr(serving, name)
        if x is None or x.value is None or isinstance(x.value, Invalid):
            continue
        assert typed(x.value, kind) == x.value and type(typed(x.value, kind)) is type(x.value), (name, x)


@settings(max_examples=60, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(framework=st.sampled_from(["vllm", "trtllm"]), data=st.data())
def test_no_serving_fact_holds_an_unvalidated_value(tmp_path_factory, framework, data):
    """Whatever a file writes for the options that size memory, each Serving fact holds a value of
    its kind or an Invalid, and checking it with a GPU known raises no internal error."""
    from sits_doctor.engine import CheckOptions, check

    keys = data.draw(st.lists(st.sampled_from(VLLM_KEYS if framework == "vllm" else TRT_KEYS), min_size=1, max_size=4,
                              unique=True))
    model = FIXTURES / "hf" / "llama-3.1-8b-instruct"
    text = (f"model: {model}\n" if framework == "vllm" else "model: meta-llama/Llama-3.1-8B-Instruct\nbackend: pytorch\n")
    text += "".join(_yaml(k, data.draw(HOSTILE)) for k in keys)
    folder = tmp_path_factory.mktemp("facts")
    path = write(folder, "serve.yaml" if framework == "vllm" else "extra_llm_api_options.yaml", text)
    report = check([str(path)], CheckOptions(isolated=True, debug=True, gpu="L4"))
    assert not report.internal_errors, (text, report.internal_errors)
    for plan in report.deployments:
        _assert_typed(plan.facts.serving)
