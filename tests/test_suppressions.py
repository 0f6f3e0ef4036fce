"""Suppressions: inline ``# sits-doctor: ignore[...] reason`` comments in YAML and
``.sits-doctor-ignore.toml`` entries, and the problems reported about them (SITS900).

Findings are built by hand (tests/make_finding.py) at the lines a rule would report; ``apply``
never runs the rules. ``today`` is fixed so expiry does not depend on the calendar.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from make_finding import make_finding
from sits_doctor import suppressions
from sits_doctor.errors import InputError
from sits_doctor.suppressions import Comment, Directive, Problem

TODAY = date(2027, 1, 31)
NO_REASON = "suppression without a reason does not suppress: say why after the codes, `# sits-doctor: ignore[{}] <why>`"


def run(texts: dict[str, str], findings, today: date = TODAY):
    return suppressions.apply(findings, texts, today)


# --- finding the comments -------------------------------------------------------------------


def comments(text: str) -> list[tuple[int, int, str, bool]]:
    return [(c.line, c.col, c.text, c.alone) for c in suppressions.scan_yaml(text)[0]]


def test_comments_are_found_with_line_column_and_whether_they_stand_alone():
    text = "# top\nmodel: ./m  # trailing\n  # indented\nport: 8000\n"
    assert comments(text) == [(1, 1, "# top", True), (2, 13, "# trailing", False), (3, 3, "# indented", True)]


def test_a_hash_inside_a_string_is_not_a_comment():
    text = (
        'a: "x # sits-doctor: ignore[SITS204] not a comment"\n'
        "b: 'y # nor this'\n"
        "c: plain#text\n"
        "d: \"multi\n"
        "  line # still the string\"\n"
        "e: |\n"
        "  # a line of the block\n"
        "  more\n"
        "f: \"g\"#glued to the string: not a comment in YAML\n"
        "h: 1 # real\n"
    )
    assert comments(text) == [(10, 6, "# real", False)]


def test_a_comment_on_a_block_scalar_header_is_found_and_the_block_is_spanned():
    text = "args:\n  - |  # header comment\n    vllm serve m \\\n      --swap-space 4\n  - --port\n"
    found, spans = suppressions.scan_yaml(text)
    assert [(c.line, c.col, c.text, c.alone) for c in found] == [(2, 8, "# header comment", False)]
    assert spans == {2: 4}


def test_a_comment_after_a_block_scalar_is_outside_it():
    text = "a: |\n  text\n# after\nb: 1\n"
    assert comments(text) == [(3, 1, "# after", True)]


def test_helm_template_actions_do_not_stop_the_scan_and_keep_columns():
    text = (
        "{{- if .Values.enabled }}\n"
        "image: {{ .Values.image }}  # sits-doctor: ignore[SITS204] chart default\n"
        "{{- end }}\n"
    )
    assert comments(text) == [(2, 29, "# sits-doctor: ignore[SITS204] chart default", False)]


def test_crlf_line_endings_do_not_leak_into_the_comment():
    assert comments("a: 1 # c\r\nb: 2\r\n") == [(1, 6, "# c", False)]


# --- inline suppressions --------------------------------------------------------------------

SERVE = "model: ./m\nswap-space: 4  # sits-doctor: ignore[SITS204] pinned to vLLM 0.8 until the upgrade\n"


def test_same_line_comment_with_a_reason_suppresses():
    f = make_finding("SITS204", "serve.yaml", 2, 1, "/swap-space")
    result = run({"serve.yaml": SERVE}, [f])
    assert (result.kept, result.suppressed, result.problems, result.errors) == ([], [f], [], [])


def test_the_directive_is_parsed_with_its_codes_reason_and_covered_lines():
    found, problems = suppressions.directives(SERVE, "serve.yaml")
    assert found == [Directive(2, 16, ("SITS204",), "pinned to vLLM 0.8 until the upgrade", (2, 2))]
    assert problems == []


def test_only_the_finding_on_the_commented_line_is_suppressed():
    on = make_finding("SITS204", "serve.yaml", 2, 1, "/swap-space")
    other = make_finding("SITS204", "serve.yaml", 1, 1, "/model")
    result = run({"serve.yaml": SERVE}, [other, on])
    assert (result.kept, result.suppressed, result.problems) == ([other], [on], [])


def test_another_code_on_the_same_line_is_kept_and_the_suppression_is_unused():
    f = make_finding("SITS205", "serve.yaml", 2, 1, "/swap-space")
    result = run({"serve.yaml": SERVE}, [f])
    assert result.kept == [f]
    assert result.problems == [Problem("serve.yaml", 2, 16, "unused suppression: no SITS204 finding on line 2", "unused")]


@pytest.mark.parametrize("comment", [
    "# sits-doctor: ignore[SITS204]",
    "# sits-doctor: ignore[SITS204]   ",
    "# sits-doctor: ignore[SITS204] -- ",
    "# sits-doctor: ignore[SITS204]: —",
])
def test_without_a_reason_nothing_is_suppressed_and_it_is_reported(comment):
    text = f"model: ./m\nswap-space: 4  {comment}\n"
    f = make_finding("SITS204", "serve.yaml", 2, 1, "/swap-space")
    result = run({"serve.yaml": text}, [f])
    assert (result.kept, result.suppressed) == ([f], [])
    assert result.problems == [Problem("serve.yaml", 2, 16, NO_REASON.format("SITS204"), "no-reason")]


@pytest.mark.parametrize("separator", [" ", ": ", " -- ", " — "])
def test_a_reason_may_follow_a_separator(separator):
    text = f"swap-space: 4  # sits-doctor: ignore[SITS204]{separator}legacy image\n"
    found, _ = suppressions.directives(text, "serve.yaml")
    assert found[0].reason == "legacy image"


@pytest.mark.parametrize("codes", ["SITS2", "SITS20", "SITS204", "SITS205, SITS204", "SITS3,SITS204"])
def test_codes_and_prefixes_suppress_what_they_start(codes):
    text = f"swap-space: 4  # sits-doctor: ignore[{codes}] legacy\n"
    f = make_finding("SITS204", "serve.yaml", 1, 1, "/swap-space")
    assert run({"serve.yaml": text}, [f]).suppressed == [f]


@pytest.mark.parametrize("codes", ["SITS3", "SITS2041", "SITS205", "SITS21"])
def test_codes_that_do_not_cover_the_finding_do_not_suppress(codes):
    text = f"swap-space: 4  # sits-doctor: ignore[{codes}] legacy\n"
    f = make_finding("SITS204", "serve.yaml", 1, 1, "/swap-space")
    result = run({"serve.yaml": text}, [f])
    assert result.kept == [f]
    assert [p.kind for p in result.problems] == ["unused" if codes != "SITS2041" else "malformed"]


def test_a_partly_used_directive_reports_the_unused_codes():
    text = "swap-space: 4  # sits-doctor: ignore[SITS204, SITS205, SITS3] legacy\n"
    f = make_finding("SITS204", "serve.yaml", 1, 1, "/swap-space")
    result = run({"serve.yaml": text}, [f])
    assert result.suppressed == [f]
    assert result.problems == [
        Problem("serve.yaml", 1, 16, "unused codes SITS205, SITS3 in suppression: no SITS205 or SITS3 finding on line 1", "unused")
    ]


def test_one_unused_code_is_named_in_the_singular():
    text = "swap-space: 4  # sits-doctor: ignore[SITS204,SITS205] legacy\n"
    result = run({"serve.yaml": text}, [make_finding("SITS204", "serve.yaml", 1, 1, "/swap-space")])
    assert [p.message for p in result.problems] == ["unused code SITS205 in suppression: no SITS205 finding on line 1"]


def test_a_comment_alone_on_the_line_above_covers_the_next_line():
    text = "model: ./m\n# sits-doctor: ignore[SITS204] pinned image\nswap-space: 4\nmax-seq-len-to-capture: 8192\n"
    covered = make_finding("SITS204", "serve.yaml", 3, 1, "/swap-space")
    below = make_finding("SITS204", "serve.yaml", 4, 1, "/max-seq-len-to-capture")
    result = run({"serve.yaml": text}, [covered, below])
    assert (result.kept, result.suppressed, result.problems) == ([below], [covered], [])


def test_other_comment_lines_may_sit_between_the_directive_and_its_line():
    text = "# sits-doctor: ignore[SITS204] pinned image\n# see INFRA-12\n  # and the runbook\nswap-space: 4\n"
    found, _ = suppressions.directives(text, "serve.yaml")
    assert found[0].covers == (4, 4)
    f = make_finding("SITS204", "serve.yaml", 4, 1, "/swap-space")
    assert run({"serve.yaml": text}, [f]).suppressed == [f]


@pytest.mark.parametrize("text", [
    "# sits-doctor: ignore[SITS204] pinned image\n\nswap-space: 4\n",
    "# sits-doctor: ignore[SITS204] pinned image\n   \nswap-space: 4\n",
    "swap-space: 4\n# sits-doctor: ignore[SITS204] pinned image\n",
])
def test_a_blank_line_or_the_end_of_the_file_leaves_the_directive_covering_nothing(text):
    f = make_finding("SITS204", "serve.yaml", text.count("\n", 0, text.index("swap")) + 1, 1, "/swap-space")
    result = run({"serve.yaml": text}, [f])
    assert result.kept == [f]
    line = 1 if text.startswith("#") else 2
    assert result.problems == [Problem(
        "serve.yaml", line, 1,
        "unused suppression: it stands alone before a blank line or the end of the file, so it covers no line", "unused",
    )]


def test_a_trailing_comment_does_not_cover_the_next_line():
    text = "model: ./m  # sits-doctor: ignore[SITS204] legacy\nswap-space: 4\n"
    f = make_finding("SITS204", "serve.yaml", 2, 1, "/swap-space")
    assert run({"serve.yaml": text}, [f]).kept == [f]


K8S_ARGS = """\
containers:
  - name: vllm
    image: vllm/vllm-openai:v0.11.0
    args:
      # sits-doctor: ignore[SITS204] removed flags go with the v0.12 image bump
      - |
        vllm serve /models/mistral \\
          --max-seq-len-to-capture 8192 \\
          --num-scheduler-steps 8
      - --port 8000
"""


def test_a_directive_above_a_block_string_covers_every_line_of_it():
    inside = [make_finding("SITS204", "k8s.yaml", n, 11, "/containers/0/args/0") for n in (8, 9)]
    after = make_finding("SITS204", "k8s.yaml", 10, 9, "/containers/0/args/1")
    result = run({"k8s.yaml": K8S_ARGS}, inside + [after])
    assert (result.kept, result.suppressed, result.problems) == ([after], inside, [])
    assert suppressions.directives(K8S_ARGS, "k8s.yaml")[0][0].covers == (6, 9)


def test_an_unused_directive_over_a_block_names_its_lines():
    result = run({"k8s.yaml": K8S_ARGS}, [])
    assert [p.message for p in result.problems] == ["unused suppression: no SITS204 finding on lines 6-9"]


def test_a_directive_on_the_block_header_covers_the_block():
    text = K8S_ARGS.replace("      # sits-doctor: ignore[SITS204] removed flags go with the v0.12 image bump\n", "").replace(
        "- |", "- |  # sits-doctor: ignore[SITS204] legacy flags")
    f = make_finding("SITS204", "k8s.yaml", 8, 11, "/containers/0/args/0")
    assert run({"k8s.yaml": text}, [f]).suppressed == [f]


def test_the_same_line_directive_is_credited_before_the_one_above():
    text = "# sits-doctor: ignore[SITS204] block reason\nswap-space: 4  # sits-doctor: ignore[SITS204] line reason\n"
    f = make_finding("SITS204", "serve.yaml", 2, 1, "/swap-space")
    result = run({"serve.yaml": text}, [f])
    assert result.suppressed == [f]
    assert result.problems == [Problem("serve.yaml", 1, 1, "unused suppression: no SITS204 finding on line 2", "unused")]


def test_the_nearest_directive_above_is_credited_first():
    text = "# sits-doctor: ignore[SITS2] far\n# sits-doctor: ignore[SITS204] near\nswap-space: 4\n"
    f = make_finding("SITS204", "serve.yaml", 3, 1, "/swap-space")
    result = run({"serve.yaml": text}, [f])
    assert [(p.line, p.message) for p in result.problems] == [(1, "unused suppression: no SITS2 finding on line 3")]


def test_an_unused_directive_is_reported_in_a_file_without_findings():
    result = run({"serve.yaml": SERVE}, [])
    assert result.problems == [Problem("serve.yaml", 2, 16, "unused suppression: no SITS204 finding on line 2", "unused")]


@pytest.mark.parametrize("comment,message", [
    ("# sits-doctor: ignroe[SITS204] legacy", "malformed suppression: expected `# sits-doctor: ignore[CODE, ...] reason`"),
    ("# sits-doctor ignore[SITS204] legacy", "malformed suppression: expected `# sits-doctor: ignore[CODE, ...] reason`"),
    ("# sits-doctor: ignore SITS204 legacy", "malformed suppression: expected `# sits-doctor: ignore[CODE, ...] reason`"),
    ("# Sits-Doctor: ignore[SITS204] legacy", "malformed suppression: expected `# sits-doctor: ignore[CODE, ...] reason`"),
    ("# sits-doctor: ignore[] legacy", "malformed suppression: '' is not a rule code or prefix (such as SITS204 or SITS2)"),
    ("# sits-doctor: ignore[sits204] legacy", "malformed suppression: 'sits204' is not a rule code or prefix (such as SITS204 or SITS2)"),
    ("# sits-doctor: ignore[SITS204,] legacy", "malformed suppression: '' is not a rule code or prefix (such as SITS204 or SITS2)"),
    ("# sits-doctor: ignore[swap-space] legacy", "malformed suppression: 'swap-space' is not a rule code or prefix (such as SITS204 or SITS2)"),
])
def test_a_malformed_directive_does_not_suppress_and_is_reported(comment, message):
    text = f"swap-space: 4  {comment}\n"
    f = make_finding("SITS204", "serve.yaml", 1, 1, "/swap-space")
    result = run({"serve.yaml": text}, [f])
    assert result.kept == [f]
    assert result.problems == [Problem("serve.yaml", 1, 16, message, "malformed")]


def test_a_directive_later_in_a_comment_is_found_at_its_own_column():
    text = "swap-space: 4  # old note # sits-doctor: ignore[SITS204] legacy\n"
    found, _ = suppressions.directives(text, "serve.yaml")
    assert (found[0].line, found[0].col, found[0].reason) == (1, 27, "legacy")


def test_other_comments_are_left_alone():
    text = "swap-space: 4  # noqa: SITS204\n# sits doctor is great\n# sits-doctor runs in CI\n# see # sits-doctor docs\n"
    assert run({"serve.yaml": text}, []).problems == []


def test_a_directive_inside_a_string_is_not_a_suppression():
    text = 'served-model-name: "m  # sits-doctor: ignore[SITS204] legacy"\n'
    f = make_finding("SITS204", "serve.yaml", 1, 1, "/served-model-name")
    result = run({"serve.yaml": text}, [f])
    assert (result.kept, result.problems) == ([f], [])


def test_json_files_are_not_read_for_comments():
    text = '{"swap-space": 4}\n# sits-doctor: ignore[SITS204] not JSON\n'
    f = make_finding("SITS204", "config.json", 1, 2, "/swap-space")
    result = run({"config.json": text}, [f])
    assert (result.kept, result.problems) == ([f], [])


def test_findings_in_files_without_text_are_kept():
    f = make_finding("SITS204", "elsewhere.yaml", 2, 1, "/swap-space")
    assert run({"serve.yaml": "model: ./m\n"}, [f]).kept == [f]


def test_an_unscannable_file_reports_why_its_comments_were_not_read():
    text = "a: 1\nb: @x  # sits-doctor: ignore[SITS204] x\n"
    result = run({"serve.yaml": text}, [])
    assert result.problems == [Problem(
        "serve.yaml", 2, 4, "suppression comments could not be read: found character '@' that cannot start any token",
        "unreadable",
    )]


def test_problems_come_sorted_by_file_and_position():
    texts = {"b.yaml": "x: 1  # sits-doctor: ignore[SITS204]\n", "a.yaml": "y: 1\nx: 1  # sits-doctor: ignore[SITS204] r\n"}
    result = run(texts, [])
    assert [(p.file, p.line, p.kind) for p in result.problems] == [("a.yaml", 2, "unused"), ("b.yaml", 1, "no-reason")]


# --- .sits-doctor-ignore.toml -------------------------------------------------------------------

GENAI = '{\n  "search": {\n    "max_length": 131072,\n    "past_present_share_buffer": true\n  },\n  "searchx": 1\n}\n'


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "phi3").mkdir(parents=True)
    (tmp_path / "models" / "phi3" / "genai_config.json").write_text(GENAI, encoding="utf-8")
    return tmp_path


def ignore_file(folder: Path, text: str) -> Path:
    path = folder / ".sits-doctor-ignore.toml"
    path.write_text(text, encoding="utf-8")
    return path


def entry(path="models/*/genai_config.json", pointer="/search", code="SITS201", reason="measured: fits in 80 GB", extra=""):
    return f'[[ignore]]\npath = "{path}"\npointer = "{pointer}"\ncode = "{code}"\nreason = "{reason}"\n{extra}'


GENAI_FILE = "models/phi3/genai_config.json"


def genai_finding(pointer="/search/max_length", code="SITS201"):
    return make_finding(code, GENAI_FILE, 3, 5, pointer)


def test_a_toml_entry_suppresses_the_pointer_and_everything_below_it(project):
    ignore_file(project, entry())
    below, at, sibling = genai_finding(), genai_finding("/search"), genai_finding("/searchx")
    result = run({GENAI_FILE: GENAI}, [below, at, sibling])
    assert (result.kept, result.suppressed, result.problems, result.errors) == ([sibling], [below, at], [], [])


def test_an_empty_pointer_covers_the_whole_document(project):
    ignore_file(project, entry(pointer=""))
    f = genai_finding("/searchx")
    assert run({GENAI_FILE: GENAI}, [f]).suppressed == [f]


@pytest.mark.parametrize("code,suppressed", [("SITS2", True), ("SITS201", True), ("SITS204", False), ("SITS3", False)])
def test_a_toml_code_is_a_code_or_prefix(project, code, suppressed):
    ignore_file(project, entry(code=code))
    f = genai_finding()
    assert run({GENAI_FILE: GENAI}, [f]).suppressed == ([f] if suppressed else [])


@pytest.mark.parametrize("glob,matches", [
    ("models/*/genai_config.json", True),
    ("models/phi3/genai_config.json", True),
    ("./models/phi3/genai_config.json", True),
    ("models/phi?/genai_config.json", True),
    ("models/[pq]hi3/*.json", True),
    ("models/[!p]hi3/*.json", False),
    ("**/genai_config.json", True),
    ("models/**", True),
    ("*.json", False),  # '*' stays within a folder
    ("models/*.json", False),
    ("genai_config.json", False),  # relative to the toml's folder, not a file name anywhere
    ("models/phi3/genai_config.jsonx", False),
])
def test_toml_paths_are_globs_relative_to_the_toml_folder(project, glob, matches):
    ignore_file(project, entry(path=glob))
    f = genai_finding()
    assert run({GENAI_FILE: GENAI}, [f]).suppressed == ([f] if matches else [])


def test_glob_regex_spells_folders_and_character_classes():
    assert suppressions.glob_regex("a/**/b?.json").pattern == r"a/(?:.*/)?b[^/]\.json"
    assert suppressions.glob_regex("[!x]*").pattern == "[^x][^/]*"


def test_the_closest_toml_wins(project):
    ignore_file(project, entry(path="models/phi3/genai_config.json"))
    ignore_file(project / "models", entry(path="phi3/genai_config.json", code="SITS3"))
    f = genai_finding()
    result = run({GENAI_FILE: GENAI}, [f])
    assert result.kept == [f]
    assert result.problems == [Problem(
        "models/.sits-doctor-ignore.toml", 1, 1,
        "unused suppression: [[ignore]] SITS3 at phi3/genai_config.json /search matched no finding", "unused",
    )]


def test_find_ignore_file_looks_in_the_folder_then_above(project):
    before = suppressions.find_ignore_file(project / GENAI_FILE)
    assert before is None or not before.is_relative_to(project.resolve())  # none in the project yet
    top = ignore_file(project, entry())
    cache: dict = {}
    assert suppressions.find_ignore_file(project / GENAI_FILE, cache) == top
    assert cache[(project / "models" / "phi3").resolve()] == top
    assert cache[(project / "models").resolve()] == top


@pytest.mark.parametrize("today,works", [(date(2027, 1, 30), True), (date(2027, 1, 31), False), (date(2027, 2, 1), False)])
def test_an_entry_stops_working_on_its_expiry_date_and_is_reported(project, today, works):
    ignore_file(project, entry(extra="expires = 2027-01-31\n"))
    f = genai_finding()
    result = run({GENAI_FILE: GENAI}, [f], today)
    assert result.suppressed == ([f] if works else [])
    expired = Problem(
        ".sits-doctor-ignore.toml", 1, 1,
        "expired suppression: [[ignore]] SITS201 at models/*/genai_config.json /search expired on 2027-01-31; "
        "the findings it covered are reported again (fix them, or renew the entry with a new date)", "expired",
    )
    assert result.problems == ([] if works else [expired])


def test_an_expired_entry_is_reported_only_when_a_file_it_covers_is_checked(project):
    """Checking one file of a repository does not report expired entries about others."""
    ignore_file(project, entry(path="models/other/genai_config.json", extra="expires = 2020-01-31\n"))
    f = genai_finding()
    result = run({GENAI_FILE: GENAI}, [f], date(2027, 1, 1))
    assert result.kept == [f] and result.problems == []


def test_an_unused_entry_is_reported_at_its_header_line(project):
    ignore_file(project, "# accepted findings\n\n" + entry() + "\n" + entry(pointer="/searchx", reason="legacy"))
    f = genai_finding()
    result = run({GENAI_FILE: GENAI}, [f])
    assert result.suppressed == [f]
    assert result.problems == [Problem(
        ".sits-doctor-ignore.toml", 9, 1,
        "unused suppression: [[ignore]] SITS201 at models/*/genai_config.json /searchx matched no finding", "unused",
    )]


def test_an_entry_for_a_file_that_was_not_checked_is_not_judged(project):
    ignore_file(project, entry(path="other/genai_config.json"))
    assert run({GENAI_FILE: GENAI}, []).problems == []


def test_a_toml_entry_applies_to_yaml_files_too(project):
    (project / "serve.yaml").write_text("model: ./m\nswap-space: 4\n", encoding="utf-8")
    ignore_file(project, entry(path="serve.yaml", pointer="/swap-space", code="SITS204"))
    f = make_finding("SITS204", "serve.yaml", 2, 1, "/swap-space")
    assert run({"serve.yaml": "model: ./m\nswap-space: 4\n"}, [f]).suppressed == [f]


def test_an_inline_comment_is_credited_before_a_toml_entry(project):
    text = "model: ./m\nswap-space: 4  # sits-doctor: ignore[SITS204] legacy\n"
    (project / "serve.yaml").write_text(text, encoding="utf-8")
    ignore_file(project, entry(path="serve.yaml", pointer="", code="SITS204"))
    f = make_finding("SITS204", "serve.yaml", 2, 1, "/swap-space")
    result = run({"serve.yaml": text}, [f])
    assert result.suppressed == [f]
    assert [(p.file, p.kind) for p in result.problems] == [(".sits-doctor-ignore.toml", "unused")]


def test_a_broken_toml_is_an_error_and_its_findings_are_kept(project):
    ignore_file(project, "[[ignore]]\npath = \n")
    f = genai_finding()
    result = run({GENAI_FILE: GENAI}, [f])
    assert result.kept == [f]
    assert [(e.path, e.line, e.col) for e in result.errors] == [(".sits-doctor-ignore.toml", 2, 8)]
    assert result.errors[0].message.startswith("invalid TOML: ")


def load(project: Path, text: str) -> InputError:
    with pytest.raises(InputError) as err:
        suppressions.load_ignore_file(ignore_file(project, text))
    return err.value


@pytest.mark.parametrize("text,message,line,col", [
    ("[[ignore]]\npath = \n", "invalid TOML: Invalid value", 2, 8),
    ('\n\nreason = "x"\n', "unknown key 'reason': entries go in [[ignore]] tables", 3, 1),
    ('ignore = "all"\n', "'ignore' must be an array of tables: write each entry under [[ignore]]", 1, 1),
    (entry() + "\n" + '[[ignore]]\npath = "a.json"\npointer = ""\ncode = "SITS2"\n',
     "[[ignore]] entry 2: 'reason' is missing (every suppression says why)", 7, 1),
    ('[[ignore]]\npointer = ""\ncode = "SITS2"\nreason = "r"\n', "[[ignore]] entry 1: 'path' is missing", 1, 1),
    (entry(reason="  "), "[[ignore]] entry 1: 'reason' is empty (every suppression says why)", 5, 1),
    (entry(code="E501"), "[[ignore]] entry 1: 'code' 'E501' is not a rule code or prefix (such as SITS204 or SITS2)", 4, 1),
    (entry(pointer="search/max_length"), "[[ignore]] entry 1: 'pointer' 'search/max_length' is not a JSON Pointer: empty, or starting with '/'", 3, 1),
    (entry(path=" "), "[[ignore]] entry 1: 'path' is empty", 2, 1),
    (entry(extra='expires = "2027-01-31"\n'), "[[ignore]] entry 1: 'expires' must be a TOML date such as 2027-01-31 (no quotes, no time)", 6, 1),
    (entry(extra="expires = 2027-01-31T10:00:00\n"), "[[ignore]] entry 1: 'expires' must be a TOML date such as 2027-01-31 (no quotes, no time)", 6, 1),
    (entry(extra="  until = 2027-01-31\n"), "[[ignore]] entry 1: unknown key 'until' (expected path, pointer, code, reason, expires)", 6, 3),
    ('[[ignore]]\npath = "a.json"\npointer = ""\ncode = 201\nreason = "r"\n', "[[ignore]] entry 1: 'code' must be a string", 4, 1),
])
def test_toml_errors_say_what_and_where(project, text, message, line, col):
    err = load(project, text)
    assert (err.path, err.message, err.line, err.col) == (".sits-doctor-ignore.toml", message, line, col)


def test_inline_tables_load_without_entry_lines(project):
    loaded = suppressions.load_ignore_file(ignore_file(
        project, 'ignore = [{path = "a.json", pointer = "", code = "SITS2", reason = "r", expires = 2030-01-01}]\n'))
    e = loaded.entries[0]
    assert (e.path, e.pointer, e.code, e.reason, e.expires, e.line) == ("a.json", "", "SITS2", "r", date(2030, 1, 1), None)


def test_an_empty_toml_has_no_entries(project):
    assert suppressions.load_ignore_file(ignore_file(project, "# nothing yet\n")).entries == ()


def test_comment_dataclass_is_what_scan_returns():
    assert suppressions.scan_yaml("a: 1 # c\n")[0] == [Comment(1, 6, "# c", False)]


def test_the_documented_ignore_file_loads(tmp_path):
    docs = (Path(__file__).resolve().parent.parent / "docs" / "ci.md").read_text(encoding="utf-8")
    block = docs.split("```toml\n", 1)[1].split("```", 1)[0]
    loaded = suppressions.load_ignore_file(ignore_file(tmp_path, block))
    e = loaded.entries[0]
    assert (e.path, e.pointer, e.code, e.expires, e.line) == ("models/*/genai_config.json", "/search", "SITS201", date(2027, 1, 31), 1)
