"""Barriers inside a branch on one interval of threads run on the CPU backend (transform/cpu_threads.py).

deepseek_v32's topk_selector scans a 256-bin histogram with the first 256 of 1024 threads:
`if tx < RADIX:` around a loop of `T.sync_threads(3, RADIX)` (a named barrier of those threads).
The CPU backend refused it ("T.sync_threads inside a branch on the thread index"); it now runs the
branch's body split at its barriers over the branch's threads, and the else branch per thread on the
others. A named barrier whose thread count is not the branch's is refused there.
Each case runs on the CPU backend and on the host emulator (sm_90a, sm_80) against float64.
"""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import LoweringError
from tilelang.testing import host_cuda_or_skip

R = 64  # threads of the scan; the block has 128


def scan(count=R, else_branch=True, thread_free=False):
    @T.prim_func
    def f(A: T.Tensor((4, R), "int32"), Flag: T.Tensor((4,), "int32"), B: T.Tensor((4, R), "int32"),
          C: T.Tensor((4, 128), "int32")):
        with T.Kernel(4, threads=128) as bx:
            tx = T.get_thread_binding()
            H = T.alloc_shared((R + 1,), "int32")
            v = T.alloc_var("int32")
            if tx < R:
                H[tx] = A[bx, tx]
            if tx == 0:
                H[R] = 0
            T.sync_threads()
            if (tx < R and Flag[bx] > 0) if thread_free else tx < R:  # suffix sums, as topk_selector's
                for i in T.serial(6):
                    off = 1 << i
                    T.sync_threads(3, count)
                    if tx < R - off:
                        v = H[tx] + H[tx + off]
                    T.sync_threads(3, count)
                    if tx < R - off:
                        H[tx] = v
                T.sync_threads(3, count)
                B[bx, tx] = H[tx] * 2 - H[tx + 1]
            else:
                if else_branch:
                    C[bx, tx] = tx + bx * 1000
    return f


def reference(a, flag, thread_free):
    a = a.numpy().astype(np.float64)
    suffix = np.cumsum(a[:, ::-1], axis=1)[:, ::-1]
    nxt = np.concatenate([suffix[:, 1:], np.zeros((4, 1))], axis=1)
    b = 2 * suffix - nxt
    c = np.full((4, 128), -1.0)
    for bx in range(4):
        taken = not thread_free or flag[bx] > 0
        if not taken:
            b[bx] = -1
        lo = R if taken else 0
        c[bx, lo:] = np.arange(lo, 128) + bx * 1000
    return torch.from_numpy(b), torch.from_numpy(c)


def inputs():
    a = torch.randint(-50, 50, (4, R), dtype=torch.int32)
    flag = torch.tensor([1, 0, 3, -2], dtype=torch.int32)
    return a, flag, torch.full((4, R), -1, dtype=torch.int32), torch.full((4, 128), -1, dtype=torch.int32)


def check(run, thread_free):
    a, flag, b, c = inputs()
    run(a, flag, b, c)
    rb, rc = reference(a, flag, thread_free)
    torch.testing.assert_close(b.double(), rb, rtol=0, atol=0)
    torch.testing.assert_close(c.double(), rc, rtol=0, atol=0)


@pytest.mark.parametrize("thread_free", [False, True])
def test_named_barrier_scan_in_a_thread_branch_on_cpu(thread_free):
    check(tilelang.compile(scan(thread_free=thread_free), target="cpu"), thread_free)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_named_barrier_scan_in_a_thread_branch_on_host_emulator(arch):
    host = host_cuda_or_skip()
    k = tilelang.compile(scan(), target=f"cuda -arch={arch}")
    check(lambda *args: host.HostProgram({"f": k}).run("f", list(args)), False)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_named_barrier_scan_in_a_thread_branch_on_the_gpu():
    k = tilelang.compile(scan(), target="cuda")
    a, flag, b, c = (x.cuda() for x in inputs())
    k(a, flag, b, c)
    rb, rc = reference(a.cpu(), flag.cpu(), False)
    torch.testing.assert_close(b.cpu().double(), rb, rtol=0, atol=0)
    torch.testing.assert_close(c.cpu().double(), rc, rtol=0, atol=0)


def test_named_barrier_of_other_threads_than_the_branch_is_refused_on_cpu():
    with pytest.raises(LoweringError, match=r"T\.sync_threads\(3, 128\) inside a branch over the 64 threads \[0, 64\)"):
        tilelang.compile(scan(count=128), target="cpu")
