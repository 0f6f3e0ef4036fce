"""The Python API takes the values the command line takes (CheckOptions from strings)."""

from __future__ import annotations

import pytest

from conftest import FIXTURES
from sits_doctor import CheckOptions, check
from sits_doctor.finding import Severity

BAD = FIXTURES / "vllm" / "bad_swap_space.yaml"  # one SITS204 error


def test_strings_as_the_cli_writes_them():
    as_cli = check([BAD], CheckOptions(isolated=True, select="SITS204,SITS201", fail_on="error", gpu="H100",
                                       gpu_memory="79.19GiB"))
    typed = check([BAD], CheckOptions(isolated=True, select=["SITS204", "SITS201"], fail_on=Severity.ERROR,
                                      gpu="H100", gpu_memory=79.19 * 2**30))
    assert [f.render() for f in as_cli.findings] == [f.render() for f in typed.findings] != []
    assert as_cli.fail_on is Severity.ERROR and as_cli.exit_code == typed.exit_code == 1


def test_a_comma_list_in_a_list_is_split():
    report = check([BAD], CheckOptions(isolated=True, ignore=["SITS001, SITS204"]))
    assert [f.code for f in report.findings] == []


@pytest.mark.parametrize("opts, message", [
    (dict(fail_on="fatal"), "fail_on 'fatal': expected error, warning or info"),
    (dict(gpu_memory="80 gigs"), "gpu_memory '80 gigs': expected a size such as 79.19GiB or 81920MiB"),
])
def test_a_bad_string_is_an_input_error(opts, message):
    report = check([BAD], CheckOptions(isolated=True, **opts))
    assert report.exit_code == 2 and report.errors[0].message == message
