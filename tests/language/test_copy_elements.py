"""T.copy between two single elements (`T.copy(A[i], B[j])`, both sides corners) is the store `B[j] = A[i]`.

The value is cast to B's dtype; it works at block level and inside T.Parallel, and with lowering hints
(annotations) it stays a one-element copy. Kernels run on the CPU backend against numpy references on
fresh random inputs and compile for sm_90a.
"""
import numpy as np
import torch

import tilelang
import tilelang.language as T


def _both(f):
    tilelang.compile(f, target="cuda -arch=sm_90a").get_kernel_source()
    return tilelang.compile(f, target="cpu")


def test_gather_int64_to_int32_through_a_local():
    n = 8

    @T.prim_func
    def gather(ind: T.Tensor((n,), T.int64), out: T.Tensor((n,), T.int32)):
        with T.Kernel(n, threads=1) as pid:
            idx = T.alloc_local([1], T.int32)
            T.copy(ind[pid], idx[0])
            out[pid] = idx[0] * 3

    k = _both(gather)
    a = torch.randint(-1000, 1000, (n,), dtype=torch.int64)
    o = torch.zeros(n, dtype=torch.int32)
    k(a, o)
    np.testing.assert_array_equal(o.numpy(), a.numpy().astype(np.int32) * 3)


def test_elementwise_copy_in_parallel_casts():
    M, N = 64, 32

    @T.prim_func
    def cp(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // 16, threads=128) as bx:
            for i, j in T.Parallel(16, N):
                T.copy(A[bx * 16 + i, N - 1 - j], B[bx * 16 + i, j])

    k = _both(cp)
    a = torch.randn(M, N).half()
    b = torch.zeros(M, N)
    k(a, b)
    np.testing.assert_array_equal(b.double().numpy(), a.double().numpy()[:, ::-1])


def test_element_copy_via_shared_and_with_annotations():
    @T.prim_func
    def f(A: T.Tensor((32,), T.float32), B: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            S = T.alloc_shared((32,), T.float32)
            T.copy(A[31 - tx], S[tx])
            T.sync_threads()
            T.copy(S[tx], B[tx], annotations={"coalesced_width": 1})

    k = _both(f)
    a = torch.randn(32)
    b = torch.zeros(32)
    k(a, b)
    np.testing.assert_array_equal(b.double().numpy(), a.double().numpy()[::-1])
