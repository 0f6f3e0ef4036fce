"""act_calib kernels against their float64 references under the Triton interpreter, and the
runtime calibrator against brute force.

Fresh random inputs each run (the seed is in the failure message), awkward shapes (M 1/3/257,
K 1/7/1000/4109), rows that are all zero, negative-only, 10⁴× outliers, tiny (1e-30), and rows
built so that x/scale lands exactly on rounding ties. Outputs are preallocated and poisoned with
values the kernels never write (int8 -128, fp8 NaN 0x7F, NaN scales), then compared exactly:
int8 and fp8 bytes bit for bit, scales bit for bit (stricter than the 1e-6 relative the brief
allows — the kernel's scale is one correctly rounded fp32 division, like the reference's).
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import random
from fractions import Fraction

import numpy as np
import pytest
import torch

from sits_doctor.kernels.act_quant import (
    QMAX,
    SCALE_MIN,
    RuntimeCalibrator,
    bench_cases,
    quantize_per_tensor,
    quantize_per_tensor_reference,
    quantize_per_token,
    quantize_per_token_reference,
    torch_per_token,
)

I8, F8 = torch.int8, torch.float8_e4m3fn
POISON = {I8: -128, F8: 0x7F}  # -128: outside the symmetric clamp; 0x7F: e4m3fn NaN


def fp8_values() -> torch.Tensor:
    """Every finite non-negative e4m3fn value, ascending, as fp32."""
    return torch.arange(0, 0x7F, dtype=torch.uint8).view(F8).float()


def make_input(M: int, K: int, in_dtype, out_dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    mag = 10 ** (torch.rand(M, 1, generator=g) * 2.5 - 2)  # 0.01 .. 3
    x = torch.randn(M, K, generator=g) * mag
    rows = list(range(M))
    if M >= 3:
        x[0] = 0.0  # all-zero row: scale floor, q == 0, no NaN
        x[1] = -x[1].abs()  # negative-only row
        x[2, int(torch.randint(K, (1,), generator=g))] = 1e4 * float(mag[2])  # massive activation
    if M >= 4:
        # a tie row: its absmax is QMAX, so scale == 1 and each x is its own quotient
        qmax = QMAX[out_dtype]
        if out_dtype == I8:
            ties = torch.arange(-127, 127).float() + 0.5
        else:
            v = fp8_values()
            mids = (v[1:] + v[:-1]) / 2
            ties = torch.cat([mids, -mids])
        pick = ties[torch.randint(len(ties), (K,), generator=g)]
        pick[0] = qmax
        x[3] = pick
    if M >= 5 and in_dtype != torch.float16:
        x[4] *= 1e-30  # tiny row: scale ~1e-32, still normal fp32
    return x.to(in_dtype)


def poisoned(shape, dtype, scale_shape):
    q = torch.empty(shape, dtype=dtype)
    q.view(torch.uint8).fill_(POISON[dtype] & 0xFF)
    s = torch.full(scale_shape, float("nan"), dtype=torch.float32)
    return q, s


def assert_same(q, s, rq, rs, what):
    qb, rb = q.view(torch.uint8), rq.view(torch.uint8)
    assert not (qb == (POISON[q.dtype] & 0xFF)).any(), f"{what}: poison left in q (unwritten elements)"
    assert torch.isfinite(s).all(), f"{what}: non-finite / unwritten scales"
    bad = qb != rb
    if bad.any():
        idx = tuple(int(i) for i in bad.nonzero()[0])
        ours = q[idx].float().item() if q.dtype == F8 else int(q[idx])
        ref = rq[idx].float().item() if q.dtype == F8 else int(rq[idx])
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.numel()} elements differ; first at "
                             f"{idx}: {ours!r} vs reference {ref!r}")
    assert s.shape == rs.shape, f"{what}: scales shape {tuple(s.shape)} vs {tuple(rs.shape)}"
    sd = ((s.double() - rs.double()).abs() / rs.double()).max().item() if s.numel() else 0.0
    assert torch.equal(s, rs), f"{what}: scales differ, max relative {sd:.3e}"


def case_seed(*parts) -> int:
    return random.Random(repr(parts) + str(random.random())).randrange(2**31)


SHAPES = [(1, 1), (1, 7), (3, 7), (3, 1000), (257, 1), (257, 7), (1, 4109), (3, 4109), (257, 1000)]
IN_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


# -------------------------------------------------------------------------------- per token


@pytest.mark.parametrize("out_dtype", [I8, F8], ids=["int8", "fp8"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_per_token_matches_reference(shape, out_dtype):
    M, K = shape
    # one input dtype per (shape, out) pair, rotating, keeps the interpreter time down
    in_dtype = IN_DTYPES[(SHAPES.index(shape) + (out_dtype == F8)) % 3]
    seed = case_seed(shape, out_dtype)
    x = make_input(M, K, in_dtype, out_dtype, seed)
    out = poisoned((M, K), out_dtype, (M, 1))
    q, s = quantize_per_token(x, out_dtype, out=out)
    assert q is out[0] and s is out[1]
    rq, rs = quantize_per_token_reference(x, out_dtype)
    assert_same(q, s, rq, rs, f"per-token {M}x{K} {in_dtype}->{out_dtype} seed={seed}")


@pytest.mark.parametrize("in_dtype", IN_DTYPES, ids=str)
@pytest.mark.parametrize("out_dtype", [I8, F8], ids=["int8", "fp8"])
def test_per_token_each_input_dtype(in_dtype, out_dtype):
    seed = case_seed(in_dtype, out_dtype)
    x = make_input(9, 300, in_dtype, out_dtype, seed)
    out = poisoned((9, 300), out_dtype, (9, 1))
    q, s = quantize_per_token(x, out_dtype, out=out)
    rq, rs = quantize_per_token_reference(x, out_dtype)
    assert_same(q, s, rq, rs, f"per-token {in_dtype}->{out_dtype} seed={seed}")


@pytest.mark.parametrize("shape,block_m,block_k", [((3, 4109), 1, 1024), ((37, 1000), 2, 256),
                                                   ((5, 7), 4, 2)])
@pytest.mark.parametrize("out_dtype", [I8, F8], ids=["int8", "fp8"])
def test_per_token_looped_rows(shape, block_m, block_k, out_dtype):
    """Rows longer than the tile: absmax loop, then the quantize loop (second read)."""
    M, K = shape
    seed = case_seed(shape, out_dtype, "loop")
    x = make_input(M, K, torch.bfloat16, out_dtype, seed)
    out = poisoned((M, K), out_dtype, (M, 1))
    q, s = quantize_per_token(x, out_dtype, out=out, block_m=block_m, block_k=block_k)
    rq, rs = quantize_per_token_reference(x, out_dtype)
    assert_same(q, s, rq, rs, f"looped {M}x{K} bm={block_m} bk={block_k} seed={seed}")


@pytest.mark.parametrize("out_dtype", [I8, F8], ids=["int8", "fp8"])
def test_per_token_reciprocal_mode(out_dtype):
    seed = case_seed(out_dtype, "recip")
    x = make_input(40, 1000, torch.float32, out_dtype, seed)
    out = poisoned((40, 1000), out_dtype, (40, 1))
    q, s = quantize_per_token(x, out_dtype, exact_div=False, out=out)
    rq, rs = quantize_per_token_reference(x, out_dtype, exact_div=False)
    assert_same(q, s, rq, rs, f"per-token exact_div=False seed={seed}")


def test_reciprocal_mode_is_a_different_rounding():
    """The flag matters: multiplying by RN(1/scale) rounds some quotients differently (torch only).
    On fp32 input int8 sees it (a 1-ulp change of v decides k + 0.5 ties) and fp8 rarely does
    (often not at all in 2M elements); bf16 input, with its short mantissa, lands near midpoints
    more often (≈ 2e-4 of elements for both)."""
    x = torch.randn(512, 4096, generator=torch.Generator().manual_seed(3))
    for dtype in (I8, F8):
        a, _ = quantize_per_token_reference(x, dtype, exact_div=True)
        b, _ = quantize_per_token_reference(x, dtype, exact_div=False)
        n = int((a.view(torch.uint8) != b.view(torch.uint8)).sum())
        assert (n > 0 or dtype == F8) and n < 1e-4 * x.numel(), (dtype, n)


def test_layouts_rank3_strided_and_transposed():
    g = torch.Generator().manual_seed(case_seed("layout"))
    x3 = torch.randn(2, 3, 37, generator=g, dtype=torch.float32).to(torch.bfloat16)
    q, s = quantize_per_token(x3, F8)
    rq, rs = quantize_per_token_reference(x3, F8)
    assert q.shape == (2, 3, 37) and s.shape == (2, 3, 1)
    assert torch.equal(q.view(torch.uint8), rq.view(torch.uint8)) and torch.equal(s, rs)

    wide = torch.full((5, 64), float("nan"), dtype=torch.float16)
    wide[:, 3:40] = torch.randn(5, 37, generator=g).half()
    view = wide[:, 3:40]  # row stride 64, last dim contiguous: used in place
    q, s = quantize_per_token(view, I8)
    rq, rs = quantize_per_token_reference(view, I8)
    assert torch.equal(q, rq) and torch.equal(s, rs)

    xt = torch.randn(37, 5, generator=g).t()  # last dim not contiguous: copied first
    q, s = quantize_per_token(xt, I8)
    rq, rs = quantize_per_token_reference(xt, I8)
    assert torch.equal(q, rq) and torch.equal(s, rs)

    q, s = quantize_per_token(torch.empty(0, 8), I8)
    assert q.shape == (0, 8) and s.shape == (0, 1)


def test_validation_errors():
    x = torch.randn(2, 8)
    with pytest.raises(ValueError, match="int8 or torch.float8_e4m3fn"):
        quantize_per_token(x, torch.uint8)
    with pytest.raises(ValueError, match="float16, bfloat16 or float32"):
        quantize_per_token(x.double(), I8)
    with pytest.raises(ValueError, match="at least one dimension"):
        quantize_per_token(torch.tensor(1.0), I8)
    with pytest.raises(ValueError, match="empty last dimension"):
        quantize_per_token(torch.empty(2, 0), I8)
    with pytest.raises(ValueError, match="power of two"):
        quantize_per_token(x, I8, block_k=3)
    with pytest.raises(ValueError, match="out q must be"):
        quantize_per_token(x, I8, out=(torch.empty(2, 8, dtype=F8), torch.empty(2, 1)))
    with pytest.raises(ValueError, match="positive and finite"):
        quantize_per_tensor(x, I8, scale=0.0)
    with pytest.raises(ValueError, match="one floating-point element"):
        quantize_per_tensor(x, I8, scale=torch.ones(2))


# -------------------------------------------------------------------------------- per tensor


@pytest.mark.parametrize("out_dtype", [I8, F8], ids=["int8", "fp8"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (257, 7), (3, 4109), (257, 1000)],
                         ids=lambda s: f"{s[0]}x{s[1]}")
def test_per_tensor_dynamic(shape, out_dtype):
    M, K = shape
    in_dtype = IN_DTYPES[(M + K + (out_dtype == F8)) % 3]
    seed = case_seed(shape, out_dtype, "pt")
    x = make_input(M, K, in_dtype, out_dtype, seed)
    out = poisoned((M, K), out_dtype, (1,))
    q, s = quantize_per_tensor(x, out_dtype, out=out)
    rq, rs = quantize_per_tensor_reference(x, out_dtype)
    assert_same(q, s, rq, rs, f"per-tensor dynamic {M}x{K} {in_dtype} seed={seed}")


def test_per_tensor_dynamic_all_zero():
    q, s = quantize_per_tensor(torch.zeros(3, 5, dtype=torch.bfloat16), F8)
    assert s.item() == SCALE_MIN and not q.float().isnan().any() and (q.float() == 0).all()


@pytest.mark.parametrize("out_dtype", [I8, F8], ids=["int8", "fp8"])
@pytest.mark.parametrize("scale_kind", ["float", "tensor"])
def test_per_tensor_static_clips(out_dtype, scale_kind):
    """A static scale sized for the bulk of the data: the outliers saturate at ±QMAX, and the number
    of saturated elements is exactly what RuntimeCalibrator.clip_count predicts."""
    seed = case_seed(out_dtype, scale_kind, "static")
    x = make_input(33, 513, torch.bfloat16, out_dtype, seed)
    static = float(x.float().abs().quantile(0.999)) / QMAX[out_dtype]
    scale = static if scale_kind == "float" else torch.tensor([static], dtype=torch.float64)
    out = poisoned((33, 513), out_dtype, (1,))
    q, s = quantize_per_tensor(x, out_dtype, scale=scale, out=out)
    rq, rs = quantize_per_tensor_reference(x, out_dtype, scale=scale)
    assert_same(q, s, rq, rs, f"per-tensor static seed={seed}")
    clipped = RuntimeCalibrator.clip_count(x, s, out_dtype)
    saturated = int((q.float().abs() == QMAX[out_dtype]).sum())
    assert clipped > 0
    # saturated ⊇ clipped: values just under scale*QMAX may round up to QMAX without clipping
    assert saturated >= clipped
    assert clipped == int((x.double().abs() > s.double() * QMAX[out_dtype]).sum())


def test_fp8_rounding_ties_subnormals_and_saturation():
    """The e4m3fn conversion on every finite value, every midpoint (ties to even), one fp32 ulp
    either side of each midpoint, subnormals, ±0, and values past 448 (clamped, not NaN)."""
    v = fp8_values()
    mids = (v[1:] + v[:-1]) / 2
    up = torch.nextafter(mids, torch.tensor(float("inf")))
    down = torch.nextafter(mids, torch.tensor(0.0))
    extra = torch.tensor([449.0, 464.0, 479.9, 480.0, 1e6, 2.0**-10, 2.0**-12, 1e-30, 0.0, -0.0])
    pos = torch.cat([v, mids, up, down, extra])
    x = torch.cat([pos, -pos]).reshape(1, -1)
    out = poisoned(tuple(x.shape), F8, (1,))
    q, s = quantize_per_tensor(x, F8, scale=1.0, out=out)
    ref = x.clamp(-448, 448).to(F8)
    bad = q.view(torch.uint8) != ref.view(torch.uint8)
    assert not bad.any(), [(x[bad][i].item(), q[bad][i].float().item(), ref[bad][i].float().item())
                           for i in range(min(5, int(bad.sum())))]
    neg_zero = (x == 0) & torch.signbit(x)
    assert neg_zero.sum() >= 2 and (q.view(torch.uint8)[neg_zero] == 0x80).all()  # -0.0 keeps its sign


def test_int8_rounds_half_to_even():
    x = (torch.arange(-130, 130).float() + 0.5).reshape(2, -1)
    q, _ = quantize_per_tensor(x, I8, scale=1.0)
    assert torch.equal(q, torch.round(x).clamp(-127, 127).to(I8))
    assert q.min() == -127  # never -128


def test_reference_vs_all_float64_quotient():
    """Why the references round x/scale to fp32 before rounding to int8: against an all-float64
    quotient the only int8 differences are off-by-one where the fp32 quotient is exactly k + 0.5
    (the fp32 rounding moved it onto the tie, and half-to-even then picked the other side)."""
    g = torch.Generator().manual_seed(case_seed("f64"))
    x = torch.randn(256, 4096, generator=g).to(torch.bfloat16)
    q, s = quantize_per_token_reference(x, I8, exact_div=True)
    q64 = torch.round(x.double() / s.double()).clamp(-127, 127).to(I8)
    diff = q.int() - q64.int()
    v32 = (x.double() / s.double()).float()
    at_tie = (v32 - v32.floor()) == 0.5
    assert diff.abs().max() <= 1
    assert bool(at_tie[diff != 0].all())


def test_torch_peer_matches_reference():
    """bench_cases' eager peer computes the same thing (so timings compare like with like)."""
    seed = case_seed("peer")
    for dtype in (I8, F8):
        x = make_input(17, 300, torch.bfloat16, dtype, seed)
        pq, ps = torch_per_token(x, dtype)
        rq, rs = quantize_per_token_reference(x, dtype, exact_div=True)
        assert torch.equal(pq.view(torch.uint8), rq.view(torch.uint8)) and torch.equal(ps, rs)


def test_bench_cases_shape():
    cases = bench_cases("cpu")
    assert len(cases) == 2
    for name, ours, peers, nbytes in cases:
        assert "per-token" in name and callable(ours)
        assert [label for label, _ in peers] == ["torch eager", "torch.compile"]
        assert all(callable(fn) for _, fn in peers)
        assert nbytes == 8192 * 4096 * 3 + 8192 * 4


# -------------------------------------------------------------------------------- calibrator


def test_calibrator_tracks_ema_without_outliers():
    cal = RuntimeCalibrator(momentum=0.25, guard=4.0)
    g = torch.Generator().manual_seed(case_seed("ema"))
    r = None
    for i in range(12):
        x = torch.randn(4, 64, generator=g) * (1.0 + 0.1 * i)  # slow drift, never 4× the estimate
        b = float(x.abs().max())
        assert float(cal.observe(x)) == b
        r = b if r is None else r + 0.25 * (b - r)
        assert float(cal.running_absmax) == pytest.approx(r, rel=1e-6)
    assert cal.outliers == 0 and cal.batches == 12
    r32 = np.float32(cal.running_absmax.item())
    assert torch.equal(cal.scale(I8), torch.tensor([r32 / np.float32(127.0)]))
    assert cal.scale(F8).dtype == torch.float32 and cal.scale(F8).shape == (1,)


def test_calibrator_guards_outliers():
    cal = RuntimeCalibrator(momentum=0.1, guard=8.0)
    base = torch.linspace(-2.0, 2.0, 101)
    for _ in range(5):
        cal.observe(base)
    assert float(cal.running_absmax) == 2.0
    spike = base.clone()
    spike[7] = 2.0e4  # a 10⁴× massive activation
    cal.observe(spike)
    assert cal.outliers == 1
    assert float(cal.max_seen) == 2.0e4
    # clipped to guard·r = 16 before averaging: r = 2 + 0.1·(16 − 2)
    assert float(cal.running_absmax) == pytest.approx(3.4, rel=1e-6)
    # it would not have been guarded at 7× (below the guard)
    cal2 = RuntimeCalibrator(momentum=0.1, guard=8.0)
    cal2.observe(base)
    cal2.observe(base * 7)
    assert cal2.outliers == 0 and float(cal2.running_absmax) == pytest.approx(2 + 0.1 * 12, rel=1e-6)
    # the static scale built on the guarded estimate clips the spike, and clip_count says so
    assert RuntimeCalibrator.clip_count(spike, cal.scale(I8), I8) == 1


def test_calibrator_zero_start_nonfinite_and_errors():
    cal = RuntimeCalibrator()
    with pytest.raises(RuntimeError, match="before any observe"):
        cal.scale(I8)
    cal.observe(torch.zeros(8))
    assert float(cal.running_absmax) == 0.0 and cal.scale(I8).item() == SCALE_MIN
    cal.observe(torch.tensor([0.5, float("nan"), float("inf"), -3.0]))  # non-finite ignored
    assert float(cal.running_absmax) == 3.0 and cal.outliers == 0
    with pytest.raises(ValueError):
        RuntimeCalibrator(guard=1.0)
    with pytest.raises(ValueError):
        RuntimeCalibrator.clip_count(torch.ones(2), 0.0, I8)


@pytest.mark.parametrize("dtype", [I8, F8], ids=["int8", "fp8"])
@pytest.mark.parametrize("in_dtype", IN_DTYPES, ids=str)
def test_clip_count_brute_force(dtype, in_dtype):
    """clip_count against an exact rational count, with elements planted at the threshold and one
    ulp of the input dtype either side of it."""
    g = torch.Generator().manual_seed(case_seed(dtype, in_dtype, "clip"))
    x = (torch.randn(600, generator=g) * 3).to(in_dtype)
    static = torch.tensor([0.0137], dtype=torch.float32)
    t = (static.double() * QMAX[dtype]).to(in_dtype)  # a representable value near the threshold
    plant = torch.cat([t, torch.nextafter(t, t + 1), torch.nextafter(t, t - 1)])
    x = torch.cat([x, plant, -plant])
    thr = Fraction(float(static)) * Fraction(QMAX[dtype])
    expect = sum(1 for v in x.double().tolist() if abs(Fraction(v)) > thr)
    assert RuntimeCalibrator.clip_count(x, static, dtype) == expect
    assert RuntimeCalibrator.clip_count(x, float(static), dtype) == expect


def test_device_selfcheck_passes_on_awkward_shapes():
    """The self-check bench/kernels.py runs on the GPU before timing, here on the interpreter: one
    line per shape, dtype and division mode, each against the float64 reference, all passing; the
    eager peer is counted in the exact-division lines' detail, not judged (on the H200 it differs
    from the reference where our kernel does not)."""
    from sits_doctor.kernels.act_quant import device_selfcheck

    results = device_selfcheck("cpu", shapes=((9, 37), (33, 300)))
    assert len(results) == 2 * 2 * 2
    assert [r for r in results if not r[1]] == []
    assert all(("torch eager peer: " in r[2]) == r[0].endswith("exact_div=True") for r in results)
