"""Baseline files (``--baseline`` / ``--write-baseline``): keys that survive unrelated edits,
the exact file text, counts, stale entries, and load errors with line:col.

Findings are built by hand (tests/make_finding.py): the engine is not involved, only the
files the findings point into, read through the loaders.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from make_finding import make_finding
from sits_doctor import baseline
from sits_doctor.baseline import Baseline, BaselineEntry, BaselineKey
from sits_doctor.errors import InputError

SERVE = "model: ./m\nswap-space: 4\nmax-seq-len-to-capture: 8192\n"
# The SITS204 findings a check of SERVE would give (lines and pointers as the loaders report them).
SWAP = ("SITS204", 2, "/swap-space", "swap-space was removed")
CAPTURE = ("SITS204", 3, "/max-seq-len-to-capture", "max-seq-len-to-capture was removed")


def short_sha(canonical: str) -> str:
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder as the working directory, with deploy/serve.yaml in it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "serve.yaml").write_text(SERVE, encoding="utf-8")
    return tmp_path


def serve_findings(shift: int = 0):
    return [
        make_finding(code, "deploy/serve.yaml", line + shift, 1, pointer, message=message)
        for code, line, pointer, message in (SWAP, CAPTURE)
    ]


# --- keys ---------------------------------------------------------------------------------


def test_key_is_code_relative_path_pointer_and_hash_of_the_value(project):
    key = baseline.entry_key(serve_findings()[0], project, baseline.docs_reader())
    assert key == BaselineKey("SITS204", "deploy/serve.yaml", "/swap-space", short_sha("4"))


def test_hash_is_of_canonical_json_sorted_and_compact():
    docs = [SimpleNamespace(index=0, data={"search": {"top_k": 5, "do_sample": True, "stop": ["a", "é"]}})]
    key = baseline.entry_key(make_finding("SITS201", "genai_config.json", pointer="/search"), Path.cwd(), lambda f: docs)
    assert key.hash == short_sha('{"do_sample":true,"stop":["a","é"],"top_k":5}')
    assert len(key.hash) == 16


def test_hash_reads_the_document_with_the_findings_doc_index_not_the_list_position():
    # An empty first YAML document is not in the list: doc 2 is the second SourceDoc.
    docs = [SimpleNamespace(index=1, data={"a": "first"}), SimpleNamespace(index=2, data={"a": "second"})]
    key = baseline.entry_key(make_finding("SITS204", "k.yaml", pointer="/a", doc=2), Path.cwd(), lambda f: docs)
    assert key.hash == short_sha('"second"')


@pytest.mark.parametrize("pointer,doc", [("/missing", 0), ("/list/2", 0), ("/list/x", 0), ("/a", 5)])
def test_a_pointer_or_document_that_is_not_there_hashes_as_absent(pointer, doc):
    docs = [SimpleNamespace(index=0, data={"a": 1, "list": [1, 2]})]
    key = baseline.entry_key(make_finding("SITS204", "x.yaml", pointer=pointer, doc=doc), Path.cwd(), lambda f: docs)
    assert key.hash == short_sha('"<absent>"')


def test_pointer_escapes_are_decoded():
    docs = [SimpleNamespace(index=0, data={"a/b": {"c~d": [10, 20]}})]
    key = baseline.entry_key(make_finding("SITS204", "x.yaml", pointer="/a~1b/c~0d/1"), Path.cwd(), lambda f: docs)
    assert key.hash == short_sha("20")


def test_paths_are_relative_to_the_root_even_outside_it(project):
    (project / "other").mkdir()
    assert baseline.relative_path("deploy/serve.yaml", project) == "deploy/serve.yaml"
    assert baseline.relative_path("deploy/serve.yaml", project / "other") == "../deploy/serve.yaml"
    assert baseline.relative_path(str(project / "deploy" / "serve.yaml"), project / "deploy") == "serve.yaml"


# --- writing --------------------------------------------------------------------------------


def test_written_file_is_sorted_versioned_and_counts_duplicates(project):
    findings = serve_findings() + [serve_findings()[1]]  # the second one twice
    text = baseline.write(list(reversed(findings)), project, baseline.docs_reader())
    assert text == (
        "{\n"
        '  "version": 1,\n'
        '  "entries": [\n'
        "    {\n"
        '      "code": "SITS204",\n'
        '      "path": "deploy/serve.yaml",\n'
        '      "pointer": "/max-seq-len-to-capture",\n'
        f'      "hash": "{short_sha("8192")}",\n'
        '      "count": 2,\n'
        '      "message": "max-seq-len-to-capture was removed"\n'
        "    },\n"
        "    {\n"
        '      "code": "SITS204",\n'
        '      "path": "deploy/serve.yaml",\n'
        '      "pointer": "/swap-space",\n'
        f'      "hash": "{short_sha("4")}",\n'
        '      "count": 1,\n'
        '      "message": "swap-space was removed"\n'
        "    }\n"
        "  ]\n"
        "}\n"
    )


def test_entries_sort_by_path_then_code_then_pointer(project):
    (project / "a.yaml").write_text("b: 1\na: 2\n", encoding="utf-8")
    findings = [
        make_finding("SITS205", "deploy/serve.yaml", pointer="/swap-space"),
        make_finding("SITS204", "deploy/serve.yaml", pointer="/swap-space"),
        make_finding("SITS204", "a.yaml", pointer="/b"),
        make_finding("SITS204", "a.yaml", pointer="/a"),
    ]
    data = json.loads(baseline.write(findings, project, baseline.docs_reader()))
    assert [(e["path"], e["code"], e["pointer"]) for e in data["entries"]] == [
        ("a.yaml", "SITS204", "/a"), ("a.yaml", "SITS204", "/b"),
        ("deploy/serve.yaml", "SITS204", "/swap-space"), ("deploy/serve.yaml", "SITS205", "/swap-space"),
    ]


def test_one_message_per_entry_whatever_the_order_of_the_findings(project):
    a = make_finding("SITS204", "deploy/serve.yaml", 2, 1, "/swap-space", message="b: judged against vLLM 0.19.0")
    b = make_finding("SITS204", "deploy/serve.yaml", 2, 1, "/swap-space", message="a: judged against vLLM 0.18.0")
    for order in ([a, b], [b, a]):
        entries = json.loads(baseline.write(order, project, baseline.docs_reader()))["entries"]
        assert [(e["count"], e["message"]) for e in entries] == [(2, "a: judged against vLLM 0.18.0")]


def test_no_findings_writes_an_empty_baseline(project):
    assert baseline.write([], project, baseline.docs_reader()) == '{\n  "version": 1,\n  "entries": []\n}\n'


# --- round trips ---------------------------------------------------------------------------


def write_and_load(project: Path, findings) -> Baseline:
    path = project / "sits-doctor-baseline.json"
    path.write_text(baseline.write(findings, project, baseline.docs_reader()), encoding="utf-8")
    return baseline.load(path)


def test_round_trip_every_finding_is_matched(project):
    loaded = write_and_load(project, serve_findings())
    assert loaded.filter(serve_findings(), project, baseline.docs_reader()) == ([], 2, [])


def test_an_edit_above_moves_the_lines_but_the_baseline_still_matches(project):
    loaded = write_and_load(project, serve_findings())
    (project / "deploy" / "serve.yaml").write_text("# pinned, see INFRA-12\n\n" + SERVE, encoding="utf-8")
    assert loaded.filter(serve_findings(shift=2), project, baseline.docs_reader()) == ([], 2, [])


def test_a_changed_value_is_a_new_finding_and_its_old_entry_is_stale(project):
    loaded = write_and_load(project, serve_findings())
    (project / "deploy" / "serve.yaml").write_text(SERVE.replace("swap-space: 4", "swap-space: 16"), encoding="utf-8")
    findings = serve_findings()
    kept, matched, stale = loaded.filter(findings, project, baseline.docs_reader())
    assert kept == [findings[0]]
    assert matched == 1
    assert stale == [BaselineEntry(BaselineKey("SITS204", "deploy/serve.yaml", "/swap-space", short_sha("4")), 1, "swap-space was removed")]


def test_a_fixed_finding_leaves_its_entry_stale(project):
    loaded = write_and_load(project, serve_findings())
    kept, matched, stale = loaded.filter(serve_findings()[1:], project, baseline.docs_reader())
    assert (kept, matched) == ([], 1)
    assert [e.key.pointer for e in stale] == ["/swap-space"]


def test_an_entry_matches_at_most_count_findings(project):
    loaded = write_and_load(project, serve_findings()[:1])
    twice = [serve_findings()[0], serve_findings()[0]]
    kept, matched, stale = loaded.filter(twice, project, baseline.docs_reader())
    assert (kept, matched, stale) == ([twice[1]], 1, [])


def test_a_partly_used_entry_is_not_stale(project):
    loaded = write_and_load(project, [serve_findings()[0], serve_findings()[0]])
    assert loaded.entries[0].count == 2
    kept, matched, stale = loaded.filter(serve_findings()[:1], project, baseline.docs_reader())
    assert (kept, matched, stale) == ([], 1, [])


def test_another_root_does_not_match(project):
    loaded = write_and_load(project, serve_findings())
    kept, matched, stale = loaded.filter(serve_findings(), project / "deploy", baseline.docs_reader())
    assert (len(kept), matched, len(stale)) == (2, 0, 2)


def test_the_code_is_part_of_the_key(project):
    loaded = write_and_load(project, serve_findings()[:1])
    other = make_finding("SITS205", "deploy/serve.yaml", 2, 1, "/swap-space")
    assert loaded.filter([other], project, baseline.docs_reader()) == ([other], 0, list(loaded.entries))


def test_duplicate_entries_in_a_hand_edited_file_add_up(project):
    key = baseline.entry_key(serve_findings()[0], project, baseline.docs_reader())
    entry = {"code": key.code, "path": key.path, "pointer": key.pointer, "hash": key.hash}
    path = project / "b.json"
    path.write_text(json.dumps({"version": 1, "entries": [entry, entry]}), encoding="utf-8")
    loaded = baseline.load(path)
    twice = [serve_findings()[0]] * 3
    kept, matched, stale = loaded.filter(twice, project, baseline.docs_reader())
    assert (len(kept), matched, stale) == (1, 2, [])


def test_docs_reader_reads_each_file_once(project, monkeypatch):
    import sits_doctor.loaders as loaders

    calls = []
    real = loaders.read_docs
    monkeypatch.setattr(loaders, "read_docs", lambda path, display: calls.append(display) or real(path, display))
    docs_of = baseline.docs_reader()
    baseline.write(serve_findings() * 3, project, docs_of)
    assert calls == ["deploy/serve.yaml"]


# --- loading --------------------------------------------------------------------------------


def load_text(tmp_path: Path, text: str) -> Baseline:
    path = tmp_path / "baseline.json"
    path.write_text(text, encoding="utf-8")
    return baseline.load(path)


def test_load_reads_entries_with_default_count_and_message(tmp_path):
    loaded = load_text(tmp_path, '{"version": 1, "entries": [{"code": "SITS204", "path": "a.yaml", "pointer": "", "hash": "00"}]}')
    assert loaded == Baseline((BaselineEntry(BaselineKey("SITS204", "a.yaml", "", "00"), 1, ""),), str(tmp_path / "baseline.json"))


@pytest.mark.parametrize("text,message,line,col", [
    ('{"version": 1,\n  "entries": [}', "invalid JSON in the baseline: Expecting value", 2, 15),
    ("", "invalid JSON in the baseline: Expecting value", 1, 1),
    ("\n  [1, 2]", "a baseline is a JSON object with 'version' and 'entries'", 2, 3),
    ('{"entries": []}', "unsupported baseline version None (this sits-doctor reads 1); write a new one with --write-baseline", None, None),
    ('{"version": 2, "entries": []}', "unsupported baseline version 2 (this sits-doctor reads 1); write a new one with --write-baseline", None, None),
    ('{"version": 1}', "'entries' must be a list", None, None),
    ('{"version": 1, "entries": {}}', "'entries' must be a list", None, None),
])
def test_load_errors_say_what_and_where(tmp_path, text, message, line, col):
    with pytest.raises(InputError) as err:
        load_text(tmp_path, text)
    assert (err.value.path, err.value.message, err.value.line, err.value.col) == (str(tmp_path / "baseline.json"), message, line, col)


GOOD_ENTRY = '{"code": "SITS204", "path": "a.yaml", "pointer": "/x", "hash": "00"}'


@pytest.mark.parametrize("bad,message", [
    ('"SITS204"', "must be an object"),
    ('{"path": "a.yaml", "pointer": "/x", "hash": "00"}', "'code' is missing"),
    ('{"code": 204, "path": "a.yaml", "pointer": "/x", "hash": "00"}', "'code' must be a string"),
    ('{"code": "SITS204", "path": "a.yaml", "hash": "00"}', "'pointer' is missing"),
    ('{"code": "SITS204", "path": "a.yaml", "pointer": "/x", "hash": null}', "'hash' must be a string"),
    ('{"code": "SITS204", "path": "a.yaml", "pointer": "/x", "hash": "00", "count": 0}', "'count' must be a whole number ≥ 1, not 0"),
    ('{"code": "SITS204", "path": "a.yaml", "pointer": "/x", "hash": "00", "count": true}', "'count' must be a whole number ≥ 1, not True"),
    ('{"code": "SITS204", "path": "a.yaml", "pointer": "/x", "hash": "00", "count": 1.5}', "'count' must be a whole number ≥ 1, not 1.5"),
    ('{"code": "SITS204", "path": "a.yaml", "pointer": "/x", "hash": "00", "message": 3}', "'message' must be a string"),
])
def test_a_bad_entry_is_reported_at_its_own_line_and_column(tmp_path, bad, message):
    text = '{\n  "tool": {"nested": [1, {"entries": 0}]},\n  "version": 1,\n  "entries": [\n    ' + GOOD_ENTRY + ",\n      " + bad + "\n  ]\n}\n"
    with pytest.raises(InputError) as err:
        load_text(tmp_path, text)
    assert (err.value.message, err.value.line, err.value.col) == (f"baseline entry 2: {message}", 6, 7)


def test_an_unreadable_baseline_is_an_input_error(tmp_path):
    with pytest.raises(InputError) as err:
        baseline.load(tmp_path / "nope.json")
    assert str(err.value) == f"{tmp_path / 'nope.json'}: error: cannot read: No such file or directory"


# --- options among a command's words ------------------------------------------------------------

STS = """apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: v}}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        command: ["sh", "-c"]
        args:
          - |
            vllm serve mistralai/Mistral-7B-Instruct-v0.3 \\
              --num-scheduler-steps 8 \\
              --port {port}
      - name: vllm2
        image: vllm/vllm-openai:v0.11.0
        args: [{extra}"--model", "m", "--max-seq-len-to-capture", "8192"]
"""
SCRIPT = "#!/bin/sh\n{extra}vllm serve m --num-scheduler-steps 8 --port {port}\n"


def _check_with(tmp_path, name: str, text: str, **opts):
    from sits_doctor.engine import CheckOptions, check

    (tmp_path / name).write_text(text, encoding="utf-8")
    return check([tmp_path / name], CheckOptions(isolated=True, select=["SITS204"], targets=["vllm==0.11.0"], **opts))


@pytest.mark.parametrize("name, text, edits", [
    ("sts.yaml", STS, [{"port": 8001, "extra": '"--host", "0.0.0.0", '}]),  # another flag of the same commands
    ("serve.sh", SCRIPT, [{"port": 8001, "extra": ""}, {"port": 8000, "extra": "export A=1\n"}]),
])
def test_editing_another_flag_of_the_command_keeps_the_baseline(tmp_path, monkeypatch, name, text, edits):
    """An unrelated edit in the same `sh -c` string, args list or script (a --port change, a
    word inserted before) leaves the recorded findings recorded: the key is the option's words."""
    monkeypatch.chdir(tmp_path)
    written = _check_with(tmp_path, name, text.format(port=8000, extra=""), write_baseline="b.json")
    assert written.findings
    for edit in edits:
        report = _check_with(tmp_path, name, text.format(**edit), baseline="b.json")
        assert report.findings == [] and report.baselined == len(written.findings), edit
        assert not [n for n in report.notices if "stale baseline entry" in n.message]


def test_changing_the_option_itself_makes_it_new(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _check_with(tmp_path, "serve.sh", SCRIPT.format(port=8000, extra=""), write_baseline="b.json")
    report = _check_with(tmp_path, "serve.sh", SCRIPT.format(port=8000, extra="").replace("--num-scheduler-steps 8",
                                                                                          "--num-scheduler-steps 4"),
                         baseline="b.json")
    assert [f.code for f in report.findings] == ["SITS204"]


def test_sarif_fingerprints_survive_an_unrelated_flag_edit(tmp_path, monkeypatch):
    import json as _json

    from sits_doctor.reporters import render

    monkeypatch.chdir(tmp_path)

    def prints(text):
        report = _check_with(tmp_path, "sts.yaml", text)
        return sorted(r["partialFingerprints"]["primaryLocationLineHash"]
                      for r in _json.loads(render(report, "sarif"))["runs"][0]["results"])

    before = prints(STS.format(port=8000, extra=""))
    assert len(before) == 2 and len(set(before)) == 2
    assert prints(STS.format(port=9000, extra='"--host", "0.0.0.0", ')) == before
