"""transform/parallel_barriers.py: a barrier at the top level of a T.Parallel body splits the loop on
the CPU backend, so every element's statements before it run before any element's after it (the
GPU meaning, where the elements are spread over the threads). Fresh random inputs, NaN-poisoned
outputs, float64 references.
"""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import LoweringError


def reverse_add(N):
    """A[i] += A[N - 1 - i], every read before any write (a T.sync_threads in the T.Parallel body)."""

    @T.prim_func
    def k(A: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128):
            L = T.alloc_fragment((N,), T.float32)
            for i in T.Parallel(N):
                L[i] = A[N - i - 1]
                T.sync_threads()
                A[i] = A[i] + L[i]
    return k


def two_dim(M, N):
    """A 2-d nest, two barriers, each phase reading what other elements wrote in the one before."""

    @T.prim_func
    def k(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((M, N), T.float32)
            R = T.alloc_shared((M, N), T.float32)
            for i, j in T.Parallel(M, N):
                S[i, j] = A[i, j]
                T.sync_threads()
                R[i, j] = S[i, j] + S[M - 1 - i, N - 1 - j]
                T.sync_threads()
                B[i, j] = R[M - 1 - i, j] * 2.0
    return k


@pytest.mark.parametrize("N", [64, 200])
def test_reverse_add(N):
    a = torch.randn(N)
    ref = a.double() + a.double().flip(0)
    tilelang.compile(reverse_add(N), target="cpu")(a)
    torch.testing.assert_close(a.double(), ref, rtol=1e-6, atol=1e-6)


def test_two_barriers_in_a_2d_nest():
    M, N = 6, 10
    a = torch.randn(M, N)
    b = torch.full((M, N), float("nan"))
    tilelang.compile(two_dim(M, N), target="cpu")(a, b)
    ref = (a.double() + a.double().flip(0).flip(1)).flip(0) * 2
    torch.testing.assert_close(b.double(), ref, rtol=1e-6, atol=1e-6)


def test_barrier_under_a_branch_refused():
    @T.prim_func
    def k(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                if i < 32:
                    T.sync_threads()
                A[i] = 1.0

    with pytest.raises(LoweringError, match="T.sync_threads under a branch or loop inside a T.Parallel loop"):
        tilelang.compile(k, target="cpu")


def test_value_bound_across_the_barrier_refused():
    @T.prim_func
    def k(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                x = A[63 - i] * 2.0
                T.sync_threads()
                A[i] = x

    with pytest.raises(LoweringError, match="x is bound before a barrier inside a T.Parallel loop"):
        tilelang.compile(k, target="cpu")
