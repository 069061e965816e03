"""Tuple assignment in a kernel follows Python: every right-hand value is read before any target is written.

Each kernel runs on the CPU backend against a float64 numpy reference on fresh random inputs, and is
compiled for sm_90a (NVRTC, no run) to check the CUDA path accepts the same IR.
"""
import numpy as np
import torch

import tilelang
import tilelang.language as T


def _both(f):
    tilelang.compile(f, target="cuda -arch=sm_90a").get_kernel_source()
    return tilelang.compile(f, target="cpu")


def test_swap_buffer_elements():
    @T.prim_func
    def swap(A: T.Tensor((2,), T.float32)):
        with T.Kernel(1, threads=1):
            A[0], A[1] = A[1], A[0]

    k = _both(swap)
    a = torch.randn(2)
    ref = a.double().numpy()[::-1].copy()
    k(a)
    np.testing.assert_allclose(a.double().numpy(), ref)


def test_rotate_elements_in_a_loop():
    # a three-way rotation repeated at run time: the reads must happen on every iteration, not once at parse time
    @T.prim_func
    def rot(A: T.Tensor((3, 8), T.float32), n: T.int32):
        with T.Kernel(1, threads=1):
            for _ in T.serial(n):
                for j in T.serial(8):
                    A[0, j], A[1, j], A[2, j] = A[1, j] * 2, A[2, j], A[0, j] + 1

    k = _both(rot)
    a = torch.randn(3, 8)
    ref = a.double().numpy().copy()
    for _ in range(5):
        ref = np.stack([ref[1] * 2, ref[2], ref[0] + 1])
    k(a, 5)
    np.testing.assert_allclose(a.double().numpy(), ref, rtol=1e-6, atol=1e-6)


def test_swap_alloc_vars_each_iteration():
    # `a, b = b, a` on T.alloc_var swaps the values; inside a run-time loop an odd count leaves them swapped
    @T.prim_func
    def swap(A: T.Tensor((2,), T.float32), B: T.Tensor((2,), T.float32), n: T.int32):
        with T.Kernel(1, threads=1):
            a = T.alloc_var(T.float32, A[0])
            b = T.alloc_var(T.float32, A[1])
            for _ in T.serial(n):
                a, b = b, a
            B[0], B[1] = a, b

    k = _both(swap)
    for n in (0, 1, 2, 3):
        a = torch.randn(2)
        b = torch.zeros(2)
        k(a, b, n)
        ref = a.double().numpy() if n % 2 == 0 else a.double().numpy()[::-1]
        np.testing.assert_allclose(b.double().numpy(), ref)


def test_swap_local_elements_and_names():
    @T.prim_func
    def mix(A: T.Tensor((4,), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            t = T.alloc_local((2,), T.float32)
            t[0] = A[0]
            t[1] = A[1]
            t[0], t[1] = t[1] - t[0], t[0]
            x = A[2]
            y = A[3]
            x, y = y, x
            B[0], B[1], B[2], B[3] = t[0], t[1], x, y

    k = _both(mix)
    a = torch.randn(4)
    b = torch.zeros(4)
    k(a, b)
    r = a.double().numpy()
    np.testing.assert_allclose(b.double().numpy(), [r[1] - r[0], r[0], r[3], r[2]], rtol=1e-6, atol=1e-6)
