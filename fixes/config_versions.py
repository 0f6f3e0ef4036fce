"""Fixes that write vLLM flags, checked against the releases that will read them.

A fix that writes a flag (``--no-enable-chunked-prefill`` for ``--enable-chunked-prefill=false``,
a renamed option) is only as good as the parser that reads the new text. Each release's own
parser data (:func:`sits_doctor.frameworks.vllm.lookup_flag`) says whether it accepts the flag:

- at the release judged (the target) the flag must parse, or the fix is display-only;
- a fix is safe only when every release the file could run accepts it: with a pin (``--target``,
  an image tag, a ``pip install vllm==X``) that is the pinned release; without one, any release
  could run, so the fix is unsafe, and its title says which releases accept the flag.

Among spellings of the same option, :func:`portable` picks the one the most releases accept
(``--no-enable-chunked-prefill`` parses on 0.8.5 … 0.33.0, ``--disable-chunked-prefill`` only on
0.33.0).
"""

from __future__ import annotations

from typing import Sequence

from sits_doctor.finding import Fix, Safety


def _releases_accepting(flag: str) -> int:
    from sits_doctor.frameworks import vllm as fw

    releases = fw.parser_table()[0]
    return sum(releases.index(b) - releases.index(a) + 1 for a, b in fw.flag_history(flag))


def portable(flags: Sequence[str], release: str) -> str | None:
    """Of ``flags`` (spellings of one option), one that ``release`` accepts and that the most
    releases accept; ties go to the earlier in ``flags``."""
    from sits_doctor.frameworks import vllm as fw

    ok = [f for f in flags if (info := fw.lookup_flag(f, release)) is not None and not info.abbreviation]
    return max(ok, key=_releases_accepting, default=None)


def accepted_by(flag: str) -> str:
    """The releases whose parser accepts ``flag``, as ``0.8.5 … 0.33.0`` runs."""
    from sits_doctor.frameworks import vllm as fw

    runs = fw.flag_history(flag)
    return ", ".join(a if a == b else f"{a} … {b}" for a, b in runs) or "no release"


def checked(fix: Fix | None, flags: Sequence[str], target) -> Fix | None:
    """``fix`` (which writes ``flags``) as the releases in play allow it: display-only when the
    judged release rejects a flag, unsafe when the file pins no release (any could run it)."""
    from sits_doctor.frameworks import vllm as fw

    if fix is None or not fix.edits or target is None or target.framework != "vllm" or not flags:
        return fix
    found = fw.parser_release(target.version)
    if found is None:
        return fix._replace(edits=(), safety=Safety.DISPLAY,
                            why_not=f"no parser data for vLLM {target.version}: whether it reads "
                                    f"{', '.join(flags)} is not checked")
    release = found[0]
    rejected = [f for f in flags if (info := fw.lookup_flag(f, release)) is None or info.abbreviation]
    if rejected:
        return fix._replace(edits=(), safety=Safety.DISPLAY,
                            why_not=f"vLLM {release} does not accept {', '.join(rejected)}")
    if target.assumed:
        accepted = "; ".join(f"{f} parses on vLLM {accepted_by(f)}" for f in flags)
        return fix._replace(safety=Safety.UNSAFE if fix.safety is Safety.SAFE else fix.safety,
                            title=f"{fix.title} (no version pin, so any release may run it: {accepted})")
    return fix
