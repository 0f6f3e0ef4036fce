"""The ``sits-doctor`` command: wiring only (options → engine → reporter → exit code)."""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback

import click

from sits_doctor import __version__
from sits_doctor.reporters import FORMATS


def _split(values: tuple[str, ...]) -> list[str]:
    """``--select A,B --select C`` → [A, B, C]."""
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def selection_options(f):
    @click.option("--select", multiple=True, metavar="CODES", help="Only these rules (codes or prefixes, comma-separated).")
    @click.option("--extend-select", multiple=True, metavar="CODES", help="Add rules to the selection.")
    @click.option("--ignore", multiple=True, metavar="CODES", help="Skip these rules (codes or prefixes).")
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        return f(*args, **kwargs)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="sits-doctor")
def main() -> None:
    """Lint LLM inference deployment configs: Hugging Face, vLLM, TensorRT-LLM, ORT GenAI, and
    the Kubernetes / Helm / compose files around them."""


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="Write the report here.")
@selection_options
@click.option("--fail-on", type=click.Choice(["info", "warning", "error"]), help="Lowest severity that fails (default: warning).")
@click.option("--target", "targets", multiple=True, metavar="NAME==VERSION", help="Framework version to judge against, e.g. vllm==0.11.")
@click.option("--gpu", metavar="NAME[xN]", help="The GPU the deployment runs on, e.g. H100-80GBx2 (for rules that size memory; none yet).")
@click.option("--model-config", type=click.Path(exists=True), help="config.json (or its folder) of the served model.")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False), help="Settings file to use instead of discovery.")
@click.option("--isolated", is_flag=True, help="Ignore settings files.")
@click.option("--statistics", is_flag=True, help="Count findings per rule.")
@click.option("--baseline", type=click.Path(dir_okay=False), help="Leave out the findings recorded in this baseline file (see docs/ci.md).")
@click.option("--write-baseline", type=click.Path(dir_okay=False), help="Record the current findings in this baseline file.")
@click.option("--skip-unrecognized", is_flag=True, help="Skip named files that hold no recognized config instead of failing (for pre-commit).")
@click.option("--show-skipped", is_flag=True, help="List the files skipped as not a recognized config, and why.")
@click.option("-q", "--quiet", is_flag=True, help="Only the findings.")
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
def check(paths, fmt, output, select, extend_select, ignore, fail_on, targets, gpu, model_config,
          config_file, isolated, statistics, baseline, write_baseline, skip_unrecognized, show_skipped, quiet,
          debug) -> None:
    """Check config files and folders. Exit 0 clean, 1 findings, 2 unusable input, 3 internal error."""
    from sits_doctor.engine import check as run_check
    from sits_doctor.reporters import render
    from sits_doctor.reporters.text import diagnostics

    if gpu is not None and not _valid_gpu(gpu):
        raise click.BadParameter(f"{gpu!r}: expected NAME or NAMExN, e.g. H100-80GB or H100-80GBx2", param_hint="--gpu")
    options = _check_options(select, extend_select, ignore, fail_on, targets, model_config, config_file, isolated, debug,
                             gpu, baseline=baseline, write_baseline=write_baseline, skip_unrecognized=skip_unrecognized)
    try:
        report = run_check(list(paths), options)
        color = fmt == "text" and output is None and _color_wanted()
        text = render(report, fmt, color=color, quiet=quiet, statistics=statistics)
    except Exception as exc:  # the last line of defence: exit 3, never a bare traceback
        detail = traceback.format_exc() if debug else f"{type(exc).__name__}: {exc}"
        click.echo(f"sits-doctor: internal error: {detail}\n(run with --debug for the traceback, and please report it)", err=True)
        sys.exit(3)
    if output and _is_input(output, list(paths) + report.files_checked):
        click.echo(f"{output}: error: refusing to write the report over a file being checked", err=True)
        sys.exit(2)
    if output:
        try:
            with open(output, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
        except OSError as exc:
            click.echo(f"{output}: error: cannot write the report: {exc.strerror or exc}", err=True)
            sys.exit(2)
    elif text:
        click.echo(text)
    diag = diagnostics(report, quiet=quiet or fmt != "text", show_skipped=show_skipped)
    if diag:
        click.echo(diag, err=True)
    sys.exit(report.exit_code())


def _check_options(select, extend_select, ignore, fail_on, targets, model_config, config_file, isolated, debug,
                   gpu=None, **more):
    from sits_doctor.engine import CheckOptions
    from sits_doctor.finding import Severity

    return CheckOptions(
        select=_split(select) or None,
        extend_select=_split(extend_select),
        ignore=_split(ignore),
        fail_on=Severity(fail_on) if fail_on else None,
        targets=list(targets),
        model_config=model_config,
        gpu=gpu,
        config=config_file,
        isolated=isolated,
        debug=debug,
        **more,
    )


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--apply", "do_apply", is_flag=True, help="Write the fixes (atomically). Without it, print the diff and change nothing.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that change behaviour (shown as unsafe).")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when anything was fixed, even if nothing remains.")
@selection_options
@click.option("--fail-on", type=click.Choice(["info", "warning", "error"]), help="Lowest severity of a remaining finding that fails (default: warning).")
@click.option("--target", "targets", multiple=True, metavar="NAME==VERSION", help="Framework version to judge against, e.g. vllm==0.11.")
@click.option("--model-config", type=click.Path(exists=True), help="config.json (or its folder) of the served model.")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False), help="Settings file to use instead of discovery.")
@click.option("--isolated", is_flag=True, help="Ignore settings files.")
@click.option("--skip-unrecognized", is_flag=True, help="Skip named files that hold no recognized config instead of failing (for pre-commit).")
@click.option("-q", "--quiet", is_flag=True, help="Only the diff (or, with --apply, only what remains).")
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
def fix(paths, do_apply, unsafe_fixes, exit_non_zero_on_fix, select, extend_select, ignore, fail_on, targets,
        model_config, config_file, isolated, skip_unrecognized, quiet, debug) -> None:
    """Fix what can be fixed: print the diff, or write it with --apply.

    Exit 0 when nothing fails after the fixes (and, without --apply, nothing would change),
    1 otherwise, 2 unusable input, 3 internal error."""
    from sits_doctor.fixer import fix_paths
    from sits_doctor.reporters.fix_text import render_fix
    from sits_doctor.reporters.text import diagnostics

    options = _check_options(select, extend_select, ignore, fail_on, targets, model_config, config_file, isolated, debug,
                             skip_unrecognized=skip_unrecognized)
    try:
        result = fix_paths(list(paths), options, unsafe=unsafe_fixes, apply=do_apply)
        text = render_fix(result, applied=do_apply, unsafe=unsafe_fixes, quiet=quiet)
    except Exception as exc:  # the last line of defence: exit 3, never a bare traceback
        detail = traceback.format_exc() if debug else f"{type(exc).__name__}: {exc}"
        click.echo(f"sits-doctor: internal error: {detail}\n(run with --debug for the traceback, and please report it)", err=True)
        sys.exit(3)
    if text:
        click.echo(text)
    report = result.report
    diag = diagnostics(report, quiet=quiet)
    extra = "\n".join(str(e) for e in result.errors)
    if diag or extra:
        click.echo("\n".join(x for x in (extra, diag) if x), err=True)
    code = report.exit_code()
    if code in (2, 3) or result.errors:
        sys.exit(max(code, 2))
    changed = any(f.changed for f in result.files)
    if changed and (exit_non_zero_on_fix or not do_apply):
        sys.exit(1)
    sys.exit(code)


@main.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules(fmt) -> None:
    """List the rules."""
    from sits_doctor.rules import RULES

    if fmt == "json":
        click.echo(json.dumps([
            {"code": m.RULE.code, "name": m.RULE.name, "severity": m.RULE.severity.value,
             "frameworks": list(m.RULE.frameworks), "summary": m.RULE.summary}
            for m in RULES
        ], indent=2))
        return
    for m in RULES:
        r = m.RULE
        click.echo(f"{r.code}  {r.name:<30} {r.severity.value:<8} {','.join(r.frameworks):<22} {r.summary}")


@main.command()
@click.argument("code")
def explain(code) -> None:
    """Show a rule's documentation."""
    from sits_doctor.rules import BY_CODE

    module = BY_CODE.get(code.upper())
    if module is None:
        click.echo(f"sits-doctor: error: unknown rule {code!r} (see `sits-doctor rules`)", err=True)
        sys.exit(2)
    click.echo((module.__doc__ or "").strip())


def _is_input(output: str, inputs: list[str]) -> bool:
    from pathlib import Path

    try:
        target = Path(output).resolve()
        return any(Path(p).resolve() == target for p in inputs)
    except (OSError, RuntimeError):
        return False


def _valid_gpu(text: str) -> bool:
    import re

    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*?(x\d+)?", text))


def _color_wanted() -> bool:
    if "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    return sys.stdout.isatty()


if __name__ == "__main__":  # pragma: no cover
    main()
