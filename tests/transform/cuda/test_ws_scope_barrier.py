"""Barriers around side-by-side warp-group branches (transform/cuda/thread_sync.py): a shared tile
written by every thread before an `if tx >= 128: producer / else: consumer` split, read by the
consumer, needs a __syncthreads before the branches, not between them: the producer waits on an
mbarrier the consumer arrives at after its own branch starts, so a barrier between the two
branches hangs the block (the public deepseek_v32/sparse_mla_fwd_seesaw.py did). Checked on the
host emulator (sm_90a) against float64."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip

N = 64


def producer_consumer():
    @T.prim_func
    def k(Q: T.Tensor((N, N), T.float16), K: T.Tensor((N, N), T.float16), O: T.Tensor((N, N), T.float32)):
        with T.Kernel(1, threads=256):
            Q_s = T.alloc_shared((N, N), T.float16)
            K_s = T.alloc_shared((N, N), T.float16)
            acc = T.alloc_fragment((N, N), T.float32)
            bar_free = T.alloc_barrier(arrive_count=128)
            bar_ready = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            T.copy(Q, Q_s)  # all 256 threads: read by the consumer's gemm
            if tx >= 128:  # producer: no tile op, element stores
                T.barrier_wait(bar_free, 0)  # the consumer says K_s is free
                for r in T.serial(N * N // 128):
                    K_s[r * 2 + (tx - 128) // 64, (tx - 128) % 64] = K[r * 2 + (tx - 128) // 64, (tx - 128) % 64]
                T.fence_proxy_async()
                T.barrier_arrive(bar_ready)
            else:  # consumer
                T.barrier_arrive(bar_free)
                T.barrier_wait(bar_ready, 0)
                T.gemm(Q_s, K_s, acc, transpose_B=True, clear_accum=True)
                T.copy(acc, O)
    return k


@pytest.mark.nvrtc
def test_barrier_goes_before_the_branches_on_host():
    host = host_cuda_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = tilelang.compile(producer_consumer(), target="cuda -arch=sm_90a")
    src = kern.get_kernel_source()
    before = src.split("if (tid >= 128")[0]
    assert "__syncthreads();" in before.split("mbarrier_init")[-1]  # the Q tile's barrier: before the split
    q, kk = torch.randn(N, N).half(), torch.randn(N, N).half()
    o = torch.full((N, N), float("nan"))
    prog = host.HostProgram({"k": kern})
    prog.barrier_timeout = 10
    prog.run("k", [q, kk, o])
    torch.testing.assert_close(o.double(), q.double() @ kk.double().T, rtol=1e-4, atol=1e-3)
