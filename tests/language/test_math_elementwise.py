"""The elementwise math of the public TileLang's T.* (trig / hyperbolic, atan2, hypot, fmod,
copysign, ldexp, nextafter, nearbyint, round modes, isnan / isinf / isfinite, popcount, clz,
clamp, q_multiply_shift, cdiv / align_up, and the public argument names), run on the CPU
backend over fresh random inputs and edge values against float64 references."""
import math

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError
from tilelang.ir import expr as E

N = 128
FLOATS = ["float32", "float64", "float16", "bfloat16"]
TOL = {"float32": 4e-6, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1.6e-2}
EDGES = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1.5]


def _gen():
    return torch.Generator().manual_seed(int(torch.randint(0, 2**31, (1,)).item()))


def _inputs(lo, hi, dtype, g):
    x = torch.rand(N, generator=g, dtype=torch.float64) * (hi - lo) + lo
    x[:len(EDGES)] = torch.tensor(EDGES, dtype=torch.float64)
    return x.to(getattr(torch, dtype))


def _check(got, ref, dtype, what, exact=False):
    """got (the kernel's dtype) against a float64 reference rounded to that dtype; NaN where NaN,
    and the sign of zeros / infinities where `exact`."""
    ref = ref.to(got.dtype).double()
    got = got.double()
    tol = 0 if exact else TOL[dtype]
    torch.testing.assert_close(got, ref, rtol=tol, atol=tol, equal_nan=True, msg=lambda m: f"{what}: {m}")
    if exact:
        same = torch.isnan(ref) | (torch.signbit(got) == torch.signbit(ref))
        assert bool(same.all()), (what, got[~same], ref[~same])


UNARY = {  # name -> (T fn, float64 reference, input range)
    "acos": (T.acos, torch.acos, (-1, 1)), "asin": (T.asin, torch.asin, (-1, 1)),
    "atan": (T.atan, torch.atan, (-20, 20)), "acosh": (T.acosh, torch.acosh, (1, 50)),
    "asinh": (T.asinh, torch.asinh, (-50, 50)), "atanh": (T.atanh, torch.atanh, (-0.99, 0.99)),
    "cosh": (T.cosh, torch.cosh, (-8, 8)), "sinh": (T.sinh, torch.sinh, (-8, 8)),
    "tan": (T.tan, torch.tan, (-1.5, 1.5)),
}
ROUNDING = {  # exact results: compared bit for bit (sign of zero included)
    "nearbyint": (T.nearbyint, torch.round),
    "round_even": (lambda x: T.round(x, rounding_mode="ties-to-even"), torch.round),
    "round_away": (lambda x: T.round(x, "ties-away-from-zero"),
                   lambda x: torch.where(x.abs() - x.abs().floor() == 0.5, x + torch.sign(x) * 0.5, x.round())),
    "fabs": (T.fabs, torch.abs), "floor": (lambda x: T.floor(x, span=None), torch.floor),
    "ceil": (lambda x: T.ceil(x=x), torch.ceil), "trunc": (lambda x: T.trunc(x, None), torch.trunc),
}


@pytest.mark.parametrize("dtype", FLOATS)
def test_inverse_and_hyperbolic_trig(dtype):
    names = list(UNARY)
    fns = [UNARY[n][0] for n in names]

    @T.prim_func
    def k(X: T.Tensor((len(names), N), dtype), Y: T.Tensor((len(names), N), dtype)):
        with T.Kernel(1) as bx:
            for f, fn in enumerate(fns):
                for i in T.Parallel(N):
                    Y[f, i] = fn(X[f, i])

    g = _gen()
    x = torch.stack([_inputs(*UNARY[n][2], dtype, g) for n in names])
    y = torch.full_like(x, 7.0)
    tilelang.compile(k, target="cpu")(x, y)
    for r, n in enumerate(names):
        _check(y[r], UNARY[n][1](x[r].double()), dtype, n)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rounding_modes_and_abs(dtype):
    names = list(ROUNDING)
    fns = [ROUNDING[n][0] for n in names]

    @T.prim_func
    def k(X: T.Tensor((N,), dtype), Y: T.Tensor((len(names), N), dtype)):
        with T.Kernel(1) as bx:
            for f, fn in enumerate(fns):
                for i in T.Parallel(N):
                    Y[f, i] = fn(X[i])

    g = _gen()
    x = _inputs(-6, 6, dtype, g)
    # ties of both signs (half-integers are exact in every float dtype here), and -0.4 -> -0.0
    x[len(EDGES):len(EDGES) + 8] = torch.tensor([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -4.5, -0.4], dtype=x.dtype)
    y = torch.full((len(names), N), 7.0, dtype=x.dtype)
    tilelang.compile(k, target="cpu")(x, y)
    for r, n in enumerate(names):
        _check(y[r], ROUNDING[n][1](x.double()), dtype, n, exact=True)
    assert y[names.index("round_away"), len(EDGES) + 2].item() == 3.0  # 2.5 -> 3 (ties-to-even gives 2)
    with pytest.raises(DSLTypeError, match="rounding_mode"):
        T.round(E.const(1.0), "ties-to-odd")


@pytest.mark.parametrize("dtype", FLOATS)
def test_binary_float_math(dtype):
    @T.prim_func
    def k(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), E: T.Tensor((N,), "int32"),
          Y: T.Tensor((7, N), dtype)):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.atan2(A[i], B[i])
                Y[1, i] = T.hypot(A[i], B[i])
                Y[2, i] = T.copysign(A[i], B[i])
                Y[3, i] = T.fmod(A[i], B[i])
                Y[4, i] = T.nextafter(A[i], B[i])
                Y[5, i] = T.ldexp(A[i], E[i])
                Y[6, i] = T.pow(x=T.abs(A[i]), y=B[i])

    g = _gen()
    tdt = getattr(torch, dtype)
    a = (torch.randn(N, generator=g, dtype=torch.float64) * 8).to(tdt)
    b = (torch.randn(N, generator=g, dtype=torch.float64) * 3).to(tdt)
    e = torch.randint(-6, 7, (N,), generator=g, dtype=torch.int32)
    edges = torch.tensor(EDGES, dtype=torch.float64)
    a[:len(EDGES)], b[:len(EDGES)] = edges.to(tdt), edges.flip(0).to(tdt)
    a[20:24], b[20:24] = torch.tensor([1.0, 1.0, -0.0, 0.0]).to(tdt), torch.tensor([1.0, -3.0, 2.0, -2.0]).to(tdt)
    y = torch.full((7, N), 7.0, dtype=tdt)
    tilelang.compile(k, target="cpu")(a, b, e, y)
    ad, bd = a.double(), b.double()
    _check(y[0], torch.atan2(ad, bd), dtype, "atan2")
    _check(y[1], torch.hypot(ad, bd), dtype, "hypot")
    _check(y[2], torch.copysign(ad, bd), dtype, "copysign", exact=True)
    _check(y[3], torch.fmod(ad, bd), dtype, "fmod", exact=True)
    _check(y[4], torch.nextafter(a, b) if dtype in ("float32", "float64") else _nextafter_bits(a, b), dtype,
           "nextafter", exact=True)
    _check(y[5], torch.ldexp(ad, e.double()), dtype, "ldexp", exact=True)
    _check(y[6], ad.abs().pow(bd), dtype, "pow")


def _nextafter_bits(a, b):
    """nextafter on a 16-bit float grid, from the bit patterns (an independent reference)."""
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        if math.isnan(x) or math.isnan(y):
            out.append(math.nan)
            continue
        if x == y:
            out.append(y)
            continue
        t = torch.tensor([x], dtype=a.dtype)
        bits = t.view(torch.int16).item() & 0xFFFF
        if x == 0:
            bits = 1 if y > 0 else 0x8001
        elif (y > x) == (x > 0):
            bits += 1
        else:
            bits -= 1
        out.append(torch.tensor([bits - 65536 if bits >= 32768 else bits], dtype=torch.int16).view(a.dtype).item())
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("dtype", FLOATS + ["int32"])
def test_isnan_isinf_isfinite(dtype):
    @T.prim_func
    def k(X: T.Tensor((N,), dtype), Y: T.Tensor((3, N), "bool")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.isnan(X[i])
                Y[1, i] = T.isinf(X[i])
                Y[2, i] = T.isfinite(X[i], span=None)

    g = _gen()
    if dtype == "int32":
        x = torch.randint(-100, 100, (N,), generator=g, dtype=torch.int32)
    else:
        x = _inputs(-1e4, 1e4, dtype, g)
        x[40:44] = torch.tensor([float("nan"), float("-inf"), 1e30, -1e30]).to(x.dtype)  # 1e30: inf in fp16
    y = torch.zeros(3, N, dtype=torch.bool)
    y[0] = True  # poison
    tilelang.compile(k, target="cpu")(x, y)
    assert torch.equal(y, torch.stack([torch.isnan(x), torch.isinf(x), torch.isfinite(x)]))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "uint32", "int64"])
def test_popcount_and_clz(dtype):
    @T.prim_func
    def k(X: T.Tensor((N,), dtype), P: T.Tensor((N,), dtype), Z: T.Tensor((N,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                P[i] = T.popcount(X[i])
                Z[i] = T.clz(X[i])

    g = _gen()
    tdt = getattr(torch, dtype)
    info = torch.iinfo(tdt)
    lo, hi = (info.min, info.max) if info.bits < 64 else (-(2**62), 2**62)
    x = torch.randint(lo, hi, (N,), generator=g, dtype=torch.int64)
    x[:4] = torch.tensor([0, 1, lo, hi])
    x = x.to(tdt)
    p, z = torch.full((N,), 99, dtype=tdt), torch.full((N,), 99, dtype=torch.int32)
    tilelang.compile(k, target="cpu")(x, p, z)
    bits = info.bits
    u = [v & ((1 << bits) - 1) for v in x.to(torch.int64).tolist()]
    assert p.to(torch.int64).tolist() == [bin(v).count("1") for v in u]
    assert z.tolist() == [bits - v.bit_length() for v in u]
    with pytest.raises(DSLTypeError, match="integer"):
        T.popcount(E.const(1.0))


@pytest.mark.parametrize("dtype", FLOATS + ["int32"])
def test_clamp_like_torch(dtype):
    @T.prim_func
    def k(X: T.Tensor((N,), dtype), L: T.Tensor((N,), dtype), H: T.Tensor((N,), dtype), Y: T.Tensor((2, N), dtype)):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.clamp(X[i], L[i], H[i])
                Y[1, i] = T.clamp(dst=X[i], min_val=-2, max_val=3)

    g = _gen()
    tdt = getattr(torch, dtype)
    if dtype == "int32":
        x, lo, hi = (torch.randint(-9, 9, (N,), generator=g, dtype=tdt) for _ in range(3))
    else:
        x, lo, hi = ((torch.randn(N, generator=g, dtype=torch.float64) * 4).to(tdt) for _ in range(3))
        x[:3], lo[3:6], hi[6:9] = (torch.tensor([float("nan"), float("inf"), float("-inf")]).to(tdt) for _ in range(3))
    y = torch.full((2, N), 77, dtype=tdt)
    tilelang.compile(k, target="cpu")(x, lo, hi, y)
    ref0 = torch.minimum(torch.maximum(x.double(), lo.double()), hi.double())  # NaN-propagating, min > max -> max
    torch.testing.assert_close(y[0].double(), ref0.to(tdt).double(), rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(y[1].double(), x.double().clamp(-2, 3).to(tdt).double(), rtol=0, atol=0,
                               equal_nan=True)
    assert T.clamp(5, 0, 3) == 3  # plain Python folds


def test_q_multiply_shift():
    @T.prim_func
    def k(X: T.Tensor((N,), "int32"), M: T.Tensor((N,), "int32"), S: T.Tensor((N,), "int32"),
          Y: T.Tensor((2, N), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.q_multiply_shift(X[i], M[i], 31, S[i])
                Y[1, i] = T.q_multiply_shift(X[i], M[i] >> 16, 15, 0)

    g = _gen()
    x = torch.randint(-2**20, 2**20, (N,), generator=g, dtype=torch.int32)
    m = torch.randint(-2**30, 2**30, (N,), generator=g, dtype=torch.int32)
    s = torch.randint(-4, 8, (N,), generator=g, dtype=torch.int32)
    y = torch.zeros(2, N, dtype=torch.int32)
    tilelang.compile(k, target="cpu")(x, m, s, y)

    def ref(a, b, q, sh):  # round(a * b * 2^-(q + sh)), halves up, exact in Python integers
        num = a * b * (2 ** max(-sh, 0))
        r = q + max(sh, 0)
        return (num + (1 << (r - 1))) >> r

    xs, ms, ss = x.tolist(), m.tolist(), s.tolist()
    assert y[0].tolist() == [ref(a, b, 31, sh) for a, b, sh in zip(xs, ms, ss)]
    assert y[1].tolist() == [ref(a, b >> 16, 15, 0) for a, b in zip(xs, ms)]


def test_cdiv_align_up_likely_and_integer_fmod():
    assert T.cdiv(10, 4) == 3 and T.ceildiv(lhs=8, rhs=4) == 2 and T.align_up(10, 4) == 12
    assert T.likely(True) is True

    @T.prim_func
    def k(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), Y: T.Tensor((4, N), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.cdiv(A[i], B[i])
                Y[1, i] = T.align_up(A[i], B[i])
                Y[2, i] = T.fmod(A[i] - 50, B[i])
                if T.likely(A[i] > 10):
                    Y[3, i] = 1
                else:
                    Y[3, i] = 0

    g = _gen()
    a = torch.randint(0, 100, (N,), generator=g, dtype=torch.int32)
    b = torch.randint(1, 9, (N,), generator=g, dtype=torch.int32)
    y = torch.full((4, N), -99, dtype=torch.int32)
    tilelang.compile(k, target="cpu")(a, b, y)
    av, bv = a.tolist(), b.tolist()
    assert y[0].tolist() == [-(-p // q) for p, q in zip(av, bv)]
    assert y[1].tolist() == [-(-p // q) * q for p, q in zip(av, bv)]
    assert y[2].tolist() == [int(math.fmod(p - 50, q)) for p, q in zip(av, bv)]
    assert y[3].tolist() == [int(p > 10) for p in av]


def test_public_argument_names():
    """Calls written with the public TileLang's parameter names bind here."""
    n = 32

    @T.prim_func
    def k(A: T.Tensor((n,), "int32"), F: T.Tensor((n,), "float32"), Y: T.Tensor((9, n), "int32"),
          Z: T.Tensor((3, n), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                Y[0, i] = T.if_then_else(cond=A[i] > 0, t=A[i], f=-A[i], span=None)
                Y[1, i] = T.bitwise_and(x=A[i], y=12)
                Y[2, i] = T.bitwise_or(x=A[i], y=3, span=None)
                Y[3, i] = T.bitwise_xor(x=A[i], y=5)
                Y[4, i] = T.bitwise_not(x=A[i])
                Y[5, i] = T.shift_left(x=A[i] & 15, y=2)
                Y[6, i] = T.shift_right(x=A[i], y=1)
                Y[7, i] = T.Select(condition=A[i] > 3, true_value=1, false_value=2)
                Y[8, i] = T.reinterpret("int32", F[i])  # the older (dtype, value) order
                Z[0, i] = T.Cast("float32", A[i], annotations={"sat": True})
                Z[1, i] = T.cast(value=A[i], dtype="float32", round="", sat=True, rbits=None, span=None)
                Z[2, i] = T.max_value("float16", span=None) + T.min_value(dtype="float16") * 0.5

    g = _gen()
    a = torch.randint(-50, 50, (n,), generator=g, dtype=torch.int32)
    f = torch.randn(n, generator=g)
    y, z = torch.zeros(9, n, dtype=torch.int32), torch.zeros(3, n)
    tilelang.compile(k, target="cpu")(a, f, y, z)
    av = a.tolist()
    assert y[0].tolist() == [abs(v) for v in av]
    assert y[1:7].tolist() == [[v & 12 for v in av], [v | 3 for v in av], [v ^ 5 for v in av], [~v for v in av],
                               [(v & 15) << 2 for v in av], [v >> 1 for v in av]]
    assert y[7].tolist() == [1 if v > 3 else 2 for v in av]
    assert torch.equal(y[8], f.view(torch.int32))
    assert torch.equal(z[0], a.float()) and torch.equal(z[1], a.float())
    assert (z[2] == 32752).all()
    assert E.const_value(T.infinity("float32", None)) == float("inf")
