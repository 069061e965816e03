"""`with T.Kernel(threads=n):` without grid extents launches one block (public TileLang behaviour).

`as x` binds an empty list then. Kernels run on the CPU backend against numpy references on fresh random
inputs and compile for sm_90a.
"""
import numpy as np
import torch

import tilelang
import tilelang.language as T


def test_one_block_parallel_and_threads():
    M, N = 16, 64

    @T.prim_func
    def f(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32), C: T.Tensor((128,), T.int32)):
        with T.Kernel(threads=128):
            S = T.alloc_shared((M, N), T.float32)
            T.copy(A, S)
            for i, j in T.Parallel(M, N):
                B[i, j] = S[i, j] * 2 + 1
            tx = T.get_thread_binding()
            C[tx] = tx * 3

    src = tilelang.compile(f, target="cuda -arch=sm_90a").get_kernel_source()
    assert "__global__" in src
    k = tilelang.compile(f, target="cpu")
    a = torch.randn(M, N)
    b = torch.zeros(M, N)
    c = torch.zeros(128, dtype=torch.int32)
    k(a, b, c)
    np.testing.assert_allclose(b.double().numpy(), a.double().numpy() * 2 + 1, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(c.numpy(), np.arange(128) * 3)


def test_as_binds_an_empty_list_and_default_threads():
    seen = []

    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel() as blocks:
            seen.append(blocks)
            for i in T.serial(4):
                A[i] = A[i] - 1

    assert seen == [[]]
    k = tilelang.compile(f, target="cpu")
    a = torch.randn(4)
    ref = a.double().numpy() - 1
    k(a)
    np.testing.assert_allclose(a.double().numpy(), ref, rtol=1e-6, atol=1e-6)
