"""What each ONNX Runtime GenAI release's own ``genai_config.json`` parser accepts, as its wheel
showed it.

Two tables, both written by ``tools/probe_ortgenai.py`` from the CPU wheels on PyPI (one virtual
environment per release, every release from 0.3.0 on):

- ``data/ortgenai_keys.json`` (``--keys``): for every key of the newest schema
  (sits_doctor/schemas/ortgenai.py), whether each release's parser knows it (a release that does
  not answers ``JSON Error: ... Unknown value``);
- ``data/ortgenai_probes.json``: small configs with one thing changed, and what each release did
  with them (``og.Config(folder)``, or Model/Generator creation for ``stage: "model"`` probes).

A version that is not one of the probed releases is judged as the newest release before it (or
the oldest / newest release the tables hold), and :func:`judged_as` says so.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from packaging.version import Version

DATA = Path(__file__).resolve().parent / "data"
KEYS_FILE = DATA / "ortgenai_keys.json"
PROBES_FILE = DATA / "ortgenai_probes.json"
SESSION_PASS_THROUGH_PROBE = "session_option_unknown_string"  # an unknown string session option
FRACTION_PROBE = "context_length_float"  # an integer field given 4096.5
TOP_BOOLEAN_PROBE = "unknown_top_scalar_bool"  # an unknown top-level true
UNKNOWN_KEY_PROBE = "unknown_key_decoder"  # an unknown key in model.decoder
PIPELINE_V2_PROBE = "pipeline_v2"  # a "version": 2 pipeline config (microsoft/onnxruntime-genai#2114)


@lru_cache(maxsize=1)
def _keys() -> dict:
    return json.loads(KEYS_FILE.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _probes() -> dict:
    return json.loads(PROBES_FILE.read_text(encoding="utf-8"))


def releases() -> tuple[str, ...]:
    """The releases whose parser the tables hold, oldest first."""
    return tuple(_keys()["versions"])


class Judged(NamedTuple):
    release: str  # the probed release whose parser judges the config
    note: str | None  # why that release and not the version asked for (None: it is that release)


def judged_as(version: str) -> Judged:
    """The probed release that judges ``version``: itself, else the newest probed release before
    it; a version before the oldest or after the newest probed release is judged as that one."""
    known = releases()
    if version in known:
        return Judged(version, None)
    asked = Version(version)
    oldest, newest = known[0], known[-1]
    if asked < Version(oldest):
        return Judged(oldest, f"older than {oldest}, the oldest release whose config parser the rules know; "
                              f"the config is judged as {oldest} reads it")
    if asked > Version(newest):
        return Judged(newest, f"newer than {newest}, the newest release whose config parser the rules know; "
                              f"the config is judged as {newest} reads it")
    below = max((r for r in known if Version(r) < asked), key=Version)
    return Judged(below, f"not one of the releases whose config parser the rules know ({oldest} … {newest}); "
                         f"the config is judged as {below}, the release before it")


def _verdict(segments: list, release: str) -> bool:
    """Whether ``release`` accepted, from runs of releases ``[first, last, ok]`` (first/last inclusive)."""
    at = Version(release)
    for first, last, ok in segments:
        if Version(first) <= at <= Version(last):
            return ok
    raise KeyError(release)


def unknown_keys(release: str) -> frozenset[str]:
    """The newest schema's keys (dotted paths) that ``release``'s parser does not know."""
    return frozenset(key for key, segments in _keys()["keys"].items() if not _verdict(segments, release))


def first_knowing(key: str) -> str | None:
    """The oldest release whose parser knows ``key`` (a dotted path), if any does."""
    for first, _last, ok in _keys()["keys"].get(key, ()):
        if ok:
            return first
    return None


def probe_accepted_by(name: str) -> tuple[str, ...]:
    """The releases that accepted probe ``name`` of ortgenai_probes.json, oldest first."""
    versions = _probes()["versions"]
    out: list[str] = []
    for seg in _probes()["probes"][name]["results"]:
        if seg["ok"]:
            out.extend(versions[versions.index(seg["first"]): versions.index(seg["last"]) + 1])
    return tuple(out)


def probe_error(name: str, release: str) -> str | None:
    """What ``release`` answered to probe ``name`` (None: it accepted it, or it was not probed)."""
    versions = _probes()["versions"]
    if release not in versions:
        return None
    at = versions.index(release)
    for seg in _probes()["probes"][name]["results"]:
        if versions.index(seg["first"]) <= at <= versions.index(seg["last"]):
            return seg["error"]
    return None


def passes_unknown_session_options(release: str) -> bool:
    """Whether ``release`` hands an unknown string session option to ONNX Runtime unchecked
    (otherwise its parser rejects it as an unknown value)."""
    accepted = probe_accepted_by(SESSION_PASS_THROUGH_PROBE)
    return bool(accepted) and Version(release) >= Version(accepted[0])


def reads_fractions_as_integers(release: str) -> bool:
    """Whether ``release`` takes a fractional number where it wants an integer (4096.5 read as 4096)."""
    return release in probe_accepted_by(FRACTION_PROBE)


def ignores_top_level_booleans(release: str) -> bool:
    """Whether ``release`` ignores an unknown top-level boolean, as it does numbers and strings."""
    return release in probe_accepted_by(TOP_BOOLEAN_PROBE)


def parser_message(error: str) -> str:
    """The parser's own words of a recorded error, without the probe's folder and JSON position."""
    import re

    head, json_error, text = error.partition("JSON Error:")
    text = re.sub(r"\s+at line \d+ index \d+$", "", text if json_error else head).strip()
    return f"JSON Error: {text}" if json_error else text


def unknown_value_error(release: str, path: list, key: str) -> str:
    """What ``release``'s parser prints for an unknown ``key`` in the section at ``path`` (``[]``:
    the top level), in the form its wheel printed for the unknown-key probe: 0.3.0–0.5.2 name the
    key alone (``JSON Error: Unknown value: key``), 0.6.0 on the section and the quoted key
    (``JSON Error: model:decoder: Unknown value "key"``)."""
    recorded = parser_message(probe_error(UNKNOWN_KEY_PROBE, release) or "")
    if 'Unknown value "' not in recorded:
        return f"JSON Error: Unknown value: {key}"
    section = "".join(f"{part}:" for part in path)
    return f"JSON Error: {section + ' ' if section else ''}Unknown value \"{key}\""
