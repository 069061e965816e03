"""T.ieee_add ... T.ieee_fdiv in each rounding direction, T.fma / T.fmul / T.fast_rcp, and the errors
of the packed x2 ops, on the CPU backend. Directed roundings are checked bit for bit against an
exact reference: the neighbouring floats of the exact (rational) result, from Python fractions."""
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang import dtypes as dt
from tilelang.errors import DSLTypeError
from tilelang.ir import expr as E

N = 96
MODES = ("rn", "rz", "ru", "rd")
OPS = ("add", "sub", "mul", "fdiv", "fmaf", "frcp", "fsqrt")


def _np(dtype):
    return np.float32 if dtype == "float32" else np.float64


def _fr(v) -> Fraction:
    return Fraction(float(v))  # exact: float32 and float64 values are doubles


def _round(exact, dtype, mode, sqrt_of=None):
    """`exact` (a Fraction; for sqrt, None and sqrt_of = the radicand) rounded to `dtype` in `mode`."""
    f = _np(dtype)
    key = (lambda v: _fr(v) ** 2) if sqrt_of is not None else _fr
    target = sqrt_of if sqrt_of is not None else exact
    guess = f(math.sqrt(float(sqrt_of))) if sqrt_of is not None else f(float(exact))
    lo = guess
    while np.isfinite(lo) and key(lo) > target:
        lo = np.nextafter(lo, f(-np.inf))
    while np.isfinite(np.nextafter(lo, f(np.inf))) and key(np.nextafter(lo, f(np.inf))) <= target:
        lo = np.nextafter(lo, f(np.inf))
    hi = lo if key(lo) == target else np.nextafter(lo, f(np.inf))
    if mode == "rd":
        return lo
    if mode == "ru":
        return hi
    if mode == "rz":
        return lo if target >= 0 else hi
    dl, dh = abs(target - key(lo)), abs(key(hi) - target)
    if sqrt_of is not None:  # compare |sqrt(x) - v| through the midpoint's square
        mid = (_fr(lo) + _fr(hi)) / 2
        return lo if mid * mid > target else hi  # never a tie for sqrt of a float
    if dl != dh:
        return lo if dl < dh else hi
    return lo if int(np.array(lo).view(np.int32 if f is np.float32 else np.int64)) % 2 == 0 else hi


def _exact(op, a, b, c):
    fa, fb, fc = _fr(a), _fr(b), _fr(c)
    return {"add": fa + fb, "sub": fa - fb, "mul": fa * fb, "fdiv": fa / fb, "fmaf": fa * fb + fc,
            "frcp": 1 / fa}.get(op)


def _kernel(dtype):
    @T.prim_func
    def k(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype),
          Y: T.Tensor((len(MODES), len(OPS), N), dtype)):
        with T.Kernel(1):
            for m, mode in enumerate(MODES):
                for i in T.Parallel(N):
                    Y[m, 0, i] = T.ieee_add(A[i], B[i], mode)
                    Y[m, 1, i] = T.ieee_sub(A[i], B[i], rounding_mode=mode)
                    Y[m, 2, i] = T.ieee_mul(A[i], B[i], mode)
                    Y[m, 3, i] = T.ieee_fdiv(A[i], B[i], mode)
                    Y[m, 4, i] = T.ieee_fmaf(A[i], B[i], C[i], mode)
                    Y[m, 5, i] = T.ieee_frcp(A[i], mode)
                    Y[m, 6, i] = T.ieee_fsqrt(T.abs(A[i]), mode)
    return k


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_directed_rounding_is_exact(dtype):
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31, (1,)).item()))
    tdt = getattr(torch, dtype)
    a, b, c = (torch.randn(N, generator=g, dtype=torch.float64).to(tdt) for _ in range(3))
    b[:8] *= 1e-9  # far apart exponents: the sum is inexact by less than an ulp of either operand
    a[8:12] = b[8:12]  # a - b == 0 exactly
    y = torch.full((len(MODES), len(OPS), N), float("nan"), dtype=tdt)
    tilelang.compile(_kernel(dtype), target="cpu")(a, b, c, y)
    av, bv, cv = (x.numpy() for x in (a, b, c))
    for m, mode in enumerate(MODES):
        for o, op in enumerate(OPS):
            got = y[m, o].numpy()
            for i in range(N):
                if op == "fsqrt":
                    want = _round(None, dtype, mode, sqrt_of=_fr(abs(av[i])))
                else:
                    want = _round(_exact(op, av[i], bv[i], cv[i]), dtype, mode)
                assert got[i] == want, (op, mode, i, av[i], bv[i], cv[i], got[i], want)
    # an exact zero sum is -0.0 when rounding down and +0.0 otherwise (IEEE 754)
    sub = y[:, 1, 8:12]
    assert (sub == 0).all() and torch.signbit(sub[3]).all() and not torch.signbit(sub[:3]).any()


def test_half_precision_round_to_nearest_and_errors():
    n = 64

    @T.prim_func
    def k(A: T.Tensor((n,), "float16"), B: T.Tensor((n,), "float16"), Y: T.Tensor((4, n), "float16"),
          Z: T.Tensor((2, n), "bfloat16")):
        with T.Kernel(1):
            for i in T.Parallel(n):
                Y[0, i] = T.ieee_add(A[i], B[i])
                Y[1, i] = T.ieee_fdiv(A[i], B[i], "rn")
                Y[2, i] = T.ieee_fsqrt(T.abs(A[i]))
                Y[3, i] = T.ieee_frsqrt(T.abs(A[i]) + 1)
                Z[0, i] = T.ieee_mul(T.cast(A[i], "bfloat16"), T.cast(B[i], "bfloat16"))
                Z[1, i] = T.ieee_fmaf(T.cast(A[i], "bfloat16"), T.cast(B[i], "bfloat16"), 1.0)

    a, b = torch.randn(n).half(), torch.randn(n).half()
    y, z = torch.full((4, n), float("nan")).half(), torch.full((2, n), float("nan")).bfloat16()
    tilelang.compile(k, target="cpu")(a, b, y, z)
    ad, bd = a.double(), b.double()
    assert torch.equal(y[0], (ad + bd).half()) and torch.equal(y[1], (ad / bd).half())
    assert torch.equal(y[2], ad.abs().sqrt().half())
    torch.testing.assert_close(y[3].double(), (ad.abs() + 1).rsqrt().half().double(), rtol=1e-3, atol=0)
    ab, bb = a.bfloat16().double(), b.bfloat16().double()
    assert torch.equal(z[0], (ab * bb).bfloat16())
    torch.testing.assert_close(z[1].double(), (ab * bb + 1).bfloat16().double(), rtol=8e-3, atol=0)

    x16, x64, i32 = E.Var("h", dt.float16), E.Var("d", dt.float64), E.Var("n", dt.int32)
    # bad rounding modes and unsupported dtypes are ValueErrors, as in the public TileLang
    with pytest.raises(ValueError, match="Only rounding mode 'rn' is available for half precision"):
        T.ieee_add(x16, x16, "rz")
    with pytest.raises(ValueError, match="Invalid rounding mode 'up'"):
        T.ieee_add(x64, x64, "up")
    with pytest.raises(ValueError, match="Invalid rounding mode"):
        T.ieee_fsqrt(4.0, "bad")
    with pytest.raises(ValueError, match="frsqrt is not supported for float64"):
        T.ieee_frsqrt(x64)
    with pytest.raises(DSLTypeError, match="floating-point"):
        T.ieee_mul(i32, i32)
    with pytest.raises(DSLTypeError, match="one dtype"):
        T.fma(x16, x64, x64)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_fma_is_fused_and_fmul_is_not(dtype):
    """a * b + c with a = b = 1 + 2^-k and c = -(1 + 2^-(k-1)): the exact value is 2^-2k, which one
    rounding keeps; the rounded product (1 + 2^-(k-1) + 2^-2k, a tie to even) loses it."""
    k_bits = {"float32": 12, "float64": 27, "float16": 6, "bfloat16": 4}[dtype]
    n = 32

    @T.prim_func
    def k(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype), Y: T.Tensor((3, n), dtype)):
        with T.Kernel(1):
            for i in T.Parallel(n):
                Y[0, i] = T.fma(A[i], B[i], C[i])
                Y[1, i] = T.fmul(A[i], B[i]) + C[i]
                Y[2, i] = T.fast_rcp(A[i])

    tdt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31, (1,)).item()))
    a, b, c = ((torch.rand(n, generator=g, dtype=torch.float64) + 0.5).to(tdt) for _ in range(3))
    one = 1 + 2.0 ** -k_bits
    a[:4], b[:4], c[:4] = one, one, -(1 + 2.0 ** -(k_bits - 1))
    y = torch.full((3, n), float("nan"), dtype=tdt)
    tilelang.compile(k, target="cpu")(a, b, c, y)
    assert (y[0, :4].double() == 2.0 ** (-2 * k_bits)).all(), y[0, :4]
    assert (y[1, :4] == 0).all(), y[1, :4]
    ad, bd, cd = a.double(), b.double(), c.double()
    tol = {"float32": 2e-7, "float64": 1e-15, "float16": 1e-3, "bfloat16": 8e-3}[dtype]
    if dtype in ("float32", "float64"):  # one rounding of the exact a * b + c
        exact = [float(_fr(x) * _fr(w) + _fr(z)) for x, w, z in zip(a.tolist(), b.tolist(), c.tolist())]
        assert torch.equal(y[0], torch.tensor(exact, dtype=torch.float64).to(tdt))  # float32: exact in double
        assert torch.equal(y[1], ((ad * bd).to(tdt).double() + cd).to(tdt))
    torch.testing.assert_close(y[2].double(), (1 / ad).to(tdt).double(), rtol=tol, atol=0)


def test_packed_x2_ops_reject_scalars():
    x = E.Var("x", dt.float32)  # (the ops on float32x2 / float16x2 / bfloat16x2 values: tests/frontend/test_vector.py)
    for fn, args in ((T.add2, (x, x)), (T.sub2, (x, x)), (T.mul2, (x, x)), (T.fma2, (x, x, x)),
                     (T.max2, (x, x)), (T.min2, (x, x)), (T.abs2, (x,))):
        with pytest.raises(ValueError, match="expected dtype in"):
            fn(*args)
