"""Element atomics outside T.Parallel in kernels that read no thread index.

`T.atomic_add(B[j], x)` outside a T.Parallel loop is SIMT code: every thread of the block applies it (our
CUDA codegen emits it unguarded; the public TileLang runs scalar statements in every thread). The CPU
backend simulates a block's threads only where the kernel reads a thread index, so such an atomic ran once
per block (B got x, not threads * x). A kernel holding one now runs its threads (cpu_threads), each
applying the atomic. Each program runs on the CPU against a float64 torch reference on fresh random inputs,
and its sm_90a CUDA on the host emulator against the same reference.
"""
from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip


def serial_loop_of_atomics(nb=3, threads=64):
    @T.prim_func
    def f(A: T.Tensor((nb, 4), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(nb, threads=threads) as bx:
            for j in T.serial(4):
                T.atomic_add(B[j], A[bx, j] * 0.5)

    return f, [(nb, 4)], (4,), lambda a, b: b + threads * 0.5 * a.sum(0)


def atomic_addx4(threads=2):
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=threads):
            T.atomic_addx4(B[0], A[0])

    return f, [(4,)], (4,), lambda a, b: b + threads * a


def fragment_sum_then_atomic(nb=2, threads=32):
    """A fragment accumulated in scalar code (one update per replica), then added by every thread."""

    @T.prim_func
    def f(A: T.Tensor((nb, 8), T.float32), B: T.Tensor((nb,), T.float32)):
        with T.Kernel(nb, threads=threads) as bx:
            acc = T.alloc_fragment((1,), T.float32)
            acc[0] = 0.0
            for k in T.serial(8):
                acc[0] = acc[0] + A[bx, k]
            T.atomic_add(B[bx], acc[0])

    return f, [(nb, 8)], (nb,), lambda a, b: b + threads * a.sum(1)


def shared_counter(threads=128):
    @T.prim_func
    def f(A: T.Tensor((2,), T.float32), B: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=threads):
            S = T.alloc_shared((1,), T.float32)
            S[0] = A[1]
            T.sync_threads()
            T.atomic_add(S[0], A[0])
            T.sync_threads()
            T.copy(S, B)

    return f, [(2,)], (1,), lambda a, b: (a[1] + threads * a[0]).reshape(1)


def tickets(nb=2, threads=64):
    """Each thread takes a ticket (the counter's previous value) and writes its slot: all slots filled."""

    @T.prim_func
    def f(A: T.Tensor((nb * threads,), T.float32), Cnt: T.Tensor((1,), T.int32),
          B: T.Tensor((nb * threads,), T.float32)):
        with T.Kernel(nb, threads=threads):
            pos = T.alloc_var(T.int32)
            pos = T.atomic_add(Cnt[0], 1, return_prev=True)
            B[pos] = A[pos] * 2.0

    return f, [(nb * threads,)], (nb * threads,), lambda a, b: 2 * a


CASES = {"serial_loop_of_atomics": serial_loop_of_atomics, "atomic_addx4": atomic_addx4,
         "fragment_sum_then_atomic": fragment_sum_then_atomic, "shared_counter": shared_counter,
         "tickets": tickets}


def _run(case, launch):
    f, shapes, out_shape, ref = CASES[case]()
    ins = [torch.randn(*s) for s in shapes]
    out = torch.randn(*out_shape)
    want = ref(*[x.double() for x in ins], out.double())
    args = ins + ([torch.zeros(1, dtype=torch.int32)] if case == "tickets" else []) + [out]
    launch(f, args)
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-4)
    if case == "tickets":
        assert args[1].item() == out.numel()


@pytest.mark.parametrize("case", list(CASES))
def test_simt_atomic_every_thread_on_cpu(case):
    _run(case, lambda f, args: tilelang.compile(f, target="cpu")(*args))


@pytest.mark.nvrtc
@pytest.mark.parametrize("case", list(CASES))
def test_simt_atomic_every_thread_on_host_emulator(case):
    host = host_cuda_or_skip()

    def launch(f, args):
        prog = host.HostProgram({"f": tilelang.compile(f, target="cuda -arch=sm_90a")})
        try:
            prog.run("f", args)
        finally:
            prog.close()

    _run(case, launch)
