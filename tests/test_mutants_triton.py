"""Triton config.pbtxt (sits_doctor/loaders/triton.py): edge cases that mutation testing showed no
test noticing — ``parameters`` entries that are not a string map, a placeholder right before a
closing bracket, the model's name from its path, an ensemble step without a model name, a last line
without a newline, how lists count towards the nesting limit."""

from __future__ import annotations

import pytest

from sits_doctor.errors import InputError
from sits_doctor.loaders.triton import parse_pbtxt, plans, why_not

BACKEND = 'backend: "tensorrtllm"\n'


@pytest.mark.parametrize("text, data", [
    ('parameters: [ "abc" ]\n', ["abc"]),
    ('parameters { key: 5 value: { string_value: "x" } }\n', [{"key": 5, "value": {"string_value": "x"}}]),
    ('parameters { key: { a: 1 } value: { string_value: "x" } }\n',
     [{"key": {"a": 1}, "value": {"string_value": "x"}}]),
    ('parameters { key: "a" value: { x: 1 } }\n', [{"key": "a", "value": {"x": 1}}]),
    ('parameters { key: "a" value: 5 }\n', [{"key": "a", "value": 5}]),
    ('parameters { key: "a" value: { string_value: 5 } }\n', [{"key": "a", "value": {"string_value": 5}}]),
])
def test_parameters_that_are_not_a_string_map_stay_as_written_and_set_nothing(text, data):
    doc = parse_pbtxt(BACKEND + text, "llama/config.pbtxt")
    assert doc.data["parameters"] == data
    (plan,) = plans(doc)
    assert plan.settings == {}


def test_a_placeholder_right_before_a_closing_bracket():
    text = BACKEND + 'max_batch_size: ${mbs}\ninput [ { name: "ids" data_type: TYPE_INT32 dims: [${len}] } ]\n'
    doc = parse_pbtxt(text, "llama/config.pbtxt")
    assert doc.data["input"] == [{"name": "ids", "data_type": "TYPE_INT32", "dims": ["${len}"]}]
    assert doc.templated == {"/max_batch_size", "/input/0/dims/0"}
    pos = doc.positions["/input/0/dims"]
    assert text[pos.start:pos.end] == "[${len}]"


@pytest.mark.parametrize("path, label", [
    ("config.pbtxt", "Triton model config (tensorrtllm backend)"),  # no folder: the file's stem
    ("models/llama.pbtxt", "Triton model llama (tensorrtllm backend)"),
    ("repo/llama/config.pbtxt", "Triton model llama (tensorrtllm backend)"),
])
def test_the_model_is_named_by_its_folder_only_for_config_pbtxt(path, label):
    (plan,) = plans(parse_pbtxt(BACKEND, path))
    assert plan.label == label


def test_an_ensemble_step_without_a_model_name_is_left_out_of_the_reason():
    text = ('platform: "ensemble"\nensemble_scheduling {\n  step [ { model_name: "preprocessing" model_version: -1 },'
            ' { model_version: -1 }, { model_name: "tensorrt_llm" model_version: -1 } ]\n}\n')
    assert why_not(parse_pbtxt(text, "ensemble/config.pbtxt")) == (
        "a Triton ensemble of preprocessing, tensorrt_llm; the tensorrtllm model's own config.pbtxt holds its settings")


def test_a_last_line_without_a_newline_is_read():
    text = '\nbackend: "tensorrtllm"\nmax_batch_size: 8'  # a blank first line, no newline at the end
    doc = parse_pbtxt(text, "llama/config.pbtxt")
    assert doc.data == {"backend": "tensorrtllm", "max_batch_size": 8}
    (plan,) = plans(doc)
    s = plan.settings["max_batch_size"]
    assert (s.value, str(s.prov)) == (8, "llama/config.pbtxt:3:17")


def test_a_list_and_each_message_in_it_are_one_level_of_nesting_each():
    parse_pbtxt("b [ { " * 50 + "} ] " * 50, "c")  # 100 levels
    with pytest.raises(InputError) as info:
        parse_pbtxt("b [ { " * 50 + "b { } " + "} ] " * 50, "c")
    assert str(info.value) == "c:1:303: error: invalid protobuf text format: nested deeper than 100 levels"


def test_a_map_entry_without_a_value_has_no_span_to_edit():
    doc = parse_pbtxt('parameters { key: "enable_kv_cache_reuse" }\n', "c")
    assert doc.data == {"parameters": {"enable_kv_cache_reuse": ""}}  # proto3's default: the empty string
    pos = doc.positions["/parameters/enable_kv_cache_reuse"]
    assert (pos.line, pos.col, pos.start, pos.end) == (1, 19, -1, -1)
