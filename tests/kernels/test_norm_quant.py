"""Fused RMSNorm + per-token quantization (kernels/norm_quant.py) against its float64 reference,
under the Triton interpreter.

Fresh random inputs each run (the seed is in the failure message); awkward shapes (M 1/3/257,
K 1/7/1000/4109, non-contiguous rows, rank 3); bf16, fp16 and fp32 input; int8 and fp8; with
and without the residual add; the one-tile and the looped (two-pass) paths; rows that are all
zero, tiny, or hold a 10⁴× outlier. Outputs are preallocated and poisoned with values the kernel
never writes (int8 -128, fp8 NaN 0x7F, NaN scales).

Tolerances: the kernel's y = RMSNorm(x) is an fp32 number whose rounding (Triton's reduction
order for the sum of squares) the float64 reference cannot reproduce, so unlike
test_act_quant.py the codes are not compared bit for bit. ``compare_with_reference`` accepts the
reference code, or the neighbouring code only where the reference quotient lies within a
relative 2e-5 of the boundary between them; scales within a relative 1e-5; the new residual
exactly. The tests at the end check that this comparison still fails on a wrong eps, a missing
weight, a wrong residual and a one-step error away from a tie.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import random

import pytest
import torch

from sits_doctor.kernels.act_quant import QMAX, SCALE_MIN, quantize_per_token
from sits_doctor.kernels.norm_quant import (
    compare_with_reference,
    llama_rms_norm,
    norm_quant_reference,
    rms_norm_quant,
    torch_norm_quant,
    torch_rms_norm,
)

# numpy's overflow / invalid-value warnings inside the interpreter are bugs here (an inf or NaN
# the GPU would turn into garbage, e.g. 0 * inf on an all-zero row): fail on them
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

I8, F8 = torch.int8, torch.float8_e4m3fn
POISON = {I8: -128, F8: 0x7F}  # -128: outside the symmetric clamp; 0x7F: e4m3fn NaN
IN_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
EPS = 1e-5


def case_seed(*parts) -> int:
    return random.Random(repr(parts) + str(random.random())).randrange(2**31)


def make_inputs(M, K, in_dtype, seed, *, residual=False, row_stride=None):
    """x (rows `row_stride` apart when given), weight and optionally a residual."""
    g = torch.Generator().manual_seed(seed)
    mag = 10 ** (torch.rand(M, 1, generator=g) * 2.5 - 2)  # 0.01 .. 3: eps matters on small rows
    base = torch.randn(M, K, generator=g) * mag
    if M >= 3:
        base[0] = 0.0  # all-zero row: scale floor, q == 0, no NaN
        base[1] = -base[1].abs()  # negative-only row
        base[2, int(torch.randint(K, (1,), generator=g))] = 1e4 * float(mag[2])  # massive value
    if M >= 5 and in_dtype != torch.float16:
        base[4] *= 1e-30  # tiny row: its squares underflow fp32, eps dominates
    if row_stride is not None:
        wide = torch.full((M, row_stride), float("nan"), dtype=in_dtype)
        wide[:, 3:3 + K] = base.to(in_dtype)
        x = wide[:, 3:3 + K]  # last dim contiguous, rows row_stride apart: read in place
    else:
        x = base.to(in_dtype)
    weight = (1.0 + 0.5 * torch.randn(K, generator=g)).to(in_dtype)
    r = None
    if residual:
        r = (torch.randn(M, K, generator=g) * mag).to(in_dtype)
        if M >= 3:
            r[0] = 0.0  # keeps row 0 all zero after the add
    return x, weight, r


def poisoned(M, K, dtype):
    q = torch.empty(M, K, dtype=dtype)
    q.view(torch.uint8).fill_(POISON[dtype] & 0xFF)
    return q, torch.full((M, 1), float("nan"), dtype=torch.float32)


def run_and_check(x, weight, r, out_dtype, what, **kw):
    M, K = x.shape
    out = poisoned(M, K, out_dtype)
    got = rms_norm_quant(x, weight, EPS, out_dtype, residual=r, out=out, **kw)
    assert got[0] is out[0] and got[1] is out[1]
    q, s = got[0], got[1]
    assert not (q.view(torch.uint8) == (POISON[out_dtype] & 0xFF)).any(), \
        f"{what}: poison left in q (unwritten elements)"
    res = compare_with_reference(got, x, weight, EPS, out_dtype, residual=r,
                                 exact_div=kw.get("exact_div", False))
    assert res["ok"], f"{what}: {res}"
    if M >= 3:
        assert (q[0].float() == 0).all() and s[0].item() == SCALE_MIN, f"{what}: zero row"
    return got, res


SHAPES = [(1, 1), (1, 7), (3, 7), (3, 1000), (257, 1), (257, 7), (1, 4109), (3, 4109), (257, 1000)]


@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("out_dtype", [I8, F8], ids=["int8", "fp8"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_matches_reference(shape, out_dtype, residual):
    M, K = shape
    # one input dtype per case, rotating, keeps the interpreter time down
    in_dtype = IN_DTYPES[(SHAPES.index(shape) + (out_dtype == F8) + residual) % 3]
    seed = case_seed(shape, out_dtype, residual)
    x, w, r = make_inputs(M, K, in_dtype, seed, residual=residual)
    run_and_check(x, w, r, out_dtype, f"{M}x{K} {in_dtype}->{out_dtype} res={residual} seed={seed}")


@pytest.mark.parametrize("in_dtype", IN_DTYPES, ids=str)
@pytest.mark.parametrize("out_dtype", [I8, F8], ids=["int8", "fp8"])
def test_each_input_dtype_with_residual(in_dtype, out_dtype):
    seed = case_seed(in_dtype, out_dtype)
    x, w, r = make_inputs(9, 300, in_dtype, seed, residual=True)
    (_, _, new_res), _ = run_and_check(x, w, r, out_dtype, f"{in_dtype} seed={seed}")
    # the new residual is x + residual rounded once to x's dtype (torch's own bf16/fp16 add)
    assert new_res.dtype == in_dtype and torch.equal(new_res, x + r)


@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("shape,block_m,block_k", [((3, 4109), 1, 1024), ((37, 1000), 2, 256),
                                                   ((5, 7), 4, 2)])
@pytest.mark.parametrize("out_dtype", [I8, F8], ids=["int8", "fp8"])
def test_looped_rows(shape, block_m, block_k, out_dtype, residual):
    """Rows longer than the tile: sum of squares and max |z·w| in one loop, then quantize."""
    M, K = shape
    seed = case_seed(shape, out_dtype, residual, "loop")
    x, w, r = make_inputs(M, K, torch.bfloat16, seed, residual=residual)
    run_and_check(x, w, r, out_dtype, f"looped {M}x{K} bm={block_m} bk={block_k} seed={seed}",
                  block_m=block_m, block_k=block_k)


@pytest.mark.parametrize("persistent", [1, 2])
def test_persistent_grid(persistent):
    """Fewer programs than row blocks: each loops over several (the interpreter counts 4 'SMs')."""
    seed = case_seed("persistent", persistent)
    x, w, r = make_inputs(41, 130, torch.bfloat16, seed, residual=True)
    run_and_check(x, w, r, I8, f"persistent={persistent} seed={seed}", persistent=persistent)
    run_and_check(x, w, None, F8, f"persistent={persistent} seed={seed}", persistent=persistent,
                  block_m=2)


@pytest.mark.parametrize("out_dtype", [I8, F8], ids=["int8", "fp8"])
def test_exact_div_mode(out_dtype):
    seed = case_seed(out_dtype, "exact")
    x, w, r = make_inputs(40, 1000, torch.float32, seed, residual=True)
    run_and_check(x, w, r, out_dtype, f"exact_div seed={seed}", exact_div=True)


def test_non_contiguous_rows_rank3_and_in_place_residual():
    seed = case_seed("layout")
    # rows 64 apart, last dim contiguous: read in place, not copied
    x, w, r = make_inputs(6, 37, torch.float16, seed, residual=True, row_stride=64)
    assert x.stride() == (64, 1)
    run_and_check(x, w, r, I8, f"strided rows seed={seed}")
    # a residual with strided rows too
    r_wide = torch.zeros(6, 50, dtype=torch.float16)
    r_wide[:, 5:42] = r
    run_and_check(x, w, r_wide[:, 5:42], F8, f"strided residual seed={seed}")

    # rank 3: q [..., K], scales [..., 1]
    g = torch.Generator().manual_seed(seed)
    x3 = torch.randn(2, 3, 37, generator=g).to(torch.bfloat16)
    w3 = torch.rand(37, generator=g) + 0.5
    q, s = rms_norm_quant(x3, w3, EPS, F8)
    assert q.shape == (2, 3, 37) and s.shape == (2, 3, 1)
    res = compare_with_reference((q, s), x3, w3, EPS, F8)
    assert res["ok"], res

    # last dim not contiguous: copied first, same result
    xt = torch.randn(37, 5, generator=g).t()
    got = rms_norm_quant(xt, w3, EPS, I8)
    assert compare_with_reference(got, xt, w3, EPS, I8)["ok"]

    # in place: residual_out is the residual itself (vLLM's fused_add_rms_norm contract)
    x, w, r = make_inputs(5, 300, torch.bfloat16, seed, residual=True)
    expect = x + r
    r_in = r.clone()
    q, s, new_res = rms_norm_quant(x, w, EPS, I8, residual=r_in, residual_out=r_in)
    assert new_res is r_in and torch.equal(r_in, expect)
    assert compare_with_reference((q, s, new_res), x, w, EPS, I8, residual=r)["ok"]

    q, s = rms_norm_quant(torch.empty(0, 8), torch.ones(8), EPS, I8)
    assert q.shape == (0, 8) and s.shape == (0, 1)


def test_reference_agrees_with_act_quant_on_a_normalized_input():
    """The reference is act_quant's reference applied to the float64 norm: quantizing its y with
    act_quant's reference gives the same codes except where y's fp32 rounding lands on a tie."""
    from sits_doctor.kernels.act_quant import quantize_per_token_reference
    from sits_doctor.kernels.norm_quant import _norm64

    g = torch.Generator().manual_seed(case_seed("ref"))
    x = torch.randn(64, 512, generator=g).to(torch.bfloat16)
    w = torch.rand(512, generator=g) + 0.5
    for dt in (I8, F8):
        q, s = norm_quant_reference(x, w, EPS, dt)
        y, _ = _norm64(x, w, EPS)
        q2, s2 = quantize_per_token_reference(y.float(), dt)  # y rounded to fp32 first
        assert torch.allclose(s, s2, rtol=1e-6, atol=0)
        assert int((q.float() != q2.float()).sum()) <= 5e-4 * q.numel()


def test_torch_peers_compute_the_same_function():
    """bench/norm_quant.py's peers: the fused torch expression passes the same comparison; the
    unfused pair (norm rounded to bf16, then act_quant) is close but rounds once more."""
    seed = case_seed("peers")
    x, w, r = make_inputs(17, 300, torch.bfloat16, seed, residual=True)
    for dt in (I8, F8):
        got = torch_norm_quant(x, w, EPS, dt, r)
        assert compare_with_reference(got, x, w, EPS, dt, residual=r)["ok"]
        y, new_res = torch_rms_norm(x, w, EPS, r)
        q, s = quantize_per_token(y, dt)
        assert torch.equal(new_res, x + r)
        qmax = QMAX[dt]
        assert ((q.float() - got[0].float()).abs() <= qmax / 8).all()  # near, not the same


def test_validation_errors():
    x = torch.randn(2, 8)
    w = torch.ones(8)
    with pytest.raises(ValueError, match="int8 or torch.float8_e4m3fn"):
        rms_norm_quant(x, w, EPS, torch.uint8)
    with pytest.raises(ValueError, match="float16, bfloat16 or float32"):
        rms_norm_quant(x.double(), w, EPS, I8)
    with pytest.raises(ValueError, match="weight must be a 1-d tensor of 8"):
        rms_norm_quant(x, torch.ones(7), EPS, I8)
    with pytest.raises(ValueError, match="residual must be"):
        rms_norm_quant(x, w, EPS, I8, residual=torch.ones(2, 8, dtype=torch.float16))
    with pytest.raises(ValueError, match="residual_out given without residual"):
        rms_norm_quant(x, w, EPS, I8, residual_out=torch.ones(2, 8))
    with pytest.raises(ValueError, match="empty last dimension"):
        rms_norm_quant(torch.empty(2, 0), torch.ones(0), EPS, I8)
    with pytest.raises(ValueError, match="power of two"):
        rms_norm_quant(x, w, EPS, I8, block_k=3)


# ------------------------------------------------------------ the comparison can fail


@pytest.mark.parametrize("out_dtype", [I8, F8], ids=["int8", "fp8"])
def test_comparison_catches_wrong_eps_weight_and_residual(out_dtype):
    seed = case_seed(out_dtype, "mutants")
    x, w, r = make_inputs(33, 257, torch.bfloat16, seed, residual=True)
    got = rms_norm_quant(x, w, EPS, out_dtype, residual=r)
    assert compare_with_reference(got, x, w, EPS, out_dtype, residual=r)["ok"]
    # eps off by 10×: the small rows' scales move far past 1e-5
    bad = compare_with_reference(got, x, w, EPS * 10, out_dtype, residual=r)
    assert not bad["ok"] and bad["scale_rel"] > 1e-3, bad
    # the weight left out (a kernel that forgot it): codes move
    bad = compare_with_reference(got, x, torch.ones_like(w), EPS, out_dtype, residual=r)
    assert not bad["ok"] and bad["outside"] > 0, bad
    # the residual not added
    got_plain = rms_norm_quant(x, w, EPS, out_dtype)
    bad = compare_with_reference(got_plain + (x,), x, w, EPS, out_dtype, residual=r)
    assert not bad["ok"], bad
    # a wrong new residual
    wrong = got[2].clone()
    wrong[3, 5] += 1
    assert not compare_with_reference((got[0], got[1], wrong), x, w, EPS, out_dtype,
                                      residual=r)["ok"]


def test_comparison_rejects_one_step_off_away_from_a_tie():
    """One code moved by one step where the reference quotient is nowhere near a boundary."""
    g = torch.Generator().manual_seed(case_seed("onestep"))
    x = torch.randn(4, 64, generator=g)
    w = torch.ones(64)
    q, s = norm_quant_reference(x, w, EPS, I8)
    from sits_doctor.kernels.norm_quant import _norm64

    y, _ = _norm64(x, w, EPS)
    v = (y / s.double()).abs()
    frac = v - v.floor()
    i, j = [int(t) for t in ((frac - 0.5).abs() > 0.2).nonzero()[0]]  # far from k + 0.5
    q2 = q.clone()
    q2[i, j] += 1 if q2[i, j] < 127 else -1
    assert compare_with_reference((q, s), x, w, EPS, I8)["ok"]
    assert not compare_with_reference((q2, s), x, w, EPS, I8)["ok"]
    # and a scale one part in 1e4 off
    assert not compare_with_reference((q, s * (1 + 1e-4)), x, w, EPS, I8)["ok"]


@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("block_k", [None, 16])  # one tile, and the two-pass path
def test_y_out_is_the_llama_rms_norm_and_leaves_q_unchanged(in_dtype, block_k):
    g = torch.Generator().manual_seed(11)
    x = (torch.randn(6, 3, 40, generator=g) * 3).to(in_dtype)
    w = (torch.randn(40, generator=g) * 0.5 + 1).to(in_dtype)
    y = torch.full_like(x, float("nan"))
    q, s = rms_norm_quant(x, w, 1e-5, torch.int8, y_out=y, block_k=block_k)
    q0, s0 = rms_norm_quant(x, w, 1e-5, torch.int8, block_k=block_k)
    assert torch.equal(q, q0) and torch.equal(s, s0)  # the quantized output does not depend on y_out
    want = llama_rms_norm(x, w, 1e-5)
    # one rounding step of bf16 / fp16 at most; fp32 a few (torch's rsqrt, whose error is not
    # specified, against the kernel's correctly rounded 1 / sqrt_rn, then two multiplies)
    ulps = 4 if in_dtype == torch.float32 else 1
    step = ulps * torch.finfo(in_dtype).eps * want.float().abs().clamp_min(torch.finfo(in_dtype).tiny)
    assert not y.isnan().any()
    assert ((y.float() - want.float()).abs() <= step).all()
    if in_dtype != torch.float32:
        assert (y == want).float().mean() > 0.99  # nearly everywhere bit for bit


def test_y_out_with_residual_and_validation():
    g = torch.Generator().manual_seed(12)
    x = torch.randn(4, 40, generator=g).to(torch.bfloat16)
    r = torch.randn(4, 40, generator=g).to(torch.bfloat16)
    w = torch.ones(40, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    q, s, res = rms_norm_quant(x, w, 1e-6, torch.int8, residual=r, y_out=y)
    assert torch.equal(res, x + r)
    want = llama_rms_norm(x + r, w, 1e-6)
    assert (y == want).float().mean() > 0.95
    with pytest.raises(ValueError, match="y_out"):
        rms_norm_quant(x, w, 1e-6, torch.int8, y_out=torch.empty(4, 40))  # fp32, not x's dtype
    with pytest.raises(ValueError, match="y_out"):
        rms_norm_quant(x, w, 1e-6, torch.int8, y_out=torch.empty(40, 4, dtype=torch.bfloat16).t())


# ---------------------------------------------------------------------------------------------
# The cached-launch fast path (taken on CUDA only; here with a stand-in device and kernel)
# ---------------------------------------------------------------------------------------------


class _Compiled:
    """A CompiledKernel stand-in: ``kernel[grid](*args)`` records the call, or refuses an
    argument count it does not take, as a launcher of another Triton version would."""

    def __init__(self, log, takes=None):
        self.function, self.log, self.takes = object(), log, takes

    def __getitem__(self, grid):
        def launch(*args):
            if self.takes is not None and len(args) != self.takes:
                raise TypeError(f"expected {self.takes} arguments, got {len(args)}")
            self.log.append(("fast", grid, args))
        return launch


class _Jit:
    """``_norm_quant_kernel`` stand-in: ``[grid](*args, **kw)`` logs the JIT launch and returns a
    compiled kernel."""

    def __init__(self, log, takes=None):
        self.log, self.takes = log, takes

    def __getitem__(self, grid):
        def launch(*args, **kw):
            self.log.append(("jit", grid, args, kw))
            return _Compiled(self.log, self.takes)
        return launch


@pytest.fixture
def fast_launch(monkeypatch):
    import types

    from sits_doctor.kernels import norm_quant as nq

    log = []
    monkeypatch.setattr(nq, "_COMPILED", {})
    monkeypatch.setattr(nq, "_FAST", {"on": True, "constexprs_in_args": True})
    monkeypatch.setattr(nq, "_norm_quant_kernel", _Jit(log))
    return nq, log, types.SimpleNamespace(type="cuda", index=0)


def test_fast_path_is_on_by_default():
    from sits_doctor.kernels import norm_quant as nq

    assert nq._FAST["on"] is True


def test_fast_path_replays_the_compiled_kernel_with_constexprs_after_the_first_launch(fast_launch):
    nq, log, dev = fast_launch
    x = torch.zeros(4, 16)
    consts = (127.0, False, False, True, False, 1, 16, True, False)
    args = (x, 16, 1e-6)
    for _ in range(3):
        nq._launch(4, args, consts, 4, dev)
    assert [e[0] for e in log] == ["jit", "fast", "fast"]
    assert log[0][3] == {**dict(zip(nq._CONST_NAMES, consts)), "num_warps": 4, "enable_fp_fusion": False}
    assert log[1][1] == (4, 1, 1) and log[1][2] == args + consts
    # another specialization (an int that is now 1, another warp count, another device) compiles again
    nq._launch(4, (x, 1, 1e-6), consts, 4, dev)
    nq._launch(4, args, consts, 8, dev)
    nq._launch(4, args, consts, 4, type(dev)(type="cuda", index=1))
    assert [e[0] for e in log[3:]] == ["jit", "jit", "jit"]


_ARGS, _CONSTS = (torch.zeros(2, 8), 8, 1e-6), (127.0, False)


def _three_launches(fast_launch, monkeypatch, takes):
    """Three launches of one specialization whose compiled launcher takes ``takes`` arguments."""
    nq, log, dev = fast_launch
    monkeypatch.setattr(nq, "_norm_quant_kernel", _Jit(log, takes=takes))
    for _ in range(3):
        nq._launch(2, _ARGS, _CONSTS, 4, dev)
    return nq, log


def test_fast_path_drops_the_constexprs_when_the_launcher_refuses_them(fast_launch, monkeypatch):
    nq, log = _three_launches(fast_launch, monkeypatch, takes=3)
    assert [e[0] for e in log] == ["jit", "fast", "fast"]
    assert nq._FAST == {"on": True, "constexprs_in_args": False}
    assert log[1][2] == _ARGS


def test_fast_path_switches_itself_off_when_no_argument_list_is_taken(fast_launch, monkeypatch):
    nq, log = _three_launches(fast_launch, monkeypatch, takes=99)
    assert [e[0] for e in log] == ["jit", "jit", "jit"]
    assert nq._FAST["on"] is False


def test_fast_path_is_never_taken_off_cuda(fast_launch):
    nq, log, _ = fast_launch
    import types

    cpu = types.SimpleNamespace(type="cpu", index=None)
    for _ in range(2):
        nq._launch(2, (torch.zeros(2, 8), 8, 1e-6), (127.0,), 4, cpu)
    assert [e[0] for e in log] == ["jit", "jit"] and nq._COMPILED == {}
