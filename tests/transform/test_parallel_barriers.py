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

from .parallel_barrier_kernels import reverse_add, two_dim


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
