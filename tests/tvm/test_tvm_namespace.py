"""tilelang.tvm: DataType, tirx expression builders (on our IR, checked by running a CPU kernel
that decodes FP4 nibbles with them against a float64 table), tvm.target.Target as a `with`
context for target="auto", and `import tvm` resolving to it when no real TVM is installed."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang import tvm
from tilelang.errors import DSLTypeError

ROOT = Path(__file__).resolve().parents[2]
tirx = tvm.tirx


def test_datatype_is_the_dtype_class():
    assert tvm.DataType is T.dtype and tilelang.DataType is T.dtype
    assert tvm.DataType("float16").bits == 16 and tvm.DataType(T.int8).bits == 8
    assert 128 // tvm.DataType("float16").bits == 8


def test_const_and_primexpr():
    c = tirx.const(3, T.uint16)
    assert isinstance(c, tirx.PrimExpr) and c.dtype == T.uint16 and c.value == 3
    assert tirx.const(2).dtype == T.int32 and tirx.const(2.5).dtype == T.float32
    assert tirx.const(1 << 40).dtype == T.int64
    assert tvm.tir is tirx


def test_reinterpret_checks_width():
    with pytest.raises(DSLTypeError, match="widths must match"):
        tirx.reinterpret(T.float16, tirx.const(1, T.uint32))


def test_select_condition_from_eq_is_an_expression():
    from tilelang.ir import expr as E

    x = tirx.const(1, T.uint32)
    sel = tirx.Select(x == tirx.const(0, T.uint32), x, x)  # `==` outside a kernel body builds IR too
    assert isinstance(sel, E.Select) and sel.cond.op == "=="
    with pytest.raises(DSLTypeError, match="Python bool"):
        tirx.Select(True, x, x)
    assert tirx.NE(x, 2).dtype == T.bool


def decode_e2m1(nibble):
    """FP4 (1 sign, 2 exponent, 1 mantissa bit) -> float32 bits, built only from tirx calls."""
    s = nibble >> tirx.const(3, T.uint32)
    e = (nibble >> tirx.const(1, T.uint32)) & tirx.const(3, T.uint32)
    m = nibble & tirx.const(1, T.uint32)
    normal = (s << tirx.const(31, T.uint32)) | ((e + tirx.const(126, T.uint32)) << tirx.const(23, T.uint32)) | (
        m << tirx.const(22, T.uint32))
    sub = (s << tirx.const(31, T.uint32)) | (m * tirx.const(0x3F000000, T.uint32))  # 0.5 or 0
    bits = tirx.Select(tirx.EQ(e, tirx.const(0, T.uint32)), sub, normal)
    return tirx.reinterpret(T.float32, bits)


def fp4_kernel(n):
    @T.prim_func
    def k(P: T.Tensor((n,), T.uint8), Lo: T.Tensor((n,), T.float32), Hi: T.Tensor((n,), T.float64),
          E: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(n):
                v = tirx.Cast(T.uint32, P[i])
                Lo[i] = decode_e2m1(v & tirx.const(15, T.uint32))
                Hi[i] = tirx.Cast(T.float64, decode_e2m1(v >> tirx.const(4, T.uint32)))
                E[i] = tirx.Min(tirx.Cast(T.int32, v), tirx.const(100, T.int32)) + tirx.Max(
                    tirx.Cast(T.int32, v) - 250, 0)

    return k


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def test_tirx_builders_compute_fp4_decode_on_cpu():
    n = 256
    k = tilelang.compile(fp4_kernel(n), target="cpu")
    p = torch.randperm(256, generator=torch.Generator().manual_seed(3)).to(torch.uint8)
    lo, hi, e = torch.full((n,), float("nan")), torch.full((n,), float("nan"), dtype=torch.float64), \
        torch.full((n,), -1, dtype=torch.int32)
    k(p, lo, hi, e)

    def ref(nib):
        return torch.tensor([(-1.0 if x & 8 else 1.0) * E2M1[x & 7] for x in nib.tolist()], dtype=torch.float64)

    pi = p.to(torch.int64)
    assert torch.equal(lo.double(), ref(pi & 15))
    assert torch.equal(hi, ref(pi >> 4))
    assert torch.equal(e.to(torch.int64), torch.clamp(pi, max=100) + torch.clamp(pi - 250, min=0))


def copy_kernel():
    @T.prim_func
    def k(A: T.Tensor((32,), T.float32), B: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(32):
                B[i] = A[i] * 2

    return k


def test_target_context_sets_auto_target():
    t = tvm.target.Target("cuda -arch=sm_90a")
    assert (t.kind, t.arch, str(t)) == ("cuda", "sm_90a", "cuda -arch=sm_90a")
    assert tvm.target.Target("llvm").kind == "cpu"
    assert tvm.target.Target.current() is None
    with tvm.target.Target("cpu") as cpu:
        assert tvm.target.Target.current() is cpu
        with t:
            k = tilelang.compile(copy_kernel())
            assert k.target.kind == "cuda" and "__global__" in k.get_kernel_source()
        k = tilelang.compile(copy_kernel())
        assert k.target.kind == "cpu"
        a, b = torch.randn(32), torch.full((32,), float("nan"))
        k(a, b)
        assert torch.equal(b, a * 2)
    assert tvm.target.Target.current() is None
    with pytest.raises(tilelang.TileLangError, match="unknown target"):
        tvm.target.Target("hip -mcpu=gfx950")


PROBE = r"""
import sys
import tilelang
import tilelang.language as T
from tvm import DataType
from tvm import tirx
import tvm.tirx
from tvm.tirx import const
assert sys.modules["tvm"] is tilelang.tvm and tvm.tirx is tilelang.tvm.tirx is tirx
assert DataType("bfloat16").bits == 16 and const(3, T.int8).dtype == T.int8
assert tilelang.tvm.__spec__.name == "tilelang.tvm"
try:
    import tvm.nothing_here
except ModuleNotFoundError:
    print("ok")
"""


def test_import_tvm_gives_our_namespace():
    import importlib.machinery

    if importlib.machinery.PathFinder.find_spec("tvm") is not None:
        pytest.skip("a real TVM is installed: it wins `import tvm`")
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


def test_without_import_tilelang_there_is_no_tvm():
    res = subprocess.run([sys.executable, "-c", "import tvm"], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert res.returncode != 0 and "No module named 'tvm'" in res.stderr


def test_testing_requires_package_is_a_skip_mark():
    """`@tvm.testing.requires_package(...)` (the public dequantize_gemm examples use it): skipped
    under pytest when a package is missing; the decorated function still runs when called."""
    missing = tvm.testing.requires_package("no_such_package_for_tilelang_tests")
    present = tvm.testing.requires_package("torch")
    assert missing.mark.name == "skipif" and missing.mark.args == (True,)
    assert present.mark.args == (False,)

    @missing
    def f(x):
        return x + 1

    assert f(1) == 2


def test_tirx_call_extern_calls_the_device_function_on_cpu():
    n = 64

    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            B[tx] = tirx.call_extern("float32", "sqrtf", A[tx])

    a = torch.rand(n, generator=torch.Generator().manual_seed(5)) * 100
    b = torch.full((n,), float("nan"))
    tilelang.compile(k, target="cpu")(a, b)
    assert (b.double() - a.double().sqrt()).abs().max().item() < 1e-5 * 10


def test_tirx_call_extern_outside_a_kernel_is_an_error():
    with pytest.raises(Exception, match="call_extern"):
        tirx.call_extern("void", "__nanosleep", 100)
