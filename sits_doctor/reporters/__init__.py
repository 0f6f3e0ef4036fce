"""One reporter per output format; each turns a Report into text."""

import re

FORMATS = ("text", "json", "sarif", "github", "junit")
_SURROGATE = re.compile("[\udc80-\udcff]")  # how Python keeps an undecodable byte of a file name


def printable(obj):
    """``obj`` (a string, or lists/dicts of them) with the undecodable bytes of file names (which
    Python keeps as lone surrogates) written as ``\\xNN``, so that every format stays valid UTF-8."""
    if isinstance(obj, str):
        return obj.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") if _has_surrogate(obj) else obj
    if isinstance(obj, dict):
        return {printable(k): printable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [printable(v) for v in obj]
    return obj


def _has_surrogate(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def render(report, fmt: str, *, color: bool = False, quiet: bool = False, statistics: bool = False,
           verbose: bool = False) -> str:
    if fmt == "text":
        from sits_doctor.reporters.text import render as r

        return r(report, color=color, quiet=quiet, statistics=statistics, verbose=verbose)
    if fmt == "json":
        from sits_doctor.reporters.json_report import render as r
    elif fmt == "sarif":
        from sits_doctor.reporters.sarif import render as r
    elif fmt == "github":
        from sits_doctor.reporters.github import render as r
    elif fmt == "junit":
        from sits_doctor.reporters.junit import render as r
    else:  # pragma: no cover - the CLI restricts the choice
        raise ValueError(fmt)
    return r(report)
