"""One home per fact (DESIGN.md "Knowledge, facts and fixes"): a vLLM option name, a flag or a
framework version is written in sits_doctor/frameworks/ and nowhere else in the engine, the
loaders, the fixers or the rules. Docstrings and comments may mention them; code may not."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from sits_doctor.frameworks import vllm as fw

REPO = Path(__file__).resolve().parent.parent
CODE = sorted(
    [p for p in (REPO / "sits_doctor").rglob("*.py") if "frameworks" not in p.parts and "schemas" not in p.parts]
    + list((REPO / "rules").glob("*.py")) + list((REPO / "fixes").glob("*.py"))
)
VERSION = re.compile(r"\d+\.\d+(\.\d+)?(\.post\d+|rc\d+)?")
# Version-looking strings that are not framework versions: SARIF's own version and the CVSS-like
# security-severity scores it carries, and this package's version.
NOT_FRAMEWORK_VERSIONS = {"sits_doctor/reporters/sarif.py", "sits_doctor/__init__.py"}


def _code_strings(path: Path):
    """String constants of the module that are not docstrings, with their line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_the_scan_sees_a_literal(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('"""doc max_model_len"""\nx = plan.get("max_model_len")\n', encoding="utf-8")
    assert [v for _, v in _code_strings(probe)] == ["max_model_len"]


@pytest.mark.parametrize("path", CODE, ids=lambda p: str(p.relative_to(REPO)))
def test_no_vllm_option_or_version_literal_outside_frameworks(path: Path):
    rel = path.relative_to(REPO).as_posix()
    # Generic names ("model", "quantization", "-q") mean other things too (a fact, a section of
    # another framework's file, our own CLI's flag): only vLLM-specific names are checked.
    specific = [o for o in fw.OPTIONS.values() if not o.generic]
    names = {o.name for o in specific}
    flags = {o.flag for o in specific}
    found = []
    for line, value in _code_strings(path):
        head = value.lstrip("-").split("=")[0].split(".")[0].replace("-", "_")
        if value in names or value in flags or (value.startswith("--") and head in names):
            found.append(f"{rel}:{line}: option {value!r}")
        elif VERSION.fullmatch(value) and rel not in NOT_FRAMEWORK_VERSIONS:
            found.append(f"{rel}:{line}: version {value!r}")
    assert found == [], "move these into sits_doctor/frameworks/: " + "; ".join(found)


def test_engine_knows_the_ignore_file_name():
    from sits_doctor import engine, suppressions

    assert engine.IGNORE_FILE == suppressions.IGNORE_FILE


def test_every_newest_comes_from_its_frameworks_data():
    """No NEWEST written by hand beside the data that knows it (issue 28 #3)."""
    import json

    from sits_doctor.frameworks import ortgenai, ortgenai_releases, transformers, trtllm, vllm
    from sits_doctor.versions import NEWEST_KNOWN

    data = Path(vllm.__file__).parent / "data"
    read = lambda name: json.loads((data / name).read_text(encoding="utf-8"))  # noqa: E731
    assert NEWEST_KNOWN["vllm"] == read("vllm_options.json")["releases"][-1]
    assert NEWEST_KNOWN["trtllm"] == read("trtllm_options.json")["releases"][-1] == trtllm.NEWEST
    assert NEWEST_KNOWN["ortgenai"] == read("ortgenai_keys.json")["versions"][-1] == ortgenai.NEWEST
    assert NEWEST_KNOWN["hf"] == read("hf_runtime.json")["transformers"] == transformers.NEWEST
    # the transformers tables were made at one release
    assert read("hf_config_defaults.json")["transformers"] == transformers.NEWEST
    assert ortgenai_releases.releases()[-1] == ortgenai.NEWEST and dict(NEWEST_KNOWN).keys() == {"vllm", "trtllm", "ortgenai", "hf"}
    for source in (ortgenai, trtllm, transformers):
        assert 'NEWEST = "' not in Path(source.__file__).read_text(encoding="utf-8")
