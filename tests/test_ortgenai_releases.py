"""Every ORT GenAI release is judged by what its own config parser accepts (issue 26, cases 2 and 3).

The tables (sits_doctor/frameworks/data/ortgenai_keys.json and ortgenai_probes.json) were written
by tools/probe_ortgenai.py from each release's CPU wheel; here the schema built for a release
(``schema_for``) is held to them, and the CLI to what the tables say.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from sits_doctor.engine import CheckOptions, check
from sits_doctor.frameworks import ortgenai as fw
from sits_doctor.frameworks import ortgenai_releases as rel
from sits_doctor.schemas.ortgenai import schema_errors
from sits_doctor.source import parse_json

sys.path.insert(0, str(REPO / "tools"))
import probe_ortgenai as probe  # noqa: E402  (the tool that wrote the tables: its configs)

KEYS = json.loads(rel.KEYS_FILE.read_text(encoding="utf-8"))
# onnxruntime-genai on PyPI, every final release from 0.3.0 (`pip download onnxruntime-genai==X`)
PYPI_RELEASES = """0.3.0 0.4.0 0.5.0 0.5.1 0.5.2 0.6.0 0.7.0 0.7.1 0.8.0 0.8.1 0.8.2 0.8.3 0.9.0 0.9.1 0.9.2
    0.10.0 0.11.0 0.11.1 0.11.2 0.11.3 0.11.4 0.12.0 0.12.1 0.12.2 0.13.0 0.13.1 0.13.2 0.14.0 0.14.1
    0.15.0 0.15.1 0.15.2 0.16.0 0.17.0 0.17.1 0.18.0""".split()


def doc_of(config: dict):
    return parse_json(json.dumps(config), "genai_config.json")


def test_every_release_is_in_both_tables():
    assert list(rel.releases()) == PYPI_RELEASES
    assert json.loads(rel.PROBES_FILE.read_text(encoding="utf-8"))["versions"] == PYPI_RELEASES
    assert fw.NEWEST == PYPI_RELEASES[-1]
    assert KEYS["generator"] == "tools/probe_ortgenai.py --keys" and KEYS["failed"] == {}


def test_the_key_table_covers_the_schema_in_order():
    assert list(KEYS["keys"]) == [".".join(path) for path, _ in probe.key_paths()]
    for key, segments in KEYS["keys"].items():
        covered = []
        for first, last, _ok in segments:
            covered += PYPI_RELEASES[PYPI_RELEASES.index(first): PYPI_RELEASES.index(last) + 1]
        assert covered == PYPI_RELEASES, key


@pytest.mark.parametrize("release", PYPI_RELEASES)
def test_a_releases_schema_knows_the_keys_its_parser_knows(release):
    """The key probe configs, through the schema built for the release: a key the wheel did not
    know is an unknown key there (SITS204), a key it knew is not."""
    unknown = rel.unknown_keys(release)
    wrong = []
    for path, schema in probe.key_paths():
        dotted = ".".join(path)
        errors = schema_errors(doc_of(probe.key_probe(path, schema)), release)
        named = any(e.validator in ("additionalProperties", "not") for e in errors)
        if named != (dotted in unknown):
            wrong.append(dotted)
    assert wrong == []


@pytest.mark.parametrize("version, release, said", [
    ("0.7.1", "0.7.1", None),
    (PYPI_RELEASES[0], PYPI_RELEASES[0], None),
    ("0.2.0", PYPI_RELEASES[0], "older than"),
    ("0.10.3", "0.10.0", "the release before it"),
    ("0.99.0", PYPI_RELEASES[-1], "newer than"),
])
def test_judged_as(version, release, said):
    judged = rel.judged_as(version)
    assert judged.release == release
    assert (judged.note is None) == (said is None)
    if said:
        assert said in judged.note and release in judged.note


def test_first_knowing_is_the_first_release_whose_wheel_knew_the_key():
    unknown = {r: rel.unknown_keys(r) for r in PYPI_RELEASES}
    for key in KEYS["keys"]:
        known = [r for r in PYPI_RELEASES if key not in unknown[r]]
        assert rel.first_knowing(key) == (known[0] if known else None), key
    assert rel.first_knowing("no.such.key") is None


def _write(tmp_path: Path, config: dict, name="genai_config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


def _findings(path: Path, *targets: str):
    report = check([path], CheckOptions(select=["SITS201", "SITS204"], targets=targets, isolated=True))
    assert not report.errors and not report.internal_errors
    return report


def test_a_section_is_judged_by_the_target_release(tmp_path):
    """``speculative`` is known from the release the table says, an error before it."""
    since = rel.first_knowing("speculative")
    assert since is not None and since != PYPI_RELEASES[0]
    before = PYPI_RELEASES[PYPI_RELEASES.index(since) - 1]
    path = _write(tmp_path, {**probe.BASE, "speculative": {"max_draft_tokens": 4}})
    old = _findings(path, f"ortgenai=={before}").findings
    assert [f.code for f in old] == ["SITS204"]
    assert f"ORT GenAI {before} fails" in old[0].message and f"(known from {since})" in old[0].message
    assert _findings(path, f"ortgenai=={since}").findings == []


def test_unknown_session_options_are_errors_before_the_pass_through(tmp_path):
    accepted = rel.probe_accepted_by(rel.SESSION_PASS_THROUGH_PROBE)
    first = accepted[0]
    before = PYPI_RELEASES[PYPI_RELEASES.index(first) - 1]
    config = json.loads(json.dumps(probe.BASE))
    config["model"]["decoder"]["session_options"]["intra_op_num_thread"] = "4"
    path = _write(tmp_path, config)
    old = _findings(path, f"ortgenai=={before}").findings
    new = _findings(path, f"ortgenai=={first}").findings
    assert [(f.code, f.severity.value) for f in old] == [("SITS204", "error")]
    assert [(f.code, f.severity.value) for f in new] == [("SITS204", "warning")]


def test_a_fractional_integer_is_read_by_the_releases_that_read_it(tmp_path):
    config = json.loads(json.dumps(probe.BASE))
    config["model"]["context_length"] = 4096.5
    path = _write(tmp_path, config)
    for release in PYPI_RELEASES:
        rejected = release not in rel.probe_accepted_by(rel.FRACTION_PROBE)
        codes = [f.code for f in _findings(path, f"ortgenai=={release}").findings]
        assert ("SITS201" in codes) == rejected, release


def test_a_version_outside_the_tables_is_said_on_the_command_line(tmp_path):
    path = _write(tmp_path, probe.BASE)
    for version, said in (("0.2.0", "older than"), ("0.19.0", "newer than")):
        report = _findings(path, f"ortgenai=={version}")
        notes = [n.message for n in report.notices if "--target" in n.message]
        assert len(notes) == 1 and said in notes[0], report.notices
        assert report.findings == []  # said once, as a note: not a finding per file


def test_a_version_outside_the_tables_from_a_settings_file_is_an_info(tmp_path):
    path = _write(tmp_path, probe.BASE)
    (tmp_path / ".sits-doctor.toml").write_text('target = ["ortgenai==0.2.0"]\n', encoding="utf-8")
    report = check([path], CheckOptions(select=["SITS204"]))
    assert [(f.code, f.severity.value) for f in report.findings] == [("SITS204", "info")]
    assert "older than" in report.findings[0].message


def test_no_release_between_knows_a_key_the_newest_does_not_and_drops_it_again():
    """A key each release knows from some release on (no key known, forgotten and known again),
    except where the table says so: then the data shows it and this test names it."""
    flapping = []
    for key, segments in KEYS["keys"].items():
        verdicts = [ok is not False for _first, _last, ok in segments]
        if verdicts != sorted(verdicts):
            flapping.append(key)
    assert flapping == []


# --- the "version": 2 pipeline form (issue 26, case 3) ------------------------------------------
V2 = REPO / "fixtures" / "ortgenai" / ".no-plan" / "genai_config_v2_pipeline.json"


def test_no_release_loads_the_pipeline_form():
    assert rel.probe_accepted_by(rel.PIPELINE_V2_PROBE) == ()
    assert rel.probe_error(rel.PIPELINE_V2_PROBE, PYPI_RELEASES[-1])


def test_a_pipeline_config_is_refused_with_what_the_releases_do():
    result = run_cli("check", str(V2.relative_to(REPO)), "--isolated", cwd=REPO)
    assert result.exit_code == 2
    text = result.stdout + result.stderr
    assert "Traceback" not in text
    assert f"{V2.relative_to(REPO).as_posix()}:2:3" in text
    assert f"no ORT GenAI release from {PYPI_RELEASES[0]} to {PYPI_RELEASES[-1]} loads it" in text
    assert "issues/2114" in text


def test_version_2_beside_the_version_1_sections_is_read_as_version_1(tmp_path):
    """A top-level "version": 2 without a pipeline is a scalar the releases ignore (their wheels say so)."""
    assert rel.probe_accepted_by("version_2_scalar") == tuple(PYPI_RELEASES)
    path = _write(tmp_path, {**probe.BASE, "version": 2})
    findings = _findings(path).findings
    assert [(f.code, f.severity.value) for f in findings] == [("SITS204", "warning")]
    assert '"version" is silently ignored' in findings[0].message


def test_a_release_that_loads_the_pipeline_form_would_be_named(monkeypatch):
    """If a future table shows a release loading it, the message names it instead."""
    monkeypatch.setattr(rel, "probe_accepted_by", lambda name: ("0.18.0",) if name == rel.PIPELINE_V2_PROBE else ())
    from sits_doctor.errors import InputError
    from sits_doctor.loaders.ortgenai import is_pipeline_v2, refuse_pipeline_v2

    doc = parse_json(V2.read_text(encoding="utf-8"), "genai_config.json")
    assert is_pipeline_v2(doc.data)
    with pytest.raises(InputError) as err:
        refuse_pipeline_v2(doc)
    assert "only 0.18.0 load it" in err.value.message and (err.value.line, err.value.col) == (2, 3)


@pytest.mark.parametrize("data, v2", [
    ({"version": 2, "pipeline": {}}, True), ({"version": 3, "pipeline": []}, True),
    ({"version": 1, "pipeline": {}}, False), ({"version": True, "pipeline": {}}, False),
    ({"version": "2", "pipeline": {}}, False), ({"version": 2}, False), ({"version": 2, "pipeline": "x"}, False),
    ([], False),
])
def test_what_counts_as_the_pipeline_form(data, v2):
    from sits_doctor.loaders.ortgenai import is_pipeline_v2

    assert is_pipeline_v2(data) is v2


def test_parser_message_keeps_the_parsers_words():
    error = "Error encountered while parsing '<folder>/genai_config.json' JSON Error:  Unknown value \"x\" at line 1 index 28"
    assert rel.parser_message(error) == 'JSON Error: Unknown value "x"'
    assert rel.parser_message("model context_length is 0 at line 2 index 3") == "model context_length is 0"


def test_probe_error_is_the_releases_own_answer():
    name, newest = rel.PIPELINE_V2_PROBE, PYPI_RELEASES[-1]
    assert rel.probe_error(name, "0.4.0") != rel.probe_error(name, newest)  # the parser's wording changed at 0.6
    assert rel.probe_error(name, "9.9.9") is None and rel.probe_error("baseline_config", newest) is None
    result = run_cli("check", str(V2.relative_to(REPO)), "--isolated", cwd=REPO)
    assert rel.parser_message(rel.probe_error(name, newest)) in result.stdout + result.stderr


def test_a_model_that_is_not_an_object_is_not_a_genai_config():
    from sits_doctor.loaders.ortgenai import is_genai_config

    assert not is_genai_config({"model": "gpt2", "search": {}})
    assert is_genai_config({"model": {}, "search": {}}) and is_genai_config({"model": {"context_length": 8}})


@pytest.mark.parametrize("name, path, key", [
    ("unknown_top_object", [], "runtime"), ("unknown_key_search", ["search"], "enable_cuda_graphs"),
    ("unknown_key_decoder_inputs", ["model", "decoder", "inputs"], "cache_position"),
    ("unknown_key_model", ["model"], "kv_cache_dtype"),
])
def test_unknown_value_error_is_each_releases_own_wording(name, path, key):
    """The words SITS204 quotes are what every probed wheel printed for an unknown key (0.3.0–0.5.2
    name the key alone, later ones the section and the quoted key)."""
    for release in rel.releases():
        recorded = rel.probe_error(name, release)
        if recorded is not None:
            assert rel.parser_message(recorded) == rel.unknown_value_error(release, path, key), release


def test_sits204_quotes_the_old_wording_before_0_6(tmp_path):
    data = json.loads(json.dumps(probe.BASE))
    data["model"]["decoder"]["bogus_key"] = 1
    path = tmp_path / "genai_config.json"
    path.write_text(json.dumps(data, indent=2))
    quotes = {}
    for version in ("0.4.0", "0.6.0"):
        report = check([path], CheckOptions(select=["SITS204"], targets=[f"ortgenai=={version}"], isolated=True))
        quotes[version] = [e for f in report.findings for e in f.evidence if "JSON Error" in e]
    assert quotes == {"0.4.0": ["ORT GenAI 0.4.0 prints: JSON Error: Unknown value: bogus_key"],
                      "0.6.0": ['ORT GenAI 0.6.0 prints: JSON Error: model:decoder: Unknown value "bogus_key"']}


@pytest.mark.parametrize("release, refused", [("0.5.2", True), ("0.6.0", False), ("0.18.0", False)])
def test_a_top_level_boolean_is_refused_only_where_the_wheel_refused_it(release, refused):
    """0.3.0-0.5.2 answer an unknown top-level `true` with Unknown value; 0.6.0 on ignore it (probe
    unknown_top_scalar_bool)."""
    assert rel.ignores_top_level_booleans(release) is not refused
    data = json.loads(json.dumps(probe.BASE))
    data["enable_cuda_graphs"] = True
    doc = parse_json(json.dumps(data, indent=2), "genai_config.json")
    errors = [e for e in schema_errors(doc, release) if list(e.absolute_path) == ["enable_cuda_graphs"]]
    assert bool(errors) is refused
