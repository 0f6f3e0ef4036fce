"""Rule metadata, and the one way rules make findings."""

import re
from functools import lru_cache
from types import ModuleType
from typing import Iterable, NamedTuple

from sits_doctor.finding import Finding, Fix, Location, Severity
from sits_doctor.plan import Plan, Provenance, Setting

DOC_SECTIONS = ("What it does", "Why it hurts", "Example", "Fix", "How it is measured", "Sources")


class Rule(NamedTuple):
    code: str  # SITS202
    name: str  # kebab-case: max-model-len-exceeds-model
    summary: str  # one line, shown by `sits-doctor rules`
    severity: Severity  # default severity of its findings
    frameworks: tuple[str, ...]
    needs: tuple[str, ...] = ()  # facts it cannot judge without: "model", "gpu", "sizing" (no sizing option unresolved)

    def finding(
        self,
        plan: Plan,
        at: Setting | Provenance | None,
        message: str,
        *,
        evidence: Iterable[str] = (),
        fix_hint: str | None = None,
        severity: Severity | None = None,
        fixes: Iterable[Fix | None] = (),
        quote: tuple[str, str] | None = None,
        why: str | None = None,
    ) -> Finding:
        """A finding at a setting (its file position), or at the plan's anchor when the value
        is a default, a derivation, or missing. ``quote``: (who, text) the framework prints for it
        (its error or warning, word for word): the first evidence line, so the message stays one
        screen line. ``why``: how the framework comes to do what the message says (its mechanism,
        the rest of the sentence): the evidence line after the quote, for the same reason."""
        if why is not None:
            evidence = [f"why: {why}", *evidence]
        if quote is not None:
            evidence = [f"{quote[0]} prints: {quote[1]}", *evidence]
        prov = at.prov if isinstance(at, Setting) else at
        if prov is None or prov.kind != "file" or prov.file is None:
            prov = plan.anchor
        return Finding(
            code=self.code,
            name=self.name,
            severity=severity or self.severity,
            message=message,
            location=Location(file=prov.file or plan.file, line=prov.line, col=prov.col, pointer=prov.pointer, doc_index=prov.doc_index),
            plan=plan.label,
            evidence=tuple(evidence),
            fix_hint=fix_hint,
            fixes=tuple(f for f in fixes if f is not None),
            subject=command_subject(at) if isinstance(at, Setting) else None,
            explained=(quote is not None) + (why is not None),
        )


def command_subject(setting: Setting) -> tuple[str, str] | None:
    """(the command's pointer, the option's words) of a setting written as command-line words
    (sits_doctor.finding.Finding.subject); None for a mapping key or a default."""
    site = setting.site
    if site is None or site.kind not in ("argv", "shell") or not site.words:
        return None
    words = " ".join(w.text for w in site.words)
    pointer = site.words[0].pointer or site.pointer
    if site.kind == "argv":  # one list item per word: the list, not the item's index, stays put
        pointer = pointer.rsplit("/", 1)[0]
    elif site.doc is not None and site.doc.fmt in ("shell", "dockerfile"):
        pointer = ""  # a script's pointers are word indexes
    return pointer, words


def closest(word: str, known, cutoff: float = 0.75) -> str | None:
    """The known name most like ``word`` (a typo's likely intent), or None."""
    return _closest(word, tuple(sorted(known)), cutoff)


@lru_cache(maxsize=1024)
def _closest(word: str, known: tuple[str, ...], cutoff: float) -> str | None:
    # Cached: a directory of configs repeats the same typo against the same names many times.
    import difflib

    close = difflib.get_close_matches(word, known, n=1, cutoff=cutoff)
    return close[0] if close else None


def doc_sections(module: ModuleType) -> dict[str, str]:
    """The ``## Heading`` sections of a rule module's docstring."""
    text = module.__doc__ or ""
    parts = re.split(r"^## +(.+?)\s*$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}
