"""SITS201/SITS204 agree with vLLM's own parsers: every probe that tools/gen_vllm_options.py ran
through each release's real argument parser (sits_doctor/frameworks/data/vllm_options.json) is
checked here as a Kubernetes container's args, at the first and the last release of each run of
identical results: an error finding ⇔ the parser refused it.

Probes the rules do not judge are listed in NOT_JUDGED with the reason; an entry there that starts
agreeing fails the test (so the list only shrinks)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from conftest import k8s_deployment, write
from sits_doctor import CheckOptions, check

DATA = json.loads((Path(__file__).resolve().parents[2] / "sits_doctor" / "frameworks" / "data"
                   / "vllm_options.json").read_text(encoding="utf-8"))

_V090 = ("0.9.0", "0.9.0.1")
NOT_JUDGED: dict[str, tuple[tuple[str, ...], str]] = {
    """--compilation-config '{"mode": 3}'""": (_V090, "0.9.0 and 0.9.0.1 parse the JSON with a lambda that "
                                               "refuses an unknown field; CompilationConfig fields are not checked"),
    "--compilation-config.mode 3": (_V090, "the same two releases refuse the field"),
    """--limit-mm-per-prompt '{"image": 2}'""": (("0.6.0", "0.6.1.post2", "0.6.2", "0.8.4"),
                                                 "before 0.9 the value is key=value pairs, not JSON; value formats "
                                                 "of dict options are not checked"),
    # the run from 0.10.0 to the newest release in the table (its last release is a case too)
    "--limit-mm-per-prompt image=2": (("0.10.0", DATA["releases"][-1]), "from 0.10 the value must be JSON; value formats of "
                                                           "dict options are not checked"),
}


def _cases():
    for probe, results in DATA["probes"].items():
        for run in results:
            for release in sorted({run["first"], run["last"]}):
                yield pytest.param(probe, release, run["ok"], run.get("error"), id=f"{probe} @ {release}")


def _verdict(tmp_path, monkeypatch, probe: str, release: str) -> list[str]:
    args = ", ".join(json.dumps(a) for a in shlex.split(probe))
    write(tmp_path, "k8s.yaml", k8s_deployment('          command: ["vllm", "serve", "org/model"]',
                                               f"          args: [{args}]"))
    monkeypatch.chdir(tmp_path)
    report = check(["k8s.yaml"], CheckOptions(targets=[f"vllm=={release}"], isolated=True,
                                               select=["SITS201", "SITS204"]))
    assert not report.errors and not report.internal_errors, (report.errors, report.internal_errors)
    return [f.render() for f in report.findings if f.severity.value == "error"]


@pytest.mark.parametrize(("probe", "release", "ok", "error"), list(_cases()))
def test_rules_agree_with_the_release_parser(tmp_path, monkeypatch, hermetic, probe, release, ok, error):
    errors = _verdict(tmp_path, monkeypatch, probe, release)
    agrees = (not errors) == ok
    releases, reason = NOT_JUDGED.get(probe, ((), ""))
    if release in releases:
        assert not agrees, f"{probe} @ {release} now agrees: drop it from NOT_JUDGED"
        pytest.xfail(reason)
    assert agrees, f"parser: {'accepts' if ok else 'refuses: ' + str(error)}; sits-doctor: {errors or 'no error'}"
