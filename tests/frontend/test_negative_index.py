"""Negative buffer indices count from the end of their dim, Python style, where they are provably negative.

A constant (`A[-1]`) is wrapped by the parser; an index that range analysis proves negative over its
loops, grid and thread indices (`A[-i - 1]`) by the legalize_negative_index pass, first in both
pipelines. An index whose sign is unknown is left as written. Kernels run on the CPU backend against
numpy float64 references on fresh random inputs, and compile for sm_90a.
"""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError
from tilelang.ir import expr as E
from tilelang.ir.visitor import collect
from tilelang.transform.legalize_negative_index import legalize_negative_index


def _both(f):
    tilelang.compile(f, target="cuda -arch=sm_90a").get_kernel_source()
    return tilelang.compile(f, target="cpu")


def _load_indices(f):
    return [tuple(E.const_value(i) if E.const_value(i) is not None else str(i) for i in ld.indices)
            for ld in collect(f.body, lambda n: isinstance(n, E.BufferLoad)) if ld.buffer.name == "A"]


def test_constant_indices_wrap():
    @T.prim_func
    def f(A: T.Tensor((16,), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            B[0] = A[-1]
            B[1] = A[T.int32(-16)]
            B[-2] = A[-3] * 2
            B[-1] = A[0]

    assert _load_indices(f) == [(15,), (0,), (13,), (0,)]
    k = _both(f)
    a = torch.randn(16)
    b = torch.zeros(4)
    k(a, b)
    r = a.double().numpy()
    np.testing.assert_allclose(b.double().numpy(), [r[-1], r[-16], r[-3] * 2, r[0]], rtol=1e-6)


def test_constant_out_of_range_still_refused():
    with pytest.raises(DSLTypeError, match="out of range"):
        @T.prim_func
        def f(A: T.Tensor((16,), T.float32), B: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=1):
                B[0] = A[-17]


def test_affine_loop_index_wraps_loads_and_stores():
    @T.prim_func
    def rev(A: T.Tensor((16, 8), T.float32), B: T.Tensor((16, 8), T.float32)):
        with T.Kernel(2, threads=1) as bx:
            for i in T.serial(8):
                for j in T.serial(8):
                    B[-bx * 8 - i - 1, j] = A[bx * 8 + i, -j - 1] + A[-1, -1]

    k = _both(rev)
    a = torch.randn(16, 8)
    b = torch.zeros(16, 8)
    k(a, b)
    r = a.double().numpy()
    np.testing.assert_allclose(b.double().numpy(), r[::-1, ::-1] + r[-1, -1], rtol=1e-6, atol=1e-6)


def test_parallel_thread_and_symbolic_dims():
    N = T.dynamic("N")

    @T.prim_func
    def rev(A: T.Tensor((N,), T.float32), B: T.Tensor((N, 64), T.float32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), T.float32)
            for i in T.Parallel(64):
                S[-i - 1] = A[i]
            T.sync_threads()
            for r in T.serial(N):
                B[-r - 1, tx] = S[-tx - 1] + A[-1]

    k = _both(rev)
    n = 70
    a = torch.randn(n)
    b = torch.zeros(n, 64)
    k(a, b)
    r = a.double().numpy()
    row = r[:64] + r[-1]  # S[63 - i] = A[i], read back at 63 - tx
    np.testing.assert_allclose(b.double().numpy(), np.tile(row, (n, 1)), rtol=1e-6, atol=1e-6)


def test_unknown_sign_is_left_alone():
    @T.prim_func
    def shifted(shift: T.int32, A: T.Tensor((16,), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                B[i] = A[shift + i]

    @T.prim_func
    def mixed(A: T.Tensor((16,), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                B[i] = A[i - 1]  # i - 1 in [-1, 2]: either sign

    for f in (shifted, mixed):
        assert _load_indices(legalize_negative_index(f)) == _load_indices(f)
    k = _both(shifted)
    for shift in (0, 5, 8):
        a = torch.randn(16)
        b = torch.zeros(8)
        k(shift, a, b)
        np.testing.assert_allclose(b.double().numpy(), a.double().numpy()[shift:shift + 8])
