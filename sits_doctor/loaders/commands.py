"""Finding a vLLM command line inside the files that wrap it, word by word, with positions.

Container ``command``/``args`` may be lists of words or one shell string (``sh -c "vllm serve
... && ..."``); compose ``command:`` may be a string. Each word keeps the file position it was
written at (line/column for findings, start/end offsets for fixes), so a finding about
``--max-model-len`` points at that flag and a fix can remove exactly it.
"""

from __future__ import annotations

from typing import Any

from sits_doctor.frameworks import vllm as fw
from sits_doctor.loaders import shell
from sits_doctor.loaders.vllm_args import Token, is_shell_templated
from sits_doctor.plan import Provenance, Setting, Site, Word
from sits_doctor.source import SourceDoc, join_pointer
from sits_doctor.source_yaml import TEMPLATE_MARK

SHELL_OPERATORS = frozenset(shell.OPERATORS)
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash"})


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


def _script_at(texts: list[str]) -> int:
    """Index of the script a shell runs (``sh -c SCRIPT``, ``bash -lc -- SCRIPT``, ``bash -l -c
    SCRIPT``: the first word that is no option after a ``-c`` cluster; ``--`` ends the options),
    or -1."""
    for at, text in enumerate(texts):
        if text.rsplit("/", 1)[-1] not in SHELLS:
            continue
        runs = False
        for n in range(at + 1, len(texts)):
            word = texts[n]
            if word == "--":
                continue
            if word.startswith("-") and len(word) > 1:
                runs = runs or _runs_script(word)
                continue
            return n if runs else -1
        return -1
    return -1


def _script_or_items(doc: SourceDoc, items: list[tuple[str, Any]]) -> list[Token]:
    tokens: list[Token] = []
    script = _script_at(["" if item is None else str(item) for _, item in items])
    for n, (ptr, item) in enumerate(items):
        text = "" if item is None else str(item)
        if n == script or (n == 0 and len(items) == 1 and " " in text.strip()):
            tokens.extend(split_shell(doc, text, ptr))
        else:
            tokens.append(item_token(doc, text, ptr))
    return tokens


def _runs_script(flag: str) -> bool:
    """``-c`` and the clusters that end in it (``-ec``, ``-lc``, ``-xc``, ``-exc``): the next word is
    the script."""
    return len(flag) >= 2 and flag[0] == "-" and flag[-1] == "c" and flag[1:].isalpha()


def item_token(doc: SourceDoc, text: str, pointer: str) -> Token:
    """A list item that is one command-line word."""
    templated = pointer in doc.templated or TEMPLATE_MARK in text or is_shell_templated(text)
    pos = doc.pos(pointer)
    quote = pos.style if pos.style in ('"', "'") else ""
    word = Word(text, pos.start, pos.end, pointer, quote)
    return Token(text, Provenance.at(doc, pointer, key=False), templated, word, "argv")


def split_shell(doc: SourceDoc, script: str, pointer: str) -> list[Token]:
    """The words of a shell string, each located in the file text where it can be exactly."""
    pos = doc.pos(pointer)
    offsets = shell.scalar_offsets(doc.text, pos.start, pos.end, pos.style, script) if pos.start >= 0 else []
    whole_templated = pointer in doc.templated
    tokens = []
    split = shell.split(script)
    skipped = shell.redirections(split)  # `> log`, `2>&1`: no arguments
    for w in (w for k, w in enumerate(split) if k not in skipped):
        start, end = shell.source_span(offsets, w.start, w.end) if offsets else (-1, -1)
        at = start if start >= 0 else next((o for o in offsets[w.start:w.end] if o >= 0), -1)
        if at >= 0:
            line, col = doc.lines.linecol(at)
        else:
            line, col = pos.line, pos.col
        prov = Provenance(file=doc.path, pointer=pointer, doc_index=doc.index, line=line, col=col)
        text = w.text
        templated = not w.operator and ((whole_templated and TEMPLATE_MARK in text) or is_shell_templated(text))
        if start >= 0 and doc.touches_template(start, end):
            start, end = -1, -1
        tokens.append(Token(text, prov, templated, Word(text, start, end, pointer, w.quote), "shell", w.operator))
    return tokens


def vllm_invocation(tokens: list[Token], image_is_vllm: bool) -> tuple[list[Token], str, str] | None:
    """The words after ``vllm serve`` (or the api_server module) up to a shell operator.

    Returns ``(args, how, parser)``: how the server is started, as shown, and which parser reads
    the words (``fw.PARSER_*``); with a vLLM image and no explicit invocation, all words are engine
    arguments (the image's entrypoint is the server).
    """
    texts = [t.text for t in tokens]
    for i, text in enumerate(texts):
        nxt = texts[i + 1] if i + 1 < len(texts) else ""
        if text.rsplit("/", 1)[-1] == "vllm" and nxt == "serve":
            return until_operator(tokens[i + 2 :]), "vllm serve", fw.PARSER_SERVE
        if text == "-m" and nxt in fw.MODULE_PARSERS:
            return until_operator(tokens[i + 2 :]), f"python -m {nxt}", fw.MODULE_PARSERS[nxt]
    if image_is_vllm and tokens and not any(t.text in SHELLS or t.operator for t in tokens):
        if texts[0] in ("serve",):
            return until_operator(tokens[1:]), "vllm image entrypoint", fw.PARSER_IMAGE
        return until_operator(tokens), "vllm image entrypoint", fw.PARSER_IMAGE
    return None


def until_operator(tokens: list[Token]) -> list[Token]:
    out = []
    for t in tokens:
        if t.operator:
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
        site=Site("mapping", doc, pointer),
    )
