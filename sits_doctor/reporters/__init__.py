"""One reporter per output format; each turns a Report into text."""

FORMATS = ("text", "json", "sarif", "github", "junit")


def render(report, fmt: str, *, color: bool = False, quiet: bool = False, statistics: bool = False) -> str:
    if fmt == "text":
        from sits_doctor.reporters.text import render as r

        return r(report, color=color, quiet=quiet, statistics=statistics)
    if fmt == "json":
        from sits_doctor.reporters.json_report import render as r
    elif fmt == "sarif":
        from sits_doctor.reporters.sarif import render as r
    elif fmt == "github":
        from sits_doctor.reporters.github import render as r
    elif fmt == "junit":
        from sits_doctor.reporters.junit import render as r
    else:  # pragma: no cover - click restricts the choice
        raise ValueError(fmt)
    return r(report)
