"""The repo's ORT GenAI schema against what real onnxruntime-genai wheels did with the same configs.

``sits_doctor/frameworks/data/ortgenai_probes.json`` is written by ``tools/probe_ortgenai.py``,
which ran each probe config through ``onnxruntime_genai.Config`` (and, for ``stage: "model"``
probes, Model/Generator creation) in every installed version. Here, for every parser-stage
probe, the schema (``sits_doctor.schemas.ortgenai.schema_errors``) must report errors exactly
when the newest version rejected the config. Probes that pass the parser and fail only at
Model/Engine/Generator creation are out of the schema's reach and are not compared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sits_doctor.schemas.ortgenai import schema_errors
from sits_doctor.source import parse_json

DATA = Path(__file__).resolve().parent.parent / "sits_doctor" / "frameworks" / "data" / "ortgenai_probes.json"
PROBES = json.loads(DATA.read_text(encoding="utf-8"))
NEWEST = PROBES["versions"][-1]

# Where the schema is known to disagree with the parser: the reason, and the probe stays xfail
# (strict) so that fixing the schema turns it into an unexpected pass.
SCHEMA_GAPS = {
}


def _newest(probe: dict) -> dict:
    last = probe["results"][-1]
    assert last["last"] == NEWEST
    return last


def _parser_probes():
    for name, probe in PROBES["probes"].items():
        if probe["stage"] != "config":
            continue
        marks = [pytest.mark.xfail(strict=True, reason=SCHEMA_GAPS[name])] if name in SCHEMA_GAPS else []
        yield pytest.param(name, marks=marks, id=name)


def test_data_shape():
    versions = PROBES["versions"]
    assert PROBES["generator"] == "tools/probe_ortgenai.py"
    assert len(versions) >= 10 and versions[-1] == NEWEST
    from packaging.version import Version

    assert versions == sorted(versions, key=Version)
    for name, probe in PROBES["probes"].items():
        assert probe["stage"] in ("config", "model"), name
        covered = []
        for seg in probe["results"]:
            i, j = versions.index(seg["first"]), versions.index(seg["last"])
            assert i <= j, name
            covered.extend(versions[i : j + 1])
            assert seg["ok"] == (seg["error"] is None), name
        assert covered == versions, f"{name}: segments do not cover the versions once, in order"


@pytest.mark.parametrize("name", list(_parser_probes()))
def test_schema_agrees_with_newest_parser(name):
    probe = PROBES["probes"][name]
    doc = parse_json(json.dumps(probe["config"]), "genai_config.json")
    errors = schema_errors(doc)
    newest = _newest(probe)
    if newest["ok"]:
        assert not errors, f"{NEWEST} accepts it, the schema says: {[e.message for e in errors]}"
    else:
        assert errors, f"{NEWEST} rejects it ({newest['error']}), the schema finds nothing"


# Where the schema built for an older release (schema_for) is known to disagree with that release's
# parser: (probe, release) -> the reason; xfail(strict), so fixing the schema shows up here.
RELEASE_GAPS: dict[tuple[str, str], str] = {
    **{(name, release): "the CPU wheel of this release refuses providers at load ('CUDA execution provider is not "
                        "enabled in this build', 'Unknown provider type'): a build's limit, not the config parser's"
       for name in ("provider_cuda_string", "provider_cuda_graph_string_1", "provider_cuda_unknown_option",
                    "provider_unknown_name")
       for release in ("0.3.0", "0.4.0", "0.5.0")},
    **{("static_batching", release): "the process aborts reading engine.static_batching (an empty std::optional "
                                     "dereferenced in config.cpp): a crash, which a schema cannot state"
       for release in ("0.11.0", "0.11.1", "0.11.2", "0.11.3", "0.11.4", "0.12.0", "0.12.1", "0.12.2", "0.13.0",
                       "0.13.1", "0.13.2", "0.14.0", "0.14.1")},
}


def _every_release():
    versions = PROBES["versions"]
    for name, probe in PROBES["probes"].items():
        if probe["stage"] != "config":
            continue
        for seg in probe["results"]:
            for release in versions[versions.index(seg["first"]): versions.index(seg["last"]) + 1]:
                marks = ([pytest.mark.xfail(strict=True, reason=RELEASE_GAPS[(name, release)])]
                         if (name, release) in RELEASE_GAPS else [])
                yield pytest.param(name, release, seg, marks=marks, id=f"{name}@{release}")


@pytest.mark.parametrize("name, release, seg", list(_every_release()))
def test_schema_agrees_with_each_releases_parser(name, release, seg):
    """The schema at a release (what SITS201/SITS204 judge a config by under --target
    ortgenai==release) errs exactly when that release's own parser rejected the probe."""
    doc = parse_json(json.dumps(PROBES["probes"][name]["config"]), "genai_config.json")
    errors = schema_errors(doc, release)
    if seg["ok"]:
        assert not errors, f"{release} accepts it, the schema says: {[e.message for e in errors]}"
    else:
        assert errors, f"{release} rejects it ({seg['error']}), the schema finds nothing"


def test_schema_gaps_are_parser_probes():
    for name in SCHEMA_GAPS:
        assert PROBES["probes"][name]["stage"] == "config"


def test_model_stage_probes_are_accepted_by_the_newest_parser():
    """A probe marked "model" must pass Config(); what fails happens later, where the schema can't see."""
    for name, probe in PROBES["probes"].items():
        newest = _newest(probe)
        if probe["stage"] == "model" and not newest["ok"]:
            assert newest["stage"] != "config", name


def _versions_where(name: str, ok: bool) -> list[str]:
    versions = PROBES["versions"]
    return [v for seg in PROBES["probes"][name]["results"] if seg["ok"] == ok
            for v in versions[versions.index(seg["first"]) : versions.index(seg["last"]) + 1]]


@pytest.mark.parametrize(
    "name, since, first_rejecting",
    [
        ("provider_cuda_bool", "0.5.2", "0.5.2"),  # rejected by every tested version
        ("provider_cuda_number", "0.5.2", "0.5.2"),
        ("unknown_key_decoder", "0.5.2", "0.5.2"),
        ("unknown_key_search", "0.5.2", "0.5.2"),
        ("unknown_top_object", "0.5.2", "0.5.2"),
        ("context_length_float", "0.5.2", "0.15.0"),  # 4096.5 read as an integer until 0.14
        # kMaxBatchSize 32, checked at Generator creation (0.5.x did not know search.batch_size)
        ("batch_size_64", "0.6.0", "0.15.0"),
    ],
)
def test_recorded_facts(name, since, first_rejecting):
    """Facts the rules rely on, as the wheels showed them (a re-run that changes them fails here)."""
    versions = PROBES["versions"]
    considered = versions[versions.index(since):]
    rejected = [v for v in _versions_where(name, ok=False) if v in considered]
    assert rejected == versions[versions.index(first_rejecting):]


def test_session_options_pass_unknown_string_keys_from_0_11():
    versions = PROBES["versions"]
    assert _versions_where("session_option_unknown_string", ok=True) == versions[versions.index("0.11.0"):]
    assert _versions_where("session_option_unknown_number", ok=True) == []


def test_top_level_scalars_are_ignored():
    for name in ("unknown_top_scalar", "unknown_top_scalar_string"):
        assert all(seg["ok"] for seg in PROBES["probes"][name]["results"]), name
