"""T.sync_grid on the CPU backend where the kernel cannot be split into launches (inside a loop or a
T.Parallel body, or registers living across it): a cooperative launch, every block on its own
OpenMP thread, the barrier met by the whole grid (codegen/c.py). Fresh random inputs, NaN-poisoned
outputs, float64 references.
"""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import LoweringError


def mirror_sum(N, block):
    """Every element becomes N - 1: A[j] = j, then A[j] += A[N - 1 - j], with a grid barrier in the
    T.Parallel body between another block's read and its own write (the public TileLang's example shape)."""

    @T.prim_func
    def k(A: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            L = T.alloc_fragment((block,), T.float32)
            base = bx * block
            for i in T.Parallel(block):
                A[base + i] = base + i
            T.sync_grid()
            for i in T.Parallel(block):
                L[i] = A[N - base - i - 1]
                T.sync_grid()
                A[base + i] = A[base + i] + L[i]
    return k


def smooth(N, TPB, steps):
    """`steps` rounds of X[j] = (X[j-1] + X[j] + X[j+1]) / 3 (ends clamped) over the whole grid, thread
    code with a per-thread register carried across the grid barriers of a serial loop."""

    @T.prim_func
    def k(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // TPB, threads=TPB) as bx:
            tx = T.get_thread_binding()
            j = bx * TPB + tx
            v = T.alloc_local((1,), T.float32)
            v[0] = X[j]
            for _ in T.serial(steps):
                Y[j] = v[0]
                T.sync_grid()
                v[0] = (Y[T.max(j - 1, 0)] + Y[j] + Y[T.min(j + 1, N - 1)]) / 3.0
                T.sync_grid()
            X[j] = v[0]
    return k


@pytest.mark.parametrize("N,block", [(1024, 64), (96, 32)])
def test_grid_barrier_in_a_parallel_body(N, block):
    a = torch.rand(N)
    tilelang.compile(mirror_sum(N, block), target="cpu")(a)
    torch.testing.assert_close(a, torch.full((N,), float(N - 1)))


def test_grid_barrier_in_a_serial_loop_with_thread_code():
    N, TPB, steps = 96, 16, 5
    x = torch.randn(N)
    ref = x.double().clone()
    for _ in range(steps):
        p = torch.cat([ref[:1], ref[:-1]])
        n = torch.cat([ref[1:], ref[-1:]])
        ref = (p + ref + n) / 3
    out = x.clone()
    y = torch.full((N,), float("nan"))
    tilelang.compile(smooth(N, TPB, steps), target="cpu")(out, y)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


def test_too_many_blocks_refused():
    with pytest.raises(LoweringError, match="T.sync_grid in a kernel of 2048 blocks"):
        tilelang.compile(mirror_sum(2048 * 4, 4), target="cpu")
