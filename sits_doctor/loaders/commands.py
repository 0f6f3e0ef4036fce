"""Finding a vLLM command line inside the files that wrap it, word by word, with positions.

Container ``command``/``args`` may be lists of words or one shell string (``sh -c "vllm serve
... && ..."``); compose ``command:`` may be a string. Each word keeps the file position it was
written at, so a finding about ``--max-model-len`` points at that flag.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from sits_doctor.loaders.vllm_args import Token, is_shell_templated
from sits_doctor.plan import Provenance, Setting
from sits_doctor.source import SourceDoc, join_pointer
from sits_doctor.source_yaml import TEMPLATE_MARK

SHELL_OPERATORS = frozenset({"&&", "||", ";", "|", "&", ";;", "(", ")"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash"})
API_SERVER_MODULES = frozenset({"vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"})


def words(doc: SourceDoc, fields: list[tuple[str, Any]]) -> list[Token]:
    """Tokens of ``command`` + ``args`` (each a list of words or one shell string).

    ``fields`` are (pointer, value) pairs in order; a shell and ``-c`` may sit in ``command`` with
    the script in ``args``, so the words are looked at across fields.
    """
    items: list[tuple[str, Any]] = []
    tokens: list[Token] = []
    for pointer, value in fields:
        if isinstance(value, str):
            tokens += _script_or_items(doc, items)
            items = []
            tokens += split_shell(doc, value, pointer)
        elif isinstance(value, list):
            items += [(join_pointer(pointer, i), v) for i, v in enumerate(value)]
    return tokens + _script_or_items(doc, items)


def _script_or_items(doc: SourceDoc, items: list[tuple[str, Any]]) -> list[Token]:
    tokens: list[Token] = []
    for n, (ptr, item) in enumerate(items):
        text = "" if item is None else str(item)
        prev = str(items[n - 1][1]) if n else ""
        is_script = prev == "-c" and n >= 2 and str(items[n - 2][1]).rsplit("/", 1)[-1] in SHELLS
        if is_script or (n == 0 and len(items) == 1 and " " in text.strip()):
            tokens.extend(split_shell(doc, text, ptr))
        else:
            tokens.append(_token(doc, text, ptr))
    return tokens


def _token(doc: SourceDoc, text: str, pointer: str) -> Token:
    templated = pointer in doc.templated or TEMPLATE_MARK in text or is_shell_templated(text)
    return Token(text, Provenance.at(doc, pointer, key=False), templated)


_K8S_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def split_shell(doc: SourceDoc, script: str, pointer: str) -> list[Token]:
    """Split a shell string into words, locating each word in the file text.

    Each line is a command (a backslash-newline continues it); Kubernetes ``$(VAR)`` references
    stay one word (they are unknown values, like ``$VAR``).
    """
    script = _K8S_VAR.sub(lambda m: "${" + m.group(1) + "}", script.replace("\\\n", "  "))
    parts: list[str] = []
    for line in script.split("\n"):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"  # a word starting with # comments out the rest of the line
        try:
            words_of_line = list(lexer)
        except ValueError:  # unbalanced quotes: fall back to plain whitespace words
            words_of_line = line.split()
        if words_of_line:
            parts += ([";"] if parts else []) + words_of_line  # a new line is a new command
    start = doc.pos(pointer)
    cursor = doc.lines.offset(start.line, start.col)
    whole_templated = pointer in doc.templated
    tokens = []
    for part in parts:
        found = doc.text.find(part, cursor) if part and part != ";" else -1
        if found >= 0:
            line, col = doc.lines.linecol(found)
            cursor = found + len(part)
        else:
            line, col = doc.lines.linecol(cursor)
        prov = Provenance(file=doc.path, pointer=pointer, doc=doc.index, line=line, col=col)
        templated = (whole_templated and TEMPLATE_MARK in part) or is_shell_templated(part)
        tokens.append(Token(part, prov, templated))
    return tokens


def vllm_invocation(tokens: list[Token], image_is_vllm: bool) -> tuple[list[Token], str] | None:
    """The words after ``vllm serve`` (or the api_server module) up to a shell operator.

    Returns ``(args, how)``; with a vLLM image and no explicit invocation, all words are engine
    arguments (the image's entrypoint is the server).
    """
    texts = [t.text for t in tokens]
    for i, text in enumerate(texts):
        nxt = texts[i + 1] if i + 1 < len(texts) else ""
        if text.rsplit("/", 1)[-1] == "vllm" and nxt == "serve":
            return _until_operator(tokens[i + 2 :]), "vllm serve"
        if text == "-m" and nxt in API_SERVER_MODULES:
            return _until_operator(tokens[i + 2 :]), f"python -m {nxt}"
    if image_is_vllm and tokens and not any(t in SHELLS or t in SHELL_OPERATORS for t in texts):
        if texts[0] in ("serve",):
            return _until_operator(tokens[1:]), "vllm image entrypoint"
        return _until_operator(tokens), "vllm image entrypoint"
    return None


def _until_operator(tokens: list[Token]) -> list[Token]:
    out = []
    for t in tokens:
        if t.text in SHELL_OPERATORS:
            break
        out.append(t)
    return out


def image_setting(doc: SourceDoc, image: Any, pointer: str) -> Setting | None:
    """The container image reference at ``pointer`` (it may pin the framework version)."""
    if not isinstance(image, str):
        return None
    return Setting(
        key="image", raw_key="image", value=image, raw=image,
        prov=Provenance.at(doc, pointer, key=False),
        templated=pointer in doc.templated or TEMPLATE_MARK in image,
    )
