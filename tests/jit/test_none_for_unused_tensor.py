"""A tensor parameter the kernel never touches may be passed as None (a null pointer)."""
import pytest
import torch

import tilelang
import tilelang.language as T


def make(n, with_bias):
    @T.prim_func
    def f(A: T.Tensor((n,), "float32"), Bias: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(n // 2):
                if with_bias:
                    C[bx * (n // 2) + i] = A[bx * (n // 2) + i] * 3.0 + Bias[bx * (n // 2) + i]
                else:
                    C[bx * (n // 2) + i] = A[bx * (n // 2) + i] * 3.0

    return f


def test_unused_tensor_may_be_none():
    k = tilelang.compile(make(64, with_bias=False), target="cpu")
    a = torch.randn(64)
    c = torch.full((64,), float("nan"))
    k(a, None, c)
    torch.testing.assert_close(c.double(), a.double() * 3.0)
    c2 = torch.full((64,), float("nan"))  # a real tensor is still accepted (and ignored)
    k(a, torch.randn(64), c2)
    torch.testing.assert_close(c2.double(), a.double() * 3.0)


def test_none_for_a_used_tensor_is_refused():
    k = tilelang.compile(make(64, with_bias=True), target="cpu")
    a, b = torch.randn(64), torch.randn(64)
    with pytest.raises(TypeError, match="argument .Bias.*got NoneType; the kernel reads or writes it"):
        k(a, None, torch.empty(64))
    c = torch.full((64,), float("nan"))
    k(a, b, c)
    torch.testing.assert_close(c.double(), a.double() * 3.0 + b.double(), rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match="argument 'A'"):
        k(None, b, c)


def test_none_with_out_idx_and_jit():
    @tilelang.jit(out_idx=[-1], target="cpu")
    def factory(n, with_bias=False):
        return make(n, with_bias)

    k = factory(32)
    a = torch.randn(32)
    torch.testing.assert_close(k(a, None).double(), a.double() * 3.0)


def test_symbolic_dims_of_none_tensors():
    m = T.dynamic("m")

    @T.prim_func
    def only_owner(X: T.Tensor((m,), "float32"), Out: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=4):
            for i in T.Parallel(4):
                Out[i] = m * 10 + i

    k = tilelang.compile(only_owner, target="cpu")
    out = torch.full((4,), -1, dtype=torch.int32)
    k(torch.zeros(7), out)
    assert torch.equal(out, torch.arange(4, dtype=torch.int32) + 70)
    k(None, out)  # the only tensor naming m is None: m is 0
    assert torch.equal(out, torch.arange(4, dtype=torch.int32))

    n = T.dynamic("n")

    @T.prim_func
    def shared(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"), Out: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=4):
            for i in T.Parallel(4):
                Out[i] = n + i

    k2 = tilelang.compile(shared, target="cpu")
    k2(None, torch.zeros(5), out)  # Y binds n
    assert torch.equal(out, torch.arange(4, dtype=torch.int32) + 5)
    with pytest.raises(RuntimeError, match="'n' is named only by X, Y, all passed as None"):
        k2(None, None, out)

    @T.prim_func
    def shared_unused(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"), Out: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=4):
            for i in T.Parallel(4):
                Out[i] = Out[i] * 2.0

    k3 = tilelang.compile(shared_unused, target="cpu")
    o = torch.randn(4)
    want = o.double() * 2
    k3(None, None, o)  # n is used nowhere: nothing to bind
    torch.testing.assert_close(o.double(), want)
