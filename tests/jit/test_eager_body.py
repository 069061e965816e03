"""Eager @tilelang.jit bodies: `assert` before the kernels (checked while building, or by the
host at each call when it depends on symbolic dims), T.const values read off a
T.StridedTensor's strides, and function-level attrs on the parsed PrimFunc.
CPU target; results checked against float64 torch on fresh random inputs."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError


@T.macro
def add_into(A, B, Out):
    n, = A.shape
    m, = B.shape
    assert n == m, f"length mismatch {n} {m}"
    with T.Kernel(T.ceildiv(n, 16), threads=16) as bx:
        for i in T.Parallel(16):
            if bx * 16 + i < n:
                Out[bx * 16 + i] = A[bx * 16 + i] * 2.0 + B[bx * 16 + i]


@tilelang.jit(target="cpu")
def add_dynamic(A, B, Out):
    n, m = T.dynamic("n, m")
    A: T.Tensor[[n], T.float32]
    B: T.Tensor[[m], T.float32]
    Out: T.Tensor[[n], T.float32]
    add_into(A, B, Out)


@tilelang.jit(target="cpu")
def add_const(A, B, Out):
    n, m = T.const("n, m")
    A: T.Tensor[[n], T.float32]
    B: T.Tensor[[m], T.float32]
    Out: T.Tensor[[n], T.float32]
    add_into(A, B, Out)


@tilelang.jit(target="cpu")
def add_same_dim(A, B, Out):
    n = T.dynamic("n")
    A: T.Tensor[[n], T.float32]
    B: T.Tensor[[n], T.float32]
    Out: T.Tensor[[n], T.float32]
    add_into(A, B, Out)


@tilelang.jit(target="cpu")
def strided_copy(A):
    N, M, SN, SM = T.const("N, M, SN, SM")
    A: T.StridedTensor[[N, M], [SN, SM], T.float32]
    B = T.empty((N, M), T.float32)
    T.annotate_pass_configs({"tl.disable_warp_specialized": True})
    with T.Kernel(N, threads=8) as bx:
        for j in T.serial(M):
            B[bx, j] = A[bx, j] - 0.5
    return B


def test_host_assert_on_dynamic_dims():
    a, b = torch.randn(37), torch.randn(37)
    out = torch.full((37,), float("nan"))
    add_dynamic(a, b, out)
    torch.testing.assert_close(out.double(), a.double() * 2 + b.double())
    kernel = add_dynamic.compile(A=a, B=b, Out=out)
    assert "tl.host_asserts" in kernel.prim_func.attrs
    with pytest.raises(AssertionError, match="length mismatch n m"):
        add_dynamic(torch.randn(37), torch.randn(36), torch.empty(37))


def test_assert_decided_by_the_dims_is_not_a_host_check():
    a, b = torch.randn(21), torch.randn(21)
    out = torch.full((21,), float("nan"))
    add_same_dim(a, b, out)
    torch.testing.assert_close(out.double(), a.double() * 2 + b.double())
    assert "tl.host_asserts" not in add_same_dim.compile(A=a, B=b, Out=out).prim_func.attrs


def test_assert_on_const_dims_fails_while_building():
    a, b = torch.randn(16), torch.randn(16)
    out = torch.full((16,), float("nan"))
    add_const(a, b, out)
    torch.testing.assert_close(out.double(), a.double() * 2 + b.double())
    with pytest.raises(DSLTypeError, match="length mismatch 16 15"):
        add_const(a, torch.randn(15), out)


def test_const_strides_come_from_the_tensor_view():
    base = torch.randn(12, 2, 10, 3)
    view = base[:, 1, :, 2]
    got = strided_copy(view)
    torch.testing.assert_close(got.double(), view.double() - 0.5)
    f = strided_copy.get_tir(view)
    assert [int(s) for s in f.params[0].strides] == list(view.stride())
    assert list(f.attrs["tilelang_out_idx"]) == [-1]
    assert dict(f.attrs["tilelang_pass_configs"]) == {"tl.disable_warp_specialized": True}
