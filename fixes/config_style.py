"""How config text is written: the layout helpers and the quoting rules the fix builders share.

A new key or value follows the file: JSON strings are JSON-quoted; a YAML scalar keeps the quote
style written there and is left plain only when every YAML reader reads it back as the same
string; a command-line word stays unquoted only when the shell would not split or expand it.
"""

from __future__ import annotations

import re
from typing import Any

from sits_doctor.source import Pos, SourceDoc

_PLAIN_SAFE = re.compile(r"^(?:[A-Za-z0-9_./]|-[A-Za-z0-9_.-])[A-Za-z0-9_./+=-]*$")  # --flag is plain too
_YAML_11_WORDS = frozenset("y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF null Null NULL ~".split())




class CannotEdit(Exception):
    """The edit would need reformatting; the message says why."""


def parent(pointer: str) -> str:
    return pointer.rsplit("/", 1)[0] if "/" in pointer else ""


def line_start(text: str, i: int) -> int:
    return text.rfind("\n", 0, i) + 1


def line_end(text: str, i: int) -> int:
    """Offset just past the line break of the line holding ``i`` (or the text's end)."""
    nl = text.find("\n", i)
    return len(text) if nl < 0 else nl + 1


def key_text(doc: SourceDoc, pos: Pos, key: str) -> str:
    import json

    if doc.fmt == "json":
        return json.dumps(key, ensure_ascii=False)
    quote = doc.text[pos.key_start: pos.key_start + 1]
    if quote == '"':
        return json.dumps(key, ensure_ascii=False)
    if quote == "'":
        return "'" + key.replace("'", "''") + "'"
    if not plain_reads_back(key):
        return json.dumps(key, ensure_ascii=False)
    return key


def scalar_text(doc: SourceDoc, pos: Pos | None, value: Any) -> str:
    """``value`` as a JSON or YAML scalar, keeping the quote style written there."""
    import json

    if doc.fmt == "json" or value is None or isinstance(value, (bool, int, float)):
        if doc.fmt != "json" and isinstance(value, bool):
            return "true" if value else "false"
        return json.dumps(value, ensure_ascii=False)
    text = str(value)
    style = pos.style if pos is not None else None
    if style == "'":
        return "'" + text.replace("'", "''") + "'"
    if style == '"' or not plain_reads_back(text):
        return json.dumps(text, ensure_ascii=False)
    return text


def looks_numeric(text: str) -> bool:
    """A number to some YAML reader: Python's float syntax (YAML 1.2's 1e5 too), hex and octal."""
    try:
        float(text.replace("_", ""))
        return True
    except ValueError:
        return text.lower().startswith(("0x", "0o", "0b", "+0x", "-0x"))


def plain_reads_back(text: str) -> bool:
    """Whether ``text`` written as a plain YAML scalar is read back as that same string (not a
    number, a boolean, null, ``.inf``/``.nan``, a date ...) by PyYAML (vLLM's loader, YAML 1.1)
    and by YAML 1.2 readers (Kubernetes): anything numeric-looking to either is quoted."""
    from sits_doctor.source_yaml import yaml_module

    yaml = yaml_module()

    if not _PLAIN_SAFE.match(text) or text in _YAML_11_WORDS or looks_numeric(text):
        return False
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) == text
    except yaml.YAMLError:
        return False


def plain_value(value: Any) -> str:
    import json

    text = json.dumps(value) if isinstance(value, (bool, dict, list)) or value is None else str(value)
    if not plain_shell(text):
        raise CannotEdit("the new value needs shell quoting")
    return text


def plain_shell(text: str) -> bool:
    return bool(text) and re.fullmatch(r"[A-Za-z0-9_./:=+,@%-]+", text) is not None
