"""T.cast's public arguments (value, dtype, round="", sat=True, rbits=None, span=None) on the CPU
backend: float8 casts with and without saturation from every float source, and the clear errors
for stochastic rounding and directed rounding to float4 (test_cast_rounding.py: the directed
rounding that is lowered). References: torch's conversions of the in-range values, and
the overflow rule written out (sat=False: e4m3fn NaN past 464, e5m2 inf from 61440)."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang import dtypes as dt
from tilelang.errors import DSLTypeError
from tilelang.ir import expr as E

N = 256
SPECIAL = [448.0, 456.0, 464.0, 465.0, 480.0, 1e6, -1e6, float("inf"), float("-inf"), float("nan"), -0.0, 0.0,
           57344.0, 60000.0, 61439.0, 61440.0, 2.0 ** -10, 2.0 ** -17, 3e-3, -7.25]


def _inputs(src):
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31, (1,)).item()))
    x = torch.randn(N, generator=g, dtype=torch.float64) * torch.exp2(torch.randint(-12, 18, (N,), generator=g))
    x[:len(SPECIAL)] = torch.tensor(SPECIAL, dtype=torch.float64)
    return x.to(getattr(torch, src))


def _ref(x, fp8, sat):
    """x (float64 values of the source) converted the way T.cast should. Finite in-range values:
    torch's rounding (to nearest even, from float32 as the kernels do)."""
    x32 = x.float()
    big = x32.abs() > (464.0 if fp8 == torch.float8_e4m3fn else 61439.99)  # rounds past the largest finite
    ok = x32.masked_fill(big, 0.0).to(fp8).double()
    if fp8 == torch.float8_e4m3fn:
        over = torch.full_like(ok, 448.0 if sat else float("nan")) * (torch.sign(x32.double()) if sat else 1)
    else:
        over = torch.sign(x32.double()) * (57344.0 if sat else float("inf"))
    return torch.where(big, over, ok)


@pytest.mark.parametrize("src", ["float32", "float16", "bfloat16", "float64"])
def test_float8_saturation(src):
    @T.prim_func
    def k(X: T.Tensor((N,), src), A: T.Tensor((N,), "float8_e4m3fn"), B: T.Tensor((N,), "float8_e4m3fn"),
          C: T.Tensor((N,), "float8_e5m2"), F: T.Tensor((3, N), "float32")):
        with T.Kernel(1):
            for i in T.Parallel(N):
                A[i] = T.cast(X[i], "float8_e4m3fn")
                B[i] = T.cast(X[i], "float8_e4m3fn", sat=False)
                C[i] = T.cast(X[i], dtype="float8_e5m2", round="", sat=False, rbits=None, span=None)
                F[0, i] = T.cast(T.cast(X[i], "float8_e4m3fn", sat=False), "float32")  # the value, not a store
                F[1, i] = T.cast(X[i], "float8_e5m2", sat=False) * 1.0
                F[2, i] = T.Cast("float8_e4m3fn", X[i], annotations={"sat": False}) + 0.0

    x = _inputs(src)
    a, b = (torch.full((N,), 1.0).to(torch.float8_e4m3fn) for _ in range(2))
    c = torch.full((N,), 1.0).to(torch.float8_e5m2)
    f = torch.full((3, N), 5.0)
    tilelang.compile(k, target="cpu")(x, a, b, c, f)
    xd = x.double()
    e4_sat, e4_nosat = _ref(xd, torch.float8_e4m3fn, True), _ref(xd, torch.float8_e4m3fn, False)
    e5_nosat = _ref(xd, torch.float8_e5m2, False)
    for got, want, what in ((a, e4_sat, "e4m3 sat"), (b, e4_nosat, "e4m3 nosat"), (c, e5_nosat, "e5m2 nosat"),
                            (f[0], e4_nosat, "e4m3 nosat value"), (f[1], e5_nosat, "e5m2 nosat value"),
                            (f[2], e4_nosat, "T.Cast sat=False")):
        torch.testing.assert_close(got.double(), want, rtol=0, atol=0, equal_nan=True, msg=lambda m, what=what: f"{what}: {m}")
    if src != "bfloat16":  # (bf16 rounds 465 to 464)
        assert torch.isnan(b[3].float()) and b[2].float() == 448 and a[3].float() == 448 and a[7].float() == 448


def test_cast_argument_errors():
    x = E.Var("x", dt.float32)
    with pytest.raises(DSLTypeError, match="sm_100a"):
        T.cast(x, "float8_e4m3fn", round="rs", rbits=E.Var("r", dt.uint32))
    with pytest.raises(DSLTypeError, match="rbits"):
        T.cast(x, "float16", round="rs")
    with pytest.raises(DSLTypeError, match="rbits"):
        T.cast(x, "float16", rbits=3)
    with pytest.raises(DSLTypeError, match="round must be one of"):
        T.cast(x, "float16", round="nearest")
    with pytest.raises(DSLTypeError, match="float32 -> float4_e2m1fn is not supported"):
        T.cast(x, "float4_e2m1fn", round="rz")
    with pytest.raises(DSLTypeError, match="sat must be a bool"):
        T.cast(x, "float8_e5m2", sat=0)
    with pytest.raises(DSLTypeError, match="no inf or NaN"):
        T.cast(x, "float4_e2m1fn", sat=False)
    with pytest.raises(DSLTypeError, match="unknown annotations"):
        T.Cast("float16", x, annotations={"saturate": False})
    # sat has no effect where nothing saturates: the plain conversion
    assert isinstance(T.cast(x, "float16", sat=False), E.Cast)


def test_cast_argument_errors_are_value_errors():
    x = E.Var("x", dt.float32)
    with pytest.raises(ValueError, match="Invalid round"):
        T.cast(x, "float8_e4m3fn", round="nearest")
    with pytest.raises(ValueError, match="Invalid sat"):
        T.cast(x, "float8_e4m3fn", sat="yes")
    with pytest.raises(ValueError, match="rbits is required"):
        T.cast(x, "float8_e4m3fn", round="rs")
    with pytest.raises(ValueError, match="rbits is only valid"):
        T.cast(x, "float8_e4m3fn", round="rn", rbits=E.Var("r", dt.uint32))


@pytest.mark.parametrize("dst", ["float8_e4m3fn", "float16", "bfloat16"])
def test_round_rn_is_the_default_rounding(dst):
    """round="rn" (to nearest even) is what every cast does: same results as round=""."""
    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), A: T.Tensor((N,), dst), B: T.Tensor((N,), dst)):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(N):
                A[i] = T.cast(X[i], dst, round="rn")
                B[i] = T.cast(X[i], dst)

    a, b = tilelang.compile(k, out_idx=[1, 2], target="cpu")(x := _inputs("float32").clamp(-400, 400))
    want = x.to(getattr(torch, dst)).double()
    torch.testing.assert_close(a.double(), want, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(b.double(), want, rtol=0, atol=0, equal_nan=True)
