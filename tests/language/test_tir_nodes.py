"""TVM's expression node classes as T.* names (tvm/tirx_nodes.py): built in kernels on the CPU backend
against float64 / exact integer references, and their isinstance checks."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError
from tilelang.ir import expr as E
from tilelang.tvm import tirx

N = 64


def test_arithmetic_nodes_match_c_and_floor_semantics():
    @T.prim_func
    def k(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), O: T.Tensor((8, N), "int32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(N):
                a, b = A[i], B[i]
                O[0, i] = T.Add(a, b)
                O[1, i] = T.Sub(a, T.Mul(b, T.IntImm("int32", 3)))
                O[2, i] = T.Div(a, b)          # truncated toward zero
                O[3, i] = T.Mod(a, b)          # the sign of a
                O[4, i] = T.FloorDiv(a, b)     # rounded down
                O[5, i] = T.FloorMod(a, b)     # the sign of b
                O[6, i] = T.Min(a, b) * 1000 + T.Max(a, b)
                O[7, i] = (T.Select(T.And(T.GT(a, 0), T.Not(T.EQ(b, 1))), 1, 0)
                           + T.Select(T.Or(T.LT(a, b), T.GE(a, 7)), 10, 0)
                           + T.Select(T.NE(a, b), 100, 0) + T.Select(T.LE(a, b), 1000, 0))

    kern = tilelang.compile(k, target="cpu")
    a = torch.randint(-50, 50, (N,), dtype=torch.int32)
    b = torch.randint(1, 9, (N,), dtype=torch.int32) * (torch.randint(0, 2, (N,), dtype=torch.int32) * 2 - 1)
    out = torch.full((8, N), -12345, dtype=torch.int32)
    kern(a, b, out)
    al, bl = a.tolist(), b.tolist()
    trunc = [int(x / y) for x, y in zip(al, bl)]
    want = [
        [x + y for x, y in zip(al, bl)],
        [x - 3 * y for x, y in zip(al, bl)],
        trunc,
        [x - q * y for x, y, q in zip(al, bl, trunc)],
        [x // y for x, y in zip(al, bl)],
        [x % y for x, y in zip(al, bl)],
        [min(x, y) * 1000 + max(x, y) for x, y in zip(al, bl)],
        [(x > 0 and y != 1) + 10 * (x < y or x >= 7) + 100 * (x != y) + 1000 * (x <= y) for x, y in zip(al, bl)],
    ]
    assert out.tolist() == want


def test_float_nodes_call_cast_let_and_single_lane_vectors():
    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float16"), O: T.Tensor((3, N), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(N):
                v = T.Var("v", "float32")
                O[0, i] = tirx.Let(v, X[i], v * v + T.FloatImm("float32", 0.5))
                O[1, i] = T.Call("float32", "tirx.exp", [X[i]]) + T.Call("float32", "tir.fabs", [X[i]])
                O[2, i] = T.Cast("float32", Y[i]) * T.Broadcast(2.0, 1) + T.Shuffle([T.Ramp(X[i], 1, 1)], [0])

    kern = tilelang.compile(k, target="cpu")
    x, y = torch.randn(N), torch.randn(N).half()
    out = torch.full((3, N), float("nan"))
    kern(x, y, out)
    xd = x.double()
    torch.testing.assert_close(out[0].double(), xd * xd + 0.5, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out[1].double(), xd.exp() + xd.abs(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out[2].double(), y.double() * 2 + xd, rtol=1e-5, atol=1e-5)


def test_select_takes_the_public_arguments_and_a_python_bool():
    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(N):
                O[i] = T.Select(condition=X[i] > 0, true_value=X[i], false_value=T.Select(True, 0.0, 1.0), span=None)

    kern = tilelang.compile(k, target="cpu")
    x = torch.randn(N)
    out = torch.full((N,), float("nan"))
    kern(x, out)
    torch.testing.assert_close(out.double(), x.double().clamp(min=0), rtol=0, atol=0)


def test_string_literal_reaches_extern_code():
    @T.prim_func
    def k(O: T.Tensor((2,), "int32")):
        T.import_source("static int tl_len(const char* s) { int n = 0; while (s[n]) ++n; return n; }\n"
                        "static int tl_at(const char* s, int k) { return (unsigned char)s[k]; }")
        with T.Kernel(1, threads=1):
            O[0] = T.call_extern("int32", "tl_len", T.StringImm('a"b\\\n\té?'))
            O[1] = T.call_extern("int32", "tl_at", T.StringImm("xyé"), 3)

    kern = tilelang.compile(k, target="cpu")
    out = torch.zeros(2, dtype=torch.int32)
    kern(out)
    assert out.tolist() == [len('a"b\\\n\té?'.encode()), "xyé".encode()[3]]


def test_isinstance_asks_about_our_nodes():
    i = T.Var("i", "int32")
    assert isinstance(i, T.Var) and isinstance(i, T.PrimExpr) and isinstance(i, tirx.Var)
    assert isinstance(T.Add(i, 1), T.Add) and not isinstance(T.Add(i, 1), T.Sub)
    assert isinstance(T.IntImm("int64", 3), T.IntImm) and T.IntImm("int64", 3).dtype == "int64"
    assert isinstance(T.FloatImm("float16", 0.5), T.FloatImm) and not isinstance(T.FloatImm("float16", 0.5), T.IntImm)
    assert isinstance(T.Cast("float32", i), T.Cast) and isinstance(T.Max(i, 2), T.Max)
    assert isinstance(T.EQ(i, 2), T.EQ) and T.EQ(i, 2).dtype == "bool"
    assert issubclass(E.Var, T.PrimExpr)
    r = T.Range(2, 10)
    assert (r.min, r.extent, r.end) == (2, 8, 10)


@pytest.mark.parametrize("make,msg", [
    (lambda: T.IntImm("float32", 1), "not an integer dtype"),
    (lambda: T.FloatImm("int32", 1), "not a floating-point dtype"),
    (lambda: T.Ramp(0, 1, 0), "lane count must be a constant integer >= 1"),
    (lambda: T.Shuffle([T.Ramp(0, 1, 2)], [2]), "constant lane in"),
    (lambda: T.PrimExpr("int32"), "not constructed itself"),
    (lambda: T.Call("float32", "tirx.nonexistent_op", [1.0]), "'tirx.nonexistent_op' is not supported"),
])
def test_unsupported_forms_are_clear_errors(make, msg):
    with pytest.raises(TileLangError, match=msg):
        make()
