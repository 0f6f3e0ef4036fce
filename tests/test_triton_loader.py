"""Triton ``config.pbtxt`` (protobuf text format) through sits_doctor.loaders.triton: the parsed
data, exact positions (1-based line/col, and ``text[start:end]`` is the value as written), syntax
errors as InputErrors, and the Plan of a tensorrtllm-backend model (sits_doctor/frameworks/triton.py
for what the backend reads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sits_doctor.errors import InputError
from sits_doctor.frameworks import triton as triton_fw
from sits_doctor.loaders.triton import is_triton_text, parse_pbtxt, plans, why_not
from sits_doctor.plan import Provenance, Site
from sits_doctor.source import Pos

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "triton"


def fixture(name: str):
    return parse_pbtxt((FIXTURES / name).read_text(encoding="utf-8"), f"fixtures/triton/{name}")


def written(doc, pointer: str) -> str:
    pos = doc.positions[pointer]
    return doc.text[pos.start:pos.end]


def key_written(doc, pointer: str) -> str:
    pos = doc.positions[pointer]
    return doc.text[pos.key_start:pos.key_end]


# --- parsing -------------------------------------------------------------------------------------
SAMPLE = """\
# header comment
name: "tensorrt_llm"   # trailing comment
max_batch_size: 8
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  default_queue_policy: { max_queue_size: 0 }
}
input [
  { name: "input_ids" data_type: TYPE_INT32 dims: [ -1 ] allow_ragged_batch: true },
  { name: 'it\\'s' data_type: TYPE_FP32 dims: [ 1 ] optional: False }
]
instance_group < count: 2, kind: KIND_GPU; gpus: [ 0, 1 ] >
parameters: { key: "gpt_model_type" value: { string_value: "inflight_fused_batching" } }
parameters { key: 'engine dir' value < string_value: "/e\\tngines/\\"x\\"" > }
"""


def test_parse_nested_repeated_lists_comments_quotes():
    doc = parse_pbtxt(SAMPLE, "config.pbtxt")
    assert doc.fmt == "pbtxt" and doc.path == "config.pbtxt" and doc.text == SAMPLE
    assert doc.data == {
        "name": "tensorrt_llm",
        "max_batch_size": 8,
        "dynamic_batching": {"preferred_batch_size": [4, 8], "default_queue_policy": {"max_queue_size": 0}},
        "input": [
            {"name": "input_ids", "data_type": "TYPE_INT32", "dims": [-1], "allow_ragged_batch": True},
            {"name": "it's", "data_type": "TYPE_FP32", "dims": [1], "optional": False},
        ],
        "instance_group": [{"count": 2, "kind": "KIND_GPU", "gpus": [0, 1]}],
        "parameters": {"gpt_model_type": "inflight_fused_batching", "engine dir": '/e\tngines/"x"'},
    }
    assert doc.templated == set() and doc.template_spans == ()


def test_field_written_several_times_becomes_a_list():
    doc = parse_pbtxt('output { name: "a" }\noutput { name: "b" }\nversions_seen: 1\nfoo: 1\nfoo: 2\n', "c")
    assert doc.data == {"output": [{"name": "a"}, {"name": "b"}], "versions_seen": 1, "foo": [1, 2]}
    assert written(doc, "/output/1") == '{ name: "b" }' and key_written(doc, "/output/1") == "output"
    assert doc.positions["/output/1"].key_line == 2
    assert doc.positions["/output"] == Pos(1, 8, 1, 1, 7, 41, 0, 6, "block")


def test_known_repeated_field_written_once_is_a_list():
    doc = parse_pbtxt("instance_group { count: 1 kind: KIND_CPU }\n", "c")
    assert doc.data == {"instance_group": [{"count": 1, "kind": "KIND_CPU"}]}
    assert doc.positions["/instance_group"] == Pos(1, 16, 1, 1, 15, 42, 0, 14, "block")
    assert doc.positions["/instance_group/0"] == Pos(1, 16, 1, 1, 15, 42, 0, 14, "flow")


def test_list_items_and_repeats_mix_in_file_order():
    doc = parse_pbtxt("dims: 1\ndims: [2, 3]\ndims: 4\n", "c")
    assert doc.data == {"dims": [1, 2, 3, 4]}
    assert [written(doc, f"/dims/{i}") for i in range(4)] == ["1", "2", "3", "4"]
    assert doc.positions["/dims/1"].key_line is None
    assert doc.positions["/dims/3"].key_line == 3


def test_scalars_as_written():
    doc = parse_pbtxt('a: -3 b: 1.5 c: 2e3 d: 1.5f e: -inf f: 0x1F g: TYPE_BF16 h: True i: false '
                      'j: "x" \'y\' k: [] l: inf\n', "c")
    assert doc.data == {"a": -3, "b": 1.5, "c": 2000.0, "d": 1.5, "e": float("-inf"), "f": 31, "g": "TYPE_BF16",
                        "h": True, "i": False, "j": "xy", "k": [], "l": "inf"}
    assert [type(doc.data[k]) for k in "abfh"] == [int, float, int, bool]


def test_colon_before_message_and_empty_message():
    doc = parse_pbtxt("a: { }\nb <>\nc: < d: 1 >\n", "c")
    assert doc.data == {"a": {}, "b": {}, "c": {"d": 1}}
    assert written(doc, "/b") == "<>" and written(doc, "/c") == "< d: 1 >"


def test_escapes_decode_like_protobuf():
    doc = parse_pbtxt(r'''a: "tab\tnl\nq\"s\'b\\x\x41\101\u00e9"''' + "\nb: 'd\"q'\n", "c")
    assert doc.data == {"a": "tab\tnl\nq\"s'b\\xAA\u00e9", "b": 'd"q'}
    assert written(doc, "/a") == r'''"tab\tnl\nq\"s\'b\\x\x41\101\u00e9"'''
    assert doc.positions["/a"].style == '"' and doc.positions["/b"].style == "'"


def test_adjacent_strings_concatenate_and_span_all_pieces():
    doc = parse_pbtxt('a: "x" "y"\n   \'z\'\n', "c")
    assert doc.data == {"a": "xyz"}
    assert written(doc, "/a") == '"x" "y"\n   \'z\''


def test_non_ascii_offsets_count_characters():
    text = 'name: "modèle"  # é\nbackend: "tensorrtllm"\n'
    doc = parse_pbtxt(text, "c")
    assert doc.data["name"] == "modèle"
    assert written(doc, "/backend") == '"tensorrtllm"'
    assert doc.positions["/backend"] == Pos(2, 10, 2, 1, 29, 42, 20, 27, '"')


def test_form_feed_does_not_shift_lines():
    doc = parse_pbtxt("a: 1\x0c\nb: 2\n", "c")
    assert doc.positions["/b"].line == 2 and written(doc, "/b") == "2"


def test_string_maps_of_ensemble_steps():
    doc = fixture(".no-plan/ensemble.pbtxt")
    step = doc.data["ensemble_scheduling"]["step"]
    assert [s["model_name"] for s in step] == ["preprocessing", "tensorrt_llm", "postprocessing"]
    assert step[0]["input_map"] == {"QUERY": "text_input", "REQUEST_OUTPUT_LEN": "max_tokens"}
    assert step[2]["output_map"] == {"OUTPUT": "text_output"}
    pos = doc.positions["/ensemble_scheduling/step/0/input_map/QUERY"]
    assert (pos.line, pos.col, pos.key_line, pos.key_col) == (29, 39, 29, 24)
    assert written(doc, "/ensemble_scheduling/step/0/input_map/QUERY") == '"text_input"'
    assert key_written(doc, "/ensemble_scheduling/step/0/input_map/QUERY") == '"QUERY"'


def test_map_entry_not_key_value_stays_a_list():
    doc = parse_pbtxt('parameters { key: "a" value: { string_value: "x" } other: 1 }\n', "c")
    assert doc.data == {"parameters": [{"key": "a", "value": {"string_value": "x"}, "other": 1}]}


def test_map_key_written_twice_last_wins():
    doc = parse_pbtxt('parameters { key: "a" value: { string_value: "1" } }\n'
                      'parameters { key: "a" value: { string_value: "2" } }\n', "c")
    assert doc.data == {"parameters": {"a": "2"}}
    assert doc.positions["/parameters/a"].line == 2


def test_map_entry_without_string_value_is_empty():
    doc = parse_pbtxt('parameters { key: "a" value: { } }\n', "c")
    assert doc.data == {"parameters": {"a": ""}}
    assert written(doc, "/parameters/a") == "{ }"


def test_key_with_slash_is_escaped_in_the_pointer():
    doc = parse_pbtxt('parameters { key: "a/b~c" value: { string_value: "v" } }\n', "c")
    assert doc.data == {"parameters": {"a/b~c": "v"}}
    assert written(doc, "/parameters/a~1b~0c") == '"v"'


# --- positions -----------------------------------------------------------------------------------
def at(text: str, written_as: str, nth: int = 0) -> tuple[int, int]:
    """[start, end) of the ``nth`` occurrence of ``written_as`` in ``text`` (found independently
    of the parser)."""
    start = -1
    for _ in range(nth + 1):
        start = text.index(written_as, start + 1)
    return start, start + len(written_as)


def test_positions_of_plain_fields():
    doc = parse_pbtxt(SAMPLE, "config.pbtxt")
    assert doc.positions["/name"] == Pos(2, 7, 2, 1, *at(SAMPLE, '"tensorrt_llm"'), *at(SAMPLE, "name"), '"')
    assert written(doc, "/name") == '"tensorrt_llm"'
    assert doc.positions["/max_batch_size"] == Pos(3, 17, 3, 1, *at(SAMPLE, "8"), *at(SAMPLE, "max_batch_size"), None)
    assert written(doc, "/max_batch_size") == "8"
    assert written(doc, "/dynamic_batching/preferred_batch_size") == "[ 4, 8 ]"
    assert doc.positions["/dynamic_batching/preferred_batch_size"].style == "flow"
    assert doc.positions["/dynamic_batching/preferred_batch_size/1"] == Pos(5, 30, start=at(SAMPLE, "8 ]")[0],
                                                                            end=at(SAMPLE, "8 ]")[0] + 1)
    assert written(doc, "/dynamic_batching/default_queue_policy/max_queue_size") == "0"
    assert key_written(doc, "/dynamic_batching/default_queue_policy/max_queue_size") == "max_queue_size"
    assert written(doc, "/input/0/data_type") == "TYPE_INT32"
    assert doc.positions["/input/1/name"] == Pos(10, 11, 10, 5, *at(SAMPLE, "'it\\'s'"), *at(SAMPLE, "name", 2), "'")
    assert written(doc, "/input/1/name") == "'it\\'s'"
    assert written(doc, "/input/1/optional") == "False"
    assert written(doc, "/instance_group/0/kind") == "KIND_GPU"
    assert written(doc, "/instance_group/0") == "< count: 2, kind: KIND_GPU; gpus: [ 0, 1 ] >"
    assert doc.positions["/instance_group"].style == "block"  # a repeated field written as one entry
    assert written(doc, "/dynamic_batching") == "{\n  preferred_batch_size: [ 4, 8 ]\n  default_queue_policy: { max_queue_size: 0 }\n}"
    assert doc.positions[""] == Pos(1, 1, start=0, end=len(SAMPLE), style="block")


def test_positions_of_parameters():
    doc = parse_pbtxt(SAMPLE, "config.pbtxt")
    pos = doc.positions["/parameters/gpt_model_type"]
    assert pos == Pos(13, 60, 13, 20, *at(SAMPLE, '"inflight_fused_batching"'), *at(SAMPLE, '"gpt_model_type"'), '"')
    assert written(doc, "/parameters/gpt_model_type") == '"inflight_fused_batching"'
    assert key_written(doc, "/parameters/gpt_model_type") == '"gpt_model_type"'
    assert written(doc, "/parameters/engine dir") == '"/e\\tngines/\\"x\\""'
    assert key_written(doc, "/parameters/engine dir") == "'engine dir'"
    assert doc.positions["/parameters"].key_line == 13 and doc.positions["/parameters"].style == "block"
    assert key_written(doc, "/parameters") == "parameters"


def test_fixture_positions():
    doc = fixture("good_tensorrt_llm_llama31_8b.pbtxt")
    text = doc.text
    pos = doc.positions["/parameters/kv_cache_free_gpu_mem_fraction"]
    assert pos == Pos(85, 26, 84, 8, *at(text, '"0.85"'), *at(text, '"kv_cache_free_gpu_mem_fraction"'), '"')
    assert doc.positions["/max_batch_size"] == Pos(6, 17, 6, 1, *at(text, "64", 1), *at(text, "max_batch_size", 1), None)
    assert written(doc, "/max_batch_size") == "64"  # the 1st "64" is in the header comment
    assert written(doc, "/dynamic_batching/default_queue_policy/max_queue_size") == "512"
    assert written(doc, "/instance_group/0/kind") == "KIND_CPU"
    assert written(doc, "/input/4/name") == '"streaming"'


# --- syntax errors -------------------------------------------------------------------------------
@pytest.mark.parametrize("text, line, col, message", [
    ('max_batch_size: 8\ndynamic_batching {\n  max_queue_delay_microseconds: 100\n', 4, 1,
     "expected '}' to close the message opened at 2:18, found the end of the file"),
    ('name: "tensorrt_llm\nbackend: "x"\n', 1, 7, "String missing ending quote: '\"tensorrt_llm'"),
    ("max_batch_size: 8 }\n", 1, 19, "unexpected '}': no message is open"),
    ("max_batch_size 8\n", 1, 16, "expected ':' or '{' after 'max_batch_size', found '8'"),
    ("input [ { name: \"a\" } { name: \"b\" } ]\n", 1, 23, 'Expected ",".'),
    ("dims: [ 1, 2\n", 2, 1, "expected ']' to close the list opened at 1:7, found the end of the file"),
    ("dims [ 1 ]\n", 1, 6, "expected ':' before a list of values (only a list of messages may omit it), found '1'"),
    ("max_batch_size: $triton_max_batch_size\n", 1, 17,
     "unexpected '$' (a fill_template.py placeholder is written ${name})"),
    ("max_batch_size:\n", 2, 1, "expected a value, found the end of the file"),
    ("max_batch_size:", 1, 16, "expected a value, found the end of the file"),
    ("a:: 1\n", 1, 3, "expected a value, found ':'"),
    ("max_batch_size: 1.2.3\n", 1, 17, "Couldn't parse float: 1.2.3"),
    ("a { b: 1 >\n", 1, 10, "expected '}' to close the message opened at 1:3, found '>'"),
    ("[ext.field]: 1\n", 1, 1, "extension and Any fields ([...]) are not supported in a Triton model config"),
    (': 1\n', 1, 1, "Expected identifier."),
    ('name: "a"\nmax_batch_size: 1\nmax_batch_size: 2\n', 3, 1,
     "non-repeated field 'max_batch_size' is specified multiple times (first at 2:1)"),
    ('a: "\\xff"\n', 1, 4,
     "Couldn't parse string: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
])
def test_syntax_errors_are_input_errors(text, line, col, message):
    with pytest.raises(InputError) as info:
        parse_pbtxt(text, "models/m/config.pbtxt")
    assert info.value == InputError("models/m/config.pbtxt", f"invalid protobuf text format: {message}", line, col)


def test_nesting_limit():
    parse_pbtxt("b { " * 100 + "}" * 100, "c")
    with pytest.raises(InputError) as info:
        parse_pbtxt("b { " * 101 + "}" * 101, "c")
    assert str(info.value) == "c:1:403: error: invalid protobuf text format: nested deeper than 100 levels"


# --- sniffing ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ('name: "m"\nbackend: "python"\n', True),
    ("platform: 'ensemble'\n", True),
    ("max_batch_size: 0\n", False),  # also a line of TensorRT-LLM LLM-API YAML
    ("max_batch_size: 0\ninput [\n  { name: \"x\" }\n]\n", True),
    ("dynamic_batching { }\n", True),
    ("max_batch_size: ${triton_max_batch_size}\n", True),
    ("instance_group [\n  { kind: KIND_GPU }\n]\n", True),
    ('parameters {\n  key: "k"\n  value: { string_value: "v" }\n}\n', True),
    ("parameters: { key: \"k\" }\n", True),
    ("backend: pytorch\nmax_batch_size: 8\n", False),  # TensorRT-LLM LLM-API YAML
    ("model: meta-llama/Llama-3.1-8B\nmax_model_len: 8192\n", False),
    ('{"max_batch_size": 8}', False),
    ("  backend: \"tensorrtllm\"\n", False),  # indented: not a top-level field
])
def test_is_triton_text(text, expected):
    assert is_triton_text(text) is expected


# --- plans ---------------------------------------------------------------------------------------
def test_plan_of_tensorrtllm_model():
    doc = fixture("good_tensorrt_llm_llama31_8b.pbtxt")
    (plan,) = plans(doc)
    assert (plan.framework, plan.kind, plan.label) == ("trtllm", "triton-pbtxt",
                                                      "Triton model tensorrt_llm (tensorrtllm backend)")
    assert plan.file == "fixtures/triton/good_tensorrt_llm_llama31_8b.pbtxt" and plan.doc is doc
    assert plan.entry == "triton tensorrtllm backend"
    assert plan.anchor == Provenance(file=plan.file, pointer="/backend", line=5, col=1)
    assert {k: (s.value, s.raw) for k, s in plan.settings.items()} == {
        "max_batch_size": (64, 64),
        "gpt_model_type": ("inflight_fused_batching", "inflight_fused_batching"),
        "gpt_model_path": ("/models/engines/llama-3.1-8b-instruct-fp8-tp1",) * 2,
        "max_beam_width": (1, "1"),
        "kv_cache_free_gpu_mem_fraction": (0.85, "0.85"),
        "max_tokens_in_paged_kv_cache": (262144, "262144"),
        "enable_kv_cache_reuse": (True, "true"),
        "enable_chunked_context": (True, "true"),
        "batch_scheduler_policy": ("guaranteed_no_evict", "guaranteed_no_evict"),
        "exclude_input_in_output": (True, "true"),
        "FORCE_CPU_ONLY_INPUT_TENSORS": ("no", "no"),
    }
    s = plan.settings["kv_cache_free_gpu_mem_fraction"]
    assert s.key == s.raw_key == "kv_cache_free_gpu_mem_fraction" and not s.templated
    assert s.prov == Provenance(file=plan.file, pointer="/parameters/kv_cache_free_gpu_mem_fraction", line=85, col=26)
    assert s.site == Site("pbtxt", doc, "/parameters/kv_cache_free_gpu_mem_fraction")
    assert plan.settings["max_batch_size"].prov == Provenance(file=plan.file, pointer="/max_batch_size", line=6, col=17)
    assert plan.settings["max_batch_size"].site == Site("pbtxt", doc, "/max_batch_size")
    assert plan.value("kv_cache_free_gpu_mem_fraction") == 0.85


def test_plan_values_that_do_not_convert_stay_as_written():
    doc = parse_pbtxt('backend: "tensorrtllm"\nparameters { key: "enable_kv_cache_reuse" value: { string_value: "yes" } }\n'
                      'parameters { key: "max_attention_window_size" value: { string_value: "4096, 8192" } }\n'
                      'parameters { key: "max_tokens_in_paged_kv_cache" value: { string_value: "" } }\n'
                      'parameters { key: "sink_token_length" value: { string_value: "4 tokens" } }\n', "c.pbtxt")
    (plan,) = plans(doc)
    assert {k: s.value for k, s in plan.settings.items()} == {
        "enable_kv_cache_reuse": "yes", "max_attention_window_size": [4096, 8192],
        "max_tokens_in_paged_kv_cache": "", "sink_token_length": 4,  # std::stoi reads the leading digits
    }
    assert plan.anchor.line == 1 and plan.anchor.pointer == "/backend"


@pytest.mark.parametrize("head", ['backend: "tensorrt_llm"', 'platform: "tensorrt_llm"'])
def test_other_spellings_of_the_backend(head):
    doc = parse_pbtxt(head + "\nmax_batch_size: 4\n", "models/llm/config.pbtxt")
    (plan,) = plans(doc)
    assert plan.label == "Triton model llm (tensorrtllm backend)"  # no name: the model's folder
    assert plan.anchor.pointer == "/" + head.split(":")[0]
    assert list(plan.settings) == ["max_batch_size"]


def test_templated_placeholders():
    doc = fixture("unfilled_tensorrt_llm.pbtxt")
    assert doc.templated == {
        "/max_batch_size", "/model_transaction_policy/decoupled", "/dynamic_batching/preferred_batch_size/0",
        "/dynamic_batching/max_queue_delay_microseconds", "/parameters/gpt_model_type",
        "/parameters/kv_cache_free_gpu_mem_fraction", "/parameters/max_attention_window_size",
    }
    assert doc.data["max_batch_size"] == "${triton_max_batch_size}"
    assert doc.data["model_transaction_policy"] == {"decoupled": "${decoupled_mode}"}
    assert written(doc, "/max_batch_size") == "${triton_max_batch_size}"
    assert doc.positions["/max_batch_size"].style is None
    assert written(doc, "/parameters/gpt_model_type") == '"${batching_strategy}"'
    assert [doc.text[s:e] for s, e in doc.template_spans] == [
        "${triton_max_batch_size}", "${decoupled_mode}", "${triton_max_batch_size}",
        "${max_queue_delay_microseconds}", "${batching_strategy}", "${kv_cache_free_gpu_mem_fraction}",
        "${max_attention_window_size}",
    ]
    (plan,) = plans(doc)
    assert {k: s.templated for k, s in plan.settings.items()} == {
        "max_batch_size": True, "gpt_model_type": True, "gpt_model_path": False,
        "kv_cache_free_gpu_mem_fraction": True, "max_attention_window_size": True,
    }
    assert plan.settings["gpt_model_type"].value == "${batching_strategy}"
    assert plan.value("kv_cache_free_gpu_mem_fraction", "unknown") == "unknown"
    assert plan.value("gpt_model_path") == "/engines/qwen2.5-7b"


def test_placeholder_inside_a_longer_value_is_templated():
    doc = parse_pbtxt('backend: "tensorrtllm"\nparameters { key: "gpt_model_path" '
                      'value: { string_value: "${model_root}/engine" } }\n', "c")
    (plan,) = plans(doc)
    assert plan.settings["gpt_model_path"].templated
    assert [doc.text[s:e] for s, e in doc.template_spans] == ["${model_root}"]


@pytest.mark.parametrize("name, reason", [
    (".no-plan/preprocessing_python.pbtxt", "a Triton config.pbtxt, but its backend is python, not tensorrtllm"),
    (".no-plan/ensemble.pbtxt", "a Triton ensemble of preprocessing, tensorrt_llm, postprocessing; "
                       "the tensorrtllm model's own config.pbtxt holds its settings"),
    ("good_tensorrt_llm_llama31_8b.pbtxt", ""),
])
def test_why_not_and_no_plan_for_other_backends(name, reason):
    doc = fixture(name)
    assert why_not(doc) == reason
    assert len(plans(doc)) == (0 if reason else 1)


@pytest.mark.parametrize("text, reason", [
    ("", "an empty Triton config.pbtxt"),
    ("# only a comment\n", "an empty Triton config.pbtxt"),
    ('backend: "${triton_backend}"\n', "a Triton config.pbtxt whose backend is still the placeholder "
                                        "${triton_backend}; fill it with tools/fill_template.py"),
    ('platform: "onnxruntime_onnx"\n', "a Triton config.pbtxt, but its platform is onnxruntime_onnx, not tensorrtllm"),
    ("max_batch_size: 8\n", "a Triton config.pbtxt with neither backend nor platform"),
    ('platform: "ensemble"\n', "a Triton ensemble; the tensorrtllm model's own config.pbtxt holds its settings"),
])
def test_why_not_inline(text, reason):
    doc = parse_pbtxt(text, "c")
    assert why_not(doc) == reason and plans(doc) == []


# --- framework facts -----------------------------------------------------------------------------
@pytest.mark.parametrize("name, text, value", [
    ("kv_cache_free_gpu_mem_fraction", "0.9", 0.9),
    ("kv_cache_free_gpu_mem_fraction", " .5x", 0.5),
    ("max_tokens_in_paged_kv_cache", "8192", 8192),
    ("max_tokens_in_paged_kv_cache", "0.9", 0),  # std::stoi stops at the dot
    ("kv_cache_host_memory_bytes", "1073741824", 1073741824),
    ("enable_kv_cache_reuse", "TRUE", True),
    ("enable_kv_cache_reuse", "0", False),
    ("max_attention_window_size", "4096", [4096]),
    ("max_attention_window_size", "1024, 4096,", [1024, 4096]),
    ("batch_scheduler_policy", "max_utilization", "max_utilization"),
    ("medusa_choices", "{0, 0}, {0, 1}", "{0, 0}, {0, 1}"),
    ("not_a_backend_key", "12", "12"),
])
def test_convert_like_the_backend(name, text, value):
    assert triton_fw.convert(name, text) == value


@pytest.mark.parametrize("name, text", [
    ("enable_kv_cache_reuse", "yes"), ("enable_kv_cache_reuse", "True "), ("max_beam_width", "one"),
    ("kv_cache_free_gpu_mem_fraction", ""), ("kv_cache_host_memory_bytes", "-1"), ("max_attention_window_size", ""),
])
def test_convert_fails_where_the_backend_falls_back(name, text):
    with pytest.raises(ValueError):
        triton_fw.convert(name, text)


def test_documented_defaults():
    p = triton_fw.PARAMETERS
    assert (p["kv_cache_free_gpu_mem_fraction"].default, p["enable_kv_cache_reuse"].default,
            p["batch_scheduler_policy"].default, p["max_beam_width"].default,
            p["exclude_input_in_output"].default, p["max_tokens_in_paged_kv_cache"].default) == (
        0.9, False, "guaranteed_no_evict", 1, False, None)
    assert p["gpt_model_type"].variable == "batching_strategy" and p["gpt_model_path"].variable == "engine_dir"
    assert triton_fw.has_placeholder("${engine_dir}/x") and not triton_fw.has_placeholder("$engine_dir")


def test_is_triton_name():
    from sits_doctor.loaders.triton import is_triton_name

    assert is_triton_name("config.pbtxt") and not is_triton_name("config.json") and not is_triton_name("x.pbtxt")


def test_token_position_agrees_with_the_tokenizers_public_errors():
    """_token_at reads protobuf's private attributes: they must be what ParseError() reports."""
    from google.protobuf import text_format

    from sits_doctor.loaders.triton import _token_at

    tok = text_format.Tokenizer(['a: 1\n', '  b { c: "x" }\n'])
    seen = []
    while not tok.AtEnd():
        err = tok.ParseError("")
        assert _token_at(tok) == (err.GetLine(), err.GetColumn())
        seen.append((tok.token, *_token_at(tok)))
        tok.NextToken()
        prev = tok.ParseErrorPreviousToken("")
        assert _token_at(tok, previous=True) == (prev.GetLine(), prev.GetColumn())
    assert seen == [("a", 1, 1), (":", 1, 2), ("1", 1, 4), ("b", 2, 3), ("{", 2, 5), ("c", 2, 7), (":", 2, 8),
                    ('"x"', 2, 10), ("}", 2, 14)]


def test_crlf_line_endings():
    text = 'name: "m"\r\nbackend: "tensorrtllm"\r\nparameters { key: "k" value: { string_value: "v" } }\r\n'
    doc = parse_pbtxt(text, "c")
    assert doc.data == {"name": "m", "backend": "tensorrtllm", "parameters": {"k": "v"}}
    assert doc.positions["/backend"] == Pos(2, 10, 2, 1, *at(text, '"tensorrtllm"'), *at(text, "backend"), '"')
    assert written(doc, "/parameters/k") == '"v"'


@pytest.mark.parametrize("text, data", [
    ('input { name: "a" }\n', {"input": [{"name": "a"}]}),
    ('output { name: "b" }\n', {"output": [{"name": "b"}]}),
    ("dims: 4\n", {"dims": [4]}),
    ("dynamic_batching { preferred_batch_size: 8 }\n", {"dynamic_batching": {"preferred_batch_size": [8]}}),
    ('ensemble_scheduling { step { model_name: "m" } }\n', {"ensemble_scheduling": {"step": [{"model_name": "m"}]}}),
    ("instance_group { gpus: 0 }\n", {"instance_group": [{"gpus": [0]}]}),
    ("model_warmup { batch_size: 1 }\n", {"model_warmup": [{"batch_size": 1}]}),
    ("max_batch_size: 4\n", {"max_batch_size": 4}),  # singular: a plain value
])
def test_repeated_fields_of_model_config_written_once(text, data):
    assert parse_pbtxt(text, "c").data == data


# The parameters keys of all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt and the keys the
# C++ reads (GetParameter<...>("...") in model_instance_state.cc / model_state.cc), both at
# triton-inference-server/tensorrtllm_backend v0.18.0.
TEMPLATE_KEYS_V0_18 = """
max_beam_width FORCE_CPU_ONLY_INPUT_TENSORS gpt_model_type gpt_model_path encoder_model_path
max_tokens_in_paged_kv_cache max_attention_window_size sink_token_length batch_scheduler_policy
kv_cache_free_gpu_mem_fraction cross_kv_cache_fraction kv_cache_host_memory_bytes kv_cache_onboard_blocks
exclude_input_in_output cancellation_check_period_ms stats_check_period_ms iter_stats_max_iterations
request_stats_max_iterations enable_kv_cache_reuse normalize_log_probs enable_chunked_context gpu_device_ids
participant_ids lora_cache_optimal_adapter_size lora_cache_max_adapter_size lora_cache_gpu_memory_fraction
lora_cache_host_memory_bytes decoding_mode executor_worker_path medusa_choices eagle_choices gpu_weights_percent
enable_context_fmha_fp32_acc multi_block_mode cuda_graph_mode cuda_graph_cache_size speculative_decoding_fast_logits
""".split()
CPP_ONLY_KEYS_V0_18 = ["recv_poll_period_ms", "enable_trt_overlap", "worker_path"]


def test_parameter_table_covers_the_template_and_the_cpp():
    assert len(TEMPLATE_KEYS_V0_18) == 37
    known = set(triton_fw.PARAMETERS) | triton_fw.TRITON_PARAMETERS
    assert [k for k in TEMPLATE_KEYS_V0_18 + CPP_ONLY_KEYS_V0_18 if k not in known] == []
    later = {k for k, p in triton_fw.PARAMETERS.items() if p.source == triton_fw.LATER_COPY}
    assert later == {"num_nodes", "lora_prefetch_dir", "lookahead_window_size", "lookahead_ngram_size",
                     "lookahead_verification_set_size", "guided_decoding_backend", "xgrammar_tokenizer_info_path",
                     "tokenizer_dir"}
    assert triton_fw.REQUIRED == ("gpt_model_type",)
    assert set(triton_fw.REQUIRED_LATER) - later == {"gpt_model_type"}
