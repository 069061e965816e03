"""T.ws / mbarriers / T.tma_copy on the CPU backend: warp groups run in program order, every
barrier is simulated, and a wait program order could never satisfy fails instead of computing."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing.kernels import ws_gemm


def run(func, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(func, target="cpu")
    k(*args)


@pytest.mark.parametrize("kw", [dict(consumer=0), dict(consumer=1, stages=2),
                                dict(consumer=0, stages=2, pipelined=False, set_nreg=True)])
def test_ws_gemm_matches_float64(kw):
    M, N, K = 200, 136, 320  # ragged M and N tiles
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    run(ws_gemm(M, N, K, **kw), a, b, c)
    ref = a.double() @ b.double()
    err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 2e-3, err


def _consumer_first(arrivals=128):
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256) as bx:
            S = T.alloc_shared((64, 64), "float32")
            ready = T.alloc_barrier(arrivals)
            with T.ws(0):  # waits for data the producer below has not loaded yet
                T.barrier_wait(ready, 0)
                T.copy(S, B)
            with T.ws(1):
                T.tma_copy(A, S, barrier=ready)
                T.barrier_arrive(ready)

    return f


def test_wait_program_order_cannot_satisfy_fails():
    a = torch.randn(64, 64)
    with pytest.raises(RuntimeError, match="would never complete under the CPU backend"):
        run(_consumer_first(), a, torch.zeros(64, 64))


def test_overrunning_a_phase_fails():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            bar = T.alloc_barrier(64)
            T.barrier_arrive(bar)  # 256 threads arrive on a barrier counting 64
            for i in T.Parallel(64):
                B[i] = A[i]

    with pytest.raises(RuntimeError, match="overrun the barrier's count"):
        run(f, torch.randn(64), torch.zeros(64))


def test_parities_and_phases():
    """Two phases of one barrier: parity 1 passes on a fresh barrier, then 0, then 1 again."""

    @T.prim_func
    def f(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            bars = T.alloc_barrier([128, 256])
            T.mbarrier_wait_parity(bars[0], 1)
            with T.ws(1):
                T.mbarrier_arrive(bars[0])
            T.mbarrier_wait_parity(bars[0], 0)
            T.mbarrier_arrive_expect_tx(bars[1], 0)  # all 256 threads: phase 0 of bars[1]
            T.mbarrier_expect_tx(bars[1], 1024)
            T.barrier_wait(bars[1], 0)
            for i in T.Parallel(64):
                B[i] = A[i] * 2.0

    a = torch.randn(64)
    b = torch.full((64,), float("nan"))
    run(f, a, b)
    torch.testing.assert_close(b.double(), a.double() * 2, rtol=0, atol=0)
