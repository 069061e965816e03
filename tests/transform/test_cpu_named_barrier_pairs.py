"""Producer / consumer thread intervals meeting at named barriers (T.named_barrier_arrive on one side,
T.sync_threads(id, count) on the other, counting both sides' threads) on the CPU backend
(transform/cpu_threads.py, paired_phases): the branch runs in phases between the barrier operations, at
the top level of the branches and inside a serial loop of one trip count in both. Fresh random inputs
against float64 / exact integer references; the same kernels on CUDA compile for sm_90a (NVRTC)."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T


def handoff():
    """One value handed from thread 0 to thread 32 through shared memory (the public issue 2188 shape)."""

    @T.prim_func
    def k(inp: T.Tensor((1,), T.int32), out: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            slot = T.alloc_shared((1,), T.int32)
            if tx < 32:
                if tx == 0:
                    slot[0] = inp[0] + 1
                T.named_barrier_arrive(10, 64)
                T.sync_threads(11, 64)
            else:
                T.sync_threads(10, 64)
                if tx == 32:
                    out[0] = slot[0]
                T.named_barrier_arrive(11, 64)
    return k


def rounds(R, P, C):
    """R rounds: P producer threads each write their slot (round r of X), arrive; C consumer threads wait,
    each adds the whole row of slots to its own sum, then arrive on the second barrier, which the
    producers wait on before overwriting the slots."""
    N = P + C

    @T.prim_func
    def k(X: T.Tensor((R, P), T.float32), Out: T.Tensor((C,), T.float32)):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            slots = T.alloc_shared((P,), T.float32)
            acc = T.alloc_local((1,), T.float32)
            if tx < P:
                for r in T.serial(R):
                    slots[tx] = X[r, tx] * (r + 1)
                    T.named_barrier_arrive(1, N)
                    T.sync_threads(2, N)
            else:
                acc[0] = 0.0
                for r in T.serial(R):
                    T.sync_threads(1, N)
                    for j in T.serial(P):
                        acc[0] = acc[0] + slots[j] * (tx - P + 1)
                    T.named_barrier_arrive(2, N)
                Out[tx - P] = acc[0]
    return k


def rounds_ref(X, C):
    R = X.shape[0]
    w = torch.arange(1, R + 1, dtype=torch.float64)[:, None]
    total = (X.double() * w).sum()
    return total * torch.arange(1, C + 1, dtype=torch.float64)


def test_handoff_on_cpu():
    k = tilelang.compile(handoff(), target="cpu")
    for v in torch.randint(-1000, 1000, (3,), generator=torch.Generator().manual_seed(5)).tolist():
        inp, out = torch.tensor([v], dtype=torch.int32), torch.full((1,), -7, dtype=torch.int32)
        k(inp, out)
        assert int(out[0]) == v + 1


@pytest.mark.parametrize("R,P,C,seed", [(4, 32, 32, 0), (3, 64, 32, 1), (5, 32, 96, 2)])
def test_rounds_on_cpu(R, P, C, seed):
    X = torch.randn(R, P, generator=torch.Generator().manual_seed(seed))
    out = torch.full((C,), float("nan"))
    tilelang.compile(rounds(R, P, C), target="cpu")(X, out)
    torch.testing.assert_close(out.double(), rounds_ref(X, C), rtol=1e-5, atol=1e-4)


def test_mismatched_barrier_ids_are_still_refused():
    @T.prim_func
    def k(out: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            if tx < 32:
                T.named_barrier_arrive(10, 64)
            else:
                T.sync_threads(11, 64)
                out[0] = 1
    with pytest.raises(tilelang.errors.LoweringError, match="named barrier"):
        tilelang.compile(k, target="cpu")


@pytest.mark.nvrtc
def test_cuda_source():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for f in (handoff(), rounds(4, 32, 32)):
            src = tilelang.compile(f, target="cuda -arch=sm_90a").get_kernel_source()
            assert "named_barrier_arrive" in src and "named_barrier_sync" in src
