"""The fix builders (sits_doctor.fixes.config) and the fix engine's pure parts
(sits_doctor.fixer): each builder's exact output text for every way a setting can be written —
YAML block / flow / quoted keys and values, JSON, argv lists, shell strings — and the reason given
whenever an edit is refused; apply_edits, _choose, FileResult and the writer's edge cases."""

from __future__ import annotations

import os

import pytest

from sits_doctor import atomic_write, fixer
from sits_doctor.errors import InputError
from sits_doctor.finding import Edit, Finding, Fix, Safety
from sits_doctor.fixer import apply_edits
from sits_doctor.fixes import config as edit
from sits_doctor.fixes import config_style as style
from sits_doctor.loaders.commands import words
from sits_doctor.loaders.flatten import flatten
from sits_doctor.loaders.vllm_args import parse_args
from sits_doctor.plan import Setting, Site, Word
from sits_doctor.source import parse_json
from sits_doctor.source_yaml import parse_yaml


def yaml_doc(text: str):
    return parse_yaml(text, "c.yaml")[0]


def setting(doc, key: str) -> Setting:
    return flatten(doc, doc.data)[key]


def ys(text: str, key: str) -> Setting:
    return setting(yaml_doc(text), key)


def js(text: str, key: str) -> Setting:
    return setting(parse_json(text, "c.json"), key)


def out(fix: Fix) -> str:
    """The fixed text; the fix must be applicable."""
    assert fix is not None
    assert fix.safety is not Safety.DISPLAY, fix.why_not
    assert fix.why_not is None
    return apply_edits(fix.source, fix.edits)


def refused(fix: Fix) -> str:
    assert fix is not None
    assert fix.safety is Safety.DISPLAY and fix.edits == ()
    assert fix.source and fix.file == "c.yaml" or fix.file == "c.json"
    return fix.why_not


def cli_options(text: str, pointer_key: str = "args", fmt: str = "yaml") -> dict[str, Setting]:
    """The vLLM options of the command line at ``/pointer_key`` (after ``serve``)."""
    doc = parse_json(text, "c.json") if fmt == "json" else yaml_doc(text)
    tokens = words(doc, [("/" + pointer_key, doc.data[pointer_key])])
    texts = [t.text for t in tokens]
    start = texts.index("serve") + 1 if "serve" in texts else 0
    if "serve" in texts and texts.index("serve") + 1 < len(texts) and not texts[start].startswith("-"):
        start += 1  # the model
    return parse_args([t for t in tokens[start:] if not t.operator], doc)[0]


# --- remove: mappings ------------------------------------------------------------------------------

def test_remove_a_yaml_block_key_takes_its_whole_line():
    fix = edit.remove(ys("a: 1\nb: 2\nc: 3\n", "b"), "drop b")
    assert out(fix) == "a: 1\nc: 3\n"
    assert fix.title == "drop b" and fix.file == "c.yaml" and fix.safety is Safety.SAFE
    assert fix.edits == (Edit(5, 10, ""),)


def test_remove_keeps_the_safety_asked_for():
    fix = edit.remove(ys("a: 1\nb: 2\n", "b"), "t", Safety.UNSAFE)
    assert fix.safety is Safety.UNSAFE and out(fix) == "a: 1\n"


def test_remove_the_last_key_without_a_final_newline():
    assert out(edit.remove(ys("a: 1\nb: 2", "b"), "t")) == "a: 1\n"


def test_remove_a_nested_block_key_and_its_block_value():
    text = "a:\n  b: 1\n  c:\n    d: 2\n  e: 3\n"
    assert out(edit.remove(ys(text, "a.c"), "t")) == "a:\n  b: 1\n  e: 3\n"
    assert out(edit.remove(ys(text, "a.e"), "t")) == "a:\n  b: 1\n  c:\n    d: 2\n"


def test_remove_the_only_key_of_a_mapping_is_refused():
    why = refused(edit.remove(ys("top:\n  only: 1\nz: 2\n", "top.only"), "t"))
    assert why == "it is the only key of its mapping (removing it would leave null, not {})"


def test_remove_the_only_top_level_key_is_refused():
    assert refused(edit.remove(ys("only: 1\n", "only"), "t")).startswith("it is the only key of its mapping")


def test_remove_the_first_key_of_a_sequence_item_lets_the_next_take_its_place():
    text = "items:\n  - a: 1\n    b: 2\n    c: 3\nz: 1\n"
    assert out(edit.remove(ys(text, "items.0.a"), "t")) == "items:\n  - b: 2\n    c: 3\nz: 1\n"
    assert out(edit.remove(ys(text, "items.0.b"), "t")) == "items:\n  - a: 1\n    c: 3\nz: 1\n"


def test_remove_the_first_key_of_a_sequence_item_whose_value_is_a_mapping():
    text = "items:\n  - a:\n      x: 1\n    b: 2\nz: 1\n"
    assert out(edit.remove(ys(text, "items.0.a"), "t")) == "items:\n  - b: 2\nz: 1\n"


def test_remove_the_first_key_of_the_second_sequence_item():
    text = "items:\n  - a: 1\n    b: 2\n  - a: 3\n    b: 4\n"
    assert out(edit.remove(ys(text, "items.1.a"), "t")) == "items:\n  - a: 1\n    b: 2\n  - b: 4\n"


def test_remove_an_entry_sharing_its_line_is_refused():
    why = refused(edit.remove(ys("? a\n: 1\nb: 2\n", "a"), "t"))
    assert why == "the entry shares its line with other YAML content"


def test_remove_a_json_member_on_its_own_line_takes_the_line_and_comma():
    text = '{\n  "a": 1,\n  "b": 2,\n  "c": 3\n}'
    assert out(edit.remove(js(text, "a"), "t")) == '{\n  "b": 2,\n  "c": 3\n}'
    assert out(edit.remove(js(text, "b"), "t")) == '{\n  "a": 1,\n  "c": 3\n}'
    assert out(edit.remove(js(text, "c"), "t")) == '{\n  "a": 1,\n  "b": 2\n}'


def test_remove_a_compact_json_member():
    text = '{"a": 1, "b": 2, "c": 3}'
    assert out(edit.remove(js(text, "a"), "t")) == '{"b": 2, "c": 3}'
    assert out(edit.remove(js(text, "b"), "t")) == '{"a": 1, "c": 3}'
    assert out(edit.remove(js(text, "c"), "t")) == '{"a": 1, "b": 2}'


def test_remove_a_json_member_with_spaces_before_its_comma():
    assert out(edit.remove(js('{"a": 1 , "b": 2}', "a"), "t")) == '{"b": 2}'
    assert out(edit.remove(js('{"a": 1 , "b": 2}', "b"), "t")) == '{"a": 1 }'


def test_remove_a_json_member_whose_comma_ends_a_line_with_more_after():
    text = '{\n  "a": 1, "b": 2,\n  "c": 3\n}'
    assert out(edit.remove(js(text, "a"), "t")) == '{\n  "b": 2,\n  "c": 3\n}'
    assert out(edit.remove(js(text, "b"), "t")) == '{\n  "a": 1, "c": 3\n}'


def test_remove_a_json_member_not_first_on_its_line_keeps_the_line():
    text = '{"x": {\n  "a": 1,\n  "b": 2}, "a": 0}'
    assert out(edit.remove(js(text, "x.b"), "t")) == '{"x": {\n  "a": 1}, "a": 0}'


def test_remove_the_only_json_member():
    assert out(edit.remove(js('{\n  "a": 1\n}', "a"), "t")) == "{\n}"
    assert out(edit.remove(js('{"a": 1}', "a"), "t")) == "{}"
    assert out(edit.remove(js('{"x": 0, "y": {"a": 1}}', "y.a"), "t")) == '{"x": 0, "y": {}}'
    assert out(edit.remove(js('{"x": 0, "y": {"a": 1\n}}', "y.a"), "t")) == '{"x": 0, "y": {\n}}'
    assert out(edit.remove(js('{"x": 0, "y": {  "a": 1 }}', "y.a"), "t")) == '{"x": 0, "y": {   }}'


def test_remove_a_json_member_followed_by_a_comma_at_the_very_end():
    # a trailing comma the scan runs off the end of the text with
    assert edit._remove_flow('"a": 1,', 0, 6, "}") == Edit(0, 7, "")
    assert edit._remove_flow('"a": 1,  ', 0, 6, "}") == Edit(0, 9, "")
    assert edit._remove_flow('x,\n"a": 1,\n', 3, 9, "}") == Edit(3, 11, "")


def test_remove_flow_with_a_comma_at_the_very_start():
    assert edit._remove_flow(",a", 1, 2, "]") == Edit(0, 2, "")
    assert edit._remove_flow(" ,a", 2, 3, "]") == Edit(1, 3, "")


def test_remove_flow_without_a_comma_or_close():
    assert edit._remove_flow("  a  ", 2, 3, "}") == Edit(2, 3, "")
    assert edit._remove_flow("\n  a\n", 3, 4, "}") == Edit(3, 4, "")
    assert edit._remove_flow("\n  a\n}", 3, 4, "}") == Edit(1, 5, "")
    assert edit._remove_flow("\n  a }", 3, 4, "}") == Edit(3, 4, "")
    assert edit._remove_flow("x a\n}", 2, 3, "}") == Edit(2, 3, "")


def test_remove_from_a_yaml_flow_mapping():
    assert out(edit.remove(ys("x: {a: 1, b: 2}\n", "x.a"), "t")) == "x: {b: 2}\n"
    assert out(edit.remove(ys("x: {a: 1, b: 2}\n", "x.b"), "t")) == "x: {a: 1}\n"
    assert out(edit.remove(ys("x: {a: 1}\ny: 2\n", "x.a"), "t")) == "x: {}\ny: 2\n"


def test_remove_a_key_whose_value_is_a_flow_collection():
    assert out(edit.remove(ys("a: 1\nb: [1, 2]\n", "b"), "t")) == "a: 1\n"


# --- remove: env items and argv ---------------------------------------------------------------------

def _env_setting(text: str, pointer: str) -> Setting:
    doc = yaml_doc(text)
    return Setting("X", "X", "1", "1", site=Site("env", doc, pointer))


def test_remove_an_env_item_takes_its_lines():
    text = "env:\n  - name: A\n    value: '1'\n  - name: B\n    value: '2'\nz: 1\n"
    assert out(edit.remove(_env_setting(text, "/env/0"), "t")) == "env:\n  - name: B\n    value: '2'\nz: 1\n"
    assert out(edit.remove(_env_setting(text, "/env/1"), "t")) == "env:\n  - name: A\n    value: '1'\nz: 1\n"


def test_remove_an_env_item_of_a_flow_list():
    text = "env: [{name: A, value: '1'}, {name: B, value: '2'}]\n"
    assert out(edit.remove(_env_setting(text, "/env/0"), "t")) == "env: [{name: B, value: '2'}]\n"
    assert out(edit.remove(_env_setting(text, "/env/1"), "t")) == "env: [{name: A, value: '1'}]\n"


def test_remove_an_item_not_starting_its_own_line_is_refused():
    text = "env:\n  - - name: A\n    - name: B\nz: 1\n"
    doc = yaml_doc(text)
    s = Setting("X", "X", site=Site("env", doc, "/env/0/0"))
    assert refused(edit.remove(s, "t")) == "the list item does not start its own line"


def test_remove_an_item_whose_dash_follows_other_content_is_refused():
    text = "env: - a\n"
    doc = yaml_doc("env:\n  - a\n")
    doc.text = text  # a position right after a dash that shares its line
    doc.positions["/env/0"] = doc.positions["/env/0"]._replace(start=7, end=8)
    s = Setting("X", "X", site=Site("env", doc, "/env/0"))
    assert refused(edit.remove(s, "t")) == "the list item does not start its own line"


def test_remove_an_item_without_a_dash_before_it_is_refused():
    doc = yaml_doc("env:\n  - a\n")
    doc.text = "env:\n    a\n"
    s = Setting("X", "X", site=Site("env", doc, "/env/0"))
    assert refused(edit.remove(s, "t")) == "the list item does not start its own line"


def test_remove_items_with_unknown_positions_is_refused():
    doc = yaml_doc("env:\n  - a\n")
    s = Setting("X", "X", site=Site("env", doc, "/env/7"))
    assert refused(edit.remove(s, "t")) == "the items' positions are unknown"
    doc.positions["/env/0"] = doc.positions["/env/0"]._replace(start=-1)
    s = Setting("X", "X", site=Site("env", doc, "/env/0"))
    assert refused(edit.remove(s, "t")) == "the items' positions are unknown"
    doc.positions["/env/0"] = doc.positions["/env/0"]._replace(start=8, end=-1)
    assert refused(edit.remove(s, "t")) == "the items' positions are unknown"


def test_remove_a_member_with_unknown_positions_is_refused():
    doc = yaml_doc("a: 1\nb: 2\n")
    s = Setting("b", "b", site=Site("mapping", doc, "/nope"))
    assert refused(edit.remove(s, "t")) == "the entry's position is unknown"
    doc.positions["/b"] = doc.positions["/b"]._replace(key_start=-1)
    s = Setting("b", "b", site=Site("mapping", doc, "/b"))
    assert refused(edit.remove(s, "t")) == "the entry's position is unknown"
    doc = yaml_doc("a: 1\nb: 2\n")
    doc.positions["/b"] = doc.positions["/b"]._replace(end=-1)
    s = Setting("b", "b", site=Site("mapping", doc, "/b"))
    assert refused(edit.remove(s, "t")) == "the entry's position is unknown"


ARGV = "args:\n  - serve\n  - --max-model-len\n  - '4096'\n  - --swap-space=4\n  - --enforce-eager\nz: 1\n"


def test_remove_an_argv_flag_and_its_value_item():
    p = cli_options(ARGV)
    assert out(edit.remove(p["max_model_len"], "t")) == "args:\n  - serve\n  - --swap-space=4\n  - --enforce-eager\nz: 1\n"
    assert out(edit.remove(p["swap_space"], "t")) == "args:\n  - serve\n  - --max-model-len\n  - '4096'\n  - --enforce-eager\nz: 1\n"
    assert out(edit.remove(p["enforce_eager"], "t")) == "args:\n  - serve\n  - --max-model-len\n  - '4096'\n  - --swap-space=4\nz: 1\n"


def test_remove_from_a_json_argv_list():
    p = cli_options('{"args": ["serve", "--max-model-len", "4096", "--x=1"]}', fmt="json")
    assert out(edit.remove(p["max_model_len"], "t")) == '{"args": ["serve", "--x=1"]}'
    assert out(edit.remove(p["x"], "t")) == '{"args": ["serve", "--max-model-len", "4096"]}'


def test_remove_from_a_flow_argv_list():
    p = cli_options("args: [serve, --max-model-len, '4096', --x=1]\n")
    assert out(edit.remove(p["max_model_len"], "t")) == "args: [serve, --x=1]\n"


def test_remove_an_argv_option_sharing_an_item_with_other_words_is_refused():
    doc = yaml_doc("args:\n  - serve\n  - --a 1\n  - --b\n")
    pos = doc.positions["/args/1"]
    site = Site("argv", doc, "/args/1", (Word("--a", pos.start, pos.start + 3, "/args/1"),))
    assert refused(edit.remove(Setting("a", "--a", site=site), "t")) == "the option shares a list item with other words"


def test_require_whole_items():
    doc = yaml_doc("args:\n  - a\n  - b\n")
    pa, pb = doc.positions["/args/0"], doc.positions["/args/1"]
    edit._require_whole_items(doc, (Word("a", pa.start, pa.end, "/args/0"), Word("b", pb.start, pb.end, "/args/1")))
    for w in (Word("a", -1, -1, "/args/0"), Word("a", pa.start, pa.end, "/args/9"),
              Word("a", pa.start + 1, pa.end, "/args/0"), Word("a", pa.start, pa.end + 1, "/args/0")):
        with pytest.raises(edit.CannotEdit, match="shares a list item"):
            edit._require_whole_items(doc, (w,))


# --- remove: shell words ------------------------------------------------------------------------------

SHELL = "cmd: \"vllm serve m --max-model-len 4096 --swap-space='4' --enforce-eager && echo ok\"\n"


def test_remove_words_from_a_one_line_script():
    p = cli_options(SHELL, "cmd")
    assert out(edit.remove(p["max_model_len"], "t")) == "cmd: \"vllm serve m --swap-space='4' --enforce-eager && echo ok\"\n"
    assert out(edit.remove(p["swap_space"], "t")) == "cmd: \"vllm serve m --max-model-len 4096 --enforce-eager && echo ok\"\n"
    assert out(edit.remove(p["enforce_eager"], "t")) == "cmd: \"vllm serve m --max-model-len 4096 --swap-space='4' && echo ok\"\n"


def test_remove_an_option_alone_on_a_continued_line_takes_the_line():
    text = "cmd: |\n  vllm serve m \\\n    --max-model-len 4096 \\\n    --swap-space 4 \\\n    --x 1\n"
    p = cli_options(text, "cmd")
    assert out(edit.remove(p["max_model_len"], "t")) == "cmd: |\n  vllm serve m \\\n    --swap-space 4 \\\n    --x 1\n"
    assert out(edit.remove(p["swap_space"], "t")) == "cmd: |\n  vllm serve m \\\n    --max-model-len 4096 \\\n    --x 1\n"


def test_remove_the_first_option_of_a_line_with_more_after_takes_the_spaces_after_it():
    text = "cmd: |\n  vllm serve m \\\n  --max-model-len 4096  --swap-space 4\n"
    p = cli_options(text, "cmd")
    assert out(edit.remove(p["max_model_len"], "t")) == "cmd: |\n  vllm serve m \\\n  --swap-space 4\n"
    assert out(edit.remove(p["swap_space"], "t")) == "cmd: |\n  vllm serve m \\\n  --max-model-len 4096\n"


def test_remove_the_first_word_at_the_very_start_of_a_line():
    doc = yaml_doc("a: 1\n")
    doc.text = "--x 1 --y 2\n"
    site = Site("shell", doc, "/a", (Word("--x", 0, 3, "/a"), Word("1", 4, 5, "/a")))
    assert out(edit.remove(Setting("x", "--x", site=site), "t")) == "--y 2\n"
    doc.text = "--x 1\t--y 2"
    assert out(edit.remove(Setting("x", "--x", site=site), "t")) == "--y 2"
    doc.text = "--x 1"
    assert out(edit.remove(Setting("x", "--x", site=site), "t")) == ""
    doc.text = "--x 1 --y 2 "
    assert out(edit.remove(Setting("x", "--x", site=site), "t")) == "--y 2 "
    doc.text = "--x 1 \\\nmore"
    assert out(edit.remove(Setting("x", "--x", site=site), "t")) == "more"


def test_remove_tabs_before_a_word():
    doc = yaml_doc("a: 1\n")
    doc.text = "a\t \t--x 1 b\n"
    site = Site("shell", doc, "/a", (Word("--x", 4, 7, "/a"), Word("1", 8, 9, "/a")))
    assert out(edit.remove(Setting("x", "--x", site=site), "t")) == "a b\n"


def test_remove_a_shell_option_inside_an_escaped_string_is_refused():
    p = cli_options('cmd: "vllm serve m --max-model-len \\"4096\\""\n', "cmd")
    assert refused(edit.remove(p["max_model_len"], "t")) == "the option is inside an escaped or folded string"


def test_remove_a_setting_of_another_kind_is_refused():
    doc = yaml_doc("a: 1\nb: 2\n")
    s = Setting("a", "a", site=Site("default", doc, "/a"))
    assert refused(edit.remove(s, "t")) == "cannot edit a default setting"
    assert refused(edit.rename(s, "b", "t")) == "cannot rename a default setting"
    assert refused(edit.replace_value(s, 1, "t")) == "cannot change a default setting"


# --- the dispatch ----------------------------------------------------------------------------------

def test_no_site_or_no_document_gives_no_fix():
    for s in (Setting("a", "a"), Setting("a", "a", site=Site("mapping", None, "/a"))):
        assert edit.remove(s, "t") is None
        assert edit.rename(s, "b", "t") is None
        assert edit.replace_value(s, 1, "t") is None
        assert edit.rewrite_word(s, "--b", "t") is None
        assert edit.display(s, "t", "why") is None
    assert edit.display(None, "t", "why") is None


def test_display_fix():
    doc = yaml_doc("a: 1\nb: 2\n")
    fix = edit.display(setting(doc, "a"), "look", "because")
    assert fix == Fix("look", "c.yaml", (), Safety.DISPLAY, "because", "a: 1\nb: 2\n")


def test_a_templated_setting_is_display_only():
    s = ys("a: 1\nb: 2\n", "a")._replace(templated=True)
    assert refused(edit.remove(s, "t")) == "the value comes from a template or a variable"
    assert refused(edit.replace_value(s, 3, "t")) == "the value comes from a template or a variable"


def test_an_edit_touching_a_helm_action_is_display_only():
    text = "a: 1\nb: {{ .Values.b }}\nc: 3\n"
    doc = yaml_doc(text)
    s = setting(doc, "b")._replace(templated=False)
    assert refused(edit.remove(s, "t")) == "the edit would touch a {{ }} template action"
    assert out(edit.remove(setting(doc, "c"), "t")) == "a: 1\nb: {{ .Values.b }}\n"


def test_edits_come_sorted():
    doc = yaml_doc("a: 1\nb: 2\n")
    fix = edit._build(setting(doc, "a"), "t", Safety.SAFE,
                      lambda site, d: [Edit(8, 9, "x"), Edit(0, 1, "y"), Edit(3, 4, "z")])
    assert fix.edits == (Edit(0, 1, "y"), Edit(3, 4, "z"), Edit(8, 9, "x"))
    assert fix.safety is Safety.SAFE and fix.why_not is None and fix.source == "a: 1\nb: 2\n"


# --- rename ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("new, written", [
    ("new_key", "new_key"), ("a.b/c", "a.b/c"), ("--flag", "--flag"), ("-x", "-x"), ("x=y", "x=y"), ("a+b", "a+b"),
    ("yes", '"yes"'), ("Off", '"Off"'), ("~", '"~"'), ("a b", '"a b"'), ("a:b", '"a:b"'), ("-", '"-"'),
    ("--", "--"), ("+a", '"+a"'), ("a#b", '"a#b"'), ("", '""'), ("é", '"é"'),
])
def test_rename_a_plain_yaml_key(new, written):
    assert out(edit.rename(ys("old: 1\nz: 1\n", "old"), new, "t")) == f"{written}: 1\nz: 1\n"


def test_rename_a_quoted_yaml_key_keeps_its_quotes():
    assert out(edit.rename(ys("'old': 1\nz: 1\n", "old"), "it's", "t")) == "'it''s': 1\nz: 1\n"
    assert out(edit.rename(ys('"old": 1\nz: 1\n', "old"), "new", "t")) == '"new": 1\nz: 1\n'
    assert out(edit.rename(ys('"old": 1\nz: 1\n', "old"), 'a"é', "t")) == '"a\\"é": 1\nz: 1\n'


def test_rename_a_json_key():
    assert out(edit.rename(js('{"old": 1, "z": 1}', "old"), "new", "t")) == '{"new": 1, "z": 1}'
    assert out(edit.rename(js('{"old": 1, "z": 1}', "old"), "né\"", "t")) == '{"né\\"": 1, "z": 1}'


def test_rename_a_nested_yaml_key_in_a_flow_mapping():
    assert out(edit.rename(ys("x: {old: 1, z: 2}\n", "x.old"), "new", "t")) == "x: {new: 1, z: 2}\n"


def test_rename_a_key_with_an_unknown_position_is_refused():
    doc = yaml_doc("old: 1\n")
    doc.positions["/old"] = doc.positions["/old"]._replace(key_start=-1)
    assert refused(edit.rename(setting(doc, "old"), "new", "t")) == "the key's position is unknown"
    s = Setting("x", "x", site=Site("mapping", doc, "/missing"))
    assert refused(edit.rename(s, "new", "t")) == "the key's position is unknown"


def test_rename_argv_flags():
    p = cli_options(ARGV)
    assert out(edit.rename(p["max_model_len"], "--max-len", "t")) == ARGV.replace("--max-model-len", "--max-len")
    assert out(edit.rename(p["swap_space"], "--swap", "t")) == ARGV.replace("--swap-space=4", "--swap=4")
    assert refused(edit.rename(p["swap_space"], "swap", "t")) == "a command-line option needs a flag name"
    assert refused(edit.rename(p["swap_space"], "--a b", "t")) == "the new flag needs quoting"


def test_rename_a_quoted_argv_item_keeps_its_quotes():
    text = "args:\n  - serve\n  - '--max-model-len=4'\n  - \"--x\"\n  - '1'\n"
    p = cli_options(text)
    assert out(edit.rename(p["max_model_len"], "--len", "t")) == "args:\n  - serve\n  - '--len=4'\n  - \"--x\"\n  - '1'\n"
    assert out(edit.rename(p["x"], "--y", "t")) == "args:\n  - serve\n  - '--max-model-len=4'\n  - \"--y\"\n  - '1'\n"


def test_rename_shell_flags():
    p = cli_options(SHELL, "cmd")
    assert out(edit.rename(p["swap_space"], "--swap", "t")) == SHELL.replace("--swap-space=", "--swap=")
    assert out(edit.rename(p["max_model_len"], "--len", "t")) == SHELL.replace("--max-model-len", "--len")


def test_rename_a_flag_inside_an_escaped_string_is_refused():
    p = cli_options('cmd: "vllm serve m \\"--max-model-len\\" 4096"\n', "cmd")
    assert refused(edit.rename(p["max_model_len"], "--len", "t")) == "the flag is inside an escaped or folded string"


# --- replace_value: mappings -------------------------------------------------------------------------

@pytest.mark.parametrize("value, written", [
    ("plain", "plain"), ("a.b/c_d", "a.b/c_d"), ("-x", "-x"), ("--flag", "--flag"), ("a=b", "a=b"), ("auto", "auto"),
    ("yes", '"yes"'), ("NULL", '"NULL"'), ("1.5", '"1.5"'), ("12", '"12"'), ("-1", '"-1"'), ("1e5", '"1e5"'),
    ("0x1F", '"0x1F"'), ("0o17", '"0o17"'), ("1_000", '"1_000"'), ("a b", '"a b"'), ("a:b", '"a:b"'), ("", '""'),
    ("x'y", '"x\'y"'), ("é", '"é"'),
    (None, "null"), (True, "true"), (False, "false"), (3, "3"), (2.5, "2.5"), (0, "0"),
])
def test_replace_a_plain_yaml_value(value, written):
    assert out(edit.replace_value(ys("k: v\nz: 1\n", "k"), value, "t")) == f"k: {written}\nz: 1\n"


def test_replace_a_quoted_yaml_value_keeps_its_quotes():
    assert out(edit.replace_value(ys("k: 'v'\nz: 1\n", "k"), "it's", "t")) == "k: 'it''s'\nz: 1\n"
    assert out(edit.replace_value(ys("k: 'v'\nz: 1\n", "k"), 12, "t")) == "k: 12\nz: 1\n"
    assert out(edit.replace_value(ys('k: "v"\nz: 1\n', "k"), "plain", "t")) == 'k: "plain"\nz: 1\n'
    assert out(edit.replace_value(ys('k: "v"\nz: 1\n', "k"), True, "t")) == "k: true\nz: 1\n"


def test_replace_a_json_value():
    text = '{"k": "v", "z": 1}'
    assert out(edit.replace_value(js(text, "k"), "plain", "t")) == '{"k": "plain", "z": 1}'
    assert out(edit.replace_value(js(text, "k"), True, "t")) == '{"k": true, "z": 1}'
    assert out(edit.replace_value(js(text, "k"), None, "t")) == '{"k": null, "z": 1}'
    assert out(edit.replace_value(js(text, "k"), 7, "t")) == '{"k": 7, "z": 1}'
    assert out(edit.replace_value(js(text, "k"), "é", "t")) == '{"k": "é", "z": 1}'


def test_replace_in_a_flow_mapping():
    assert out(edit.replace_value(ys("x: {k: 1, z: 2}\n", "x.k"), "yes", "t")) == 'x: {k: "yes", z: 2}\n'


def test_replace_a_block_collection_or_alias_is_refused():
    assert refused(edit.replace_value(ys("a: |\n  hi\nb: 2\n", "a"), "x", "t")) == "the value is a block or a collection"
    assert refused(edit.replace_value(ys("a: >\n  hi\nb: 2\n", "a"), "x", "t")) == "the value is a block or a collection"
    assert refused(edit.replace_value(ys("a: [1]\nb: 2\n", "a"), "x", "t")) == "the value is a block or a collection"
    assert refused(edit.replace_value(ys("a:\n  c: 1\nb: 2\n", "a"), "x", "t")) == "the value is a block or a collection"
    for key in ("a", "b"):
        assert refused(edit.replace_value(ys("a: &x 1\nb: *x\n", key), 5, "t")) in ALIAS_REFUSALS


ALIAS_REFUSALS = ("the value is a YAML alias or anchor",
                  "it is written once for several places (a YAML anchor, alias or << merge)")


def test_replace_a_value_with_an_unknown_position_is_refused():
    doc = yaml_doc("k: v\nz: 1\n")
    doc.positions["/k"] = doc.positions["/k"]._replace(start=-1)
    assert refused(edit.replace_value(setting(doc, "k"), 1, "t")) == "the value's position is unknown"


def test_scalar_text_without_a_position_is_plain_or_json():
    doc = yaml_doc("k: v\n")
    assert edit._scalar_text(doc, None, "plain") == "plain"
    assert edit._scalar_text(doc, None, "a b") == '"a b"'
    assert edit._scalar_text(doc, None, True) == "true"
    assert edit._scalar_text(doc, None, None) == "null"


def test_looks_numeric():
    for text in ("1", "-1", "1.5", "1e3", "1_000", "0x1f", "0o7", "inf", "nan"):
        assert style.looks_numeric(text) is True, text
    for text in ("a", "x0", "1a", "", "_"):
        assert style.looks_numeric(text) is False, text


# was a bug (xfail in 5d25df6): `.inf`, `-.inf`, `.nan` and `0b101` were written unquoted and read back as numbers
@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "0b101"])
def test_replace_with_a_yaml_special_number_string_keeps_it_a_string(value):
    fixed = out(edit.replace_value(ys("k: v\nz: 1\n", "k"), value, "t"))
    assert yaml_doc(fixed).data["k"] == value


# was a bug (xfail in 5d25df6): a numeric-looking key was written plain and read back as an int
@pytest.mark.parametrize("key", ["0x1F", "0777"])
def test_rename_to_a_numeric_looking_key_keeps_the_string(key):
    fixed = out(edit.rename(ys("old: 1\nz: 1\n", "old"), key, "t"))
    assert list(yaml_doc(fixed).data) == [key, "z"]


# --- replace_value / rewrite_word: command lines ---------------------------------------------------------

def test_replace_an_argv_value_item_keeps_its_quotes():
    p = cli_options(ARGV)
    assert out(edit.replace_value(p["max_model_len"], 8192, "t")) == ARGV.replace("'4096'", "'8192'")
    assert out(edit.replace_value(p["max_model_len"], "yes", "t")) == ARGV.replace("'4096'", "'yes'")
    text = ARGV.replace("'4096'", "4096")
    p = cli_options(text)
    assert out(edit.replace_value(p["max_model_len"], "8k", "t")) == text.replace("4096", "8k")
    assert out(edit.replace_value(p["max_model_len"], 8192, "t")) == text.replace("4096", '"8192"')
    assert out(edit.replace_value(p["max_model_len"], True, "t")) == text.replace("4096", '"True"')


def test_replace_an_inline_argv_value():
    p = cli_options(ARGV)
    assert out(edit.replace_value(p["swap_space"], 8, "t")) == ARGV.replace("--swap-space=4", "--swap-space=8")
    assert out(edit.replace_value(p["swap_space"], True, "t")) == ARGV.replace("--swap-space=4", "--swap-space=true")
    assert out(edit.replace_value(p["swap_space"], None, "t")) == ARGV.replace("--swap-space=4", "--swap-space=null")


def test_replace_an_inline_value_keeps_its_quotes():
    p = cli_options(SHELL, "cmd")
    assert out(edit.replace_value(p["swap_space"], 8, "t")) == SHELL.replace("'4'", "'8'")
    text = "args:\n  - serve\n  - \"--x='1\"\n  - --y=\"\n  - --z=''\n"
    p = cli_options(text)
    assert out(edit.replace_value(p["x"], 2, "t")) == text.replace("--x='1", "--x=2")
    assert out(edit.replace_value(p["z"], 2, "t")) == text.replace("--z=''", "--z='2'")
    assert out(edit.replace_value(p["y"], 2, "t")) == text.replace('--y="', "--y=2")


def test_replace_an_inline_value_in_a_quoted_argv_item():
    text = "args:\n  - serve\n  - '--x=\"1\"'\n  - \"--y=a\"\n"
    p = cli_options(text)
    assert out(edit.replace_value(p["x"], 2, "t")) == "args:\n  - serve\n  - '--x=\"2\"'\n  - \"--y=a\"\n"
    assert out(edit.replace_value(p["y"], "b", "t")) == "args:\n  - serve\n  - '--x=\"1\"'\n  - \"--y=b\"\n"


def test_replace_a_shell_value_word_keeps_its_quotes():
    p = cli_options(SHELL, "cmd")
    assert out(edit.replace_value(p["max_model_len"], 8, "t")) == SHELL.replace("4096", "8")
    text = "cmd: vllm serve m --max-model-len '4096' --x 1\n"
    p = cli_options(text, "cmd")
    assert out(edit.replace_value(p["max_model_len"], 8, "t")) == text.replace("'4096'", "'8'")


def test_replace_refusals_on_command_lines():
    p = cli_options(ARGV)
    assert refused(edit.replace_value(p["enforce_eager"], 8, "t")) == "the option has no single value word"
    assert refused(edit.replace_value(p["max_model_len"], "a b", "t")) == "the new value needs shell quoting"
    assert refused(edit.replace_value(p["max_model_len"], "", "t")) == "the new value needs shell quoting"
    assert refused(edit.replace_value(p["max_model_len"], {"a": 1}, "t")) == "the new value needs shell quoting"
    assert refused(edit.replace_value(p["max_model_len"], [1], "t")) == "the new value needs shell quoting"
    p = cli_options('cmd: "vllm serve m --max-model-len \\"4096\\" --y=\\"2\\""\n', "cmd")
    assert refused(edit.replace_value(p["max_model_len"], 5, "t")) == "the value is inside an escaped or folded string"
    p = cli_options('cmd: "vllm serve m \\"--y=2\\""\n', "cmd")
    assert refused(edit.replace_value(p["y"], 5, "t")) == "the option is inside an escaped or folded string"


def test_replace_a_list_option_with_several_values_is_refused():
    p = cli_options("args:\n  - serve\n  - --served-model-name\n  - a\n  - b\n")
    assert refused(edit.replace_value(p["served_model_name"], "c", "t")) == "the option has no single value word"


def test_plain_value():
    assert edit._plain_value(True) == "true"
    assert edit._plain_value(None) == "null"
    assert edit._plain_value(3) == "3"
    assert edit._plain_value("a:b,c@d%e+f=g/h.i_j-k") == "a:b,c@d%e+f=g/h.i_j-k"
    with pytest.raises(edit.CannotEdit, match="needs shell quoting"):
        edit._plain_value([1])


def test_plain_shell():
    assert edit._plain_shell("--a=b") is True
    assert edit._plain_shell("") is False
    assert edit._plain_shell("a b") is False
    assert edit._plain_shell("a'") is False
    assert edit._plain_shell("$X") is False


def test_rewrite_word():
    p = cli_options(ARGV)
    assert out(edit.rewrite_word(p["swap_space"], "--no-swap", "t")) == ARGV.replace("--swap-space=4", "--no-swap")
    assert out(edit.rewrite_word(p["enforce_eager"], "--no-enforce-eager", "t")) == ARGV.replace(
        "--enforce-eager", "--no-enforce-eager")
    assert refused(edit.rewrite_word(p["max_model_len"], "--x", "t")) == "the option is not one word of its own"
    assert refused(edit.rewrite_word(p["enforce_eager"], "a b", "t")) == "the new word needs quoting"
    assert refused(edit.rewrite_word(p["enforce_eager"], "", "t")) == "the new word needs quoting"


def test_rewrite_a_quoted_word_keeps_its_quotes():
    text = "args:\n  - serve\n  - '--x=1'\n"
    assert out(edit.rewrite_word(cli_options(text)["x"], "--no-x", "t")) == "args:\n  - serve\n  - '--no-x'\n"
    p = cli_options(SHELL, "cmd")
    assert out(edit.rewrite_word(p["enforce_eager"], "--no-x", "t")) == SHELL.replace("--enforce-eager", "--no-x")


def test_rewrite_word_refusals():
    doc = yaml_doc("a: 1\nb: 2\n")
    assert refused(edit.rewrite_word(setting(doc, "a"), "--x", "t")) == "the option is not one word of its own"
    p = cli_options('cmd: "vllm serve m \\"--y=2\\""\n', "cmd")
    assert refused(edit.rewrite_word(p["y"], "--x", "t")) == "the option is not one word of its own"


# was a bug (xfail in 5d25df6): removing the last continued line left the `\` above, joining the next command
def test_remove_the_last_continued_option_keeps_the_next_command_apart():
    from sits_doctor.loaders import shell

    text = "cmd: |\n  vllm serve m \\\n    --max-model-len 4096 \\\n    --swap-space 4\n  echo ok\n"
    fixed = out(edit.remove(cli_options(text, "cmd")["swap_space"], "t"))
    script = yaml_doc(fixed).data["cmd"]
    first = []
    for w in shell.split(script):
        if w.operator:
            break
        first.append(w.text)
    assert first == ["vllm", "serve", "m", "--max-model-len", "4096"]
def test_rewrite_a_word_at_the_very_start_of_the_text():
    doc = yaml_doc("a: 1\n")
    doc.text = "--x=1 --y"
    for kind in ("argv", "shell"):
        site = Site(kind, doc, "/a", (Word("--x=1", 0, 5, "/a"),))
        assert out(edit.rewrite_word(Setting("x", "--x", site=site), "--no-x", "t")) == "--no-x --y"
        site = Site(kind, doc, "/a", (Word("--x=1", -1, -1, "/a"),))
        assert refused(edit.rewrite_word(Setting("x", "--x", site=site), "--no-x", "t")) == (
            "the option is not one word of its own")


def test_line_helpers():
    assert edit._line_end("\nabc", 0) == 1
    assert edit._line_end("ab\ncd", 1) == 3
    assert edit._line_end("ab\ncd", 3) == 5
    assert edit._line_end("abc", 0) == 3
    assert edit._line_start("ab\ncd", 4) == 3
    assert edit._line_start("ab\ncd", 1) == 0
    assert edit._line_start("\nab", 0) == 0
    assert edit._parent("/a/b/c") == "/a/b"
    assert edit._parent("/a") == ""
    assert edit._parent("a") == ""


def test_replace_an_inline_value_at_the_very_start_of_the_text():
    doc = yaml_doc("a: 1\n")
    doc.text = "--x=1 --y"
    site = Site("shell", doc, "/a", (Word("--x=1", 0, 5, "/a"),), True)
    assert out(edit.replace_value(Setting("x", "--x", site=site), 2, "t")) == "--x=2 --y"


def test_remove_the_first_key_of_the_text():
    assert out(edit.remove(ys("a: 1\nb: 2\n", "a"), "t")) == "b: 2\n"
    assert out(edit.remove(ys("a:\n  c: 1\nb: 2\n", "a"), "t")) == "b: 2\n"


def test_remove_an_item_whose_dash_is_followed_by_other_text_is_refused():
    doc = yaml_doc("env:\n  - a\n")
    doc.text = "env:\n  -x a\n"
    doc.positions["/env/0"] = doc.positions["/env/0"]._replace(start=10, end=11)
    s = Setting("X", "X", site=Site("env", doc, "/env/0"))
    assert refused(edit.remove(s, "t")) == "the list item does not start its own line"


# --- the fix engine (sits_doctor.fixer) ------------------------------------------------------------

from types import SimpleNamespace

from sits_doctor.engine import CheckOptions
from sits_doctor.finding import Location, Severity

SERVE = "model: ./m\nswap-space: 4\nmax-model-len: 4096\n"


def _finding(code: str, *fixes: Fix) -> Finding:
    return Finding(code, "t", Severity.WARNING, code, Location("c.yaml", 1, 1), fixes=fixes)


def _fix(*edits: Edit, safety: Safety = Safety.SAFE, source: str = "0123456789") -> Fix:
    return Fix("t", "c.yaml", tuple(edits), safety, None, source)


def test_applicable():
    assert fixer.applicable(_fix(safety=Safety.SAFE), False) is True
    assert fixer.applicable(_fix(safety=Safety.SAFE), True) is True
    assert fixer.applicable(_fix(safety=Safety.UNSAFE), False) is False
    assert fixer.applicable(_fix(safety=Safety.UNSAFE), True) is True
    assert fixer.applicable(_fix(safety=Safety.DISPLAY), False) is False
    assert fixer.applicable(_fix(safety=Safety.DISPLAY), True) is False


def test_apply_edits_sorts_and_keeps_everything_else():
    text = "0123456789"
    assert apply_edits(text, []) == text
    assert apply_edits(text, [Edit(8, 10, "X"), Edit(0, 1, "A"), Edit(3, 3, "+")]) == "A12+34567X"
    assert apply_edits(text, [Edit(2, 4, "ab"), Edit(4, 6, "cd")]) == "01abcd6789"
    assert apply_edits(text, [Edit(4, 6, ""), Edit(4, 4, "<")]) == "0123<6789"
    assert apply_edits(text, [Edit(10, 10, "!")]) == "0123456789!"
    assert apply_edits(text, [Edit(0, 10, "")]) == ""


@pytest.mark.parametrize("edits", [
    [Edit(2, 5, "a"), Edit(4, 6, "b")],  # overlapping
    [Edit(0, 11, "")],  # past the end
    [Edit(5, 4, "")],  # backwards
    [Edit(3, 6, ""), Edit(4, 4, "x")],  # an insertion inside a replaced span
])
def test_apply_edits_refuses_bad_edits(edits):
    with pytest.raises(ValueError, match="overlapping or out-of-range edit"):
        apply_edits("0123456789", edits)


def test_choose_takes_fixes_in_file_order_and_drops_overlaps():
    a = (_finding("SITS2"), _fix(Edit(5, 8, "a")))
    b = (_finding("SITS1"), _fix(Edit(1, 3, "b")))
    c = (_finding("SITS3"), _fix(Edit(2, 6, "c")))  # overlaps both: the earlier-starting b wins
    d = (_finding("SITS4"), _fix(Edit(8, 9, "d")))  # touches a's end: both stay
    assert fixer._choose([a, b, c, d]) == [b, a, d]


def test_choose_an_edit_may_end_where_a_taken_one_starts():
    a = (_finding("SITS1"), _fix(Edit(0, 1, "a"), Edit(6, 8, "b")))
    b = (_finding("SITS2"), _fix(Edit(3, 6, "c")))
    assert fixer._choose([b, a]) == [a, b]
    assert apply_edits("0123456789", [e for _, fx in fixer._choose([b, a]) for e in fx.edits]) == "a12cb89"


def test_choose_breaks_ties_by_code_and_drops_repeated_edit_sets():
    x = (_finding("SITS9"), _fix(Edit(2, 4, "x")))
    y = (_finding("SITS1"), _fix(Edit(2, 3, "y")))
    assert fixer._choose([x, y]) == [y]
    same1 = (_finding("SITS1"), _fix(Edit(2, 4, "z")))
    same2 = (_finding("SITS2"), _fix(Edit(2, 4, "z")))
    assert fixer._choose([same2, same1]) == [same1]


def test_choose_sorts_by_the_first_edit_of_each_fix():
    late = (_finding("SITS1"), _fix(Edit(9, 10, "l"), Edit(6, 7, "m")))
    early = (_finding("SITS2"), _fix(Edit(3, 4, "e"), Edit(8, 9, "f")))
    assert fixer._choose([late, early]) == [early, late]


def test_choose_insertions_at_one_place():
    first = (_finding("SITS1"), _fix(Edit(4, 4, "a")))
    second = (_finding("SITS2"), _fix(Edit(4, 4, "b")))
    assert fixer._choose([first, second]) == [first]
    around = (_finding("SITS3"), _fix(Edit(2, 4, "r")))
    after = (_finding("SITS4"), _fix(Edit(4, 6, "s")))
    assert fixer._choose([first, around, after]) == [around, first, after]


def test_file_result_changed_and_diff(tmp_path):
    r = fixer.FileResult("d/c.yaml", tmp_path / "c.yaml", "a\nb\n", "a\nc")
    assert r.changed is True
    assert r.diff() == ("--- a/d/c.yaml\n+++ b/d/c.yaml\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
                        "\\ No newline at end of file\n")
    assert fixer.FileResult("c", tmp_path, "x", "x").changed is False
    assert fixer.FileResult("c", tmp_path, "x", "y", problem="why").changed is False


def test_inside(tmp_path):
    root = tmp_path / "tree"
    (root / "sub").mkdir(parents=True)
    file_root = root / "one.yaml"
    file_root.write_text("x")
    (root / "link.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    assert fixer._inside(root / "sub" / "a.yaml", [root]) is True
    assert fixer._inside(root, [root]) is False  # only what lies in a checked folder is written
    assert fixer._inside(tmp_path / "a.yaml", [root]) is False
    assert fixer._inside(tmp_path / "a.yaml", [root, tmp_path]) is True
    assert fixer._inside(tmp_path / "a.yaml", []) is False
    # a named file puts its folder under check, not where a symlink of that name points
    assert fixer.checked_tree(file_root) == root.resolve()
    assert fixer.checked_tree(root / "link.yaml") == root.resolve()
    assert fixer.checked_tree(root) == root.resolve()


def test_write_atomically_keeps_a_bom_and_the_mode(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(("\ufeff" + "a: 1\n").encode())
    os.chmod(path, 0o600)
    fixer.write_atomically(path, "a: 1\n", "a: 2\n", [tmp_path])
    assert path.read_bytes() == ("\ufeff" + "a: 2\n").encode()
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]
    path.write_bytes(b"a: 1\n")
    os.chmod(path, 0o751)
    fixer.write_atomically(path, "a: 1\n", "b: 1\n", [tmp_path])
    assert path.read_bytes() == b"b: 1\n"
    assert os.stat(path).st_mode & 0o7777 == 0o751


def test_write_atomically_refusals(tmp_path):
    path = tmp_path / "c.yaml"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(InputError, match="not written: cannot read it again"):
        fixer.write_atomically(path, "", "x", [tmp_path])
    path.write_bytes(b"\xff\xfe bad")
    with pytest.raises(InputError, match="changed since it was checked"):
        fixer.write_atomically(path, "\ufffd bad", "x", [tmp_path])
    path.write_bytes(("\ufeff" + "a").encode())
    with pytest.raises(InputError, match="changed since it was checked"):
        fixer.write_atomically(path, "\ufeffa", "x", [tmp_path])
    with pytest.raises(InputError, match="symlink that leaves the checked tree"):
        fixer.write_atomically(path, "a", "x", [elsewhere])
    assert path.read_bytes() == ("\ufeff" + "a").encode()


def test_write_atomically_reraises_what_is_not_an_os_error(tmp_path, monkeypatch):
    path = tmp_path / "c.yaml"
    path.write_text("a")

    def boom(tmp, target):
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic_write, "_before_rename", boom)
    with pytest.raises(KeyboardInterrupt):
        fixer.write_atomically(path, "a", "b", [tmp_path])
    assert path.read_text() == "a"
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]


def _fake_rule(monkeypatch, make_fixes):
    """The only rule: every check offers ``make_fixes(text, path)``, one finding per list of fixes."""
    from sits_doctor import engine
    from sits_doctor.rule import Rule

    rule = Rule("SITS998", "fake", "test", Severity.WARNING, ("vllm",))

    def check_(plan, ctx):
        for code_fixes in make_fixes(plan.doc.text, plan.file):
            yield rule.finding(plan, plan.anchor, "fake " + code_fixes[0].title, fixes=code_fixes)

    monkeypatch.setattr(engine, "rule_modules", lambda: (SimpleNamespace(RULE=rule, check=check_),))


def test_fix_paths_takes_safe_fixes_shows_the_rest_and_settles(tmp_path, hermetic, monkeypatch):
    path = tmp_path / "serve.yaml"
    path.write_text(SERVE)

    def fixes(text, file):
        out = []
        if "swap-space" in text:
            a = text.index("swap-space")
            out.append([Fix("rename", file, (Edit(a, a + 4, "SWAP"),), Safety.SAFE, None, text)])
        if "max-model-len" in text:
            a = text.index("max-model-len")
            out.append([Fix("unsafe", file, (Edit(a, a + 3, "MAX"),), Safety.UNSAFE, None, text),
                        Fix("shown", file, (), Safety.DISPLAY, "because", text)])
        return out

    _fake_rule(monkeypatch, fixes)
    result = fixer.fix_paths([str(path)], CheckOptions(isolated=True))
    (r,) = result.files
    assert r.original == SERVE and r.new == SERVE.replace("swap", "SWAP")
    assert [fx.title for _, fx in r.fixed] == ["rename"]
    assert sorted(fx.title for _, fx in result.shown_only) == ["shown", "unsafe"]
    assert path.read_text() == SERVE  # a dry run
    assert [f.fixes[0].title for f in result.report.findings] == ["unsafe"]

    result = fixer.fix_paths([str(path)], CheckOptions(isolated=True), unsafe=True, apply=True)
    (r,) = result.files
    assert r.new == SERVE.replace("swap", "SWAP").replace("max-", "MAX-")
    assert sorted(fx.title for _, fx in r.fixed) == ["rename", "unsafe"]
    assert [fx.title for _, fx in result.shown_only] == ["shown"]
    assert path.read_text() == r.new
    assert result.report.findings == [] and result.errors == []


def test_fix_paths_with_nothing_to_fix(tmp_path, hermetic, monkeypatch):
    path = tmp_path / "serve.yaml"
    path.write_text(SERVE)
    _fake_rule(monkeypatch, lambda text, file: [[Fix("shown", file, (), Safety.DISPLAY, "why", text)]])
    result = fixer.fix_paths([str(path)], CheckOptions(isolated=True), apply=True)
    assert result.files == [] and len(result.shown_only) == 1 and path.read_text() == SERVE


def test_fix_paths_overlapping_fixes_take_another_round(tmp_path, hermetic, monkeypatch):
    path = tmp_path / "serve.yaml"
    path.write_text(SERVE)

    def fixes(text, file):
        out = []
        if text.startswith("model"):
            out.append([Fix("a", file, (Edit(0, 5, "MODEL"),), Safety.SAFE, None, text)])
        if text[3:5] != "XY":
            out.append([Fix("b", file, (Edit(3, 5, "XY"),), Safety.SAFE, None, text)])
        return out

    _fake_rule(monkeypatch, fixes)
    result = fixer.fix_paths([str(path)], CheckOptions(isolated=True))
    (r,) = result.files
    assert r.new == "MODXY" + SERVE[5:] and r.problem is None and [fx.title for _, fx in r.fixed] == ["a", "b"]


@pytest.mark.parametrize("needed, settles", [(10, True), (11, False)])
def test_fix_paths_gives_up_after_ten_rounds(tmp_path, hermetic, monkeypatch, needed, settles):
    path = tmp_path / "serve.yaml"
    path.write_text(SERVE)

    def fixes(text, file):
        if text.count("#") >= needed:
            return []
        return [[Fix("mark", file, (Edit(len(text), len(text), "#\n"),), Safety.SAFE, None, text)]]

    _fake_rule(monkeypatch, fixes)
    result = fixer.fix_paths([str(path)], CheckOptions(isolated=True), apply=True)
    (r,) = result.files
    assert len(r.fixed) == 10
    if settles:
        assert r.problem is None and path.read_text() == SERVE + "#\n" * 10
    else:
        assert r.problem == "did not settle after 10 rounds of fixes; nothing written"
        assert path.read_text() == SERVE


def test_fix_paths_a_fix_that_breaks_the_file_is_not_written(tmp_path, hermetic, monkeypatch):
    path = tmp_path / "serve.yaml"
    path.write_text(SERVE)

    def fixes(text, file):
        if "{" in text:
            return []
        return [[Fix("break", file, (Edit(0, 0, "a: {\n"),), Safety.SAFE, None, text)]]

    _fake_rule(monkeypatch, fixes)
    result = fixer.fix_paths([str(path)], CheckOptions(isolated=True), apply=True)
    (r,) = result.files
    assert r.problem.startswith("the fixed text would not parse (") and r.problem.endswith("); nothing written")
    assert r.changed is False and path.read_text() == SERVE


def test_fix_paths_reports_a_file_changed_before_the_write(tmp_path, hermetic, monkeypatch):
    path = tmp_path / "serve.yaml"
    path.write_text(SERVE)

    def fixes(text, file):
        if "swap-space" not in text:
            return []
        a = text.index("swap-space")
        return [[Fix("rename", file, (Edit(a, a + 4, "SWAP"),), Safety.SAFE, None, text)]]

    _fake_rule(monkeypatch, fixes)
    real = fixer.write_atomically

    def meddle(p, expected, new, roots):
        p.write_text("changed: 1\n")
        return real(p, expected, new, roots)

    monkeypatch.setattr(fixer, "write_atomically", meddle)
    result = fixer.fix_paths([str(path)], CheckOptions(isolated=True), apply=True)
    (r,) = result.files
    assert r.problem == "not written: the file changed since it was checked; run fix again"
    assert [e.message for e in result.errors] == [r.problem]
    assert path.read_text() == "changed: 1\n"
