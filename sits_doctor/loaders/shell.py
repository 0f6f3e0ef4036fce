"""Shell words with their offsets: enough of POSIX ``sh`` to read a ``vllm serve ...`` line.

``shlex`` gives the words but not where they are, and finding a word again with ``str.find``
places ``--flag='{...}'`` wrongly; a fix needs the exact characters. So this tokeniser walks the
script once and records, for every word, where it starts and ends *as written* (quotes
included). It handles single and double quotes, backslash escapes, ``\\``-newline continuations,
comments, ``$(...)``/``${...}``/backticks inside a word, and the control operators that end a
command (``&& || ; | & ( )`` and newlines, reported as ``;``); redirections are words of their
own, marked as such. Inside ``$(...)`` it reads a script of its own (quotes, comments, here-documents
and ``case`` patterns there do not end the group). It does not expand anything: ``$VAR`` stays in
the word; :func:`expand` says what a word holds once the variables the file sets are put in, or
that it cannot be known.

:func:`scalar_offsets` maps a YAML/JSON string value back to the file, character by character,
so a word's offsets in the script become offsets in the file where they are exact.
"""

import re
from typing import Callable, NamedTuple

OPERATORS = ("&&", "||", ";;", "|&", ";", "|", "&", "(", ")")
# Redirection operators, longest first; a word of digits right before one is its file descriptor
# (``2>&1``). They are words of their own (``cat<<EOF>/tmp/x`` is cat, <<, EOF, >, /tmp/x), marked
# ``redirect``, and end no command.
REDIRECTIONS = ("&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">&", ">>", ">|", "<", ">")
_BLANK = " \t\r"
_OPERATOR_START = frozenset(o[0] for o in OPERATORS)
_REDIRECT_START = frozenset(o[0] for o in REDIRECTIONS)
_WORD_END = frozenset(_BLANK + "\n") | _OPERATOR_START
_MAX_NESTING = 32  # $( $( ... ) ): deeper than this, a group's end is found by counting brackets


class ShellWord(NamedTuple):
    text: str  # the word with quoting removed
    start: int  # offset in the script of the word as written
    end: int
    quote: str = ""  # '"' or "'" when the whole word is one quoted string
    operator: bool = False
    redirect: bool = False  # a redirection operator (its target is the next word)


class Heredoc(NamedTuple):
    """A here-document: ``cat > FILE <<EOF`` ... ``EOF``. ``word``: index (in :func:`split`'s
    words) of its ``<<`` word; ``start``/``end``: the body's offsets in the script (its lines,
    without the delimiter line); ``expands``: the delimiter is unquoted, so ``$VAR`` in the body
    is expanded by the shell."""

    delimiter: str
    word: int
    start: int
    end: int
    expands: bool


def split(script: str, heredocs: list[Heredoc] | None = None) -> list[ShellWord]:
    """The words and control operators of ``script``; unbalanced quotes end at the script end.
    Here-document bodies are not words: they are skipped, and appended to ``heredocs``."""
    out, _ = _scan(script, 0, heredocs, nested=False, depth=0)
    while out and out[-1].operator and out[-1].text == ";" and script[out[-1].start] == "\n":
        out.pop()  # the script's final line break ends nothing
    return out


def redirections(words: list[ShellWord]) -> set[int]:
    """Indexes of the redirection words and of their targets (``> FILE``, ``<<EOF``'s delimiter):
    what a command's arguments leave out."""
    out: set[int] = set()
    for k, w in enumerate(words):
        if w.redirect:
            out.add(k)
            if k + 1 < len(words) and not words[k + 1].operator and not words[k + 1].redirect:
                out.add(k + 1)
    return out


def _scan(script: str, i: int, heredocs: list[Heredoc] | None, nested: bool, depth: int) -> tuple[list[ShellWord], int]:
    """Words and operators from ``i``; ``nested``: the inside of a ``$(``, which ends at its
    unmatched ``)`` (returned: the offset after it; else the script's end)."""
    out: list[ShellWord] = []
    pending: list[tuple[str, int, bool, bool]] = []  # (delimiter, word index, expands, strip tabs)
    opened: tuple[int, bool] | None = None  # a << word waiting for its delimiter: (index, strip tabs)
    parens, cases = 0, _Cases()
    n = len(script)
    while i < n:
        c = script[i]
        if c in _BLANK:
            i += 1
        elif c == "\\" and script.startswith("\\\n", i):
            i += 2
        elif c == "\n":
            if out and not out[-1].operator:  # a line break ends a command (blank lines add nothing)
                out.append(ShellWord(";", i, i + 1, operator=True))
            i = _heredoc_bodies(script, i + 1, pending, heredocs)
            pending, opened = [], None
        elif c == "#":
            while i < n and script[i] != "\n":
                i += 1
        elif (c in _REDIRECT_START or c.isdigit()) and (redirect := _redirection(script, i)) is not None:
            out.append(ShellWord(script[i:redirect], i, redirect, redirect=True))
            op = script[i:redirect].lstrip("0123456789")
            opened = (len(out) - 1, op == "<<-") if op in ("<<", "<<-") else None
            i = redirect
        elif c in _OPERATOR_START and (op := next((o for o in OPERATORS if script.startswith(o, i)), None)) is not None:
            if nested and op == ")" and not cases.in_patterns():
                if parens == 0:
                    return out, i + 1
                parens -= 1
            elif nested and op == "(" and not cases.in_patterns():
                parens += 1
            cases.operator(op)
            out.append(ShellWord(op, i, i + len(op), operator=True))
            i += len(op)
            opened = None
        else:
            word, i = _word(script, i, depth)
            if opened is not None:  # <<EOF, << 'EOF', <<-"EOF": the delimiter, quoting removed
                raw = script[word.start:word.end]
                pending.append((word.text, opened[0], not any(q in raw for q in "'\"\\"), opened[1]))
                opened = None
            elif nested:
                cases.word(word.text, not out or out[-1].operator)
            out.append(word)
    return out, n


def _heredoc_bodies(script: str, i: int, pending: list[tuple[str, int, bool, bool]],
                    heredocs: list[Heredoc] | None) -> int:
    """Skip the bodies of the here-documents opened on the line that ended at ``i``, in order."""
    n = len(script)
    for delimiter, word, expands, strip in pending:
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
    return min(i, n)


class _Cases:
    """Where a ``case ... in PATTERN) ...;; esac`` puts its patterns, so that the ``)`` ending a
    pattern does not end the ``$(`` around it."""

    def __init__(self):
        self.open = 0  # nested case commands
        self.patterns = False  # the next words are a pattern list (after `in` or `;;`)
        self.heading = False  # between `case` and `in`

    def word(self, text: str, first: bool) -> None:
        if first and text == "case":
            self.open += 1
            self.heading = True
        elif self.heading and text == "in":
            self.heading, self.patterns = False, True
        elif self.open and text == "esac" and (first or self.patterns):
            self.open -= 1
            self.patterns = False

    def in_patterns(self) -> bool:
        """Whether a ``(`` or ``)`` here belongs to a pattern (``(a)`` / ``a)``)."""
        return self.open > 0 and self.patterns

    def operator(self, op: str) -> None:
        if self.open and self.patterns and op == ")":
            self.patterns = False
        elif self.open and op == ";;":
            self.patterns = True


def _redirection(script: str, i: int) -> int | None:
    """The end of a redirection operator (with its file descriptor number) at ``i``, or None.
    ``<(`` and ``>(`` are process substitutions: part of a word."""
    j = i
    while j < len(script) and script[j].isdigit():
        j += 1
    op = next((o for o in REDIRECTIONS if script.startswith(o, j)), None)
    if op is None or (j > i and op.startswith("&")) or (op in ("<", ">") and script.startswith("(", j + 1)):
        return None
    return j + len(op)


def _word(script: str, i: int, depth: int = 0) -> tuple[ShellWord, int]:
    start, n = i, len(script)
    chars: list[str] = []
    quotes: list[str] = []
    while i < n:
        c = script[i]
        if c in _WORD_END or (c in "<>" and not script.startswith("(", i + 1)):
            break  # a blank, a control operator, a redirection
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
            i = _double_quoted(script, i + 1, chars, depth)
            quotes.append('"')
        elif c == "$" and script.startswith("$'", i):
            i = _ansi_c_quoted(script, i + 2, chars)
            quotes.append("$'")
        elif c == "$" and script.startswith('$"', i):  # $"...": a translated string, read as "..."
            i = _double_quoted(script, i + 2, chars, depth)
            quotes.append('"')
        elif c in "<>":  # <(...) or >(...): a process substitution, kept as written
            end = _matching(script, i, depth)
            chars.append(script[i:end])
            i = end
        else:
            i = _plain_char(script, i, chars, depth)
    end = min(i, n)
    raw = script[start:end]
    whole = raw[:1] if len(quotes) == 1 and raw[:1] in "'\"" and raw[-1:] == raw[:1] and len(raw) >= 2 else ""
    return ShellWord("".join(chars), start, end, whole), end


_ANSI_C = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "e": "\x1b", "E": "\x1b",
           "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _ansi_c_quoted(script: str, i: int, chars: list[str]) -> int:
    """The body of ``$'...'`` from ``i``: backslash escapes (``\\'`` does not end it)."""
    n = len(script)
    while i < n and script[i] != "'":
        if script[i] == "\\" and i + 1 < n:
            chars.append(_ANSI_C.get(script[i + 1], script[i:i + 2]))
            i += 2
        else:
            chars.append(script[i])
            i += 1
    return i + 1


def _double_quoted(script: str, i: int, chars: list[str], depth: int = 0) -> int:
    n = len(script)
    while i < n and script[i] != '"':
        c = script[i]
        if c == "\\" and i + 1 < n and script[i + 1] in '$`"\\\n':
            if script[i + 1] != "\n":
                chars.append(script[i + 1])
            i += 2
        else:
            i = _plain_char(script, i, chars, depth)
    return i + 1


def _plain_char(script: str, i: int, chars: list[str], depth: int = 0) -> int:
    """One character, or a whole ``$(...)``/``${...}``/backtick group kept as written."""
    if script[i] == "`" or (script[i] == "$" and script.startswith(("$(", "${"), i)):
        end = _matching(script, i, depth)
        chars.append(script[i:end])
        return end
    chars.append(script[i])
    return i + 1


def _matching(script: str, i: int, depth: int = 0) -> int:
    """End of the ``$(...)``, ``$((...))``, ``${...}``, backtick or ``<(...)`` group starting at
    ``i``, read as the shell reads it: quotes, escapes, comments, here-documents and ``case``
    patterns inside do not end it."""
    n = len(script)
    if script[i] == "`":
        j = i + 1
        while j < n and script[j] != "`":
            j += 2 if script[j] == "\\" else 1
        return min(j + 1, n)
    if depth >= _MAX_NESTING:
        return _counted(script, i)
    if script.startswith("$((", i):  # arithmetic: brackets only
        return _counted(script, i)
    if script[i + 1] == "(":  # $(...), <(...), >(...): a script of its own
        return _scan(script, i + 2, None, nested=True, depth=depth + 1)[1]
    j, braces = i + 2, 1  # ${...}
    while j < n:
        c = script[j]
        if c == "\\":
            j += 2
        elif c == "'":
            end = script.find("'", j + 1)
            j = n if end < 0 else end + 1
        elif c == '"':
            j = _double_quoted(script, j + 1, [], depth + 1)
        elif c == "`" or (c == "$" and script.startswith(("$(", "${"), j)):
            j = _matching(script, j, depth + 1)
        elif c == "{":
            braces += 1
            j += 1
        elif c == "}":
            braces -= 1
            j += 1
            if braces == 0:
                return j
        else:
            j += 1
    return n


def _counted(script: str, i: int) -> int:
    """End of the group at ``i`` by counting its brackets alone."""
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


# --- expansion -------------------------------------------------------------------------------

UNSET = object()  # what a lookup returns for a variable the file does not set
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARAMETER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(?:(:?[-=])(.*))?", re.DOTALL)
_K8S_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


class Use(NamedTuple):
    """One variable put into a word: the expression as written, the variable, and the default
    that was taken (None: the variable's own value)."""

    expression: str
    name: str
    default: str | None


def expand(text: str, lookup: Callable[[str], object], *, splits: bool = True) -> tuple[str | None, list[Use]]:
    """What the word ``text`` (a word's text: quoting removed, its ``$``-groups as written) holds
    once its variables are put in, and which were used; the value is None when it cannot be known.

    ``lookup(name)``: the variable's value (a str), None when it is set to something the file
    does not show, or :data:`UNSET`. Followed: ``$NAME``, ``${NAME}``, ``$1``, ``${NAME-word}``,
    ``${NAME:-word}``, ``${NAME=word}``, ``${NAME:=word}`` (the word: the default when NAME is
    unset, or empty with ``:``; itself expanded, nested defaults included) and Kubernetes'
    ``$(NAME)``. Unknown: a variable that is unset without a default, command substitution,
    arithmetic, ``${#NAME}``, ``${NAME:+x}``, ``${NAME%x}`` and every other operator, ``$@`` and
    the other special parameters, a default whose quoting reads differently inside and outside
    double quotes, and (``splits``: the word is not one double-quoted string) a value with blanks,
    which the shell would split into several words."""
    used: list[Use] = []
    value = _expand(text, lookup, used, splits, 0)
    return value, used


_MAX_DEFAULTS = 8  # ${A:-${B:-...}}: deeper than this, unknown


def _expand(text: str, lookup, used: list[Use], splits: bool, depth: int) -> str | None:
    if depth >= _MAX_DEFAULTS:
        return None
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "`":
            return None
        if c != "$" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "{":
            end = _matching(text, i, depth)
            if text[end - 1:end] != "}" or end - i < 3:
                return None
            value = _parameter(text[i + 2:end - 1], text[i:end], lookup, used, splits, depth)
        elif nxt == "(":
            m = _K8S_VAR.match(text, i)
            if m is None:  # command substitution or arithmetic
                return None
            end = m.end()
            value = _variable(m.group(1), m.group(0), lookup, used, splits)
        elif _NAME.match(nxt):
            m = _NAME.match(text, i + 1)
            end = m.end()
            value = _variable(m.group(), text[i:end], lookup, used, splits)
        elif nxt.isdigit():
            end = i + 2
            value = _variable(nxt, text[i:end], lookup, used, splits)
        elif nxt in "@*#?!$[":  # special parameters, $[arithmetic]
            return None
        else:  # a lone '$' (or '$-', kept as text)
            out.append(c)
            i += 1
            continue
        if value is None:
            return None
        out.append(value)
        i = end
    return "".join(out)


def _variable(name: str, expression: str, lookup, used: list[Use], splits: bool) -> str | None:
    value = lookup(name)
    if not isinstance(value, str) or (splits and any(b in value for b in " \t\n")):
        return None
    used.append(Use(expression, name, None))
    return value


def _parameter(inner: str, expression: str, lookup, used: list[Use], splits: bool, depth: int) -> str | None:
    m = _PARAMETER.fullmatch(inner)
    if m is None:
        return None
    name, op, word = m.groups()
    if op is None:
        return _variable(name, expression, lookup, used, splits)
    value = lookup(name)
    if isinstance(value, str) and not (value == "" and op.startswith(":")):
        return _variable(name, expression, lookup, used, splits)
    if value is None:
        return None
    default = _default_word(word, lookup, used, splits, depth + 1)
    if default is None:
        return None
    used.append(Use(expression, name, default))
    return default


def _default_word(word: str, lookup, used: list[Use], splits: bool, depth: int) -> str | None:
    """The word of ``${NAME:-word}``, quoting removed and expanded. A single quote, or a
    backslash before a character that only outside double quotes it escapes, reads differently
    inside and outside them: unknown."""
    chars: list[str] = []
    i, n, quoted = 0, len(word), False
    while i < n:
        c = word[i]
        if c == "'" or (splits and not quoted and c in " \t\n"):
            return None
        if c == "\\":
            if i + 1 >= n or word[i + 1] not in '`"\\':  # (an escaped '$' is no expansion: not followed)
                return None
            chars.append(word[i + 1])
            i += 2
        elif c == '"':
            quoted = not quoted
            i += 1
        elif c in "$`":
            end = _matching(word, i, depth) if word.startswith(("${", "$(", "`"), i) else i + 1
            if c == "$" and end == i + 1:  # $NAME, $1 ...
                m = _NAME.match(word, i + 1)
                end = m.end() if m else min(i + 2, n)
            value = _expand(word[i:end], lookup, used, splits, depth)
            if value is None:
                return None
            chars.append(value)
            i = end
        else:
            chars.append(c)
            i += 1
    return "".join(chars)


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
