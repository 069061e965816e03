"""Scalar math (T.exp ... T.erf, max/min/pow/clamp, abs), bitwise ops and shifts, and integer
`//` / `%` (T.floordiv/floormod/truncdiv/truncmod) of negative operands. CPU target."""
import math

import pytest
import torch

import tilelang
import tilelang.language as T

N = 96

UNARY = {
    "exp": (T.exp, torch.exp, (-10, 10)), "exp2": (T.exp2, torch.exp2, (-10, 10)),
    "log": (T.log, torch.log, (1e-3, 100)), "log2": (T.log2, torch.log2, (1e-3, 100)),
    "log10": (T.log10, torch.log10, (1e-3, 100)), "sqrt": (T.sqrt, torch.sqrt, (0, 100)),
    "rsqrt": (T.rsqrt, torch.rsqrt, (1e-2, 100)), "tanh": (T.tanh, torch.tanh, (-6, 6)),
    "sigmoid": (T.sigmoid, torch.sigmoid, (-30, 30)), "sin": (T.sin, torch.sin, (-7, 7)),
    "cos": (T.cos, torch.cos, (-7, 7)), "erf": (T.erf, torch.erf, (-3, 3)),
    "floor": (T.floor, torch.floor, (-5, 5)), "ceil": (T.ceil, torch.ceil, (-5, 5)),
    "round": (T.round, torch.round, (-5, 5)), "trunc": (T.trunc, torch.trunc, (-5, 5)),
    "log1p": (T.log1p, torch.log1p, (-0.5, 10)), "expm1": (T.expm1, torch.expm1, (-3, 3)),
    "abs": (T.abs, torch.abs, (-5, 5)), "neg": (lambda x: -x, torch.neg, (-5, 5)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_unary_math(dtype):
    names = list(UNARY)
    fns = [UNARY[n][0] for n in names]

    @T.prim_func
    def k(X: T.Tensor((len(names), N), dtype), Y: T.Tensor((len(names), N), dtype)):
        with T.Kernel(1) as bx:
            for f, fn in enumerate(fns):  # a Python iterable: unrolled while parsing
                for i in T.Parallel(N):
                    Y[f, i] = fn(X[f, i])

    tdt = getattr(torch, dtype)
    x = torch.stack([torch.linspace(*UNARY[n][2], N, dtype=torch.float64) for n in names])
    x[names.index("round"), :6] = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 2.4999])  # ties to even
    x = x.to(tdt)
    y = torch.full_like(x, float("nan"))
    tilelang.compile(k, target="cpu")(x, y)
    tol = {"float32": 2e-6, "float64": 1e-12, "float16": 1e-3, "bfloat16": 8e-3}[dtype]
    for r, n in enumerate(names):
        ref = UNARY[n][1](x[r].double()).to(tdt).double()
        torch.testing.assert_close(y[r].double(), ref, rtol=tol, atol=tol, msg=lambda m: f"{n}: {m}")


def test_binary_math_and_select():
    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), Y: T.Tensor((7, N), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.max(A[i], B[i])
                Y[1, i] = T.min(A[i], B[i], 0.5)
                Y[2, i] = T.pow(T.abs(A[i]), B[i])
                Y[3, i] = T.clamp(A[i] * 3, -1.0, 2.0)
                Y[4, i] = T.if_then_else(A[i] > B[i], A[i] - B[i], B[i] * 2)
                Y[5, i] = A[i] / B[i]
                Y[6, i] = T.max(A[i], 1) + T.min(2, B[i])  # python scalars on either side

    a, b = torch.randn(N), torch.randn(N)
    y = torch.full((7, N), float("nan"))
    tilelang.compile(k, target="cpu")(a, b, y)
    ad, bd = a.double(), b.double()
    ref = torch.stack([torch.maximum(ad, bd), torch.minimum(torch.minimum(ad, bd), torch.tensor(0.5)),
                       ad.abs().pow(bd), (ad * 3).clamp(-1, 2), torch.where(ad > bd, ad - bd, bd * 2), ad / bd,
                       ad.clamp(min=1) + bd.clamp(max=2)])
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8", "uint32"])
def test_bitwise_and_shifts(dtype):
    tdt = getattr(torch, dtype)

    @T.prim_func
    def k(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), S: T.Tensor((N,), dtype),
          Y: T.Tensor((8, N), dtype)):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = A[i] & B[i]
                Y[1, i] = A[i] | B[i]
                Y[2, i] = A[i] ^ B[i]
                Y[3, i] = ~A[i]
                Y[4, i] = A[i] << S[i]
                Y[5, i] = A[i] >> S[i]
                Y[6, i] = T.bitwise_xor(T.bitwise_and(A[i], 0x5A), T.bitwise_or(B[i], 3))
                Y[7, i] = T.shift_right(T.shift_left(A[i], 1), 1)

    info = torch.iinfo(tdt)
    # 32/64-bit signed: small enough that `<< 6` cannot overflow (undefined in C)
    lo, hi = (info.min, info.max) if info.bits < 32 or info.min == 0 else (-(2 ** 24), 2 ** 24)
    a = torch.randint(lo, hi, (N,), dtype=torch.int64).to(tdt)
    b = torch.randint(lo, hi, (N,), dtype=torch.int64).to(tdt)
    s = torch.randint(0, 7, (N,), dtype=tdt)
    y = torch.zeros(8, N, dtype=tdt)
    tilelang.compile(k, target="cpu")(a, b, s, y)
    # torch has no uint32 shifts/bitwise on CPU for every version: compute in int64 and wrap
    ai, bi, si = a.to(torch.int64), b.to(torch.int64), s.to(torch.int64)
    bits = info.bits
    mask = (1 << bits) - 1

    def wrap(v):
        if bits == 64:
            return v
        v = v & mask
        return torch.where(v > info.max, v - (1 << bits), v) if info.min < 0 else v

    ref = [wrap(ai & bi), wrap(ai | bi), wrap(ai ^ bi), wrap(~ai), wrap(ai << si), ai >> si,
           wrap((ai & 0x5A) ^ (bi | 3)), wrap(ai << 1) >> 1]
    for r, want in enumerate(ref):
        assert torch.equal(y[r].to(torch.int64), want), (r, y[r], want)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_floordiv_floormod_negative_like_python(dtype):
    vals = [-17, -16, -9, -8, -7, -1, 0, 1, 7, 8, 9, 16, 17]
    divs = [-8, -3, -1, 1, 3, 8]
    pairs = [(a, b) for a in vals for b in divs]
    P = len(pairs)

    @T.prim_func
    def k(A: T.Tensor((P,), dtype), B: T.Tensor((P,), dtype), Y: T.Tensor((6, P), dtype)):
        with T.Kernel(1) as bx:
            for i in T.serial(P):
                Y[0, i] = A[i] // B[i]
                Y[1, i] = A[i] % B[i]
                Y[2, i] = T.floordiv(A[i], B[i])
                Y[3, i] = T.floormod(A[i], B[i])
                Y[4, i] = T.truncdiv(A[i], B[i])
                Y[5, i] = T.truncmod(A[i], B[i])

    tdt = getattr(torch, dtype)
    a = torch.tensor([p[0] for p in pairs], dtype=tdt)
    b = torch.tensor([p[1] for p in pairs], dtype=tdt)
    y = torch.zeros(6, P, dtype=tdt)
    tilelang.compile(k, target="cpu")(a, b, y)
    fl = [x // d for x, d in pairs]
    md = [x % d for x, d in pairs]
    td = [int(x / d) for x, d in pairs]
    tm = [int(math.fmod(x, d)) for x, d in pairs]
    assert y.tolist() == [fl, md, fl, md, td, tm]


def test_floordiv_by_constants_and_negative_indices():
    # constant divisors go through the simplifier; results must still follow Python
    @T.prim_func
    def k(A: T.Tensor((40,), "int32"), Y: T.Tensor((4, 40), "int32")):
        with T.Kernel(1) as bx:
            for i in T.serial(40):
                x = A[i]
                Y[0, i] = x // 4
                Y[1, i] = x % 4
                Y[2, i] = (x * 8 + 3) // 8
                Y[3, i] = (i - 20) % 6

    a = torch.arange(-20, 20, dtype=torch.int32)
    y = torch.zeros(4, 40, dtype=torch.int32)
    tilelang.compile(k, target="cpu")(a, y)
    xs = a.tolist()
    assert y.tolist() == [[x // 4 for x in xs], [x % 4 for x in xs], [(x * 8 + 3) // 8 for x in xs],
                          [(i - 20) % 6 for i in range(40)]]


def test_unsigned_division_of_large_values():
    @T.prim_func
    def k(A: T.Tensor((16,), "uint32"), B: T.Tensor((16,), "uint32"), Y: T.Tensor((2, 16), "uint32")):
        with T.Kernel(1) as bx:
            for i in T.serial(16):
                Y[0, i] = A[i] // B[i]
                Y[1, i] = A[i] % B[i]

    a = torch.randint(2 ** 31, 2 ** 32 - 1, (16,), dtype=torch.int64)
    b = torch.randint(1, 1000, (16,), dtype=torch.int64)
    y = torch.zeros(2, 16, dtype=torch.uint32)
    tilelang.compile(k, target="cpu")(a.to(torch.uint32), b.to(torch.uint32), y)
    assert y.to(torch.int64).tolist() == [(a // b).tolist(), (a % b).tolist()]


def test_half_and_bfloat16_round_after_every_op_like_torch():
    n = 4096

    @T.prim_func
    def k(A: T.Tensor((n,), "float16"), B: T.Tensor((n,), "float16"), C: T.Tensor((n,), "float16"),
          Y: T.Tensor((3, n), "float16"), Z: T.Tensor((3, n), "bfloat16")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                Y[0, i] = A[i] * B[i] + C[i]
                Y[1, i] = (A[i] + B[i]) * C[i] - A[i]
                Y[2, i] = A[i] / B[i] + C[i] * C[i]
                Z[0, i] = T.cast(A[i], "bfloat16") * T.cast(B[i], "bfloat16") + T.cast(C[i], "bfloat16")
                Z[1, i] = T.cast(A[i] * 3, "bfloat16")
                Z[2, i] = T.cast(A[i], "bfloat16") / T.cast(B[i], "bfloat16")

    a, b, c = (torch.randn(n).half() for _ in range(3))
    y, z = torch.zeros(3, n).half(), torch.zeros(3, n).bfloat16()
    tilelang.compile(k, target="cpu")(a, b, c, y, z)
    ab, bb, cb = a.bfloat16(), b.bfloat16(), c.bfloat16()
    assert torch.equal(y, torch.stack([a * b + c, (a + b) * c - a, a / b + c * c]))
    assert torch.equal(z, torch.stack([ab * bb + cb, (a * 3).bfloat16(), ab / bb]))
