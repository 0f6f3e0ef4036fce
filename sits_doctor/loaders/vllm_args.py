"""vLLM engine arguments: command-line tokens and YAML keys to normalized ProjectSettings.

Follows vLLM's own normalization (sits_doctor.frameworks.vllm): ``_`` and ``-`` are the same up
to the first ``.``; ``--no-X`` turns a boolean off; ``-tp/-pp/-dp/-q/-cc/-ac/-O<n>`` are
shorthands; ``--a.b=c`` sets a nested field; JSON-valued options are parsed and their fields
become ProjectSettings too; ``max_model_len`` takes ``8k``/``8K`` suffixes. Each Setting records the
words it was written with (:class:`~sits_doctor.plan.Site`), so a fix can edit them.
"""

import re
from typing import Any, NamedTuple

from sits_doctor.frameworks import vllm as fw
from sits_doctor.loaders import shell
from sits_doctor.plan import Provenance, Setting, Site, Word
from sits_doctor.source_yaml import TEMPLATE_MARK

normalize_key = fw.normalize_key

_HUMAN_INT = re.compile(r"^(\d+(?:\.\d+)?)([kmgKMG]?)$")
# $VAR, ${VAR}, $(VAR), $((...)), $[...], `...`, and the shell's positional and special parameters ($1, ${2:-x}, $@)
_SHELL_VAR = re.compile(r"\$(\{|\()?[A-Za-z_][A-Za-z0-9_]*[})]?|\$\(\(|`|\$\{?[0-9@*#?!$]|\$\[")


class Token(NamedTuple):
    """One command-line word and where it was written."""

    text: str
    prov: Provenance
    templated: bool = False
    word: Word | None = None  # its characters in the file, for edits
    site: str = "argv"  # "argv" (a list item), "shell" (inside a shell string) or "helm"
    operator: bool = False  # a shell control operator (&&, ;, |, a line break)


def parse_human_int(value: Any) -> int | str:
    """vLLM's human-readable ints (from 0.8.4): ``1k``=1000, ``1K``=1024, ``25.6k``=25600.

    Returns the int, or the text unchanged when it is not such a number (``auto`` etc.).
    """
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        m = _HUMAN_INT.match(text)
        if not m:
            return text
        number, suffix = m.groups()
        power = "kmg".index(suffix.lower()) + 1 if suffix else 0
        base = 1024 if suffix.isupper() else 1000
        scaled = float(number) * base**power
        return int(scaled) if scaled == int(scaled) else text
    except (ValueError, OverflowError):  # past Python's int-string limit (4300 digits), or inf:
        return text  # vLLM's parser fails on it the same way, so it stays text (SITS201 reports it)


def coerce(key: str, value: Any, release: str | None = None) -> Any:
    """Parse a value the way vLLM's arg parser would, leaving unparseable text as it is: the
    parser of ``release``, or where that is not known yet (a loader, before the target is) the
    newest release in the tables that has the option (``fw.parser_kind``: each release's own
    parser, so ``--max-num-batched-tokens 8k`` is 8000 where ``human_readable_int`` reads it).
    An optional type reads ``""`` and ``"None"`` as None (the option keeps its default)."""
    import json

    base = key.partition(".")[0]
    read = fw.parser_kind(base, release)
    kind = read[0] if read is not None else fw.kind_of(base)
    if "." not in key and read is not None and read[1].startswith(fw.OPTIONAL_TYPE) and value in fw.NONE_WORDS:
        return None
    if kind == "human_int" and "." not in key:
        return parse_human_int(value)
    if not isinstance(value, str):
        return value
    if "." in key:  # --compilation-config.level=3: a field of a JSON option
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if not isinstance(parsed, (dict, list)) or value.strip()[:1] in "{[" else value
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
    except ValueError:
        return value
    if kind == "bool" and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if kind == "json" and value.strip()[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


# What a word processor, a web page or an input method may put where '-' was typed: every character
# Unicode calls a dash (category Pd) but '-' itself, and the minus signs (U+2212 and its modifier,
# superscript, subscript and heavy forms). tests/test_shell_launch_scripts.py checks the list
# against the Unicode database.
LOOKALIKE_DASHES = ("\u02d7\u058a\u05be\u1400\u1806\u2010\u2011\u2012\u2013\u2014\u2015\u207b\u208b\u2212\u2796"
                    "\u2e17\u2e1a\u2e3a\u2e3b\u2e40\u2e5d\u301c\u3030\u30a0\ufe31\ufe32\ufe58\ufe63\uff0d\U00010ead")
LOOKALIKE = fw.LOOKALIKE


def _is_flag(text: str) -> bool:
    if text[:1] in LOOKALIKE_DASHES:
        rest = text.lstrip("-" + LOOKALIKE_DASHES)
        return len(text) > 2 and rest[:1].isalpha()
    if not text.startswith("-") or text == "-":
        return False
    return not re.fullmatch(r"-\d+(\.\d+)?", text)


def has_lookalike_dash(name: str) -> bool:
    """Whether a flag's name holds a look-alike dash anywhere (``－－max-model-len``,
    ``--max－model-len``): no flag vLLM knows."""
    return any(c in LOOKALIKE_DASHES for c in name)


def ascii_dashes(text: str) -> str:
    """The flag meant: every look-alike dash becomes '-', and one look-alike alone before the
    name becomes '--' (what word processors make of a typed '--'), or '-' before a short option
    (``—tp``: ``-tp``)."""
    plain = "".join("-" if c in LOOKALIKE_DASHES else c for c in text)
    lead = len(text) - len(text.lstrip("-" + LOOKALIKE_DASHES))
    if lead == 1 and text[0] in LOOKALIKE_DASHES:
        name = plain.partition("=")[0]
        if name not in fw.SHORTHANDS and not re.fullmatch(r"-O\d*", name):
            return "-" + plain
    return plain


def expand_nested(setting: Setting) -> dict[str, Setting]:
    """Fields of a dict-valued option as their own ProjectSettings (``compilation_config.x``).

    They share the option's position; they have no site of their own (a JSON string is edited
    as a whole)."""
    out: dict[str, Setting] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                key = f"{prefix}.{k}"
                out[key] = setting.with_(key=key, raw_key=k, value=v, raw=v, site=None)
                walk(key, v)

    walk(setting.key, setting.value)
    return out


def site_of(doc, tokens: list[Token]) -> Site | None:
    """How the words ``tokens`` (a flag and its values) are written."""
    first = tokens[0]
    words = tuple(t.word or Word(t.text) for t in tokens)
    if first.site == "helm":  # the words a mapping entry becomes (edited as the entry)
        return Site("helm", doc, first.word.pointer if first.word else "", words)
    return Site("shell" if first.site == "shell" else "argv", doc, words[0].pointer, words)


def parse_args(tokens: list[Token], doc=None) -> tuple[dict[str, Setting], list[Token]]:
    """Engine options and positional words from a vLLM command line (after ``serve``)."""
    settings: dict[str, Setting] = {}
    positional: list[Token] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        text = tok.text
        if not _is_flag(text):
            positional.append(tok)
            i += 1
            continue
        name, eq, inline = text.partition("=")
        templated = tok.templated
        used = [tok]
        if has_lookalike_dash(name):
            # not a flag vLLM knows (a positional word when it starts with the look-alike), but
            # written as one: kept apart so that no rule takes it for the real option, and
            # reported (SITS204)
            key, value = LOOKALIKE + normalize_key(ascii_dashes(name).lstrip("-")), True
        elif re.fullmatch(r"-O\d+", name):
            key, value = fw.OPTIMIZATION_LEVEL, int(name[2:])
        else:
            head, dot, rest = name.partition(".")
            if head in fw.SHORTHANDS:
                key = fw.SHORTHANDS[head] + dot + rest
            else:
                key = normalize_key(name.lstrip("-"))
            base = key.partition(".")[0]
            kind = fw.kind_of(base)
            if eq:
                value = inline
            elif base.startswith("no_") and (fw.kind_of(base[3:]) == "bool" or i + 1 >= len(tokens) or _is_flag(tokens[i + 1].text)):
                key, value = base[3:], False
            elif kind == "bool":
                value = True
                if i + 1 < len(tokens) and tokens[i + 1].text.lower() in fw.BOOL_WORDS:
                    i += 1  # ≤0.8.4 (StoreBoolean) reads it; later parsers refuse it as a stray argument
                    value = tokens[i].text
                    used.append(tokens[i])
                elif (i + 1 < len(tokens) and tokens[i + 1].templated and not tokens[i + 1].operator
                      and _LONE_VAR.fullmatch(tokens[i + 1].text)):
                    i += 1  # `--enforce-eager $EAGER`: the flag is set; the word is whatever $EAGER holds
                    used.append(tokens[i])
            elif kind == "list":
                values = []
                while i + 1 < len(tokens) and not _is_flag(tokens[i + 1].text) and not tokens[i + 1].operator:
                    i += 1
                    values.append(tokens[i].text)
                    used.append(tokens[i])
                    templated = templated or tokens[i].templated
                value = values
            elif i + 1 < len(tokens) and not _is_flag(tokens[i + 1].text):
                i += 1
                value = tokens[i].text
                used.append(tokens[i])
                templated = templated or tokens[i].templated
            else:
                value = True
        notes = [t.prov.note for t in used if t.prov.note]
        setting = Setting(
            key=key,
            raw_key=name,
            value=coerce(key, value) if not templated else value,
            raw=value,
            prov=tok.prov._replace(note="; ".join(notes)) if notes else tok.prov,
            templated=templated,
            site=site_of(doc, used) if doc is not None else None,
        )
        if eq and setting.site is not None:
            setting = setting.with_(site=Site(setting.site.kind, doc, setting.site.pointer, setting.site.words, True))
        settings[key] = setting
        settings.update(expand_nested(setting))
        i += 1
    return settings, positional


_LONE_VAR = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\}")  # a word that is one variable


def is_shell_templated(text: str) -> bool:
    return bool(_SHELL_VAR.search(text))


def resolve_vars(tokens: list[Token], env: dict[str, Setting], *, assignment: bool = False) -> tuple[list[Token], int]:
    """Words with ``$(VAR)`` (Kubernetes), ``${VAR}``, ``${VAR:-default}`` and ``$VAR`` replaced by
    the container's own environment where it says what they are (:func:`shell.expand` reads
    them; nested defaults included). ``${VAR:-default}`` (and ``${1:-default}``, a script
    argument) is the default when the file does not set the variable at all; the word's
    provenance then says so. A variable that is set to something the file does not know (a
    secret, a field, another variable) stays unknown, and so does any ``$`` expression it does
    not follow. A resolved word keeps no file span (a fix must not rewrite the reference); an
    unquoted shell word that expands to nothing is gone, as the shell drops it (``assignment``:
    the words are the values of ``NAME=value``, which are neither split nor dropped). Returns
    the words and how many stay unknown."""
    out, unknown = [], 0

    def lookup(name: str):
        s = env.get(name)
        if s is None:
            return shell.UNSET
        return None if s.templated or s.value is None else str(s.value)

    for tok in tokens:
        if not tok.templated or tok.operator or "$" not in tok.text:
            out.append(tok)
            continue
        splits = tok.site == "shell" and not assignment and not (tok.word is not None and tok.word.quote == '"')
        text, used = shell.expand(tok.text, lookup, splits=splits)
        if text is None or "{{" in text or TEMPLATE_MARK in text or is_shell_templated(text):
            unknown += 1
            out.append(tok)
            continue
        if splits and not text:
            continue  # an empty unquoted expansion: the shell drops the word
        notes = []
        for use in used:
            if use.default is not None:
                where = f"argument {use.name} of the script" if use.name.isdigit() else use.name
                notes.append(f"{use.expression} is its default {use.default!r} ({where} is not set in the file)")
            elif env[use.name].prov.note:  # the variable itself took a default
                notes.append(f"{use.expression}: {env[use.name].prov.note}")
        word = tok.word._replace(start=-1, end=-1) if tok.word is not None else None
        prov = tok.prov._replace(note="; ".join(notes)) if notes else tok.prov
        out.append(tok._replace(text=text, templated=False, word=word, prov=prov))
    return out, unknown
