"""Property tests for the fix builders: over generated JSON / YAML documents (block and flow
style), argv lists and shell strings, an edit at a random place changes exactly that place —
the re-parsed data equals the original with only that key / item / word changed — and every
character outside the edit's span is the original's."""

from __future__ import annotations

import json
import shlex

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sits_doctor.finding import Safety
from sits_doctor.fixer import apply_edits
from sits_doctor.fixes import config as edit
from sits_doctor.loaders.commands import words
from sits_doctor.loaders.flatten import flatten
from sits_doctor.loaders.vllm_args import parse_args
from sits_doctor.source import parse_json
from sits_doctor.source_yaml import parse_yaml

_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "null", "true", "false"}
KEYS = st.text("abcdefghijklmnopqrstuvwxyz_-", min_size=1, max_size=8).filter(
    lambda k: k[0].isalpha() and k.lower() not in _YAML_WORDS)
SCALARS = st.one_of(
    st.integers(-10**6, 10**6), st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda f: round(f, 3)),
    st.text("abcdefgh xyz:/#.'\"", max_size=12),
)
DOCS = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(KEYS, children, min_size=1, max_size=4),
    ),
    max_leaves=12,
).filter(lambda d: isinstance(d, dict))
NEW_VALUES = st.one_of(st.integers(0, 10**6), st.booleans(), st.text("abcdxyz:#' \"", min_size=1, max_size=8))
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _yaml_block(data, indent=0) -> str:
    """Block-style YAML written by hand (so the test does not depend on one emitter's habits)."""
    pad = " " * indent
    lines = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            lines.append(f"{pad}{key}:  # comment\n" + _yaml_block(value, indent + 2))
        elif isinstance(value, list) and value and all(not isinstance(v, (dict, list)) for v in value):
            lines.append(f"{pad}{key}:\n" + "".join(f"{pad}  - {json.dumps(v)}\n" for v in value))
        else:
            lines.append(f"{pad}{key}: {json.dumps(value)}\n")
    return "".join(lines)


def _render(data, style: str) -> tuple[str, list]:
    if style == "json-indent":
        text = json.dumps(data, indent=2)
        return text, [parse_json(text, "c.json")]
    if style == "json-compact":
        text = json.dumps(data)
        return text, [parse_json(text, "c.json")]
    if style == "yaml-flow":
        text = "x: 1\ny: " + json.dumps(data) + "\n"
        return text, parse_yaml(text, "c.yaml")
    text = _yaml_block(data)
    return text, parse_yaml(text, "c.yaml")


def _data_of(text: str, style: str):
    if style.startswith("json"):
        return json.loads(text)
    return parse_yaml(text, "c.yaml")[0].data


def _delete(data, path: list[str]):
    node = data
    for p in path[:-1]:
        node = node[p]
    del node[path[-1]]


def _settings(doc, style):
    out = flatten(doc, doc.data)
    if style == "yaml-flow":
        out = {k: v for k, v in out.items() if k.startswith("y.")}
    return {k: s for k, s in out.items() if not any(part.isdigit() for part in k.split("."))}


@PROPS
@given(data=DOCS, style=st.sampled_from(["json-indent", "json-compact", "yaml-flow", "yaml-block"]),
       pick=st.integers(0, 10**6), op=st.sampled_from(["remove", "rename", "replace"]), new=NEW_VALUES)
def test_an_edit_at_a_random_pointer_changes_only_its_span(data, style, pick, op, new):
    text, docs = _render(data, style)
    settings_ = _settings(docs[0], style)
    assume(settings_)
    key = sorted(settings_)[pick % len(settings_)]
    setting = settings_[key]
    path = key.split(".")
    if style == "yaml-flow":
        path = path[1:]
    expected = json.loads(json.dumps(data))
    if op == "remove":
        fix = edit.remove(setting, "t")
        _delete(expected, path)
    elif op == "rename":
        parent = expected
        for p in path[:-1]:
            parent = parent[p]
        new_key = "zz" + path[-1]
        assume(new_key not in parent)
        fix = edit.rename(setting, new_key, "t")
        parent[new_key] = parent.pop(path[-1])
    else:
        assume(not isinstance(setting.value, (dict, list)))
        fix = edit.replace_value(setting, new, "t")
        parent = expected
        for p in path[:-1]:
            parent = parent[p]
        parent[path[-1]] = new
    if fix.safety is Safety.DISPLAY:
        assume(False)  # refused with a reason (e.g. the only key of a list item); nothing to check
    out = apply_edits(text, fix.edits)
    got = _data_of(out, style)
    if style == "yaml-flow":
        assert got["x"] == 1
        got = got["y"]
    assert got == expected
    (e, *more) = fix.edits
    if not more:
        assert out[: e.start] == text[: e.start]
        assert out[len(out) - (len(text) - e.end):] == text[e.end:]


ARG_WORDS = st.lists(
    st.tuples(st.sampled_from(["--alpha", "--beta", "--max-model-len", "--swap-space", "--x-y"]),
              st.lists(st.text("abc0123:/._", min_size=1, max_size=6), max_size=1)),
    min_size=1, max_size=5, unique_by=lambda t: t[0],
)


def _argv(groups) -> list[str]:
    return ["serve"] + [w for flag, values in groups for w in (flag, *values)]


def _argv_doc(argv: list[str], style: str):
    """``args:`` holding ``argv`` in one of four layouts; returns (text, document)."""
    if style == "json":
        text = json.dumps({"args": argv}, indent=1)
        return text, parse_json(text, "c.json")
    if style == "flow":
        text = "args: " + json.dumps(argv) + "  # tail\nafter: 1\n"
    elif style == "flow-lines":
        text = "args: [\n" + ",\n".join(f"    {json.dumps(a)}" for a in argv) + "\n]\nafter: 1\n"
    else:
        text = "args:\n" + "".join(f"  - {json.dumps(a)}\n" for a in argv) + "after: 1\n"
    (doc,) = parse_yaml(text, "c.yaml")
    return text, doc


@PROPS
@given(groups=ARG_WORDS, style=st.sampled_from(["block", "flow", "flow-lines", "json"]), pick=st.integers(0, 100))
def test_removing_an_option_from_an_argv_list_removes_exactly_its_items(groups, style, pick):
    argv = _argv(groups)
    text, doc = _argv_doc(argv, style)
    tokens = words(doc, [("/args", doc.data["args"])])
    parsed, _ = parse_args(tokens[1:], doc)
    flag, values = groups[pick % len(groups)]
    setting = parsed[flag.lstrip("-").replace("-", "_")]
    fix = edit.remove(setting, "t")
    assert fix.safety is Safety.SAFE, fix.why_not
    out = apply_edits(text, fix.edits)
    data = json.loads(out) if style == "json" else parse_yaml(out, "c.yaml")[0].data
    expected = [w for f, vs in groups if f != flag for w in (f, *vs)]
    assert data["args"] == ["serve"] + expected
    if style != "json":
        assert data["after"] == 1


SHELL_VALUES = st.one_of(
    st.text("abc0123:/._", min_size=1, max_size=6),
    st.text("abc 12", min_size=1, max_size=6).map(lambda t: "'" + t + "'"),
    st.text("abc 12$", min_size=1, max_size=6).map(lambda t: '"' + t.replace("$", "") + '"'),
)


@PROPS
@given(
    groups=st.lists(st.tuples(st.sampled_from(["--alpha", "--beta", "--gamma", "--delta"]), SHELL_VALUES),
                    min_size=1, max_size=4, unique_by=lambda t: t[0]),
    layout=st.sampled_from(["one-line", "continued", "literal-block"]),
    pick=st.integers(0, 100),
)
def test_removing_an_option_from_a_shell_string_removes_exactly_its_words(groups, layout, pick):
    parts = [f"{flag} {value}" for flag, value in groups]
    if layout == "one-line":
        script = "vllm serve m " + " ".join(parts) + " && echo done"
        text = "cmd: " + json.dumps(script) + "\n"
    elif layout == "continued":
        script = "vllm serve m \\\n" + " \\\n".join("  " + p for p in parts) + "\n"
        text = "cmd: |\n" + "".join("  " + line + "\n" for line in script.rstrip("\n").split("\n"))
    else:
        script = "vllm serve m\n" + " ".join(parts)
        text = "cmd: |\n" + "".join("  " + line + "\n" for line in script.split("\n"))
    (doc,) = parse_yaml(text, "c.yaml")
    tokens = words(doc, [("/cmd", doc.data["cmd"])])
    start = [t.text for t in tokens].index("serve") + 2
    parsed, _ = parse_args([t for t in tokens[start:] if not t.operator], doc)
    flag, value = groups[pick % len(groups)]
    setting = parsed[flag[2:]]
    fix = edit.remove(setting, "t")
    assume(fix.safety is Safety.SAFE)  # a quoted word inside a JSON string has escapes: refused
    out = apply_edits(text, fix.edits)
    new_script = parse_yaml(out, "c.yaml")[0].data["cmd"]
    keep = [w for f, v in groups if f != flag for w in (f, *shlex.split(v))]
    words_after = shlex.split(new_script.replace("\\\n", " ").replace("&&", " && "))
    assert words_after[:3] == ["vllm", "serve", "m"]
    assert [w for w in words_after[3:] if w not in ("&&", "echo", "done")] == keep


# --- adding ---------------------------------------------------------------------------------------

from sits_doctor.fixes.config_insert import add_member, add_words  # noqa: E402


def _mappings(data, pointer=""):
    if isinstance(data, dict):
        yield pointer, data
        for k, v in data.items():
            yield from _mappings(v, f"{pointer}/{k}")


@PROPS
@given(data=DOCS, style=st.sampled_from(["json-indent", "json-compact", "yaml-flow", "yaml-block"]),
       pick=st.integers(0, 10**6), new=NEW_VALUES, crlf=st.booleans())
def test_adding_a_key_adds_exactly_that_key(data, style, pick, new, crlf):
    text, docs = _render(data, style)
    if crlf and style != "json-compact":
        text = text.replace("\n", "\r\n")
        docs = [parse_json(text, "c.json")] if style.startswith("json") else parse_yaml(text, "c.yaml")
    doc = docs[0]
    maps = list(_mappings(doc.data))
    if style == "yaml-flow":
        maps = [(p, m) for p, m in maps if p.startswith("/y")]
    assume(maps)
    pointer, mapping = maps[pick % len(maps)]
    assume(mapping and "zz" not in mapping)
    try:
        e = add_member(doc, pointer, "zz", new)
    except edit.CannotEdit:
        assume(False)
    out = apply_edits(text, [e])
    got = _data_of(out, style)
    expected = json.loads(json.dumps(doc.data))
    node = expected
    for part in [p for p in pointer.split("/") if p]:
        node = node[part]
    node["zz"] = new
    assert got == expected
    assert out[: e.start] == text[: e.start] and out[e.start + len(e.new):] == text[e.start:]
    if crlf and "\n" in e.new:
        assert "\r\n" in e.new and "\n" not in e.new.replace("\r\n", "")


@PROPS
@given(groups=ARG_WORDS, style=st.sampled_from(["block", "flow", "flow-lines", "json"]),
       new=st.lists(st.text("abc0123:/._-", min_size=1, max_size=6), min_size=1, max_size=2))
def test_adding_words_to_an_argv_list_appends_exactly_them(groups, style, new):
    argv = _argv(groups)
    text, doc = _argv_doc(argv, style)
    tokens = words(doc, [("/args", doc.data["args"])])
    from sits_doctor.loaders.vllm_args import site_of

    e = add_words(doc, site_of(doc, tokens), new)
    out = apply_edits(text, [e])
    data = json.loads(out) if style == "json" else parse_yaml(out, "c.yaml")[0].data
    assert data["args"] == argv + new
    if style != "json":
        assert data["after"] == 1


@PROPS
@given(groups=st.lists(st.tuples(st.sampled_from(["--alpha", "--beta", "--gamma"]), SHELL_VALUES),
                       min_size=1, max_size=3, unique_by=lambda t: t[0]),
       layout=st.sampled_from(["one-line", "continued"]),
       new=st.lists(st.text("abc0123:/._-", min_size=1, max_size=6), min_size=1, max_size=2))
def test_adding_words_to_a_shell_string_appends_exactly_them(groups, layout, new):
    parts = [f"{flag} {value}" for flag, value in groups]
    if layout == "one-line":
        script = "vllm serve m " + " ".join(parts)
        text = "cmd: " + json.dumps(script) + "\n"
    else:
        script = "vllm serve m \\\n" + " \\\n".join("  " + p for p in parts) + "\n"
        text = "cmd: |\n" + "".join("  " + line + "\n" for line in script.rstrip("\n").split("\n"))
    (doc,) = parse_yaml(text, "c.yaml")
    tokens = words(doc, [("/cmd", doc.data["cmd"])])
    from sits_doctor.loaders.vllm_args import site_of

    site = site_of(doc, tokens)
    assume(site.words[-1].start >= 0)
    e = add_words(doc, site, new)
    out = apply_edits(text, [e])
    before = shlex.split(script.replace("\\\n", " "))
    after = shlex.split(parse_yaml(out, "c.yaml")[0].data["cmd"].replace("\\\n", " "))
    assert after == before + new
