"""What ``sits-doctor fix`` prints: the unified diff of each file (without ``--apply``) or what
was written, then what was fixed, what is only shown, and what remains."""

from __future__ import annotations

from sits_doctor.finding import Safety


def render_fix(result, *, applied: bool, unsafe: bool, quiet: bool = False) -> str:
    out: list[str] = []
    for r in result.files:
        if r.problem:
            continue
        if not applied and r.changed:
            out.append(r.diff().rstrip("\n"))
    if quiet:
        if applied:
            out += [f.render() for f in result.report.failing]
        return "\n".join(out)
    n_fixed = sum(len(r.fixed) for r in result.files if r.changed)
    files = [r for r in result.files if r.changed]
    for r in result.files:
        for finding, fix in r.fixed if r.changed else ():
            loc = finding.location
            verb = "fixed" if applied else "would fix"
            out.append(f"{verb}: {loc.file}:{loc.line}:{loc.col}: {finding.code} {fix.title}"
                       + (" (unsafe)" if fix.safety is Safety.UNSAFE else ""))
        if r.problem:
            out.append(f"not fixed: {r.path}: {r.problem}")
    hidden_unsafe = 0
    for finding, fix in result.shown_only:
        loc = finding.location
        if fix.safety is Safety.UNSAFE and not unsafe:
            hidden_unsafe += 1
            out.append(f"unsafe fix available: {loc.file}:{loc.line}:{loc.col}: {finding.code} {fix.title} "
                       "(use --unsafe-fixes)")
        elif fix.safety is Safety.DISPLAY:
            out.append(f"no automatic fix: {loc.file}:{loc.line}:{loc.col}: {finding.code} {fix.title}"
                       + (f" ({fix.why_not})" if fix.why_not else ""))
    remaining = result.report.findings
    unusable = len(result.report.errors)
    if unusable:
        out.append(f"{unusable} file(s) or argument(s) could not be used (see the errors): nothing was fixed there.")
    if applied:
        out += [f"remains: {f.render()}" for f in remaining]
        if n_fixed:
            out.append(f"Fixed {n_fixed} finding(s) in {len(files)} file(s); {len(remaining)} remain.")
        else:
            out.append(f"Nothing to fix; {len(remaining)} finding(s) remain.")
    else:
        if n_fixed:
            out.append(f"Would fix {n_fixed} finding(s) in {len(files)} file(s) (run with --apply to write); "
                       f"{len(remaining)} would remain.")
        else:
            out.append(f"Nothing to fix; {len(remaining)} finding(s) remain.")
    return "\n".join(out)
