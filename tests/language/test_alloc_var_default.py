"""T.alloc_var without `init` starts at zero (the public TileLang's documented default), on both backends.

Kernels run on the CPU backend against numpy references on fresh random inputs; the CUDA source for
sm_90a is compiled (NVRTC) and checked to hold the zero initialisation.
"""
import numpy as np
import torch

import tilelang
import tilelang.language as T


def test_while_loop_sum_from_default_zero():
    @T.prim_func
    def tri(A: T.Tensor((1,), T.int32), n: T.int32):
        with T.Kernel(1, threads=1):
            i = T.alloc_var(T.int32, 0)
            s = T.alloc_var(T.int32)
            while i < n:
                s += i
                i += 1
            A[0] = s

    k = tilelang.compile(tri, target="cpu")
    for n in np.random.randint(0, 50, size=4).tolist():
        a = torch.full((1,), 12345, dtype=torch.int32)
        k(a, n)
        assert a.item() == sum(range(n))


def test_default_zero_per_iteration_and_dtypes():
    # a var allocated inside a loop starts again at zero on every iteration; float16 / float32 / int8 all zero
    @T.prim_func
    def acc(A: T.Tensor((128, 8), T.float32), B: T.Tensor((128, 8), T.float32), C: T.Tensor((128,), T.int32)):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            c = T.alloc_var(T.int8)
            for j in T.serial(8):
                s = T.alloc_var(T.float32)
                h = T.alloc_var(T.float16)
                s += A[tx, j]
                h += 1
                B[tx, j] = s * h
                if A[tx, j] > 0:
                    c += 1
            C[tx] = c

    src = tilelang.compile(acc, target="cuda -arch=sm_90a").get_kernel_source()
    assert "s[0] = 0.0f;" in src
    k = tilelang.compile(acc, target="cpu")
    a = torch.randn(128, 8)
    b = torch.full((128, 8), 7.0)
    c = torch.full((128,), 99, dtype=torch.int32)
    k(a, b, c)
    ref = a.double().numpy()
    np.testing.assert_allclose(b.double().numpy(), ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(c.numpy(), (ref > 0).sum(axis=1))


def test_scope_string_in_init_position():
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            x = T.alloc_var(T.float32, "local.var")
            for i in T.serial(4):
                x += A[i]
            A[0] = x

    k = tilelang.compile(f, target="cpu")
    a = torch.randn(4)
    ref = a.double().sum().item()
    k(a)
    assert abs(a[0].item() - ref) < 1e-5
