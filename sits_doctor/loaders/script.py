"""Launch scripts and Dockerfiles that start a serving engine.

A shell script is read word by word with :mod:`sits_doctor.loaders.shell` (every word keeps its
offsets in the file, so a fix removes exactly a flag and its value). Each command (words between
control operators and line breaks) that runs ``vllm serve`` or the API server module becomes a
Plan. Variables are followed as a shell would: ``NAME=value`` and ``export NAME=value`` before the
command, ``NAME=value cmd`` prefixes, ``${NAME:-default}``; a word that names a variable the
script does not set stays unknown (counted, not judged). Only exported or prefixed variables are
the engine's environment. ``docker run [OPTIONS] IMAGE ARGS`` runs ARGS in the image (its tag may
pin the version; ``--entrypoint`` is the command; ``-e`` the environment). A ``vllm serve --config
FILE`` whose FILE the script writes with a here-document (``cat > FILE <<EOF``) is checked as a
vLLM YAML where the here-document sits.

A Dockerfile's last ``ENTRYPOINT`` and ``CMD`` (exec form ``["vllm", "serve", ...]`` or shell
form) are the command; ``ENV`` sets the environment and ``FROM`` names the image (whose tag may
pin the version, and whose own entrypoint runs when the file sets none). A command that runs a
shell script beside the Dockerfile (found through ``COPY``/``ADD``, or by name) is read through
that script, with the Dockerfile's ENV, image, pin and arguments.
"""

from __future__ import annotations

import os
import re
from typing import Any

from packaging.version import Version

from sits_doctor.loaders import shell
from sits_doctor.loaders.filenames import is_dockerfile, is_script  # noqa: F401  (re-exported)
from sits_doctor.loaders.vllm_args import Token, is_shell_templated, resolve_vars
from sits_doctor.plan import Plan, Provenance, Setting, Site, Word
from sits_doctor.source import Pos, SourceDoc, join_pointer

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_INSTRUCTION = re.compile(r"^[ \t]*([A-Za-z]+)[ \t]+", re.MULTILINE)


# --- shell scripts ----------------------------------------------------------------------------

def parse_script(text: str, display: str) -> SourceDoc:
    """A script as a document of its words: ``/N`` is the N-th word (operators included)."""
    heredocs: list[shell.Heredoc] = []
    words = shell.split(text, heredocs)
    doc = SourceDoc(display, "shell", [w.text for w in words], {}, text)
    doc.derived["heredocs"] = [(target, h) for h in heredocs if (target := _heredoc_target(words, h.word))]
    doc.positions[""] = Pos(1, 1, start=0, end=len(text))
    for i, w in enumerate(words):
        line, col = doc.lines.linecol(w.start)
        doc.positions[f"/{i}"] = Pos(line, col, start=w.start, end=w.end, style=w.quote or None)
    doc.derived["shell-words"] = words
    return doc


def _heredoc_target(words: list[shell.ShellWord], at: int) -> str | None:
    """The file a here-document is written to: ``cat > FILE <<EOF``, ``cat <<EOF >FILE``,
    ``tee [-a] FILE <<EOF``, ``cat <<EOF | tee FILE``."""
    start = at
    while start > 0 and not words[start - 1].operator:
        start -= 1
    end = at
    while end < len(words) and not words[end].operator:
        end += 1
    command = words[start:end]
    if end < len(words) and words[end].text == "|":  # cat <<EOF | tee FILE
        after = end + 1
        while after < len(words) and not words[after].operator:
            after += 1
        piped = words[end + 1:after]
        if piped and piped[0].text == "tee":
            command = piped
    if command and command[0].text == "tee":
        skipped = shell.redirections(command)
        files = [w.text for k, w in enumerate(command[1:], 1) if k not in skipped and not w.text.startswith("-")]
        return files[0] if files else None
    for k, w in enumerate(command):
        if w.redirect and _STDOUT.fullmatch(w.text) and k + 1 < len(command) and not command[k + 1].redirect:
            return command[k + 1].text
    return None


_STDOUT = re.compile(r"1?>>?|1?>\||&>>?")  # redirections of the standard output to a file


def _tokens(doc: SourceDoc, words: list[shell.ShellWord], first: int) -> list[Token]:
    """The words as Tokens; redirections (``> log``, ``2>&1``, ``<<EOF``) are no arguments and
    are left out."""
    out = []
    skipped = shell.redirections(words)
    for i, w in enumerate(words, first):
        if i - first in skipped:
            continue
        pointer = f"/{i}"
        pos = doc.positions[pointer]
        prov = Provenance(file=doc.path, pointer=pointer, doc_index=doc.index, line=pos.line, col=pos.col)
        templated = not w.operator and is_shell_templated(w.text)
        out.append(Token(w.text, prov, templated, Word(w.text, w.start, w.end, pointer, w.quote), "shell", w.operator))
    return out


def script_plans(doc: SourceDoc, exported: dict[str, Setting] | None = None, image: Setting | None = None,
                 pin: Setting | None = None) -> list[Plan]:
    """A Plan for every command of the script that starts vLLM (or ``trtllm-serve``).
    ``exported``, ``image``, ``pin``: what a Dockerfile that runs the script gives it (its ENV
    and the command's arguments as ``$1`` …, its FROM image, its ``pip install`` pin)."""
    words = doc.derived.get("shell-words") or shell.split(doc.text)
    plans = command_plans(doc, _tokens(doc, words, 0), exported)
    plans += heredoc_config_plans(doc, plans)
    pin = pip_pin(doc, doc.text, 0, "") or pin
    for plan in plans:
        plan.pin = pin
        if image is not None and plan.image is None:
            plan.image = image
    return plans


CONFIG_OPTION = "config"  # vllm serve --config FILE


def heredoc_config_plans(doc: SourceDoc, plans: list[Plan]) -> list[Plan]:
    """``vllm serve --config FILE`` where the script writes FILE with a here-document: that YAML,
    read as vLLM reads a --config file, at its positions in the script (findings point at its
    lines; fixes edit them)."""
    from sits_doctor.loaders.vllm import is_vllm_yaml, plan_from_config_yaml
    from sits_doctor.source_yaml import parse_span

    written = doc.derived.get("heredocs") or []
    out: list[Plan] = []
    done: set[int] = set()
    for plan in plans:
        config = plan.settings.get(CONFIG_OPTION)
        if plan.framework != "vllm" or config is None or config.templated or not isinstance(config.value, str):
            continue
        # the last here-document written to that file before the command runs
        found = [h for target, h in written if target == config.value and h.end <= max(
            (w.start for w in (config.site.words if config.site else ()) if w.start >= 0), default=len(doc.text))]
        if not found or id(found[-1]) in done:
            continue
        body = found[-1]
        done.add(id(body))
        for inner in parse_span(doc.text, body.start, body.end, doc.path):
            if body.expands:
                inner.templated |= _shell_templated_pointers(inner.data, "")
            if not is_vllm_yaml(inner.data):
                continue
            config_plan = plan_from_config_yaml(inner)
            line, _ = doc.lines.linecol(body.start)
            config_plan.label = f"vllm serve --config {config.value} (here-document at {doc.path}:{line})"
            out.append(config_plan)
    return out


def _shell_templated_pointers(node: Any, pointer: str) -> set[str]:
    """Pointers of the string values holding a ``$`` expansion (an unquoted here-document)."""
    if isinstance(node, dict):
        return {p for k, v in node.items() for p in _shell_templated_pointers(v, join_pointer(pointer, k))}
    if isinstance(node, list):
        return {p for i, v in enumerate(node) for p in _shell_templated_pointers(v, join_pointer(pointer, i))}
    return {pointer} if isinstance(node, str) and is_shell_templated(node) else set()


def command_plans(doc: SourceDoc, tokens: list[Token], exported: dict[str, Setting] | None = None,
                  what: str = "script", hardware: dict[str, Setting] | None = None) -> list[Plan]:
    """Plans of the commands in ``tokens`` (a script's words), following its variables;
    ``exported``: the environment the script starts with (also readable as variables)."""
    exported = dict(exported or {})
    variables: dict[str, Setting] = dict(exported)  # what the script has set so far (exported or not)
    plans: list[Plan] = []
    assigned = _assignments(tokens)
    for command in _commands(tokens):
        prefix: dict[str, Setting] = {}
        exporting = command[0].text == "export"
        rest = command[1:] if exporting else command
        assignments = 0
        while assignments < len(rest) and _ASSIGNMENT.match(rest[assignments].text):
            assignments += 1
        for tok in rest[:assignments]:
            m = _ASSIGNMENT.match(tok.text)
            # a lone `export NAME=value` goes with its `export` when removed
            words = (command[0].word, tok.word) if exporting and len(rest) == 1 else (tok.word,)
            prefix[m.group(1)] = _variable(doc, tok, m.group(1), m.group(2), words, variables)
        rest = rest[assignments:]
        if exporting or not rest:  # assignments alone set shell variables (exported ones: the environment)
            variables.update(prefix)
            if exporting:
                exported.update(prefix)
            continue
        env = {**exported, **prefix}
        resolved, unknown = resolve_vars(rest, {**variables, **prefix})
        container = docker_run(doc, resolved)
        if container is not None:  # the server runs in the image, with docker's -e environment
            words, image, env, entrypoint = container
            unknown = sum(t.templated for t in words)  # docker's own options are not the server's
            plan = _plan_of(doc, words, env, image=image, entrypoint_kept=not entrypoint, what=what,
                            line=rest[0].prov.line)
        else:
            plan = _plan_of(doc, resolved, env, what=what)
        if plan is not None:
            plan.unchecked += unknown
            _note_assignments(plan, assigned)
            if hardware:
                plan.hardware = dict(hardware)
            plans.append(plan)
    return plans


# `docker run` options that take a value (docker run --help, Docker 27); the rest take none.
_DOCKER_VALUE_OPTIONS = frozenset("""
-a --attach --add-host --annotation --blkio-weight --blkio-weight-device --cap-add --cap-drop --cgroup-parent
--cgroupns --cidfile --cpu-period --cpu-quota --cpu-rt-period --cpu-rt-runtime -c --cpu-shares --cpus
--cpuset-cpus --cpuset-mems --device --device-cgroup-rule --device-read-bps --device-read-iops
--device-write-bps --device-write-iops --dns --dns-option --dns-search --domainname --entrypoint -e --env
--env-file --expose --gpus --group-add --health-cmd --health-interval --health-retries --health-start-interval
--health-start-period --health-timeout -h --hostname --ip --ip6 --ipc --isolation --kernel-memory -l --label
--label-file --link --link-local-ip --log-driver --log-opt --mac-address -m --memory --memory-reservation
--memory-swap --memory-swappiness --mount --name --network --net --network-alias --net-alias
--oom-score-adj --pid --pids-limit --platform -p --publish --pull --restart --runtime --security-opt
--shm-size --stop-signal --stop-timeout --storage-opt --sysctl --tmpfs --ulimit -u --user --userns --uts
-v --volume --volume-driver --volumes-from -w --workdir
""".split())
_DOCKER_SHORT_VALUE = frozenset(o[1] for o in _DOCKER_VALUE_OPTIONS if len(o) == 2)
_CONTAINER_CLIS = frozenset({"docker", "podman", "nvidia-docker"})


def docker_run(doc: SourceDoc, tokens: list[Token]):
    """``docker run [OPTIONS] IMAGE [ARGS]`` (also ``podman``, ``sudo docker``, ``docker container
    run``): (the words the container runs: ``--entrypoint`` then ARGS, the image as a Setting,
    the ``-e`` environment, whether an entrypoint was given), or None. The image's own
    entrypoint gets ARGS when there is no ``--entrypoint`` (vLLM's image: ``vllm serve``)."""
    i = 1 if tokens and tokens[0].text == "sudo" else 0
    if i >= len(tokens) or tokens[i].text.rsplit("/", 1)[-1] not in _CONTAINER_CLIS:
        return None
    i += 1
    if i < len(tokens) and tokens[i].text == "container":
        i += 1
    if i >= len(tokens) or tokens[i].text != "run":
        return None
    i += 1
    env: dict[str, Setting] = {}
    entrypoint: Token | None = None
    while i < len(tokens) and tokens[i].text.startswith("-") and tokens[i].text != "-":
        tok = tokens[i]
        name, eq, inline = tok.text.partition("=")
        takes = name in _DOCKER_VALUE_OPTIONS or (
            not name.startswith("--") and len(name) > 2 and name[-1] in _DOCKER_SHORT_VALUE)  # -it, -dp 80:80
        value: Token | None = None
        if takes and not eq and i + 1 < len(tokens):
            i += 1
            value = tokens[i]
        elif takes and eq:
            value = tok._replace(text=inline)
        if value is not None and name in ("-e", "--env"):
            key, has, val = value.text.partition("=")
            env[key] = Setting(key=key, raw_key=key, value=val if has else None, raw=val if has else None,
                               prov=value.prov, templated=not has or value.templated or is_shell_templated(val))
        if value is not None and name == "--entrypoint":
            entrypoint = value
        i += 1
    if i >= len(tokens):
        return None
    image_tok = tokens[i]
    image = Setting(key="image", raw_key="image", value=image_tok.text, raw=image_tok.text, prov=image_tok.prov,
                    templated=image_tok.templated)
    words = ([entrypoint] if entrypoint is not None else []) + list(tokens[i + 1:])
    return words, image, env, entrypoint is not None


_SHELL_KEYWORDS = frozenset({"then", "else", "do", "{", "!", "elif", "if", "while", "until"})


def _assignments(tokens: list[Token]) -> dict[str, list[Token]]:
    """Every ``NAME=value`` word that starts a command (or follows ``then``/``do``/``export``…)
    anywhere in the script: a variable set in a branch, a loop or after its use still is."""
    out: dict[str, list[Token]] = {}
    for command in _commands(tokens):
        k = 0
        while k < len(command) and command[k].text in _SHELL_KEYWORDS | {"export", "local", "readonly"}:
            k += 1
        while k < len(command) and (m := _ASSIGNMENT.match(command[k].text)):
            out.setdefault(m.group(1), []).append(command[k])
            k += 1
    return out


def _note_assignments(plan: Plan, assigned: dict[str, list[Token]]) -> None:
    """A flag followed by a variable word its value cannot be read from (``--enforce-eager
    $EAGER``): note on the setting where the script sets the variable, for the rules to say."""
    for key, setting in list(plan.settings.items()):
        words = setting.site.words if setting.site is not None else ()
        if setting.value is not True or len(words) != 2 or "$" not in words[1].text or words[1].start < 0:
            continue  # (a resolved word has no span left)
        name = words[1].text.strip("${}")
        where = assigned.get(name)
        if where:
            shown = ", ".join(f"line {t.prov.line} ({t.text})" for t in where)
            plan.settings[key] = setting.with_(prov=setting.prov._replace(
                note=f"{words[1].text} is set in this file: {shown}"))


def _variable(doc: SourceDoc, tok: Token, name: str, value: str, words, variables: dict[str, Setting]) -> Setting:
    """``NAME=value`` as a Setting; the value may use variables set before it."""
    templated = is_shell_templated(value)
    prov = tok.prov
    if templated:
        probe = tok._replace(text=value, templated=True)
        (done,), unknown = resolve_vars([probe], variables, assignment=True)
        if not unknown:
            value, templated, prov = done.text, False, done.prov
    return Setting(key=name, raw_key=name, value=value, raw=value, prov=prov, templated=templated,
                   site=Site("shell", doc, tok.word.pointer, tuple(w for w in words if w is not None)))


# ``pip install ... vllm==X``, in two parts: the command, then the pinned package later in the same
# command (before a line break or ; & |). One pattern with a lazy gap between them went back over
# the rest of the line from every ``pip install`` on it (quadratic: a 110 KB RUN line took 10 s);
# :func:`_pins` searches each command's stretch of text once.
_PIN_COMMAND = re.compile(r"\b(?:pip3?|uv\s+pip)\s+install\b")
_PIN_END = re.compile(r"[\n;&|]")
_PIN_PACKAGE = re.compile(r"(?<![\w.-])(?P<pkg>vllm|tensorrt[-_]llm)(?:\[[^\]\n;&|]{0,256}\])?"
                          r"==(?P<version>\d+(?:\.\d+)+(?:[.-]?post\d+|[.-]?rc\d+)?)(?![\w.])")
_PINNED = {"vllm": "vllm", "tensorrt-llm": "trtllm", "tensorrt_llm": "trtllm"}


def _pins(text: str) -> list[re.Match]:
    """Each ``pip install`` command's first pinned vllm / tensorrt-llm, in order. A stretch of text
    searched without a pin is not searched again for a later ``pip install`` inside it."""
    found: list[re.Match] = []
    resume = searched = 0  # where the next command may start; the end of the last empty stretch
    for command in _PIN_COMMAND.finditer(text):
        if command.start() < resume or command.end() <= searched:
            continue
        stop = _PIN_END.search(text, command.end())
        stop = len(text) if stop is None else stop.start()
        m = _PIN_PACKAGE.search(text, command.end(), stop)
        if m is None:
            searched = stop
            continue
        found.append(m)
        resume = m.end()
    return found


def pip_pin(doc: SourceDoc, text: str, offset: int, pointer: str) -> Setting | None:
    """The last ``pip install vllm==X`` (or tensorrt-llm) in ``text``, which sits at ``offset`` of
    the file (-1: somewhere in the value at ``pointer``), as a Setting keyed by the framework."""
    found = _pins(text)
    if not found:
        return None
    m = found[-1]
    if offset >= 0:
        line, col = doc.lines.linecol(offset + m.start("pkg"))
        prov = Provenance(file=doc.path, pointer=pointer, doc_index=doc.index, line=line, col=col)
    else:
        prov = Provenance.at(doc, pointer)
    written = f"pip install {m['pkg']}=={m['version']}"
    version = str(Version(m["version"]))  # PEP 440 normal form (0.5.3post1 is 0.5.3.post1), as pip reads it
    if version != m["version"]:
        written += f" (PEP 440: {version})"
    return Setting(key=_PINNED[m["pkg"]], raw_key="pip install", value=version, raw=written, prov=prov)


def _commands(tokens: list[Token]) -> list[list[Token]]:
    out: list[list[Token]] = [[]]
    for t in tokens:
        if t.operator:
            if out[-1]:
                out.append([])
        else:
            out[-1].append(t)
    return [c for c in out if c]


def _plan_of(doc: SourceDoc, tokens: list[Token], env: dict[str, Setting], image: Setting | None = None,
             entrypoint_kept: bool = False, what: str = "script", line: int | None = None) -> Plan | None:
    from sits_doctor.loaders.vllm import plan_from_command

    first = next((t for t in tokens if not t.operator), None)
    if first is None and image is None:
        return None
    line = line or (first.prov.line if first is not None else 1)
    label = f"{what} line {line}"
    anchor = first.prov if first is not None else Provenance(file=doc.path)
    plan = plan_from_command(doc, tokens, label=label, anchor=anchor, image=image, env=env,
                             entrypoint_kept=entrypoint_kept, env_expands=False)
    if plan is not None:
        return plan
    try:
        from sits_doctor.loaders import trtllm_serve
    except ImportError:  # pragma: no cover - until the trtllm-serve loader lands
        return None
    plan = trtllm_serve.plan_from_tokens(doc, tokens, label=label, anchor=anchor, env=env, image=image,
                                         env_expands=False)
    if plan is None:  # a trtllm-build command: the engine it builds
        from sits_doctor.loaders import trtllm_build

        plan = trtllm_build.plan_from_tokens(doc, tokens, label=label, anchor=anchor, env=env, image=image,
                                             env_expands=False)
    return plan


# --- Dockerfiles ------------------------------------------------------------------------------

def parse_dockerfile(text: str, display: str) -> SourceDoc:
    """A Dockerfile as a document: ``/FROM``, ``/ENV/NAME``, and the last ``/ENTRYPOINT`` and
    ``/CMD`` (exec form: a list with a position per item; shell form: the words of its text)."""
    doc = SourceDoc(display, "dockerfile", {}, {"": Pos(1, 1, start=0, end=len(text))}, text)
    for keyword, start, end in _instructions(text):
        body = _without_skipped_lines(text[start:end])
        line, col = doc.lines.linecol(start)
        if keyword == "FROM":
            image = body.split()[0] if body.split() else ""
            image_start = start + (len(body) - len(body.lstrip()))
            doc.data["FROM"] = image
            doc.positions["/FROM"] = Pos(line, col, start=image_start, end=image_start + len(image))
            doc.data.pop("ENTRYPOINT", None)  # a new stage starts from its base image's command
            doc.data.pop("CMD", None)
        elif keyword in ("ENTRYPOINT", "CMD"):
            if keyword == "ENTRYPOINT":
                doc.data.pop("CMD", None)  # Docker: setting ENTRYPOINT resets a CMD from before
            doc.data[keyword] = _command_value(doc, keyword, body, start)
        elif keyword == "ENV":
            _env(doc, body, start)
        elif keyword in ("COPY", "ADD"):
            paths = [w.text for w in shell.split(body) if not w.operator and not w.text.startswith("--")]
            if len(paths) >= 2:
                doc.derived.setdefault("copies", []).append((paths[:-1], paths[-1]))
        elif keyword == "RUN" and pip_pin(doc, body, start, "") is not None:
            doc.derived["pin"] = pip_pin(doc, body, start, "")
    return doc


def _instructions(text: str) -> list[tuple[str, int, int]]:
    """(KEYWORD, start, end) of each instruction's arguments, continuation lines included."""
    out = []
    i, n = 0, len(text)
    while i < n:
        line_end = text.find("\n", i)
        line_end = n if line_end < 0 else line_end
        stripped = text[i:line_end].lstrip()
        if not stripped or stripped.startswith("#"):
            i = line_end + 1
            continue
        m = _INSTRUCTION.match(text, i)
        end = line_end
        continued = text[i:end].rstrip(" \t\r").endswith("\\")
        while continued and end < n:  # continuation lines
            nxt_start = end + 1
            nxt = text.find("\n", nxt_start)
            end = n if nxt < 0 else nxt
            line = text[nxt_start:end].strip(" \t\r")
            if line and not line.startswith("#"):  # Docker skips empty and comment lines inside an instruction
                continued = line.endswith("\\")
        if m is not None and m.start() == i:
            out.append((m.group(1).upper(), m.end(), end))
        i = end + 1
    return out


def _without_skipped_lines(body: str) -> str:
    """``body`` with the empty and comment lines Docker skips inside a continued instruction turned
    into spaces (their newline too), so the words around them join as Docker joins them and every
    offset stays where it is in the file."""
    out, continued = [], False
    for line in body.splitlines(keepends=True):
        content = line.strip(" \t\r\n")
        if continued and (not content or content.startswith("#")):
            out.append(" " * len(line))
            continue
        out.append(line)
        continued = content.endswith("\\")
    return "".join(out)


_CONTINUATION = re.compile(r"\\[ \t]*\r?\n")  # Docker: the escape character ending a line (trailing blanks allowed)
# unrolled: runs of plain characters in one step, one group per escape (an alternation per character
# keeps backtracking state for every character of a long string)
_JSON_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')


def _command_value(doc: SourceDoc, keyword: str, body: str, start: int) -> Any:
    pointer = f"/{keyword}"
    offset = start + (len(body) - len(body.lstrip()))
    line, col = doc.lines.linecol(offset)
    items = _exec_form(body)
    if items is not None:  # ["vllm", "serve", ...]: each item keeps its place in the file
        doc.positions[pointer] = Pos(line, col, start=offset, end=start + len(body.rstrip()), style="flow")
        for i, (text, (item_start, item_end)) in enumerate(items):
            at = start + item_start
            item_line, item_col = doc.lines.linecol(at)
            doc.positions[join_pointer(pointer, i)] = Pos(item_line, item_col, start=at, end=start + item_end, style='"')
        return [text for text, _ in items]
    words = shell.split(body)
    doc.positions[pointer] = Pos(line, col, start=offset, end=start + len(body))
    doc.derived[keyword] = [w._replace(start=w.start + start, end=w.end + start) for w in words]
    return [w.text for w in words]


def _exec_form(body: str) -> list[tuple[str, tuple[int, int]]] | None:
    """The items of an exec-form ``["a", "b"]`` with where each is written in ``body`` (start,
    end), or None (shell form). Docker removes each line continuation (the backslash and its
    newline) before it parses the JSON, so one may sit between items or inside an item."""
    import json

    dropped = {k for m in _CONTINUATION.finditer(body) for k in range(m.start(), m.end())}
    kept = [k for k in range(len(body)) if k not in dropped]
    joined = "".join(body[k] for k in kept)
    if not joined.strip().startswith("["):
        return None
    try:
        items = json.loads(joined)
    except ValueError:
        return None
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        return None
    found = list(_JSON_STRING.finditer(joined))
    decoded = [json.loads(m.group()) for m in found]
    if decoded != items:
        return None
    return [(text, (kept[m.start()], kept[m.end() - 1] + 1)) for text, m in zip(decoded, found)]


def _env(doc: SourceDoc, body: str, start: int) -> None:
    words = [w._replace(start=w.start + start, end=w.end + start) for w in shell.split(body) if not w.operator]
    env = doc.data.setdefault("ENV", {})
    pairs: list[tuple[str, str, list[shell.ShellWord]]] = []
    if words and "=" not in words[0].text and len(words) >= 2:  # legacy `ENV NAME value with spaces`
        value = doc.text[words[1].start:words[-1].end]
        pairs.append((words[0].text, value, words))
    else:
        for w in words:
            m = _ASSIGNMENT.match(w.text)
            if m:
                pairs.append((m.group(1), m.group(2), [w]))
    for name, value, ws in pairs:
        pointer = join_pointer("/ENV", name)
        line, col = doc.lines.linecol(ws[0].start)
        env[name] = value
        doc.positions[pointer] = Pos(line, col, start=ws[0].start, end=ws[-1].end)
        doc.derived.setdefault("ENV-words", {})[name] = ws


def _dockerfile_tokens(doc: SourceDoc) -> tuple[list[Token], dict[str, Setting], Setting | None]:
    """The words of ENTRYPOINT then CMD, the ENV, and the FROM image."""
    data = doc.data
    env: dict[str, Setting] = {}
    for name, value in (data.get("ENV") or {}).items():
        pointer = join_pointer("/ENV", name)
        ws = doc.derived["ENV-words"][name]
        words = tuple(Word(w.text, w.start, w.end, pointer, w.quote) for w in ws)
        env[name] = Setting(key=name, raw_key=name, value=value, raw=value, prov=Provenance.at(doc, pointer),
                            templated=is_shell_templated(value), site=Site("shell", doc, pointer, words))
    image = None
    if "FROM" in data:
        image = Setting(key="image", raw_key="image", value=data["FROM"], raw=data["FROM"],
                        prov=Provenance.at(doc, "/FROM"), templated=is_shell_templated(data["FROM"]))
    tokens: list[Token] = []
    for keyword in ("ENTRYPOINT", "CMD"):
        if keyword not in data:
            continue
        if keyword in doc.derived:  # shell form
            words = doc.derived[keyword]
            skipped = shell.redirections(words)  # `> log`, `2>&1`: no arguments
            for i, w in enumerate(words):
                if i in skipped:
                    continue
                pointer = join_pointer(f"/{keyword}", i)
                line, col = doc.lines.linecol(w.start)
                doc.positions.setdefault(pointer, Pos(line, col, start=w.start, end=w.end, style=w.quote or None))
                prov = Provenance(file=doc.path, pointer=pointer, line=line, col=col)
                tokens.append(Token(w.text, prov, not w.operator and is_shell_templated(w.text),
                                    Word(w.text, w.start, w.end, pointer, w.quote), "shell", w.operator))
        else:
            for i, text in enumerate(data[keyword]):
                pointer = join_pointer(f"/{keyword}", i)
                pos = doc.positions[pointer]
                prov = Provenance(file=doc.path, pointer=pointer, line=pos.line, col=pos.col)
                tokens.append(Token(text, prov, is_shell_templated(text),
                                    Word(text, pos.start, pos.end, pointer, '"'), "argv"))
    return tokens, env, image


def dockerfile_plans(doc: SourceDoc) -> list[Plan]:
    data = doc.data
    tokens, env, image = _dockerfile_tokens(doc)
    if not tokens and image is None:
        return []
    resolved, unknown = resolve_vars(tokens, env)
    plan = _plan_of(doc, resolved, env, image=image, entrypoint_kept="ENTRYPOINT" not in data, what="Dockerfile")
    if plan is None:
        return []
    plan.unchecked += unknown
    plan.pin = doc.derived.get("pin")
    return [plan]


def script_args(tokens: list[Token]) -> dict[str, Setting]:
    """A script's positional parameters ``$1`` … from the words its caller passes."""
    out = {}
    for n, tok in enumerate(tokens, 1):
        out[str(n)] = Setting(key=str(n), raw_key=str(n), value=tok.text, raw=tok.text,
                              prov=tok.prov._replace(note=f"argument {n} of the script, from the Dockerfile ({tok.prov})"),
                              templated=tok.templated)
    return out


def launched_script(doc: SourceDoc, folder: str) -> tuple[str, list[Token]] | None:
    """The shell script beside a Dockerfile that its ENTRYPOINT/CMD runs (``["/app/start.sh",
    ARGS]``, ``bash start.sh``, ``sh -c /app/start.sh``), found through the ``COPY``/``ADD`` that put
    it in the image or by its name in the Dockerfile's folder: (its path, the words after it)."""
    tokens = _command_tokens(doc)
    texts = [t.text for t in tokens]
    for k, text in enumerate(texts):
        if text.rsplit("/", 1)[-1] in ("sh", "bash", "dash", "zsh", "exec", "tini", "dumb-init") or text.startswith("-"):
            continue  # a shell (and its options) or an init running the script
        source = _copied_from(doc, text) or text.rsplit("/", 1)[-1]
        path = os.path.join(folder, source)
        if os.path.isfile(path) and is_script(path, None if path.endswith((".sh", ".bash")) else _head(path)):
            return path, tokens[k + 1:]
        return None
    return None


def _head(path: str) -> str:
    """The first 200 characters of a file, read as every input is (a FIFO cannot hang it)."""
    from sits_doctor.errors import InputError
    from sits_doctor.source import read_input

    try:
        return read_input(path, path)[:800].decode("utf-8", errors="replace")[:200]
    except InputError:
        return ""


def _copied_from(doc: SourceDoc, target: str) -> str | None:
    """The build-context path that ``COPY SRC DEST`` put at ``target`` in the image."""
    for sources, dest in reversed(doc.derived.get("copies", [])):
        for src in sources:
            base = src.rstrip("/").rsplit("/", 1)[-1]
            placed = dest + base if dest.endswith("/") else dest
            if placed == target or ("/" not in target and placed.rsplit("/", 1)[-1] == target):  # on PATH
                return src
            if src in (".", "./") and target.startswith(dest.rstrip("/") + "/"):
                return target[len(dest.rstrip("/")) + 1:]
    return None


def _command_tokens(doc: SourceDoc) -> list[Token]:
    return _dockerfile_tokens(doc)[0]


def dockerfile_context(doc: SourceDoc) -> tuple[dict[str, Setting], Setting | None, Setting | None]:
    """(ENV, FROM image, pip pin) of a Dockerfile, for a script it runs."""
    _, env, image = _dockerfile_tokens(doc)
    return env, image, doc.derived.get("pin")


def why_not(doc: SourceDoc) -> str:
    if doc.fmt == "dockerfile":
        return " (a Dockerfile, but its command does not start vLLM or trtllm-serve)"
    return " (a shell script, but no command in it starts vLLM or trtllm-serve)"

