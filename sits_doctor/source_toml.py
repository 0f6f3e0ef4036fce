"""TOML files read safely: ``.sits-doctor.toml``, ``pyproject.toml`` and ``.sits-doctor-ignore.toml``.

They are read as every input is (:func:`sits_doctor.source.read_text`: regular files only, size
limit, UTF-8). ``tomllib`` recurses once per level of nested arrays and inline tables, so a file
nested a few hundred levels deep ends in ``RecursionError``: the nesting is counted first, by a
scanner that knows TOML's strings and comments, and a file nested deeper than MAX_DEPTH is refused
at the line and column where it passes the limit, as deep JSON and YAML are.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from sits_doctor.errors import InputError
from sits_doctor.source import MAX_DEPTH, LineIndex

_STOP = re.compile(r"""'''|\"\"\"|["'#\[\]{}]""")  # what opens a string or comment, or nests
_BASIC_STOP = re.compile(r'["\\\n]')  # in a "basic string": its end, an escape, or a line break
_MULTILINE_BASIC_STOP = re.compile(r'"""|\\')
_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def parse_toml(text: str, display: str) -> dict[str, Any]:
    """The table a TOML text holds; invalid or too deeply nested TOML is an InputError at its
    line and column."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    check_toml_depth(text, display)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        at = _AT.search(message)
        line, col = (int(at.group(1)), int(at.group(2))) if at else (None, None)
        raise InputError(display, f"invalid TOML: {_AT.sub('', message)}", line, col) from None
    except RecursionError:  # the scan above counts what tomllib nests; this is only a backstop
        raise InputError(display, f"TOML nested deeper than {MAX_DEPTH} levels") from None


def check_toml_depth(text: str, display: str) -> None:
    """Refuse arrays and inline tables (and table headers) nested deeper than MAX_DEPTH. Strings
    and comments are stepped over; the scan stops where the text stops being TOML (a string that
    does not end), since tomllib reads no further either. Linear: every step moves forward."""
    depth, i = 0, 0
    while True:
        m = _STOP.search(text, i)
        if m is None:
            return
        token, i = m.group(), m.end()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise InputError(display, f"nested deeper than {MAX_DEPTH} levels", *LineIndex(text).linecol(m.start()))
        elif token in "]}":
            depth = max(0, depth - 1)
        elif token == "#":
            i = text.find("\n", i)
        elif token == "'":  # a literal string: no escapes, one line
            line_end = text.find("\n", i)
            i = text.find("'", i, len(text) if line_end == -1 else line_end)
            i = -1 if i == -1 else i + 1
        elif token == "'''":
            i = text.find("'''", i)
            i = -1 if i == -1 else _past_quotes(text, i, "'")
        elif token == '"':
            i = _basic_end(text, i)
        else:  # '"""'
            i = _multiline_basic_end(text, i)
        if i == -1:
            return


def _basic_end(text: str, i: int) -> int:
    """Where a one-line "basic string" whose body starts at ``i`` ends (-1: it does not)."""
    while True:
        m = _BASIC_STOP.search(text, i)
        if m is None or m.group() == "\n":
            return -1
        if m.group() == '"':
            return m.end()
        i = m.end() + 1  # past the escaped character


def _multiline_basic_end(text: str, i: int) -> int:
    while True:
        m = _MULTILINE_BASIC_STOP.search(text, i)
        if m is None:
            return -1
        if m.group() == '"""':
            return _past_quotes(text, m.start(), '"')
        i = m.end() + 1


def _past_quotes(text: str, at: int, quote: str) -> int:
    """Past the closing triple quote at ``at``: a multi-line string may end in one or two more
    quotes of its own (``'''it's''''``)."""
    end = at + 3
    while end < at + 5 and text.startswith(quote, end):
        end += 1
    return end
