"""Scalar code that updates a fragment, in a kernel the CPU backend runs thread by thread.

On CUDA a fragment touched by scalar (SIMT) code is a per-thread register replica: every thread runs
`acc[0] = acc[0] * scale + x` once on its own copy, so the value advances once. The CPU backend keeps one
copy of a fragment per block; when the kernel reads a thread index (cpu_threads), such a statement ran once
per simulated thread on that one copy (online softmax's running sum came out 128x too large). A fragment
store that is the same code in every thread now runs once per block, between the threads' code before and
after it. Each program runs on the CPU against a float64 torch reference on fresh random inputs, and its
sm_90a CUDA on the host emulator against the same reference.
"""
from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip


def rmw_between_barriers():
    @T.prim_func
    def f(A: T.Tensor((2,), T.float32), B: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((1,), T.float32)
            acc[0] = A[1]
            T.sync_threads()
            acc[0] = acc[0] * 0.5 + A[0]
            T.sync_threads()
            if T.get_thread_binding() == 0:
                B[0] = acc[0]

    return f, lambda a: (a[1] * 0.5 + a[0]).reshape(1)


def read_before_and_after():
    """Threads read the fragment before and after the update, in one stretch of code with no barrier
    (the barrier before it keeps the initial store out of that stretch)."""

    @T.prim_func
    def f(A: T.Tensor((64,), T.float32), B: T.Tensor((2, 64), T.float32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            acc = T.alloc_fragment((1,), T.float32)
            acc[0] = A[3]
            T.sync_threads()
            B[0, tx] = acc[0] + A[tx]
            acc[0] = acc[0] * acc[0] - A[5]
            B[1, tx] = acc[0] + A[tx]

    def ref(a):
        v0 = a[3]
        v1 = v0 * v0 - a[5]
        return torch.stack([v0 + a, v1 + a])

    return f, ref


def running_sum_in_a_loop():
    """The update sits in a serial loop beside a per-thread store: the loop runs at block level."""

    @T.prim_func
    def f(A: T.Tensor((6,), T.float32), B: T.Tensor((6, 32), T.float32)):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            acc = T.alloc_fragment((1,), T.float32)
            acc[0] = 0.0
            T.sync_threads()
            for k in T.serial(6):
                acc[0] = acc[0] + A[k]
                B[k, tx] = acc[0] * (tx + 1)

    return f, lambda a: a.cumsum(0)[:, None] * torch.arange(1, 33, dtype=torch.float64)[None, :]


def online_logsumexp(M=3, K=384, BK=128, threads=128):
    """Online softmax normaliser over K in tiles of BK: the running max and sum are (1,) fragments."""

    @T.prim_func
    def f(A: T.Tensor((M, K), T.float32), B: T.Tensor((M,), T.float32)):
        with T.Kernel(M, threads=threads) as bx:
            a_frag = T.alloc_fragment((BK,), T.float32)
            run_max = T.alloc_fragment((1,), T.float32)
            run_sum = T.alloc_fragment((1,), T.float32)
            run_max[0] = -T.infinity(T.float32)
            run_sum[0] = 0.0
            for k in T.serial(K // BK):
                T.copy(A[bx, k * BK], a_frag)
                tile_max = T.alloc_reducer((1,), T.float32, op="max", replication="all")
                T.fill(tile_max, run_max[0])
                for i in T.Parallel(BK):
                    tile_max[0] = T.max(tile_max[0], a_frag[i])
                T.finalize_reducer(tile_max)
                tile_sum = T.alloc_reducer((1,), T.float32, replication="all")
                T.fill(tile_sum, 0.0)
                for i in T.Parallel(BK):
                    tile_sum[0] += T.exp(a_frag[i] - tile_max[0])
                T.finalize_reducer(tile_sum)
                run_sum[0] = T.exp(run_max[0] - tile_max[0]) * run_sum[0] + tile_sum[0]
                run_max[0] = tile_max[0]
            if T.get_thread_binding() == 0:
                B[bx] = T.log(run_sum[0]) + run_max[0]

    return f, lambda a: torch.logsumexp(a, dim=1)


CASES = {"rmw_between_barriers": (rmw_between_barriers, (2,)),
         "read_before_and_after": (read_before_and_after, (64,)),
         "running_sum_in_a_loop": (running_sum_in_a_loop, (6,)),
         "online_logsumexp": (online_logsumexp, (3, 384))}


def _inputs(case):
    make, shape = CASES[case]
    f, ref = make()
    a = torch.randn(*shape)
    if case == "online_logsumexp":
        a[:, 128:256] += 4.0  # a later tile raises the max: the rescale matters
    return f, a, ref(a.double())


@pytest.mark.parametrize("case", list(CASES))
def test_fragment_update_once_on_cpu(case):
    f, a, want = _inputs(case)
    out = torch.full(want.shape, 7.0)
    tilelang.compile(f, target="cpu")(a, out)
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.nvrtc
@pytest.mark.parametrize("case", list(CASES))
def test_fragment_update_once_on_host_emulator(case):
    host = host_cuda_or_skip()
    f, a, want = _inputs(case)
    out = torch.full(want.shape, 7.0)
    prog = host.HostProgram({"f": tilelang.compile(f, target="cuda -arch=sm_90a")})
    try:
        prog.run("f", [a, out])
    finally:
        prog.close()
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-5)
