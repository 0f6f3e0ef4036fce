"""kernels/host_math.py: the launchers' integer helpers give triton's own numbers."""

from __future__ import annotations

import pytest

triton = pytest.importorskip("triton")

from sits_doctor.kernels.host_math import cdiv, pow2_at_least  # noqa: E402


def test_pow2_at_least_is_triton_next_power_of_2():
    for n in [*range(0, 5000), 8191, 8192, 8193, 65535, 65536, 2**31 - 1, 2**31, 2**40 + 3]:
        assert pow2_at_least(n) == triton.next_power_of_2(n), n


def test_cdiv_is_triton_cdiv():
    for a in range(0, 2100, 7):
        for b in (1, 2, 3, 16, 64, 128, 255, 4096):
            assert cdiv(a, b) == triton.cdiv(a, b), (a, b)


def test_no_launcher_calls_triton_helpers_on_the_host():
    """The launchers use these instead of triton.cdiv / triton.next_power_of_2 (2 µs a call)."""
    from pathlib import Path

    import sits_doctor.kernels as k

    for path in Path(k.__file__).parent.glob("*.py"):
        text = path.read_text()
        assert "triton.cdiv(" not in text and "triton.next_power_of_2(" not in text, path.name
