"""ruff-style text: ``path:line:col: CODE [severity] message``, evidence, then the fix hint."""

from __future__ import annotations

from collections import Counter
from itertools import accumulate

from sits_doctor import redact
from sits_doctor.engine import Report
from sits_doctor.facts import TABLES_HOW

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


GROUP_AFTER = 3  # identical info findings beyond this many are folded into one line
EVIDENCE_SHOWN = 3  # evidence lines under a finding by default (all of them with --verbose)
SNIPPET_WIDTH = 100  # a quoted source line longer than this is cut to a window around the column
TARGET = "target: "


def render(report: Report, *, color: bool = False, quiet: bool = False, statistics: bool = False,
           verbose: bool = False) -> str:
    """``quiet``: only the findings that fail the run, one line each. ``statistics``: the count of
    each rule's findings and the summary, no findings. ``verbose``: every evidence line.

    By default each finding is its ``path:line:col: CODE [severity] message`` line, the source line
    it points at with a caret (and the deployment, when the file holds more than one), at most
    EVIDENCE_SHOWN evidence lines (the version judged against once per deployment), and the fix."""
    lines: list[str] = []
    if statistics:
        counts = Counter((f.code, f.name) for f in report.findings)
        lines += [f"{n:>5}  {code}  {name}" for (code, name), n in sorted(counts.items())]
        lines.append(summary(report))
        return _finish(lines, color)
    repeated = {r for r, n in Counter(f.render() for f in report.findings).items() if n > 1}
    shown = report.failing if quiet else report.findings
    same = Counter((f.code, f.message) for f in shown if f.severity.value == "info")
    seen: Counter = Counter()
    plans_in: dict[str, set[str]] = {}
    for f in report.findings:
        plans_in.setdefault(f.location.file, set()).add(f.plan)
    for p in report.plans:
        plans_in.setdefault(p.file, set()).add(p.label)
    targeted: set[str] = set()  # deployments whose target line was shown
    lines_of: dict[str, tuple] = {}
    for f in shown:
        key = (f.code, f.message)
        if key in same and same[key] > GROUP_AFTER:
            seen[key] += 1
            if seen[key] > GROUP_AFTER:
                if seen[key] == same[key]:
                    lines.append(f"  = and {same[key] - GROUP_AFTER} more like it (same message, other deployments)")
                continue
        lines.append(f.render())
        if quiet:
            continue
        several = len(plans_in.get(f.location.file, ())) > 1 or f.render() in repeated
        lines += _snippet(report, f, lines_of, f.plan if several else None)
        evidence = [e for e in f.evidence if not e.startswith(TARGET)]
        target = next((e for e in f.evidence if e.startswith(TARGET)), None)
        show_target = target is not None and (verbose or f.plan not in targeted)
        if show_target:
            targeted.add(f.plan)
        hidden = 0
        if not verbose:  # the first lines (the rules put the one-line summary first), the target once per deployment
            room = EVIDENCE_SHOWN - show_target
            hidden = max(0, len(evidence) - room)
            evidence = evidence[:room]
        lines += [f"  = {e}" for e in evidence + ([target] if show_target else [])]
        if hidden:
            lines.append(f"  = … {hidden} more (-v shows them)")
        if f.fix_hint:
            lines.append(f"  help: {f.fix_hint}")
    if report.runtime and not quiet:
        lines += runtime_lines(report.runtime)
    if not quiet:
        lines.append(summary(report))
    return _finish(lines, color)


def _finish(lines: list[str], color: bool) -> str:
    from sits_doctor.reporters import printable

    text = printable("\n".join(lines))
    return _colorize(text) if color else text


def _snippet(report: Report, f, cache: dict[str, tuple], plan: str | None) -> list[str]:
    """The source line a finding points at, and a caret under its column (with the deployment's
    name after the caret when the file holds several); nothing when the text is not at hand.
    Secrets in the line are redacted (found in the whole document: a value's name can be on the
    line above), and the caret moved to stay under the same characters."""
    loc = f.location
    text = report.sources.get(loc.file)
    if text is None or loc.line < 1:
        return [f"  = in {plan}"] if plan else []
    if loc.file not in cache:
        lines = text.split("\n")
        cache[loc.file] = (lines, [0, *accumulate(len(line) + 1 for line in lines)], redact.spans(text))
    lines, starts, secrets = cache[loc.file]
    if loc.line > len(lines):
        return [f"  = in {plan}"] if plan else []
    start = starts[loc.line - 1]
    source, col = redact.redact_line(lines[loc.line - 1], [(s - start, e - start) for s, e in secrets
                                                           if start <= e and s <= start + len(lines[loc.line - 1])], loc.col)
    source = source.rstrip("\r").expandtabs(1)
    col = max(1, min(col, len(source) + 1))
    if len(source) > SNIPPET_WIDTH:  # a long line (minified JSON, a one-line sh -c): a window around the column
        start = max(0, col - 1 - SNIPPET_WIDTH // 3)
        end = start + SNIPPET_WIDTH
        window = ("…" if start else "") + source[start:end] + ("…" if end < len(source) else "")
        col = col - start + (1 if start else 0)
        source = window
    gutter = str(loc.line)
    label = f" in {plan}" if plan else ""
    word = source[col - 1:].split(" ", 1)[0].rstrip(",:")  # the key, flag or value it points at
    return [f"  {gutter} | {source}", f"  {' ' * len(gutter)} | {' ' * (col - 1)}{'^' * max(1, len(word))}{label}"]


_ROPE = {"model": "once per forward, passed to every layer", "attention": "again inside every attention layer",
         "none": "no rotary module"}


_UNTABLED = "not in the version tables for this target (install that transformers version here to build the model)"


def runtime_lines(rows: list[dict]) -> list[str]:
    """``check --runtime``: what transformers runs for each model config."""
    lines = []
    for r in rows:
        lines.append(f"{r['file']}: runtime: {r['model_class'] or 'model'} ({r['how']})")
        if r["custom_code"]:
            continue
        untabled = r["how"].startswith(TABLES_HOW)  # from the tables, not a built model
        if r["attention"] is not None:
            sdpa = "" if r["supports_sdpa"] is None else f"; the class {'has an' if r['supports_sdpa'] else 'has no'} SDPA path"
            lines.append(f"  attention: {r['attention']}{sdpa}")
        elif untabled:
            lines.append(f"  attention: {_UNTABLED}")
        if r["rope"] is not None:
            where = f" ({', '.join(r['rotary_modules'])})" if r["rotary_modules"] else ""
            lines.append(f"  rotary embeddings: {_ROPE.get(r['rope'], r['rope'])}{where}")
        elif untabled:
            lines.append(f"  rotary embeddings: {_UNTABLED}")
        if r["cache"] is not None:
            lines.append(f"  generate() cache: {r['cache']}")
        if r["quantizer"] is not None:
            lines.append(f"  quantization: {r['quantizer']}")
        if r.get("native_over_remote"):
            from sits_doctor.frameworks.transformers import REMOTE_CODE_NOTE  # only with --runtime

            lines.append(f"  repository code: {REMOTE_CODE_NOTE}")
    return lines


def diagnostics(report: Report, quiet: bool = False, show_skipped: bool = False) -> str:
    """Input errors, internal errors and notices (and, asked for, the skipped files): for stderr."""
    from sits_doctor.reporters import printable

    lines = [printable(str(e)) for e in report.errors]
    if show_skipped:
        lines += [f"{path}: skipped: {why}" for path, why in report.skipped_files]
    lines += [f"internal error: {e}\n  please report this at the sits-doctor issue tracker" for e in report.internal_errors]
    if not quiet:
        lines += [str(n) for n in report.notices]
    return "\n".join(lines)


def summary(report: Report) -> str:
    by = Counter(f.severity.value for f in report.findings)
    parts = [f"{by[s]} {s}" for s in ("error", "warning", "info") if by[s]]
    found = f"Found {len(report.findings)} finding(s)" + (f" ({', '.join(parts)})" if parts else "")
    files = f"in {len(report.files_checked)} file(s)"
    skipped = (f"; {report.skipped} file(s) skipped as not a recognized config (--show-skipped lists them)"
               if report.skipped else "")
    unusable = len({e.path for e in report.errors})
    errors = (f"; {unusable} file(s) or argument(s) could not be used"
              + (f" ({len(report.errors)} errors)" if len(report.errors) > unusable else "")) if report.errors else ""
    hidden = ""
    if report.suppressed or report.baselined:
        parts = [f"{report.suppressed} suppressed"] if report.suppressed else []
        parts += [f"{report.baselined} in the baseline"] if report.baselined else []
        hidden = f"; not shown: {', '.join(parts)}"
    return f"{found} {files}{skipped}{errors}{hidden}." + "".join(f"\ntarget: {t}" for t in target_lines(report))


def target_lines(report: Report) -> list[str]:
    """One line per framework version judged against, with where it came from."""
    sources: dict[str, list[str]] = {}
    for plan in report.plans:
        version, _, source = plan.target.partition(" (")
        sources.setdefault(version, []).append(source.removesuffix(")"))
    lines = []
    for version, found in sorted(sources.items(), key=lambda item: _version_key(item[0])):
        unique = sorted(set(found))
        if len(unique) == 1:
            lines.append(f"{version} ({unique[0]})")
        else:
            kinds = Counter(_source_kind(s) for s in found)
            parts = [f"{k} ×{n}" for k, n in sorted(kinds.items())]
            lines.append(f"{version} ({', '.join(parts)}; each finding says which)")
    return lines


def _source_kind(source: str) -> str:
    """What kind of source chose a version, for the summary of several plans."""
    if source.startswith("image "):
        return "image tag"
    if source.startswith("newest version the rules know"):
        return "assumed newest: nothing pins it (pin it with --target)"
    return source


def _version_key(label: str) -> tuple:
    """("vLLM", Version("0.9.2")) from "vLLM 0.9.2", so 0.9.2 sorts before 0.33.0."""
    from packaging.version import InvalidVersion, Version

    name, _, version = label.rpartition(" ")
    try:
        return (name, Version(version))
    except InvalidVersion:
        return (name, Version("0"))


def _colorize(text: str) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.text import Text

    buf = StringIO()
    console = Console(file=buf, force_terminal=True, color_system="standard", width=10_000, highlight=False)
    for line in text.split("\n"):
        t = Text(line)
        for sev, style in _STYLE.items():
            tag = f"[{sev}]"
            i = line.find(tag)
            if i >= 0 and not line.startswith(" "):
                t.stylize(style, i, i + len(tag))
                head = line.find(": SITS")
                if head >= 0:
                    t.stylize("bold", 0, head)
        if line.startswith("  help:"):
            t.stylize("green", 2, 7)
        console.print(t)
    return buf.getvalue().rstrip("\n")
