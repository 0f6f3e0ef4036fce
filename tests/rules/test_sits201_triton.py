"""SITS201 on Triton config.pbtxt (TensorRT-LLM backend): values the backend cannot read."""

from __future__ import annotations

from pathlib import Path

from sits_doctor.engine import CheckOptions, check

BASE = '''name: "tensorrt_llm"
backend: "tensorrtllm"
max_batch_size: 8
parameters { key: "gpt_model_type" value: { string_value: "%s" } }
parameters { key: "kv_cache_free_gpu_mem_fraction" value: { string_value: "%s" } }
parameters { key: "enable_kv_cache_reuse" value: { string_value: "%s" } }
parameters { key: "max_tokens_in_paged_kv_cache" value: { string_value: "${max_tokens}" } }
'''


def findings(tmp_path: Path, model_type="inflight_fused_batching", fraction="0.9", reuse="true", text=None):
    path = tmp_path / "config.pbtxt"
    path.write_text(text if text is not None else BASE % (model_type, fraction, reuse))
    report = check([path], CheckOptions(isolated=True, select=["SITS201"]))
    assert report.internal_errors == [] and report.errors == []
    return [(f.location.line, f.severity.value, f.message) for f in report.findings]


def test_good_values_are_quiet(tmp_path):
    assert findings(tmp_path) == []
    assert findings(tmp_path, model_type="V1", fraction="  0.5", reuse="0") == []


def test_an_unknown_batching_mode_fails_the_load(tmp_path):
    (found,) = findings(tmp_path, model_type="inflight")
    assert found[:2] == (4, "error") and "'inflight' is not a batching mode" in found[2]


def test_a_missing_batching_mode_fails_the_load(tmp_path):
    text = "\n".join(line for line in (BASE % ("x", "0.9", "true")).splitlines() if "gpt_model_type" not in line)
    (found,) = findings(tmp_path, text=text)
    assert found[1] == "error" and found[2].startswith("gpt_model_type is not set")


def test_values_the_backend_cannot_convert_fall_back_quietly(tmp_path):
    got = findings(tmp_path, fraction="ninety", reuse="yes")
    assert got == [
        (5, "warning", "kv_cache_free_gpu_mem_fraction 'ninety' is not a float the backend can read: it logs a "
                       "warning and quietly uses 0.9 instead"),
        (6, "warning", "enable_kv_cache_reuse 'yes' is not a bool the backend can read: it logs a warning and "
                       "quietly uses False instead"),
    ]


def test_a_number_with_a_tail_is_read_up_to_the_tail(tmp_path):
    (found,) = findings(tmp_path, fraction="0,85")
    assert found == (5, "warning", "kv_cache_free_gpu_mem_fraction '0,85': the backend reads only the number before "
                                   "',85' and uses 0.0")
