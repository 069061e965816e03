"""apply_simplify / simplify_prim_func drop tensor parameters the body never uses."""
import torch

import tilelang
import tilelang.language as T
from tilelang.transform import apply_simplify, simplify_prim_func


def _scale_kernel(n, with_bias):
    @T.prim_func
    def f(A: T.Tensor((n,), "float32"), Bias: T.Tensor((n,), "float32"), s: T.float32,
          C: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                if with_bias:
                    C[i] = A[i] * s + Bias[i]
                else:
                    C[i] = A[i] * s

    return f


def test_unused_tensor_is_dropped_and_scalar_kept():
    f = apply_simplify(_scale_kernel(64, with_bias=False))
    assert [p.name for p in f.params] == ["A", "s", "C"]
    a = torch.randn(64)
    c = torch.full((64,), float("nan"))
    tilelang.compile(f, target="cpu")(a, 1.5, c)
    torch.testing.assert_close(c.double(), a.double() * 1.5)


def test_used_tensor_is_kept():
    f = simplify_prim_func(_scale_kernel)(32, with_bias=True)
    assert [p.name for p in f.params] == ["A", "Bias", "s", "C"]
    a, b = torch.randn(32), torch.randn(32)
    c = torch.full((32,), float("nan"))
    tilelang.compile(f, target="cpu")(a, b, -2.0, c)
    torch.testing.assert_close(c.double(), a.double() * -2.0 + b.double(), rtol=1e-6, atol=1e-6)


def test_unused_tensor_naming_a_needed_size_is_kept():
    m = T.dynamic("m")

    @T.prim_func
    def g(Shape: T.Tensor((m,), "float32"), Out: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                Out[i] = m + i

    h = apply_simplify(g)
    assert [p.name for p in h.params] == ["Shape", "Out"]
    out = torch.zeros(64, dtype=torch.int32)
    tilelang.compile(h, target="cpu")(torch.zeros(37), out)
    assert torch.equal(out, torch.arange(64, dtype=torch.int32) + 37)
