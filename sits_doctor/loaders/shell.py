"""Shell words with their offsets: enough of POSIX ``sh`` to read a ``vllm serve ...`` line.

``shlex`` gives the words but not where they are, and finding a word again with ``str.find``
places ``--flag='{...}'`` wrongly; a fix needs the exact characters. So this tokeniser walks the
script once and records, for every word, where it starts and ends *as written* (quotes
included). It handles single and double quotes, backslash escapes, ``\\``-newline continuations,
comments, ``$(...)``/``${...}``/backticks inside a word, and the control operators that end a
command (``&& || ; | & ( )`` and newlines, reported as ``;``). It does not expand anything:
``$VAR`` stays in the word, and callers treat such words as unknown values.

:func:`scalar_offsets` maps a YAML/JSON string value back to the file, character by character,
so a word's offsets in the script become offsets in the file where they are exact.
"""

from typing import NamedTuple

OPERATORS = ("&&", "||", ";;", "|&", ";", "|", "&", "(", ")")
_BLANK = " \t\r"


class ShellWord(NamedTuple):
    text: str  # the word with quoting removed
    start: int  # offset in the script of the word as written
    end: int
    quote: str = ""  # '"' or "'" when the whole word is one quoted string
    operator: bool = False


class Heredoc(NamedTuple):
    """A here-document: ``cat > FILE <<EOF`` ... ``EOF``. ``word``: index (in :func:`split`'s
    words) of the ``<<EOF`` word; ``start``/``end``: the body's offsets in the script (its
    lines, without the delimiter line); ``expands``: the delimiter is unquoted, so ``$VAR`` in
    the body is expanded by the shell."""

    delimiter: str
    word: int
    start: int
    end: int
    expands: bool


def _heredoc_delimiter(script: str, words: list[ShellWord]) -> tuple[str, bool, bool] | None:
    """(delimiter, expands, strip tabs) when the last word opens a here-document (``<<EOF``,
    ``<<-'EOF'``, ``<< EOF``); not a here-string (``<<<``)."""
    last = words[-1]
    raw = script[last.start:last.end]
    if len(words) >= 2 and script[words[-2].start:words[-2].end] in ("<<", "<<-"):
        return last.text, not last.quote and "\\" not in raw, script[words[-2].start:words[-2].end] == "<<-"
    if not raw.startswith("<<") or raw.startswith("<<<") or raw in ("<<", "<<-"):
        return None
    strip = raw.startswith("<<-")
    delim_raw = raw[3:] if strip else raw[2:]
    text = last.text[3:] if strip else last.text[2:]
    return text, not any(q in delim_raw for q in "'\"\\"), strip


def split(script: str, heredocs: list[Heredoc] | None = None) -> list[ShellWord]:
    """The words and control operators of ``script``; unbalanced quotes end at the script end.
    Here-document bodies are not words: they are skipped, and appended to ``heredocs``."""
    out: list[ShellWord] = []
    pending: list[tuple[str, int, bool, bool]] = []  # (delimiter, word index, expands, strip tabs)
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in _BLANK:
            i += 1
        elif c == "\\" and script.startswith("\\\n", i):
            i += 2
        elif c == "\n":
            if out and not out[-1].operator:  # a line break ends a command (blank lines add nothing)
                out.append(ShellWord(";", i, i + 1, operator=True))
            i += 1
            for delimiter, word, expands, strip in pending:  # their bodies follow this line, in order
                start = i
                while i < n:
                    eol = script.find("\n", i)
                    eol = n if eol < 0 else eol
                    line = script[i:eol]
                    if (line.lstrip("\t") if strip else line).rstrip("\r") == delimiter:
                        if heredocs is not None:
                            heredocs.append(Heredoc(delimiter, word, start, i, expands))
                        i = eol + 1
                        break
                    i = eol + 1
                else:
                    if heredocs is not None:  # no delimiter line: the body runs to the end
                        heredocs.append(Heredoc(delimiter, word, start, n, expands))
            pending = []
        elif c == "#":
            while i < n and script[i] != "\n":
                i += 1
        else:
            op = next((o for o in OPERATORS if script.startswith(o, i)), None)
            if op is not None:
                out.append(ShellWord(op, i, i + len(op), operator=True))
                i += len(op)
            else:
                word, i = _word(script, i)
                out.append(word)
                opened = _heredoc_delimiter(script, out)
                if opened is not None and opened[0]:
                    delimiter, expands, strip = opened
                    index = len(out) - 1 if script[word.start:word.end].startswith("<<") else len(out) - 2
                    pending.append((delimiter, index, expands, strip))
    while out and out[-1].operator and out[-1].text == ";" and script[out[-1].start] == "\n":
        out.pop()  # the script's final line break ends nothing
    return out


def _word(script: str, i: int) -> tuple[ShellWord, int]:
    start, n = i, len(script)
    chars: list[str] = []
    quotes: list[str] = []
    while i < n:
        c = script[i]
        if c in _BLANK or c == "\n" or any(script.startswith(o, i) for o in OPERATORS):
            break
        if c == "\\":
            if script.startswith("\\\n", i):
                i += 2
                continue
            if i + 1 < n:
                chars.append(script[i + 1])
            i += 2
        elif c == "'":
            end = script.find("'", i + 1)
            end = n if end < 0 else end
            chars.append(script[i + 1:end])
            quotes.append("'")
            i = end + 1
        elif c == '"':
            i = _double_quoted(script, i + 1, chars)
            quotes.append('"')
        else:
            i = _plain_char(script, i, chars)
    end = min(i, n)
    raw = script[start:end]
    whole = raw[:1] if len(quotes) == 1 and raw[:1] in "'\"" and raw[-1:] == raw[:1] and len(raw) >= 2 else ""
    return ShellWord("".join(chars), start, end, whole), end


def _double_quoted(script: str, i: int, chars: list[str]) -> int:
    n = len(script)
    while i < n and script[i] != '"':
        c = script[i]
        if c == "\\" and i + 1 < n and script[i + 1] in '$`"\\\n':
            if script[i + 1] != "\n":
                chars.append(script[i + 1])
            i += 2
        else:
            i = _plain_char(script, i, chars)
    return i + 1


def _plain_char(script: str, i: int, chars: list[str]) -> int:
    """One character, or a whole ``$(...)``/``${...}``/backtick group kept as written."""
    if script[i] == "`" or (script[i] == "$" and script.startswith(("$(", "${"), i)):
        end = _matching(script, i)
        chars.append(script[i:end])
        return end
    chars.append(script[i])
    return i + 1


def _matching(script: str, i: int) -> int:
    """End of the ``$(...)``, ``${...}`` or backtick group starting at ``i``."""
    if script[i] == "`":
        end = script.find("`", i + 1)
        return len(script) if end < 0 else end + 1
    close = ")" if script[i + 1] == "(" else "}"
    opening = script[i + 1]
    depth, j = 0, i + 1
    while j < len(script):
        if script[j] == opening:
            depth += 1
        elif script[j] == close:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return len(script)


def scalar_offsets(text: str, start: int, end: int, style: str | None, value: str) -> list[int]:
    """For each character of the string ``value`` (a scalar written at ``text[start:end]`` in the
    given YAML/JSON style), its offset in ``text``, or -1 where it has no single source
    character (an escape sequence, a folded line break).

    Alignment walks the source in order and may only skip what a scalar's syntax adds around
    its characters (quotes, indentation, line breaks, the block header)."""
    body = start
    if style in ('"', "'"):
        body = start + 1
    elif style in ("|", ">"):
        nl = text.find("\n", start, end)
        body = end if nl < 0 else nl + 1
    out: list[int] = []
    cursor = body
    for ch in value:
        if style == '"' and cursor < end and text[cursor] == "\\":
            out.append(-1)  # an escape sequence stands for this character
            cursor += {"u": 6, "U": 10, "x": 4}.get(text[cursor + 1: cursor + 2], 2)
            continue
        if style == "'" and ch == "'" and text.startswith("''", cursor):
            out.append(-1)
            cursor += 2
            continue
        j = cursor
        while j < end and text[j] != ch and text[j] in " \t\r\n":
            j += 1
        if j < end and text[j] == ch:
            out.append(j)
            cursor = j + 1
        else:
            out.append(-1)
    return out


def source_span(offsets: list[int], start: int, end: int) -> tuple[int, int]:
    """The file span of ``value[start:end]``, or (-1, -1) unless its characters sit side by side
    in the file exactly as they are in the value."""
    if start >= end or end > len(offsets):
        return -1, -1
    first = offsets[start]
    if first < 0 or any(offsets[k] != first + (k - start) for k in range(start, end)):
        return -1, -1
    return first, first + (end - start)
