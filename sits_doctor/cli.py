"""The ``sits-doctor`` command: wiring only (argv → options → engine → reporter → exit code).

Built on the standard library's argparse. A CI gate or pre-commit hook starts this command once
per run, so its start-up is part of every check: importing click (and the inspect, uuid, datetime
modules it pulls in) cost 25–38 ms of a 120 ms one-file check on the 2-core reference machine,
argparse about 10 ms (bench/results/cli_speed.md). Exit codes: 0 clean, 1 findings, 2 unusable
input or a usage error, 3 internal error.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys

from sits_doctor import __version__
from sits_doctor.redact import redact
from sits_doctor.reporters import FORMATS

PROG = "sits-doctor"
SEVERITIES = ("info", "warning", "error")
ABOUT = ("Lint LLM inference deployment configs: Hugging Face, vLLM, TensorRT-LLM, ORT GenAI, and the "
         "Kubernetes / Helm / compose files around them.")


def main(argv: list[str] | None = None) -> None:
    """The console entry point: run ``sits-doctor ARGV`` and exit with its code."""
    try:
        code = run(sys.argv[1:] if argv is None else list(argv))
    except KeyboardInterrupt:  # Ctrl-C: a short line, not a traceback (fix removes its temporary file first)
        _err(f"{PROG}: interrupted")
        code = 130  # 128 + SIGINT, what a shell reports for it
    for stream in (sys.stdout, sys.stderr):  # what is left in a buffer must not fail the exit (status 120)
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            _detach(stream)
    sys.exit(code)


def run(argv: list[str]) -> int:
    """Run one command; return its exit code (usage errors print to stderr and return 2).

    Output that cannot be written is not a crash: a reader that went away (``| head``) stops the
    run quietly with 141, as a command killed by SIGPIPE does (cat, grep); a full disk, a closed or
    failing standard output is one line on stderr and exit 2, like a report file that cannot be
    written (``-o``). A standard error that cannot be written is given up on: it never changes the
    exit code."""
    try:
        return _dispatch(argv)
    except SystemExit as exc:  # argparse's error() and --help
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as cat and grep do
        _detach(sys.stdout)
        return 141  # 128 + SIGPIPE, what a shell reports for a command killed by it
    except Unwritable as exc:
        _detach(sys.stdout)
        _err(f"{PROG}: error: cannot write to standard output: {exc}")
        return 2


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        (_out if argv else _err)(_top_help())
        return 0 if argv else 2
    if argv[0] == "--version":
        _out(f"{PROG}, version {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    command = COMMANDS.get(name)
    if command is None:
        from sits_doctor.rule import closest

        hint = closest(name, COMMANDS) if not name.startswith("-") else None
        what = "option" if name.startswith("-") else "command"
        _err(f"usage: {PROG} COMMAND ...\n{PROG}: error: unknown {what} {name!r}"
             + (f" (did you mean {hint!r}?)" if hint else "") + f"; commands: {', '.join(COMMANDS)}")
        return 2
    build, handler, _ = command
    parser = build()
    args = parser.parse_intermixed_args(rest)
    return handler(parser, args)


def _top_help() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = [f"usage: {PROG} [-h] [--version] COMMAND ...", "", ABOUT, "", "commands:"]
    lines += [f"  {n:<{width}}  {summary}" for n, (_, _, summary) in COMMANDS.items()]
    lines += ["", "options:", "  -h, --help  show this message and exit", "  --version   show the version and exit",
              "", f"Run '{PROG} COMMAND -h' for a command's options."]
    return "\n".join(lines)


# --------------------------------------------------------------------------- argument types


def _existing_path(text: str) -> str:
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"path {text!r} does not exist")
    return text


def _existing_file(text: str) -> str:
    _existing_path(text)
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a directory, not a file")
    return text


def _file_to_write(text: str) -> str:
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a directory, not a file")
    return text


def _gpu(text: str) -> str:
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*?(x\d+)?", text):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME or NAMExN, e.g. H100-80GB or H100-80GBx2")
    return text


class _Parser(argparse.ArgumentParser):
    """argparse with a short usage line on errors and a pointer to ``-h`` (the full option list
    is one ``-h`` away, not repeated above every mistake)."""

    def error(self, message: str):
        if message.startswith("unrecognized arguments: "):
            from sits_doctor.rule import closest

            unknown = [w for w in message.split(": ", 1)[1].split() if w.startswith("--")]
            hint = closest(unknown[0].split("=")[0], [o for o in self._option_string_actions if o.startswith("--")]) if unknown else None
            message += f" (did you mean {hint}?)" if hint else ""
        self.exit(2, f"usage: {self.usage}\n{self.prog}: error: {message}\nRun '{self.prog} -h' for the options.\n")

    def _print_message(self, message: str, file=None) -> None:  # -h and usage errors: the one way out too
        if message:
            (_err if file is None or file is sys.stderr else _out)(message, end="")


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, told the terminal width by ``os`` (argparse asks ``shutil``, whose
    import costs about 2.5 ms, every time an option is added: COLUMNS, then the terminal, else 80)."""

    def __init__(self, prog: str, **kwargs):
        if kwargs.get("width") is None:
            try:
                columns = int(os.environ["COLUMNS"])
            except (KeyError, ValueError):
                try:
                    columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
                except (AttributeError, ValueError, OSError):
                    columns = 80
            kwargs["width"] = max(columns, 40) - 2
        super().__init__(prog, **kwargs)


def _memory_size(text: str) -> float:
    from sits_doctor.memory import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parser(name: str, description: str, usage: str) -> argparse.ArgumentParser:
    # exact long option names only: an abbreviation that works today breaks when an option is added
    return _Parser(prog=f"{PROG} {name}", usage=f"{PROG} {name} {usage}", description=description,
                   allow_abbrev=False, formatter_class=_Formatter)


STDIN = ("-", "/dev/stdin")  # paths that mean standard input (`helm template ... | sits-doctor check -`)


def _add_paths(p: argparse.ArgumentParser, *, stdin: bool) -> None:
    if stdin:
        p.add_argument("paths", nargs="*", default=["."], metavar="PATH",
                       help="Config files, or folders to walk (default: the current folder); '-' reads standard input.")
        p.add_argument("--stdin-filename", metavar="NAME",
                       help="The name standard input is checked under: its format (Dockerfile, *.sh, *.json), the "
                            "settings file found for it and the path in the report (default: stdin).")
    else:
        p.add_argument("paths", nargs="*", default=["."], metavar="PATH",
                       help="Config files, or folders to walk (default: the current folder).")


def _stdin(a: argparse.Namespace) -> tuple[list[str], dict | None]:
    """The paths to check, with standard input (``-`` or ``/dev/stdin``) read once and checked
    under ``--stdin-filename`` (a ValueError says what is wrong)."""
    from pathlib import Path

    paths = list(a.paths)
    named = [p for p in paths if p in STDIN]
    if not named:
        if a.stdin_filename:
            raise ValueError(f"{PROG}: error: --stdin-filename needs '-' among the paths")
        return paths, None
    if len(named) > 1:
        raise ValueError(f"{PROG}: error: standard input can be read only once; name '-' once")
    from sits_doctor.errors import InputError
    from sits_doctor.source import read_stream

    name = a.stdin_filename or "stdin"
    if name in STDIN or os.path.isdir(name):
        raise ValueError(f"{PROG}: error: --stdin-filename {name!r}: give the file name to check standard input as")
    try:
        text = read_stream(sys.stdin.buffer, name)
    except InputError as err:
        raise ValueError(str(err)) from None
    return [name if p in STDIN else p for p in paths], {Path(name).resolve(): text}


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--select", action="append", default=[], metavar="CODES", help="Only these rules (codes or prefixes, comma-separated).")
    p.add_argument("--extend-select", action="append", default=[], metavar="CODES", help="Add rules to the selection.")
    p.add_argument("--ignore", action="append", default=[], metavar="CODES", help="Skip these rules (codes or prefixes).")


def _add_common(p: argparse.ArgumentParser, fail_on_help: str) -> None:
    p.add_argument("--fail-on", choices=SEVERITIES, help=fail_on_help)
    p.add_argument("--target", dest="targets", action="append", default=[], metavar="NAME==VERSION",
                   help="Framework version to judge against, e.g. vllm==0.11.")


def _add_sources(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-config", type=_existing_path, metavar="PATH", help="config.json (or its folder) of the served model.")
    p.add_argument("--config", dest="config_file", type=_existing_file, metavar="FILE", help="Settings file to use instead of discovery.")
    p.add_argument("--isolated", action="store_true", help="Ignore settings files.")


# --------------------------------------------------------------------------- check


def _check_parser() -> argparse.ArgumentParser:
    p = _parser("check", "Check config files and folders. Exit 0 clean, 1 findings, 2 unusable input, 3 internal error.",
                "[OPTIONS] PATH...")
    _add_paths(p, stdin=True)
    p.add_argument("--format", dest="fmt", choices=FORMATS, default="text", help="Report format (default: text).")
    p.add_argument("-o", "--output", type=_file_to_write, metavar="FILE", help="Write the report here.")
    _add_selection(p)
    _add_common(p, "Lowest severity that fails (default: warning).")
    _add_gpu(p)
    _add_sources(p)
    p.add_argument("--statistics", action="store_true", help="Print only the count of findings per rule, and the summary.")
    p.add_argument("--baseline", type=_file_to_write, metavar="FILE", help="Leave out the findings recorded in this baseline file (see docs/ci.md).")
    p.add_argument("--write-baseline", type=_file_to_write, metavar="FILE", help="Record the current findings in this baseline file.")
    p.add_argument("--skip-unrecognized", action="store_true", help="Skip named files that hold no recognized config instead of failing (for pre-commit).")
    p.add_argument("--show-skipped", action="store_true", help="List the files skipped as not a recognized config, and why.")
    p.add_argument("--show-settings", action="store_true",
                   help="Print the settings that apply to the first PATH (the file found, each value, the command "
                        "line's overrides) and exit.")
    p.add_argument("--runtime", action="store_true",
                   help="For Hugging Face model configs, build the model with the installed transformers on the meta "
                        "device (no weights, no download) and report what runs: attention, RoPE placement, cache.")
    p.add_argument("-q", "--quiet", action="store_true", help="Only the findings that fail the run, one line each; no notes.")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="Every line of evidence under each finding (the arithmetic, assumptions, the target each time).")
    p.add_argument("--debug", action="store_true", help="Show tracebacks of internal errors.")
    return p


def _add_gpu(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu", type=_gpu, metavar="NAME[xN]", help="The GPU the deployment runs on, e.g. H100, A100-40GBx2 (rules that size memory need it).")
    p.add_argument("--gpu-memory", type=_memory_size, metavar="SIZE",
                   help="Total memory per GPU as the framework sees it, e.g. 79.19GiB (wins over the catalog).")


def _check(parser: argparse.ArgumentParser, a: argparse.Namespace) -> int:
    from sits_doctor.engine import check as run_check
    from sits_doctor.outputs import overwrites_input
    from sits_doctor.reporters import render
    from sits_doctor.reporters.text import diagnostics

    if a.show_settings:
        return _show_settings(a)
    try:
        paths, texts = _stdin(a)
    except ValueError as exc:
        _err(str(exc))
        return 2
    options = _options(a, gpu=a.gpu, gpu_memory=a.gpu_memory, baseline=a.baseline, write_baseline=a.write_baseline,
                       runtime=a.runtime, texts=texts)
    try:
        report = run_check(paths, options)
        color = a.fmt == "text" and a.output is None and _color_wanted()
        text = render(report, a.fmt, color=color, quiet=a.quiet, statistics=a.statistics, verbose=a.verbose)
    except Exception as exc:  # the last line of defence: exit 3, never a bare traceback
        return _internal_error(exc, a.debug)
    if a.output and overwrites_input(a.output, paths + report.files_checked):
        _err(f"{a.output}: error: refusing to write the report over a file being checked")
        return 2
    if a.output:
        try:
            with open(a.output, "w", encoding="utf-8") as fh:
                _write(fh, text + "\n")
        except OSError as exc:
            _err(f"{a.output}: error: cannot write the report: {exc.strerror or exc}")
            return 2
    elif text:
        _out(text)
    diag = diagnostics(report, quiet=a.quiet or a.fmt != "text", show_skipped=a.show_skipped)
    if diag:
        _err(diag)
    return report.exit_code


def _show_settings(a: argparse.Namespace) -> int:
    """``check --show-settings``: the settings the first path is checked with."""
    from pathlib import Path

    from sits_doctor.errors import InputError
    from sits_doctor.settings import DEFAULT_EXCLUDE, ProjectSettings, find_config, load_settings

    first = a.stdin_filename if a.paths[0] in STDIN and a.stdin_filename else a.paths[0]
    try:
        if a.isolated:
            found, settings = None, ProjectSettings()
        elif a.config_file:
            found = Path(a.config_file)
            settings = load_settings(found)
        else:
            found = find_config(Path(first))
            settings = load_settings(found) if found else ProjectSettings()
    except InputError as err:
        _err(str(err))
        return 2
    why = "--isolated" if a.isolated else "--config" if a.config_file else "none found; defaults"
    from sits_doctor.source import display_path

    rows = [("path", first), ("settings file", display_path(found) if found else f"({why})")]
    for name in ("select", "extend_select", "ignore", "fail_on", "target", "per_file_ignores", "model_config_path",
                 "gpu", "exclude", "extend_exclude"):
        value = getattr(settings, name)
        if name == "exclude" and value is None:
            value = f"{list(DEFAULT_EXCLUDE)} (default)"
        elif name == "fail_on":
            value = value.value if value is not None else "warning (default)"
        elif name == "select" and value is None:
            value = "ALL (default)"
        elif name == "per_file_ignores":
            value = dict(value)
        else:
            value = list(value) if isinstance(value, (list, tuple)) else value
        rows.append((name.replace("_path", "").replace("_", "-"), value))
    overrides = [(flag, v) for flag, v in (("--select", _split(a.select)), ("--extend-select", _split(a.extend_select)),
                                           ("--ignore", _split(a.ignore)), ("--fail-on", a.fail_on),
                                           ("--target", list(a.targets)), ("--gpu", a.gpu),
                                           ("--model-config", a.model_config)) if v]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines += ["command line (wins over the file):"] + [f"  {flag} {v}" for flag, v in overrides] if overrides else []
    _out("\n".join(lines))
    return 0


def _options(a: argparse.Namespace, **more):
    from sits_doctor.engine import CheckOptions
    from sits_doctor.finding import Severity

    return CheckOptions(
        select=_split(a.select) or None,
        extend_select=_split(a.extend_select),
        ignore=_split(a.ignore),
        fail_on=Severity(a.fail_on) if a.fail_on else None,
        targets=list(a.targets),
        model_config=a.model_config,
        config=a.config_file,
        isolated=a.isolated,
        debug=a.debug,
        skip_unrecognized=a.skip_unrecognized,
        **more,
    )


def _split(values: list[str]) -> list[str]:
    """``--select A,B --select C`` → [A, B, C]."""
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


# --------------------------------------------------------------------------- fix


def _fix_parser() -> argparse.ArgumentParser:
    p = _parser("fix", "Fix what can be fixed: print the diff, or write it with --apply. Exit 0 when nothing fails "
                       "after the fixes (and, without --apply, nothing would change), 1 otherwise, 2 unusable input, "
                       "3 internal error.", "[OPTIONS] PATH...")
    _add_paths(p, stdin=False)
    p.add_argument("--apply", dest="do_apply", action="store_true", help="Write the fixes (atomically). Without it, print the diff and change nothing.")
    p.add_argument("--unsafe-fixes", action="store_true", help="Also apply fixes that change behaviour (shown as unsafe).")
    p.add_argument("--exit-non-zero-on-fix", action="store_true", help="Exit 1 when anything was fixed, even if nothing remains.")
    _add_selection(p)
    _add_common(p, "Lowest severity of a remaining finding that fails (default: warning).")
    _add_gpu(p)
    _add_sources(p)
    p.add_argument("--skip-unrecognized", action="store_true", help="Skip named files that hold no recognized config instead of failing (for pre-commit).")
    p.add_argument("-q", "--quiet", action="store_true", help="Only the diff (or, with --apply, only what remains).")
    p.add_argument("--debug", action="store_true", help="Show tracebacks of internal errors.")
    return p


def _fix(parser: argparse.ArgumentParser, a: argparse.Namespace) -> int:
    from sits_doctor.fixer import fix_paths
    from sits_doctor.reporters.fix_text import render_fix
    from sits_doctor.reporters.text import diagnostics

    options = _options(a, gpu=a.gpu, gpu_memory=a.gpu_memory)
    try:
        result = fix_paths(list(a.paths), options, unsafe=a.unsafe_fixes, apply=a.do_apply)
        text = render_fix(result, applied=a.do_apply, unsafe=a.unsafe_fixes, quiet=a.quiet)
    except Exception as exc:  # the last line of defence: exit 3, never a bare traceback
        return _internal_error(exc, a.debug)
    if text:
        _out(text)
    report = result.report
    diag = diagnostics(report, quiet=a.quiet)
    extra = "\n".join(str(e) for e in result.errors)
    if diag or extra:
        _err("\n".join(x for x in (extra, diag) if x))
    code = report.exit_code
    if code in (2, 3) or result.errors:
        return max(code, 2)
    changed = any(f.changed for f in result.files)
    if changed and (a.exit_non_zero_on_fix or not a.do_apply):
        return 1
    return code


# --------------------------------------------------------------------------- capacity


def _capacity_parser() -> argparse.ArgumentParser:
    p = _parser("capacity", "Will it fit, and how many requests at once: KV bytes per token, weights, the KV pool "
                            "and the startup check, from the configs alone.", "[OPTIONS] PATH...")
    _add_paths(p, stdin=True)
    p.add_argument("--gpu", type=_gpu, metavar="NAME[xN]", help="The GPU, e.g. H100, A100-40GB, RTX4090, H100-80GBx4.")
    p.add_argument("--gpu-memory", type=_memory_size, metavar="SIZE",
                   help="Total memory per GPU as the framework sees it (vLLM logs total_gpu_memory), e.g. 79.19GiB; "
                        "wins over the catalog.")
    p.add_argument("--format", dest="fmt", choices=("text", "json"), default="text", help="Output format (default: text).")
    p.add_argument("--target", dest="targets", action="append", default=[], metavar="NAME==VERSION",
                   help="Framework version to model, e.g. vllm==0.11.")
    _add_sources(p)
    p.add_argument("--debug", action="store_true", help="Show tracebacks of internal errors.")
    return p


def _capacity(parser: argparse.ArgumentParser, a: argparse.Namespace) -> int:
    import json

    from sits_doctor.capacity import for_plan
    from sits_doctor.engine import CheckOptions, check
    from sits_doctor.reporters.capacity_text import render

    try:
        paths, texts = _stdin(a)
    except ValueError as exc:
        _err(str(exc))
        return 2
    try:
        report = check(paths, CheckOptions(
            ignore=["SITS"], targets=list(a.targets), model_config=a.model_config, gpu=a.gpu, gpu_memory=a.gpu_memory,
            config=a.config_file, isolated=a.isolated, debug=a.debug, texts=texts))
        rows = [for_plan(plan) for plan in report.deployments if plan.framework != "hf"]
    except Exception as exc:  # the last line of defence: exit 3, never a bare traceback
        return _internal_error(exc, a.debug)
    if rows or not report.errors:
        from sits_doctor.reporters import printable

        _out(json.dumps(printable({"deployments": rows}), indent=2) if a.fmt == "json" else render(rows))
    for e in report.errors:
        _err(str(e))
    if report.errors:
        return 2
    return 1 if any(r["startup"]["ok"] is False for r in rows) else 0


# --------------------------------------------------------------------------- rules / explain


def _rules_parser() -> argparse.ArgumentParser:
    p = _parser("rules", "List the rules.", "[--format text|json]")
    p.add_argument("--format", dest="fmt", choices=("text", "json"), default="text", help="Output format (default: text).")
    return p


def _rules(parser: argparse.ArgumentParser, a: argparse.Namespace) -> int:
    import json

    from sits_doctor.rules import RULES

    if a.fmt == "json":
        _out(json.dumps([
            {"code": m.RULE.code, "name": m.RULE.name, "severity": m.RULE.severity.value,
             "frameworks": list(m.RULE.frameworks), "summary": m.RULE.summary}
            for m in RULES
        ], indent=2))
        return 0
    rules = [m.RULE for m in RULES]
    name_w = max(len(r.name) for r in rules)
    fw_w = max(len(",".join(r.frameworks)) for r in rules)
    for r in rules:
        _out(f"{r.code}  {r.name:<{name_w}}  {r.severity.value:<8} {','.join(r.frameworks):<{fw_w}}  {r.summary}")
    return 0


def _explain_parser() -> argparse.ArgumentParser:
    p = _parser("explain", "Show a rule's documentation.", "CODE")
    p.add_argument("code", metavar="CODE", help="A rule code, e.g. SITS202.")
    return p


def _explain(parser: argparse.ArgumentParser, a: argparse.Namespace) -> int:
    from sits_doctor.rules import BY_CODE

    module = BY_CODE.get(a.code.upper())
    if module is None:
        _err(f"{PROG}: error: unknown rule {a.code!r} (see `{PROG} rules`)")
        return 2
    _out((module.__doc__ or "").strip())
    return 0


# --------------------------------------------------------------------------- inspect


def _inspect_parser() -> argparse.ArgumentParser:
    p = _parser("inspect", "What this machine runs: Python, the inference packages and their versions, torch's "
                "CUDA/cuDNN/ROCm build, the GPUs (and their catalog entries), and the attention backend torch's "
                "SDPA picks for each dtype, head size and mask.", "[--format text|json]")
    p.add_argument("--format", dest="fmt", choices=("text", "json"), default="text", help="Output format (default: text).")
    p.add_argument("--debug", action="store_true", help="Show the traceback of an internal error.")
    return p


def _inspect(parser: argparse.ArgumentParser, a: argparse.Namespace) -> int:
    import json

    from sits_doctor import environment

    try:
        data = environment.report()
    except Exception as exc:  # the last line of defence: exit 3, never a bare traceback
        return _internal_error(exc, a.debug)
    _out(json.dumps(data, indent=2) if a.fmt == "json" else environment.render(data))
    return 0


COMMANDS = {
    "check": (_check_parser, _check, "Check config files and folders."),
    "fix": (_fix_parser, _fix, "Fix what can be fixed: print the diff, or write it with --apply."),
    "capacity": (_capacity_parser, _capacity, "Will it fit: KV per token, weights, KV pool, concurrency, startup."),
    "inspect": (_inspect_parser, _inspect, "What this machine runs: packages, GPUs, the SDPA backend torch picks."),
    "rules": (_rules_parser, _rules, "List the rules."),
    "explain": (_explain_parser, _explain, "Show a rule's documentation."),
}


# --------------------------------------------------------------------------- helpers


class Unwritable(Exception):
    """Standard output cannot take what is written to it (full, closed, an I/O error)."""


def _out(text: str, end: str = "\n") -> None:
    """Print ``text`` (and a newline) on standard output; :class:`Unwritable` when it cannot be."""
    try:
        _write(sys.stdout, text + end)
    except BrokenPipeError:
        raise
    except (OSError, ValueError, AttributeError) as exc:
        raise Unwritable(_why(exc)) from None


def _err(text: str, end: str = "\n") -> None:
    """Print ``text`` on standard error, or nothing when it cannot be written (there is nowhere
    left to say so; the exit code still says what happened)."""
    try:
        _write(sys.stderr, text + end)
    except (OSError, ValueError, AttributeError):
        _detach(sys.stderr)


def _write(stream, text: str) -> None:
    """The one way out of sits-doctor (stdout, stderr, ``-o`` reports): secrets redacted
    (sits_doctor.redact), a file name's undecodable bytes as ``\\xNN``, characters the stream's
    encoding lacks as escapes rather than an error, and every byte written or an OSError."""
    from sits_doctor.reporters import printable

    if stream is None:  # started with the descriptor closed (`>&-`)
        raise ValueError("it is closed")
    text = printable(redact(text))
    binary = getattr(stream, "buffer", None)
    if binary is None:  # a text-only stream (io.StringIO in tests, a wrapper someone installed)
        stream.write(text)
        stream.flush()
        return
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        data = text.encode(encoding, getattr(stream, "errors", None) or "strict")
    except UnicodeEncodeError:  # an encoding without "×" or "…" (PYTHONIOENCODING=ascii)
        data = text.encode(encoding, "backslashreplace")
    if os.linesep != "\n":
        data = data.replace(b"\n", os.linesep.encode())
    stream.flush()  # whatever the text layer still holds goes first
    _write_all(binary, data)
    binary.flush()


def _write_all(binary, data: bytes) -> None:
    """Write every byte of ``data``: the unbuffered stdout of PYTHONUNBUFFERED=1 (a raw file)
    returns short counts that TextIOWrapper drops without a word (a pipe whose reader left, a
    signal), and a descriptor left non-blocking by the parent (CI runners do) says "later"."""
    view = memoryview(data)
    while view:
        try:
            n = binary.write(view)
        except BlockingIOError as exc:
            n = exc.characters_written or None
        if n is None:  # would block: wait until the descriptor takes more (as a blocking write would)
            import select

            select.select([], [binary.fileno()], [])
            continue
        if n == 0:
            raise OSError(errno.EIO, "nothing could be written")
        view = view[n:]


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return "it is closed"


def _detach(stream) -> None:
    """Point ``stream``'s descriptor at /dev/null, so that what its buffer still holds can be
    flushed at exit without another error (and the exit code stays ours)."""
    try:
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (AttributeError, OSError, ValueError):
        pass


def _internal_error(exc: Exception, debug: bool) -> int:
    import traceback

    detail = traceback.format_exc() if debug else f"{type(exc).__name__}: {exc}"
    _err(f"{PROG}: internal error: {detail}\n(run with --debug for the traceback, and please report it)")
    return 3


def _color_wanted() -> bool:
    if "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    return sys.stdout is not None and sys.stdout.isatty()


if __name__ == "__main__":  # pragma: no cover
    main()
