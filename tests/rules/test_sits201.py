"""SITS201 value-rejected-by-parser: ORT GenAI's strict genai_config.json types.

ORT GenAI ``src/config.cpp`` / ``src/json.h`` (trtllm-ortgenai-facts.md §5, trtllm_oga.md Q1):
provider options are strings; integers must be integral numbers (``SafeDoubleToInt``); typed
getters reject other JSON types (``Expected a string but saw a bool``), ``null`` included;
``graph_optimization_level`` is one of four names.
"""

from __future__ import annotations

import json

import harness
import pytest

from conftest import write
from sits_doctor import CheckOptions, check
from sits_doctor.finding import Severity

CODE = "SITS201"


def genai(session_options: dict | None = None, search: dict | None = None, **model) -> str:
    """A genai_config.json with one value per line, so each finding has its own line."""
    decoder = {"filename": "model.onnx", "session_options": session_options or {}}
    data = {"model": {"type": "llama", "context_length": 4096, **model, "decoder": decoder},
            "search": search or {"max_length": 4096}}
    return json.dumps(data, indent=2)


def findings(tmp_path, monkeypatch, text: str):
    return harness.findings(tmp_path, monkeypatch, {"genai_config.json": text}, "genai_config.json", CODE,
                            "ortgenai==0.18.0")


def only(found):
    assert len(found) == 1, [f.render() for f in found]
    f = found[0]
    assert (f.code, f.severity) == (CODE, Severity.ERROR)
    return f


def line_of(text: str, needle: str) -> tuple[int, int]:
    for n, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return n, line.index(needle) + 1
    raise AssertionError(needle)


@pytest.mark.parametrize("value, saw, hint", [
    (True, "bool (true)", 'write "1" (a string)'),
    (False, "bool (false)", 'write "0" (a string)'),
    (1, "number (1)", 'write "1" (a string)'),
])
def test_fail_provider_option_not_a_string(tmp_path, monkeypatch, value, saw, hint):
    text = genai({"provider_options": [{"cuda": {"enable_cuda_graph": value}}]})
    f = only(findings(tmp_path, monkeypatch, text))
    line, col = line_of(text, '"enable_cuda_graph"')
    assert f.render() == (
        f"genai_config.json:{line}:{col}: SITS201 [error] enable_cuda_graph: expected a string but saw a {saw}: "
        "ORT GenAI 0.18.0 fails to load the config"
    )
    assert f.fix_hint == hint


def test_fail_fractional_integer(tmp_path, monkeypatch):
    text = genai(search={"max_length": 4096.5})
    f = only(findings(tmp_path, monkeypatch, text))
    line, col = line_of(text, '"max_length"')
    assert f.render() == (
        f"genai_config.json:{line}:{col}: SITS201 [error] max_length = 4096.5 is not an integer: "
        "ORT GenAI 0.18.0 fails to load the config"
    )


def test_pass_integral_float_for_integer(tmp_path, monkeypatch):
    # SafeDoubleToInt accepts 4096.0; numbers read with Get<double> accept ints
    text = genai(search={"max_length": 4096.0, "batch_size": 1.0, "temperature": 1, "top_p": 0})
    assert findings(tmp_path, monkeypatch, text) == []


@pytest.mark.parametrize("key, value, section", [
    ("intra_op_num_threads", "4", "session"),
    ("context_length", "4096", "model"),
    ("top_k", "50", "search"),
])
def test_fail_string_where_integer_expected(tmp_path, monkeypatch, key, value, section):
    if section == "session":
        text = genai({key: value})
    elif section == "model":
        text = genai(**{key: value})
    else:
        text = genai(search={key: value})
    f = only(findings(tmp_path, monkeypatch, text))
    line, col = line_of(text, f'"{key}"')
    assert (f.location.line, f.location.col) == (line, col)
    assert f.message.startswith(f'{key}: expected a')
    assert f'but saw a string ("{value}"): ORT GenAI 0.18.0 fails to load the config' in f.message


def test_fail_string_where_integer_expected_wording(tmp_path, monkeypatch):
    f = only(findings(tmp_path, monkeypatch, genai(search={"top_k": "50"})))
    assert "expected a integer" not in f.message


@pytest.mark.parametrize("key, value", [("enable_cpu_mem_arena", "true"), ("enable_mem_pattern", 1)])
def test_fail_bool_option_of_another_type(tmp_path, monkeypatch, key, value):
    text = genai({key: value})
    f = only(findings(tmp_path, monkeypatch, text))
    assert f.location.line == line_of(text, f'"{key}"')[0]
    assert f.message.startswith(f"{key}: expected a boolean but saw a ")


@pytest.mark.parametrize("where, key", [
    ("session", "log_severity_level"),
    ("search", "top_p"),
    ("search", "do_sample"),
    ("model", "pad_token_id"),
    ("provider", "enable_cuda_graph"),
])
def test_fail_null_for_known_key(tmp_path, monkeypatch, where, key):
    if where == "session":
        text = genai({key: None})
    elif where == "search":
        text = genai(search={"max_length": 4096, key: None})
    elif where == "model":
        text = genai(**{key: None})
    else:
        text = genai({"provider_options": [{"cuda": {key: None}}]})
    f = only(findings(tmp_path, monkeypatch, text))
    line, col = line_of(text, f'"{key}"')
    assert (f.location.line, f.location.col) == (line, col)
    assert f.message.startswith(f"{key}: expected ")
    assert f.message.endswith("but saw a null (null): ORT GenAI 0.18.0 fails to load the config")


def test_fail_null_graph_optimization_level_says_null(tmp_path, monkeypatch):
    f = only(findings(tmp_path, monkeypatch, genai({"graph_optimization_level": None})))
    assert "None" not in f.message and "null" in f.message


def test_fail_bad_graph_optimization_level(tmp_path, monkeypatch):
    text = genai({"graph_optimization_level": "ORT_ENABLE_EVERYTHING"})
    f = only(findings(tmp_path, monkeypatch, text))
    line, col = line_of(text, '"graph_optimization_level"')
    assert f.render() == (
        f'genai_config.json:{line}:{col}: SITS201 [error] graph_optimization_level = "ORT_ENABLE_EVERYTHING" is not '
        "one of the 4 values it takes: ORT GenAI 0.18.0 fails to load the config"
    )
    assert f.fix_hint == "use one of ORT_DISABLE_ALL, ORT_ENABLE_BASIC, ORT_ENABLE_EXTENDED, ORT_ENABLE_ALL"


@pytest.mark.parametrize("level", ["ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL"])
def test_pass_graph_optimization_levels(tmp_path, monkeypatch, level):
    assert findings(tmp_path, monkeypatch, genai({"graph_optimization_level": level})) == []


def test_fail_unknown_session_option_must_be_a_string(tmp_path, monkeypatch):
    # unknown session_options keys go to AddConfigEntry, which takes strings only
    text = genai({"session.intra_op.allow_spinning": 0})
    f = only(findings(tmp_path, monkeypatch, text))
    assert f.message.startswith("session.intra_op.allow_spinning: expected a string but saw a number (0)")


def test_pass_eos_token_id_int_or_array(tmp_path, monkeypatch):
    assert findings(tmp_path, monkeypatch, genai(eos_token_id=[1, 2])) == []
    assert findings(tmp_path, monkeypatch, genai(eos_token_id=2)) == []


def test_pass_good_config(tmp_path, monkeypatch):
    text = json.dumps({
        "model": {
            "type": "llama", "context_length": 4096, "vocab_size": 128256, "bos_token_id": 128000,
            "eos_token_id": [128001, 128009], "pad_token_id": 128001,
            "decoder": {
                "filename": "model.onnx", "head_size": 64, "hidden_size": 2048, "num_attention_heads": 32,
                "num_hidden_layers": 16, "num_key_value_heads": 8,
                "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                           "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"},
                "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                            "present_value_names": "present.%d.value"},
                "session_options": {
                    "log_id": "onnxruntime-genai", "intra_op_num_threads": 4, "enable_cpu_mem_arena": True,
                    "graph_optimization_level": "ORT_ENABLE_ALL", "session.intra_op.allow_spinning": "0",
                    "provider_options": [{"cuda": {"enable_cuda_graph": "1", "tunable_op_enable": "0"}}],
                },
            },
        },
        "search": {"do_sample": False, "max_length": 4096, "past_present_share_buffer": True,
                   "temperature": 1.0, "top_k": 50, "top_p": 1.0, "num_beams": 1},
        "engine": {"dynamic_batching": {"gpu_utilization_factor": 0.6, "max_batch_size": 16}},
    }, indent=2)
    assert findings(tmp_path, monkeypatch, text) == []


# --- vLLM: size suffixes before human_readable_int ------------------------------------------

def _vllm(tmp_path, monkeypatch, value: str, version: str) -> list[str]:
    write(tmp_path, "serve.yaml", f"model: org/m\nmax-model-len: {value}\nserved-model-name: m\n")
    monkeypatch.chdir(tmp_path)
    report = check(["serve.yaml"], CheckOptions(targets=[f"vllm=={version}"], isolated=True, select=["SITS201"]))
    assert not report.errors
    return [f.render() for f in report.findings]


def test_fail_size_suffix_before_0_8_4(tmp_path, monkeypatch):
    assert _vllm(tmp_path, monkeypatch, "8k", "0.8.3") == [
        "serve.yaml:2:1: SITS201 [error] max_model_len '8k' uses a size suffix, which vLLM 0.8.3 does not "
        "read (from 0.8.4): startup fails (argument --max-model-len: invalid int value)"
    ]


@pytest.mark.parametrize("value", ["8k", "8K", "25.6k"])
def test_pass_size_suffix_from_0_8_4(tmp_path, monkeypatch, value):
    assert _vllm(tmp_path, monkeypatch, value, "0.8.4") == []


@pytest.mark.parametrize("value", ["8192", "'8192'", "-1"])
def test_pass_plain_numbers_before_0_8_4(tmp_path, monkeypatch, value):
    assert _vllm(tmp_path, monkeypatch, value, "0.7.3") == []


@pytest.mark.parametrize("version", ["0.7.3", "0.33.0"])
@pytest.mark.parametrize(("value", "shown"), [("12abc", "'12abc'"), ("8x", "'8x'"),
                                              ("9" * 5000, "'" + "9" * 57 + "...'")])
def test_fail_max_model_len_that_is_no_number(tmp_path, monkeypatch, version, value, shown):
    assert _vllm(tmp_path, monkeypatch, value, version) == [
        f"serve.yaml:2:1: SITS201 [error] max_model_len {shown} is not a number vLLM {version} reads: it refuses "
        "to start (argument --max-model-len: invalid value)"
    ]


def test_pass_auto_from_0_14(tmp_path, monkeypatch):
    assert _vllm(tmp_path, monkeypatch, "auto", "0.14.0") == []


@pytest.mark.parametrize("model", ['{"type": "llama"}', '{"type": "llama", "context_length": 0}'],
                         ids=["missing", "zero"])
def test_fail_ortgenai_context_length_missing_or_zero(tmp_path, monkeypatch, model):
    """Every tested wheel (0.5.2 … 0.18.0) refuses it at Config() (ortgenai_probes.json)."""
    from sits_doctor import CheckOptions, check

    (tmp_path / "genai_config.json").write_text('{"model": ' + model + ', "search": {"max_length": 64}}')
    monkeypatch.chdir(tmp_path)
    report = check(["genai_config.json"], CheckOptions(isolated=True, select=["SITS201"]))
    assert [f.message for f in report.findings] == [
        "model context_length is 0 or was not set: ORT GenAI 0.18.0 (assumed) fails to load the config"]


def test_message_says_an_object(tmp_path, monkeypatch):
    from sits_doctor import CheckOptions, check

    (tmp_path / "genai_config.json").write_text(
        '{"model": {"type": "llama", "context_length": 64, "vocab_size": {"a": 1}}}')
    monkeypatch.chdir(tmp_path)
    (f,) = check(["genai_config.json"], CheckOptions(isolated=True, select=["SITS201"])).findings
    assert "but saw an object" in f.message


def test_fail_yaml_string_for_a_flag_without_value(tmp_path, monkeypatch):
    """vllm/utils/argparse_utils.py@0.20.0 load_config_file: a non-bool value becomes `--key value`;
    after a flag that takes none, the word is left over."""
    found = harness.findings(tmp_path, monkeypatch, {"serve.yaml": 'model: m\nenforce_eager: "false"\nserved-model-name: m\n'},
                             "serve.yaml", CODE, "vllm==0.20.0")
    assert [f.render() for f in found] == [
        "serve.yaml:2:1: SITS201 [error] `enforce_eager: 'false'` is a string, a separate word after --enforce-eager: "
        "vLLM 0.20.0 fails to start"]
    assert found[0].evidence[0].startswith("why: vLLM's config loader passes a string after the flag, which takes none")
    assert found[0].fixes[0].edits[0].new == "false"


def test_fail_yaml_true_for_an_option_that_takes_a_value(tmp_path, monkeypatch):
    found = harness.findings(tmp_path, monkeypatch, {"serve.yaml": "model: m\nmax-num-seqs: true\nserved-model-name: m\n"},
                             "serve.yaml", CODE, "vllm==0.20.0")
    assert [f.message for f in found] == [
        "`max-num-seqs: true` becomes --max-num-seqs with no value (vLLM's config loader writes only the flag for "
        "true): vLLM 0.20.0 refuses to start (argument --max-num-seqs: expected one argument)"]


@pytest.mark.parametrize(("line", "message"), [
    ("max_model_len: true", "`max_model_len: true` becomes --max-model-len with no value"),
    ("max_model_len: .inf", "argument --max-model-len: invalid int value: 'inf'"),
])
def test_fail_max_model_len_of_the_wrong_yaml_type(tmp_path, monkeypatch, line, message):
    found = harness.findings(tmp_path, monkeypatch, {"serve.yaml": f"model: m\n{line}\nserved-model-name: m\n"},
                             "serve.yaml", CODE, "vllm==0.20.0")
    assert [f.message.startswith(message) for f in found] == [True]


# --- "None" for an optional type, and JSON that is not JSON -----------------------------------------

def _serve(tmp_path, monkeypatch, line: str, version: str = "0.33.0"):
    return harness.findings(tmp_path, monkeypatch, {"serve.sh": f"vllm serve org/m {line}\n"}, "serve.sh", CODE,
                            f"vllm=={version}")


def test_none_is_accepted_by_an_optional_type(tmp_path, monkeypatch):
    """arg_utils.py optional_type@0.33.0: "" and "None" parse as None (max_log_len: _optional_type(int))."""
    assert _serve(tmp_path, monkeypatch, "--max-log-len None") == []
    # a type that is not optional refuses the word (max_num_batched_tokens: human_readable_int)
    (f,) = _serve(tmp_path, monkeypatch, "--max-num-batched-tokens None")
    assert f.message.startswith("argument --max-num-batched-tokens: invalid int value: 'None'")
    # before optional_type (0.8.4: plain int) "None" is an invalid int
    (g,) = _serve(tmp_path, monkeypatch, "--max-log-len None", "0.8.4")
    assert "invalid int value: 'None'" in g.message


def test_python_repr_of_a_dict_is_not_json(tmp_path, monkeypatch):
    (f,) = _serve(tmp_path, monkeypatch, "--compilation-config \"{'mode': 3}\"")
    assert f.message == ("argument --compilation-config: \"{'mode': 3}\" is not JSON (Expecting property name enclosed "
                         "in double quotes): vLLM 0.33.0 refuses to start")
    assert _serve(tmp_path, monkeypatch, "--compilation-config '{\"mode\": 3}'") == []
    # union_dict_and_str: a value that does not open an object is a plain string
    assert _serve(tmp_path, monkeypatch, "--additional-config plain") == []
    (h,) = _serve(tmp_path, monkeypatch, "--additional-config \"{a: 1}\"")
    assert "is not JSON" in h.message


def test_ortgenai_names_the_release_that_judged_it(tmp_path, monkeypatch):
    """A version between probed releases is judged as the one below it, and the message says which."""
    text = genai({"provider_options": [{"cuda": {"enable_cuda_graph": True}}]})
    found = harness.findings(tmp_path, monkeypatch, {"genai_config.json": text}, "genai_config.json", CODE,
                             "ortgenai==0.9.1.dev0")
    f = only(found)
    assert f.message.endswith(": ORT GenAI 0.9.0 fails to load the config"), f.message
    assert any(e.startswith("judged as ORT GenAI 0.9.0: ") for e in f.evidence), f.evidence
