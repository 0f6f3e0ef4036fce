"""unused-suppression (SITS900)

## What it does
Reports the suppressions that do nothing or cannot work: a `# sits-doctor: ignore[CODE] reason`
comment, or an `[[ignore]]` entry of `.sits-doctor-ignore.toml`, that suppressed no finding
(some of its codes, or all of them); a suppression without a reason (it does not suppress); a
malformed one (a typo in `sits-doctor:` or `ignore[...]`, something that is not a rule code or
prefix); and a toml entry whose `expires` date has come (it stops suppressing that day).

## Why it hurts
A suppression outlives the problem it hid: the option was removed, the image was upgraded, the
line moved. Left in place it reads as a known issue that no longer exists, and it silently hides
the next finding of that code on that line. One without a reason leaves the next reader unable
to tell whether it is still needed; an expired one was meant to be looked at again.

## Example
```yaml file=serve.yaml
model: ./m
served-model-name: m  # sits-doctor: ignore[SITS204] legacy
```
Use instead:
```yaml file=serve.yaml
model: ./m
served-model-name: m
```

## Fix
Delete the comment or the toml entry, or only its unused codes; give every suppression a reason
after the codes (`# sits-doctor: ignore[SITS204] pinned to vLLM 0.8 until the upgrade`); fix or
re-date an expired entry. No automatic fix yet.

## How it is measured
Not measured: decided after every other rule has run on the file (a suppression is unused only
once all findings are known), by `sits_doctor.suppressions.apply`; `check()` itself reports
nothing. Comments are found with PyYAML's tokenizer, so a `#` inside a quoted or block string is
never taken for one. A comment covers its own line, or, alone on a line, the next non-comment
line (and the whole multi-line string that starts there). A code that did not run (not
selected) counts as unused, as in ruff.

## Sources
- ruff's unused-noqa (RUF100): https://docs.astral.sh/ruff/rules/unused-noqa/ @ ruff 0.16 ("a
  noqa directive that no longer matches any diagnostic violations ... should be removed";
  codes of rules that are not enabled are reported too), and its `# ruff: ignore[CODE]`
  own-line and end-of-line suppression comments
  (https://docs.astral.sh/ruff/linter/#error-suppression @ ruff 0.16).
- The comment grammar this rule relies on: PyYAML's scanner (`yaml/scanner.py@6.0`,
  `scan_to_next_token`, `scan_plain`, `scan_block_scalar`).
"""

from __future__ import annotations

from typing import Iterator

from sits_doctor.finding import Finding, Severity
from sits_doctor.plan import Plan
from sits_doctor.rule import Rule

RULE = Rule(
    code="SITS900",
    name="unused-suppression",
    summary="a suppression comment or .sits-doctor-ignore.toml entry that suppresses nothing, gives no reason, or has expired",
    severity=Severity.WARNING,
    frameworks=("hf", "vllm", "trtllm", "ortgenai"),
)


def check(plan: Plan, ctx) -> Iterator[Finding]:
    """Nothing per plan: the engine turns ``suppressions.apply(...).problems`` into SITS900
    findings once every rule has run."""
    yield from ()
