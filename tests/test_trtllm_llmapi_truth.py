"""SITS204 on TensorRT-LLM LLM-API files and trtllm-serve flags, on files like the public ones of
issue 26: a key only the TensorRT backend accepts (case 2), a curated --config file with a
command-line flag's name (case 3), releases outside the tables (case 6)."""

from __future__ import annotations

import pytest

from sits_doctor import engine
from sits_doctor.frameworks import trtllm as trt
from sits_doctor.frameworks import trtllm_serve as serve
from sits_doctor.versions import unknown_version_note

PERF_KNOBS = "max_batch_size: 8\nextended_runtime_perf_knob_config:\n  multi_block_mode: true\n  cuda_grap_mode: true\n"


def check(tmp_path, text, name="llm.yaml", targets=()):
    path = tmp_path / name
    path.write_text(text)
    return engine.check([path], engine.CheckOptions(isolated=True, targets=list(targets)))


def rows(report):
    return [(f.code, f.severity.value, f.location.line, f.location.col) for f in report.findings]


def test_a_tensorrt_backend_key_without_a_backend_is_info_naming_the_assumption(tmp_path):
    report = check(tmp_path, PERF_KNOBS)
    first, nested = report.findings
    assert rows(report) == [("SITS204", "info", 2, 1), ("SITS204", "error", 4, 3)]
    assert first.message == (
        "extended_runtime_perf_knob_config is a TensorRT-backend option: under the PyTorch backend, assumed here, "
        "TensorRT-LLM refuses it")
    assert first.evidence[0] == (
        "why: TrtLlmArgs has it in TensorRT-LLM 1.2.0, TorchLlmArgs does not (pydantic extra='forbid'); PyTorch "
        "was assumed because " + trt.ASSUMED_BACKEND_WHY)
    assert "fields of TorchLlmArgs and TrtLlmArgs in tensorrt_llm/llmapi/llm_args.py@v1.2.0" in first.evidence
    # what is below it is still checked, against the TensorRT backend's class
    assert nested.message.startswith("extended_runtime_perf_knob_config.cuda_grap_mode is not a field of "
                                     "ExtendedRuntimePerfKnobConfig: TensorRT-LLM 1.2.0 (assumed) refuses")
    assert nested.fix_hint == 'did you mean "cuda_graph_mode"?'


@pytest.mark.parametrize("backend", ["tensorrt", "trt"])
def test_a_stated_tensorrt_backend_accepts_it(tmp_path, backend):
    report = check(tmp_path, f"backend: {backend}\n" + PERF_KNOBS.replace("cuda_grap_mode", "cuda_graph_mode"))
    assert [f for f in report.findings if f.code == "SITS204"] == []


def test_a_stated_pytorch_backend_refuses_it(tmp_path):
    report = check(tmp_path, "backend: pytorch\n" + PERF_KNOBS)
    (finding,) = [f for f in report.findings if f.code == "SITS204"]
    assert (finding.severity.value, finding.location.line) == ("error", 3)
    assert not any("assumed (" in e for e in finding.evidence)


def test_an_unknown_key_names_the_assumed_backend(tmp_path):
    (finding,) = check(tmp_path, "max_num_tokens: 8\nprint_iter_logs: true\n").findings
    assert f"backend: pytorch assumed ({trt.ASSUMED_BACKEND_WHY})" in finding.evidence
    (stated,) = check(tmp_path, "backend: pytorch\nmax_num_tokens: 8\nprint_iter_logs: true\n").findings
    assert not any(e.startswith("backend:") for e in stated.evidence)


def test_a_command_line_flag_name_in_the_yaml_points_at_its_field(tmp_path):
    text = "max_batch_size: 161\nkv_cache_free_gpu_memory_fraction: 0.8\ntp_size: 2\nenable_attention_dp: true\n"
    report = check(tmp_path, text)
    assert rows(report) == [("SITS204", "error", 2, 1), ("SITS204", "error", 3, 1)]
    frac, tp = report.findings
    assert frac.fix_hint.startswith("--kv_cache_free_gpu_memory_fraction is trtllm-serve's command-line flag; in "
                                    "the YAML its value goes to kv_cache_config.free_gpu_memory_fraction")
    assert tp.fix_hint.startswith("--tp_size is trtllm-serve's command-line flag; in the YAML its value goes to "
                                  "tensor_parallel_size")
    assert [x.title for x in frac.fixes] == ["move kv_cache_free_gpu_memory_fraction to kv_cache_config.free_gpu_memory_fraction"]
    # a nested key is never taken for a flag
    (nested,) = check(tmp_path, "kv_cache_config:\n  max_batch_size: 3\n").findings
    assert "command-line flag" not in nested.fix_hint


def test_the_curated_file_in_its_current_shape_is_clean(tmp_path):
    text = ("max_batch_size: 161\nmax_num_tokens: 1160\ntensor_parallel_size: 1\nmoe_expert_parallel_size: 1\n"
            "cuda_graph_config:\n  enable_padding: true\n  batch_sizes: [1, 2, 4]\nprint_iter_log: true\n"
            "enable_attention_dp: true\nkv_cache_config:\n  free_gpu_memory_fraction: 0.8\n")
    assert check(tmp_path, text).findings == []


@pytest.mark.parametrize("version, why", [
    ("0.20.0", "a release whose llm_args.py was not read"),
    ("1.0.0rc4", "a release whose llm_args.py was not read"),
    ("1.3.0", "newer than 1.2.0, the newest release read"),
])
def test_a_release_outside_the_tables_is_said_not_checked(tmp_path, version, why):
    report = check(tmp_path, PERF_KNOBS, targets=[f"trtllm=={version}"])
    (finding,) = report.findings
    assert (finding.severity.value, finding.location.line, finding.location.col) == ("info", 1, 1)
    assert finding.message == (f"the LLM-API options of TensorRT-LLM {version} were not checked ({why}; the tables "
                               "hold 1.0.0, 1.1.0, 1.2.0): unknown keys are not reported")


def test_pre_1_0_keys_are_still_reported_after_the_newest_release(tmp_path):
    report = check(tmp_path, "use_cuda_graph: true\n", targets=["trtllm==1.3.0"])
    assert rows(report) == [("SITS204", "info", 1, 1), ("SITS204", "error", 1, 1)]
    assert check(tmp_path, "use_cuda_graph: true\n", targets=["trtllm==0.20.0"]).findings[1:] == []


def test_the_target_note_for_a_newer_release_does_not_promise_a_judgement():
    note = unknown_version_note("trtllm", "1.3.0")
    assert note == ("newer than 1.2.0, the newest release the rules know; its options are not judged as errors "
                    "(each file says what was not checked)")
    assert unknown_version_note("trtllm", "1.2.0") is None


SERVE = "#!/bin/sh\ntrtllm-serve m --max-batch-size 64 --port 8000\n"


@pytest.mark.parametrize("version, severity", [("1.2.0", "error"), ("1.2.3", "error"), ("1.1.0", "error"),
                                               ("1.0.0", "info"), ("1.3.0", "info"), ("0.19.0", "info")])
def test_serve_flags_are_errors_only_from_their_own_series(tmp_path, version, severity):
    report = check(tmp_path, SERVE, "run.sh", targets=[f"trtllm=={version}"])
    (finding,) = report.findings
    assert (finding.severity.value, finding.location.line, finding.location.col) == (severity, 2, 16)
    if severity == "info":
        release = serve.release_for(version).version
        assert finding.message == (
            f"--max-batch-size is not an option of trtllm-serve {release}, the nearest release read below {version}; "
            f"{version}'s own options were not read, so whether it refuses to start was not checked")
        assert finding.fixes == ()


@pytest.mark.parametrize("version, said", [("1.3.0", True), ("1.0.0", True), ("1.2.1", False)])
def test_serve_flags_all_present_in_another_series_say_they_were_not_checked(tmp_path, version, said):
    """1.3.0 judged by 1.2.0's snapshot: no flag missing there is no "0 findings" either."""
    report = check(tmp_path, "#!/bin/sh\ntrtllm-serve m --port 8000\n", "run.sh", targets=[f"trtllm=={version}"])
    messages = [f.message for f in report.findings if f.code == "SITS204"]
    release = serve.release_for(version).version
    assert messages == ([f"trtllm-serve flags not checked against {version}'s own options (not read); trtllm-serve "
                         f"{release}, the nearest release read below it, has every flag written"] if said else [])


def test_serve_flags_before_every_snapshot_are_not_checked(tmp_path):
    (finding,) = check(tmp_path, SERVE, "run.sh", targets=["trtllm==0.17.0"]).findings
    assert finding.severity.value == "info"
    assert finding.message == ("the trtllm-serve flags were not checked: TensorRT-LLM 0.17.0 is older than 0.18.2, "
                               "the oldest trtllm-serve whose options were read")


def test_same_series():
    (r020, r11rc6, r11, r12) = (serve.release_for(v) for v in ("0.20.0", "1.1.0rc6", "1.1.0", "1.2.0"))
    assert serve.same_series(r020, "0.20.1") and not serve.same_series(r020, "1.0.0")
    assert serve.same_series(r11rc6, "1.1.0rc6") and serve.same_series(r11, "1.1.9")
    assert not serve.same_series(r12, "1.3.0") and not serve.same_series(r12, "1.1.9")


def test_a_server_only_flag_name_is_not_moved(tmp_path):
    # --port configures the server, not an LLM-API field: no field to move it to
    (finding,) = check(tmp_path, "max_num_tokens: 8\nport: 8000\n").findings
    assert (finding.severity.value, finding.location.line) == ("error", 2)
    assert "command-line flag" not in finding.fix_hint and not any(f.title.startswith("move") for f in finding.fixes)


def test_an_unknown_key_under_an_assumed_release_does_not_just_say_remove_it(tmp_path):
    """Nothing pins the version: a key the newest release read lacks may be a newer release's field
    (TensorRT-LLM main's use_kv_cache_manager_v2), so the hint names both ways out."""
    text = "kv_cache_config:\n  use_kv_cache_manager_v2: false\n"
    (assumed,) = check(tmp_path, text).findings
    assert assumed.fix_hint.startswith("remove it if you run TensorRT-LLM 1.2.0 or older")
    assert "--target trtllm==VERSION" in assumed.fix_hint
    (pinned,) = check(tmp_path, text, targets=["trtllm==1.2.0"]).findings
    assert pinned.fix_hint == "remove it"
