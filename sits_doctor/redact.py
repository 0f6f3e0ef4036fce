"""Secrets never printed: the one place that finds them in text sits-doctor is about to show.

Everything the command line writes (stdout, stderr, ``-o FILE``: every report format, the ``fix``
diff and its lines, ``capacity``) passes through :func:`redact`; the source lines a report quotes
(a finding's snippet, the diff's context) are redacted as whole documents first, so that a
value whose name sits on the line above (a Kubernetes ``- name: HF_TOKEN`` / ``value: ...`` pair,
``--api-key`` on one line of an args list and its value on the next) is found too. A secret is
replaced by :data:`MARKER`; nothing else moves: a redaction never crosses or removes a line
break, so line numbers stay as they are, and :func:`column` maps a column of the original line
to the redacted one. Files are never changed: ``fix --apply`` writes the real text.

What counts as a secret:

- token shapes, wherever they stand: Hugging Face ``hf_…``, OpenAI / Anthropic ``sk-…``, AWS
  access key ids ``AKIA…`` / ``ASIA…``, GitHub ``ghp_…`` / ``github_pat_…``, Slack ``xox?-…``;
- the user and password of a URL (``https://user:hf_…@host/org/m`` → ``https://***@host/org/m``);
- the value of a name that holds a secret — its last word is token, key, secret, password,
  passwd, apikey or credential(s) (``HF_TOKEN``, ``OPENAI_API_KEY``, ``apiKey``,
  ``db-password``), or it contains secret / password / credential(s) and does not end in a word
  that names a reference (``secretName``, ``secretKeyRef``, ``HF_TOKEN_PATH`` are not secrets):
  written ``NAME=value`` (environment, ``export``, ``-e``), ``NAME: value`` (YAML, JSON),
  ``ENV NAME value`` (Dockerfile), as a Kubernetes ``name:`` / ``value:`` pair, or as a
  command-line flag's value (``--api-key VALUE``, ``--hf-token=VALUE``, the next item of an
  args list). Values that cannot be a secret stay: numbers, booleans, null, references
  (``$HF_TOKEN``, ``${HF_TOKEN}``, ``{{ .Values.token }}``, ``<your-token>``), and the bare name
  ``key`` (a Triton parameter's or a ``secretKeyRef``'s key names a setting, not a secret) and
  a tokenizer's special tokens (``eos_token``).

Every pattern is linear in the text (each name is tried from its first character only, each
value is one greedy run), so redacting a large report costs about as much as reading it.
"""

from __future__ import annotations

import re
from functools import lru_cache

MARKER = "***"

# Each pattern starts with its literal text (the boundary before it checked by a look-behind
# after it), so that the regex engine scans for the literal instead of trying every position.
_SHAPES = [re.compile(p) for p in (
    r"hf_(?<![A-Za-z0-9_]hf_)(?=[A-Za-z0-9]*[A-Z0-9])[A-Za-z0-9]{20,}(?![A-Za-z0-9])",
    r"sk-(?<![A-Za-z0-9_-]sk-)(?=[A-Za-z0-9_-]*[A-Z0-9])[A-Za-z0-9_-]{20,}",
    r"A[KS]IA(?<![A-Za-z0-9]A[KS]IA)[A-Z0-9]{16}(?![A-Za-z0-9])",
    r"gh[pousr]_(?<![A-Za-z0-9_]gh[pousr]_)[A-Za-z0-9]{30,}",
    r"github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{30,}",
    r"xox[abposr]-(?<![A-Za-z0-9]xox[abposr]-)[A-Za-z0-9-]{10,}",
)]
_USERINFO = re.compile(r"://(?P<user>[^\s/@\"'`<>\\]+)@")

# A value: quoted (the quotes stay; also the escaped quotes of JSON text and the &quot; of XML),
# or one run of characters that cannot end a word in YAML, JSON, XML or a shell command.
_BREAKS = r"\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029"  # what str.splitlines() ends a line at: never redacted
_VALUE = (rf"(?:\"(?P<dq>[^\"\\{_BREAKS}]*)\"|'(?P<sq>[^'\\{_BREAKS}]*)'|\\\"(?P<eq>[^\"\\{_BREAKS}]*)\\\""
          rf"|&quot;(?P<xq>[^&<{_BREAKS}]*)&quot;|(?P<bare>[^\s\"'`\\,;|&<>(){{}}\[\]]+))")
_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
_CLOSE = r"(?:\\?[\"']|&quot;)?"  # the closing quote of a quoted name

_ASSIGNED = re.compile(rf"(?<![A-Za-z0-9_.$-])(?P<name>{_NAME}){_CLOSE}[ \t]*[:=][ \t]*{_VALUE}")
_FLAG = re.compile(
    rf"-(?<![A-Za-z0-9_-]-)(?P<name>-?[A-Za-z][A-Za-z0-9_-]*){_CLOSE}"
    r"(?:=|[ \t]+|[ \t]*,[ \t]*|[ \t]*\\?\n[ +\-]?[ \t]*(?:-[ \t]+)?)"  # a space, the next list item, the next line
    + _VALUE
)
_PAIR = re.compile(  # Kubernetes env: name: X then value: Y (same flow mapping, or the next line)
    rf"name(?<![A-Za-z0-9_-]name){_CLOSE}[ \t]*:[ \t]*(?:\\?[\"']|&quot;)?(?P<name>{_NAME}){_CLOSE}"
    rf"[ \t]*(?:,[ \t]*|\n[ +\-]?[ \t]*(?:-[ \t]+)?)(?:\\?[\"']|&quot;)?value{_CLOSE}[ \t]*:[ \t]*{_VALUE}"
)
_ENV = re.compile(rf"ENV(?<![A-Za-z0-9_]ENV)[ \t]+(?P<name>{_NAME})[ \t]+{_VALUE}")  # Dockerfile: ENV NAME value

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_SECRET_LAST = {"token", "key", "secret", "password", "passwd", "apikey", "credential", "credentials"}
_HINTS = ("token", "key", "secret", "passw", "credential")
_SECRET_ANY = {"secret", "password", "passwd", "credential", "credentials"}
_REFERENCE_LAST = {"name", "names", "ref", "path", "file", "dir", "id", "ids", "type", "kind", "mode", "env", "var",
                   "url", "uri", "length", "len", "count", "size", "format", "prefix", "header", "source", "provider"}
# a key that says which entry, label or setting, not a credential (labelKey, topologyKey, cluster_key)
_WHICH_KEY = {"label", "topology", "cluster", "sort", "partition", "routing", "cache", "group", "hash", "index", "lookup",
              "primary", "foreign", "match", "node", "config", "dict", "map", "metric", "shard", "kv", "table", "column",
              "field", "object", "selector", "secret"}
_COUNTING = {"max", "min", "num", "per", "batched", "new", "prompt", "output", "input", "total", "first", "last"}
_SPECIAL_TOKENS = {"bos", "eos", "pad", "unk", "sep", "cls", "mask"}
_REFERENCE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:TOKEN|KEY|SECRET|PASSWORD)")  # --secret HF_TOKEN
_NOT_SECRET = re.compile(r"[-+]?(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[A-Za-z%]{0,3}|true|false|null|none|yes|no|on|off",
                         re.IGNORECASE)


@lru_cache(maxsize=4096)
def secret_name(name: str) -> bool:
    """Whether a setting, variable or flag of this name holds a secret (``HF_TOKEN``, ``--api-key``)."""
    lowered = name.lower()
    if not any(word in lowered for word in _HINTS):
        return False
    words = [w.lower() for w in _WORDS.findall(name)]
    if not words or name.lstrip("-").lower() == "key":
        return False
    if words[-1] == "key" and len(words) >= 2 and words[-2] in _WHICH_KEY:
        return False
    if words[-1] == "token" and (_COUNTING & set(words) or len(words) == 2 and words[0] in _SPECIAL_TOKENS):
        return False  # a count or rate (kv_bytes_per_token, --max-num-batched-token), a special token (eos_token)
    if words[-1] in _SECRET_LAST:
        return True
    return any(w in _SECRET_ANY for w in words) and words[-1] not in _REFERENCE_LAST


def spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of the secrets in ``text``, sorted and not overlapping."""
    found: list[tuple[int, int]] = [m.span() for shape in _SHAPES for m in shape.finditer(text)]
    found += [m.span("user") for m in _USERINFO.finditer(text)]
    for pattern in (_ASSIGNED, _FLAG, _PAIR, _ENV):
        for m in pattern.finditer(text):
            span = _value_span(m)
            if span is not None:
                found.append(span)
    merged: list[tuple[int, int]] = []
    for start, end in sorted(found):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _value_span(m: re.Match) -> tuple[int, int] | None:
    if not secret_name(m.group("name")):
        return None
    group = next(g for g in ("dq", "sq", "eq", "xq", "bare") if m.group(g) is not None)
    value = m.group(group)
    if not value or value[0] in "$-=:#<{" or set(value) == {"*"} or _NOT_SECRET.fullmatch(value) or _REFERENCE.fullmatch(value):
        return None
    return m.span(group)


def redact(text: str) -> str:
    """``text`` with every secret replaced by :data:`MARKER` (line breaks untouched)."""
    return _apply(text, spans(text))


def _apply(text: str, found: list[tuple[int, int]]) -> str:
    if not found:
        return text
    out, at = [], 0
    for start, end in found:
        out += [text[at:start], MARKER]
        at = end
    out.append(text[at:])
    return "".join(out)


def redact_line(line: str, found: list[tuple[int, int]], col: int) -> tuple[str, int]:
    """One line of a document, given the secrets ``found`` in that document as offsets relative to
    the line's start: the redacted line, and where ``col`` (1-based, of the original line) is in it
    (a column inside a secret goes to the marker's first character)."""
    mine = [(max(0, s), min(len(line), e)) for s, e in found if e > 0 and s < len(line)]
    at, shift = col - 1, 0
    for start, end in mine:
        if at < start:
            break
        if at < end:
            at = start
            break
        shift += (end - start) - len(MARKER)
    return _apply(line, mine), at - shift + 1
