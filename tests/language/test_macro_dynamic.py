"""@T.macro inlining and T.dynamic symbolic dims (one compiled kernel, several sizes). CPU target."""
import pytest
import torch

import tilelang
import tilelang.language as T


@T.macro
def scale_tile(tile, rows, cols, factor):
    for i, j in T.Parallel(rows, cols):
        tile[i, j] = tile[i, j] * factor


@T.macro
def clamp_scaled(tile, rows, cols, factor, lo, hi):
    scale_tile(tile, rows, cols, factor)  # a macro calling a macro
    for i, j in T.Parallel(rows, cols):
        tile[i, j] = T.clamp(tile[i, j], lo, hi)


@T.macro
def first_positive(A, row, n):
    # a macro with a return value: the expression is used by the caller
    return T.if_then_else(A[row, 0] > 0, A[row, 0], A[row, n - 1])


def test_macro_nested_and_returning():
    M, N, bm, bn = 50, 40, 16, 16

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((2,), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            t = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[by * bm, bx * bn], t)
            clamp_scaled(t, bm, bn, 3.0, -2.0, 2.5)
            T.copy(t, B[by * bm, bx * bn])
            if bx == 0 and by == 0:
                C[0] = first_positive(A, 0, N)
                C[1] = first_positive(A, 1, N) * 2.0

    a = torch.randn(M, N)
    a[0, 0] = -1.0
    a[1, 0] = 0.7
    b, c = torch.full((M, N), float("nan")), torch.full((2,), float("nan"))
    tilelang.compile(k, target="cpu")(a, b, c)
    torch.testing.assert_close(b.double(), (a.double() * 3).clamp(-2.0, 2.5), rtol=1e-6, atol=1e-6)
    assert c.tolist() == pytest.approx([float(a[0, N - 1]), 1.4], rel=1e-6)


def test_dynamic_dims_one_kernel_many_sizes():
    m = T.dynamic("m")
    N, bm = 24, 16

    @T.prim_func
    def k(A: T.Tensor((m, N), "float32"), B: T.Tensor((m, N), "float32"), R: T.Tensor((m,), "float32")):
        with T.Kernel(T.ceildiv(m, bm)) as bx:
            t = T.alloc_fragment((bm, N), "float32")
            r = T.alloc_fragment((bm,), "float32")
            T.copy(A[bx * bm, 0], t)
            for i, j in T.Parallel(bm, N):
                t[i, j] = t[i, j] + (bx * bm + i)
            T.reduce_sum(t, r, dim=1)
            T.copy(t, B[bx * bm, 0])
            T.copy(r, R[bx * bm])

    kern = tilelang.compile(k, target="cpu")
    for rows in (1, 15, 16, 17, 100):
        a = torch.randn(rows, N)
        b, r = torch.full((rows, N), float("nan")), torch.full((rows,), float("nan"))
        kern(a, b, r)
        want = a.double() + torch.arange(rows, dtype=torch.float64)[:, None]
        torch.testing.assert_close(b.double(), want, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(r.double(), want.sum(1), rtol=1e-5, atol=1e-5)


def test_dynamic_dims_two_symbols_and_out_idx():
    m, n = T.dynamic("m"), T.dynamic("n")
    bm, bn = 8, 32

    @T.prim_func
    def k(A: T.Tensor((m, n), "float16"), B: T.Tensor((n, m), "float16")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm)) as (bx, by):
            t = T.alloc_shared((bm, bn), "float16")
            T.copy(A[by * bm, bx * bn], t)
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < m and bx * bn + j < n:
                    B[bx * bn + j, by * bm + i] = t[i, j] * 2

    kern = tilelang.compile(k, out_idx=[1], target="cpu")
    for rows, cols in ((3, 5), (8, 32), (9, 33), (40, 70)):
        a = torch.randn(rows, cols).half()
        b = kern(a)
        assert tuple(b.shape) == (cols, rows)
        assert torch.equal(b, (a * 2).T)
