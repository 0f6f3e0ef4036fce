"""The shell tokeniser (sits_doctor.loaders.shell) and the command-line finder
(sits_doctor.loaders.commands): every word's text and its offsets as written, the offsets of a
YAML/JSON scalar's characters in the file, and which words of a container's command/args are the
vLLM engine arguments."""

from __future__ import annotations

import pytest

from sits_doctor.loaders import commands, shell
from sits_doctor.loaders.commands import words
from sits_doctor.plan import Provenance, Setting, Site, Word
from sits_doctor.source import parse_json
from sits_doctor.source_yaml import parse_yaml


def split(script: str) -> list[tuple]:
    return [(w.text, w.start, w.end, w.quote, w.operator) for w in shell.split(script)]


def texts(script: str) -> list[str]:
    return [w.text for w in shell.split(script)]


# --- shell.split -----------------------------------------------------------------------------------

@pytest.mark.parametrize("script, expected", [
    ("", []),
    ("a b", [("a", 0, 1, "", False), ("b", 2, 3, "", False)]),
    (" \t\ra  ", [("a", 3, 4, "", False)]),
    ("a\\\nb", [("ab", 0, 4, "", False)]),
    ("a \\\n b", [("a", 0, 1, "", False), ("b", 5, 6, "", False)]),
    ("a\nb", [("a", 0, 1, "", False), (";", 1, 2, "", True), ("b", 2, 3, "", False)]),
    ("\n", []),  # line breaks that end no command add nothing
    ("a\n\n\nb\n", [("a", 0, 1, "", False), (";", 1, 2, "", True), ("b", 4, 5, "", False)]),
    ("a # c d\nb", [("a", 0, 1, "", False), (";", 7, 8, "", True), ("b", 8, 9, "", False)]),
    ("# only", []),
    ("a#b", [("a#b", 0, 3, "", False)]),
    ("'a b'c", [("a bc", 0, 6, "", False)]),
    ("'a b'", [("a b", 0, 5, "'", False)]),
    ('"a b"', [("a b", 0, 5, '"', False)]),
    ("''", [("", 0, 2, "'", False)]),
    ('""', [("", 0, 2, '"', False)]),
    ("'a''b'", [("ab", 0, 6, "", False)]),
    ("a'b'", [("ab", 0, 4, "", False)]),
    ("'a'b", [("ab", 0, 4, "", False)]),
    ("'", [("", 0, 1, "", False)]),
    ("'unterminated", [("unterminated", 0, 13, "", False)]),
    ('"unterm', [("unterm", 0, 7, "", False)]),
    ("a\\ b", [("a b", 0, 4, "", False)]),
    ("a\\", [("a", 0, 2, "", False)]),
    ("\\'x", [("'x", 0, 3, "", False)]),
    ('"a\\"b\\$c\\\\d\\\ne\\x"', [('a"b$c\\de\\x', 0, 17, '"', False)]),
    ('"a\\', [("a\\", 0, 3, "", False)]),
    ('"a $(x "y") b"', [('a $(x "y") b', 0, 14, '"', False)]),
    ("x$(a (b) c)y z", [("x$(a (b) c)y", 0, 12, "", False), ("z", 13, 14, "", False)]),
    ("x${a{b}c}y", [("x${a{b}c}y", 0, 10, "", False)]),
    ("x`a b`y", [("x`a b`y", 0, 7, "", False)]),
    ("x`unterm", [("x`unterm", 0, 8, "", False)]),
    ("x$(unterm", [("x$(unterm", 0, 9, "", False)]),
    ("$X $", [("$X", 0, 2, "", False), ("$", 3, 4, "", False)]),
    ("$(a)$(b)", [("$(a)$(b)", 0, 8, "", False)]),
])
def test_split(script, expected):
    assert split(script) == expected


def test_split_operators():
    assert split("a&&b||c;;d|&e;f|g&h(i)j") == [
        ("a", 0, 1, "", False), ("&&", 1, 3, "", True), ("b", 3, 4, "", False), ("||", 4, 6, "", True),
        ("c", 6, 7, "", False), (";;", 7, 9, "", True), ("d", 9, 10, "", False), ("|&", 10, 12, "", True),
        ("e", 12, 13, "", False), (";", 13, 14, "", True), ("f", 14, 15, "", False), ("|", 15, 16, "", True),
        ("g", 16, 17, "", False), ("&", 17, 18, "", True), ("h", 18, 19, "", False), ("(", 19, 20, "", True),
        ("i", 20, 21, "", False), (")", 21, 22, "", True), ("j", 22, 23, "", False)]
    assert texts("a '&&' \"|\" \\;") == ["a", "&&", "|", ";"]
    assert [w.operator for w in shell.split("a '&&' \"|\" \\;")] == [False] * 4


def test_matching():
    assert shell._matching("$(a(b)c)d", 0) == 8
    assert shell._matching("${a}b", 0) == 4
    assert shell._matching("${a{b}}c", 0) == 7
    assert shell._matching("$(a", 0) == 3
    assert shell._matching("x`ab`c", 1) == 5
    assert shell._matching("`ab", 0) == 3
    assert shell._matching("$(a)}", 0) == 4
    assert shell._matching("${a)}", 0) == 5


def test_plain_char_and_double_quoted():
    chars = []
    assert shell._plain_char("ab", 0, chars) == 1 and chars == ["a"]
    chars = []
    assert shell._plain_char("$(x)y", 0, chars) == 4 and chars == ["$(x)"]
    chars = []
    assert shell._plain_char("$x", 0, chars) == 1 and chars == ["$"]
    chars = []
    assert shell._double_quoted('ab"c', 0, chars) == 3 and chars == ["a", "b"]
    chars = []
    assert shell._double_quoted('a\\"b"', 0, chars) == 5 and "".join(chars) == 'a"b'
    chars = []
    assert shell._double_quoted("a\\\nb\"", 0, chars) == 5 and "".join(chars) == "ab"
    chars = []
    assert shell._double_quoted("ab", 0, chars) == 3 and chars == ["a", "b"]


# --- scalar_offsets / source_span ------------------------------------------------------------------

def test_scalar_offsets_plain_and_quoted():
    text = "cmd: a b\n"
    assert shell.scalar_offsets(text, 5, 8, None, "a b") == [5, 6, 7]
    text = "cmd: 'a b'\n"
    assert shell.scalar_offsets(text, 5, 10, "'", "a b") == [6, 7, 8]
    text = 'cmd: "a b"\n'
    assert shell.scalar_offsets(text, 5, 10, '"', "a b") == [6, 7, 8]


def test_scalar_offsets_escapes():
    t = 'cmd: "a\\tb \\u00e9x\\x41\\U0001F600!"\n'
    value = "a\tb éxA\U0001F600!"
    assert shell.scalar_offsets(t, 5, len(t) - 1, '"', value) == [6, -1, 9, 10, -1, 17, -1, -1, 32]
    t = "cmd: 'it''s'\n"
    assert shell.scalar_offsets(t, 5, 12, "'", "it's") == [6, 7, -1, 10]
    t = "cmd: it''s\n"  # plain: two quotes are two characters
    assert shell.scalar_offsets(t, 5, 10, None, "it''s") == [5, 6, 7, 8, 9]


def test_scalar_offsets_blocks_and_folds():
    t = "cmd: |\n  a\n  b\n"
    assert shell.scalar_offsets(t, 5, len(t), "|", "a\nb\n") == [9, 10, 13, 14]
    t = "cmd: |"
    assert shell.scalar_offsets(t, 5, 6, "|", "x") == [-1]
    assert shell.scalar_offsets("x: |", 3, 4, "|", "x") == [-1]  # a header without a line break: nothing


def test_scalar_offsets_stop_at_the_end():
    assert shell.scalar_offsets("ab", 0, 1, None, "ab") == [0, -1]
    assert shell.scalar_offsets("a  b", 0, 4, None, "ab") == [0, 3]
    assert shell.scalar_offsets("a  b", 0, 3, None, "ab") == [0, -1]
    assert shell.scalar_offsets("xa", 0, 2, None, "a") == [-1]
    assert shell.scalar_offsets('"\\', 0, 2, '"', "x") == [-1]
    assert shell.scalar_offsets('"a', 0, 2, '"', "ab") == [1, -1]
    assert shell.scalar_offsets('"a\\', 0, 2, '"', "ab") == [1, -1]


def test_source_span():
    offs = [5, 6, 7, -1, 10, 11]
    assert shell.source_span(offs, 0, 3) == (5, 8)
    assert shell.source_span(offs, 1, 2) == (6, 7)
    assert shell.source_span(offs, 4, 6) == (10, 12)
    assert shell.source_span(offs, 2, 4) == (-1, -1)
    assert shell.source_span(offs, 3, 4) == (-1, -1)
    assert shell.source_span(offs, 2, 5) == (-1, -1)
    assert shell.source_span(offs, 2, 2) == (-1, -1)
    assert shell.source_span(offs, 5, 7) == (-1, -1)
    assert shell.source_span(offs, 5, 6) == (11, 12)
    assert shell.source_span([1, 3], 0, 2) == (-1, -1)


# --- commands.words ---------------------------------------------------------------------------------

def yaml_doc(text: str):
    return parse_yaml(text, "c.yaml")[0]


def located(tokens) -> list[tuple]:
    return [(t.text, t.word.start, t.word.end, t.word.quote, t.site, t.operator, t.prov.line, t.prov.col)
            for t in tokens]


def test_words_of_a_list():
    text = "args:\n  - serve\n  - '--x'\n  - \"a b\"\n  - 3\n  - null\n"
    doc = yaml_doc(text)
    tokens = words(doc, [("/args", doc.data["args"])])
    assert located(tokens) == [
        ("serve", 10, 15, "", "argv", False, 2, 5), ("--x", 20, 25, "'", "argv", False, 3, 5),
        ("a b", 30, 35, '"', "argv", False, 4, 5), ("3", 40, 41, "", "argv", False, 5, 5),
        ("", 46, 50, "", "argv", False, 6, 5)]
    assert [t.word.pointer for t in tokens] == ["/args/0", "/args/1", "/args/2", "/args/3", "/args/4"]


def test_words_of_a_shell_string():
    text = 'cmd: "vllm serve m --x \'a b\' && echo"\n'
    doc = yaml_doc(text)
    tokens = words(doc, [("/cmd", doc.data["cmd"])])
    assert located(tokens) == [
        ("vllm", 6, 10, "", "shell", False, 1, 7), ("serve", 11, 16, "", "shell", False, 1, 12),
        ("m", 17, 18, "", "shell", False, 1, 18), ("--x", 19, 22, "", "shell", False, 1, 20),
        ("a b", 23, 28, "'", "shell", False, 1, 24), ("&&", 29, 31, "", "shell", True, 1, 30),
        ("echo", 32, 36, "", "shell", False, 1, 33)]
    assert all(t.word.pointer == "/cmd" for t in tokens)


def test_words_of_a_script_in_a_literal_block():
    text = "cmd: |\n  vllm serve \\\n    --x 1\n"
    doc = yaml_doc(text)
    tokens = words(doc, [("/cmd", doc.data["cmd"])])
    assert located(tokens) == [
        ("vllm", 9, 13, "", "shell", False, 2, 3), ("serve", 14, 19, "", "shell", False, 2, 8),
        ("--x", 26, 29, "", "shell", False, 3, 5), ("1", 30, 31, "", "shell", False, 3, 9)]
    # the block's final line break ends nothing: a vLLM image's entrypoint still gets these as args


def test_words_with_escapes_have_no_exact_place():
    text = 'cmd: "vllm \\"a\\" b\\u00e9c"\n'
    doc = yaml_doc(text)
    tokens = words(doc, [("/cmd", doc.data["cmd"])])
    assert [t.text for t in tokens] == ["vllm", "a", "béc"]
    assert [(t.word.start, t.word.end) for t in tokens] == [(6, 10), (-1, -1), (-1, -1)]
    assert [(t.prov.line, t.prov.col) for t in tokens] == [(1, 7), (1, 14), (1, 18)]


def test_words_without_any_place():
    text = 'cmd: "\\u00e9a"\n'
    doc = yaml_doc(text)
    tokens = words(doc, [("/cmd", doc.data["cmd"])])
    assert [(t.text, t.word.start, t.prov.line, t.prov.col) for t in tokens] == [("éa", -1, 1, 13)]
    doc = yaml_doc("a: 1\n")
    tokens = commands.split_shell(doc, "x y", "/missing")
    assert [(t.text, t.word.start, t.word.end, t.prov.line, t.prov.col) for t in tokens] == [
        ("x", -1, -1, 1, 1), ("y", -1, -1, 1, 1)]


def test_words_of_a_scalar_with_no_offsets():
    from sits_doctor.source import Pos

    doc = yaml_doc("a: 1\n")
    doc.positions["/x"] = Pos(line=2, col=3)
    tokens = commands.split_shell(doc, "x y", "/x")
    assert [(t.text, t.word.start, t.word.end, t.prov.line, t.prov.col) for t in tokens] == [
        ("x", -1, -1, 2, 3), ("y", -1, -1, 2, 3)]


def test_a_word_split_by_a_folded_line_is_placed_at_its_first_character():
    doc = yaml_doc("x'a\n  b' --y\n")
    tokens = commands.split_shell(doc, doc.data, "")
    assert [(t.text, t.word.start, t.word.end, t.prov.line, t.prov.col) for t in tokens] == [
        ("xa b", -1, -1, 1, 1), ("--y", 9, 12, 2, 6)]


def test_sh_c_scripts_across_command_and_args():
    text = "command: [/bin/sh, -c]\nargs:\n  - vllm serve m --x 1 && echo\n"
    doc = yaml_doc(text)
    tokens = words(doc, [("/command", doc.data["command"]), ("/args", doc.data["args"])])
    assert [(t.text, t.site, t.operator) for t in tokens] == [
        ("/bin/sh", "argv", False), ("-c", "argv", False), ("vllm", "shell", False), ("serve", "shell", False),
        ("m", "shell", False), ("--x", "shell", False), ("1", "shell", False), ("&&", "shell", True),
        ("echo", "shell", False)]
    assert tokens[2].word == Word("vllm", 33, 37, "/args/0", "")


def test_c_without_a_shell_is_not_a_script():
    doc = yaml_doc("args: [python, -c, 'a b']\n")
    tokens = words(doc, [("/args", doc.data["args"])])
    assert [(t.text, t.site) for t in tokens] == [("python", "argv"), ("-c", "argv"), ("a b", "argv")]
    doc = yaml_doc("args: [-c, 'a b']\n")
    assert [t.site for t in words(doc, [("/args", doc.data["args"])])] == ["argv", "argv"]
    doc = yaml_doc("args: [bash, -x, 'a b']\n")
    assert [t.site for t in words(doc, [("/args", doc.data["args"])])] == ["argv", "argv", "argv"]


def test_a_one_item_list_with_spaces_is_a_script():
    doc = yaml_doc("args: ['vllm serve m']\n")
    assert [(t.text, t.site) for t in words(doc, [("/args", doc.data["args"])])] == [
        ("vllm", "shell"), ("serve", "shell"), ("m", "shell")]
    doc = yaml_doc("args: [' m ']\n")
    assert [(t.text, t.site) for t in words(doc, [("/args", doc.data["args"])])] == [(" m ", "argv")]
    doc = yaml_doc("args: ['vllm serve', m]\n")
    assert [(t.text, t.site) for t in words(doc, [("/args", doc.data["args"])])] == [
        ("vllm serve", "argv"), ("m", "argv")]


def test_words_across_fields_keep_their_order():
    text = "command: [vllm]\nargs: 'serve m'\nmore: [--x]\n"
    doc = yaml_doc(text)
    fields = [("/command", doc.data["command"]), ("/args", doc.data["args"]), ("/none", None),
              ("/more", doc.data["more"])]
    tokens = words(doc, fields)
    assert [(t.text, t.site) for t in tokens] == [("vllm", "argv"), ("serve", "shell"), ("m", "shell"),
                                                 ("--x", "argv")]


def test_templated_words():
    text = "args:\n  - --x=$PORT\n  - '{{ .Values.m }}'\n  - plain\n"
    doc = yaml_doc(text)
    tokens = words(doc, [("/args", doc.data["args"])])
    assert [t.templated for t in tokens] == [True, True, False]
    text = 'cmd: "vllm --port $PORT --y=${Y} z && $(w)"\n'
    doc = yaml_doc(text)
    tokens = words(doc, [("/cmd", doc.data["cmd"])])
    assert [(t.text, t.templated) for t in tokens] == [
        ("vllm", False), ("--port", False), ("$PORT", True), ("--y=${Y}", True), ("z", False), ("&&", False),
        ("$(w)", True)]


def test_words_of_a_helm_templated_script():
    text = "cmd: \"vllm serve {{ .Values.model }} --x 1\"\n"
    doc = yaml_doc(text)
    tokens = words(doc, [("/cmd", doc.data["cmd"])])
    assert [(t.text, t.templated, t.word.start, t.word.end) for t in tokens[:2]] == [
        ("vllm", False, 6, 10), ("serve", False, 11, 16)]
    assert tokens[2].templated is True and (tokens[2].word.start, tokens[2].word.end) == (-1, -1)
    assert [(t.text, t.templated) for t in tokens[3:]] == [("--x", False), ("1", False)]


def test_words_of_json():
    text = '{"args": ["serve", "--x", "a b"], "cmd": "vllm serve \\"m\\""}'
    doc = parse_json(text, "c.json")
    tokens = words(doc, [("/args", doc.data["args"])])
    assert [(t.text, t.word.start, t.word.end, t.word.quote) for t in tokens] == [
        ("serve", 10, 17, '"'), ("--x", 19, 24, '"'), ("a b", 26, 31, '"')]
    tokens = words(doc, [("/cmd", doc.data["cmd"])])
    assert [(t.text, t.word.start, t.word.end) for t in tokens] == [("vllm", 42, 46), ("serve", 47, 52), ("m", -1, -1)]


# --- vllm_invocation -------------------------------------------------------------------------------

def toks(*items, operators=()):
    from sits_doctor.loaders.vllm_args import Token

    return [Token(t, Provenance(), operator=(n in operators)) for n, t in enumerate(items)]


def inv(tokens, image_is_vllm=False):
    found = commands.vllm_invocation(tokens, image_is_vllm)
    return None if found is None else ([t.text for t in found[0]], found[1])


def test_vllm_invocation():
    assert inv(toks("vllm", "serve", "m", "--x", "1")) == (["m", "--x", "1"], "vllm serve")
    assert inv(toks("/usr/bin/vllm", "serve", "m")) == (["m"], "vllm serve")
    assert inv(toks("pip", "install", "x", "&&", "vllm", "serve", "m", "&&", "echo", operators=(3, 7))) == (
        ["m"], "vllm serve")
    assert inv(toks("python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", ";", "x",
                    operators=(5,))) == (["--model", "m"], "python -m vllm.entrypoints.openai.api_server")
    assert inv(toks("python", "-m", "vllm.entrypoints.api_server")) == ([], "python -m vllm.entrypoints.api_server")
    assert inv(toks("vllm", "serve")) == ([], "vllm serve")
    assert inv(toks("vllm")) is None
    assert inv(toks("vllm", "bench", "serve")) is None
    assert inv(toks("python", "-m", "other")) is None
    assert inv(toks("-m")) is None
    assert inv(toks("myvllm", "serve")) is None
    assert inv([]) is None


def test_vllm_invocation_in_a_vllm_image():
    assert inv(toks("--model", "m"), True) == (["--model", "m"], "vllm image entrypoint")
    assert inv(toks("serve", "m", "--x"), True) == (["m", "--x"], "vllm image entrypoint")
    assert inv(toks("--model", "m"), False) is None
    assert inv(toks("bash", "x"), True) is None
    assert inv(toks("a", "&&", "b", operators=(1,)), True) is None
    assert inv([], True) is None
    assert inv(toks("vllm", "serve", "m"), True) == (["m"], "vllm serve")


# --- item_token / image_setting ----------------------------------------------------------------------

def test_item_token():
    doc = yaml_doc("args:\n  - 'a'\n  - b\n")
    t = commands.item_token(doc, "a", "/args/0")
    assert t.word == Word("a", 10, 13, "/args/0", "'") and t.site == "argv" and t.templated is False
    assert (t.prov.line, t.prov.col, t.prov.pointer) == (2, 5, "/args/0")
    t = commands.item_token(doc, "b", "/args/1")
    assert t.word == Word("b", 18, 19, "/args/1", "")
    doc.templated.add("/args/1")
    assert commands.item_token(doc, "b", "/args/1").templated is True


def test_image_setting():
    doc = yaml_doc("image: vllm/vllm-openai:v0.8.5\n")
    s = commands.image_setting(doc, "vllm/vllm-openai:v0.8.5", "/image")
    assert s == Setting(key="image", raw_key="image", value="vllm/vllm-openai:v0.8.5", raw="vllm/vllm-openai:v0.8.5",
                        prov=Provenance.at(doc, "/image", key=False), templated=False,
                        site=Site("mapping", doc, "/image"))
    assert commands.image_setting(doc, 3, "/image") is None
    assert commands.image_setting(doc, None, "/image") is None
    doc.templated.add("/image")
    assert commands.image_setting(doc, "x", "/image").templated is True
