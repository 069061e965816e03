"""The asynchronous expert tier on the CPU backend (program order, float64 references):
T.wgmma_gemm is a gemm and T.wait_wgmma a no-op, T.ptx_cp_async copies at once (zero-filling
where its predicate is false), T.cp_async_barrier_noinc arrives, and `if tx < 128` / `else`
branches holding tile ops run each branch's tile ops over its own warp group."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T


def run(func, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(func, target="cpu")
    k(*args)


def test_wgmma_gemm_slices_match_float64():
    M, N, K = 64, 64, 256

    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((2, N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((2, N, K), "float16")
            C_l = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C_l)
            T.wgmma_gemm(A_s[:, 0:128], B_s[1, :, 0:128], C_l, transpose_B=True)
            T.wgmma_gemm(A_s[:, 128:256], B_s[1, :, 128:256], C_l, transpose_B=True)
            T.wait_wgmma(0)
            T.copy(C_l, C)

    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(2, N, K, dtype=torch.float16)
    c = torch.full((M, N), float("nan"))
    run(f, a, b, c)
    ref = a.double() @ b[1].double().T
    assert ((c.double() - ref).abs().max() / ref.abs().max()).item() < 1e-5


@pytest.mark.parametrize("pred", [None, True, False])
def test_ptx_cp_async_copies_rows(pred):
    @T.prim_func
    def f(A: T.Tensor((16, 64), "float16"), B: T.Tensor((16, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            S_ = T.alloc_shared((16, 64), "float16")
            T.fill(S_, 7)
            for r in T.serial(16):
                for c in T.serial(8):
                    if pred is None:
                        T.ptx_cp_async(S_[r, c * 8], A[15 - r, c * 8], 8)
                    else:
                        T.ptx_cp_async(S_[r, c * 8], A[15 - r, c * 8], 8, predicate=(r % 2 == 0) == pred)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.copy(S_, B)

    a = torch.randn(16, 64, dtype=torch.float16)
    b = torch.zeros(16, 64, dtype=torch.float16)
    run(f, a, b)
    ref = a.flip(0)
    if pred is not None:
        keep = (torch.arange(16) % 2 == 0) == pred
        ref = torch.where(keep[:, None], ref, torch.zeros_like(ref))
    assert torch.equal(b, ref)


def test_thread_branches_and_noinc_barrier():
    """Warp group 1 copies and arrives through cp.async's barrier; warp group 0 waits, then adds."""

    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256) as bx:
            S_ = T.alloc_shared((64, 64), "float32")
            F = T.alloc_fragment((64, 64), "float32")
            full = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            if tx >= 128:
                for r in T.serial(64):
                    for c in T.serial(16):
                        T.ptx_cp_async(S_[r, c * 4], A[r, c * 4], 4)
                T.cp_async_barrier_noinc(full)
            else:
                T.barrier_wait(full, 0)
                T.copy(S_, F)
                for i, j in T.Parallel(64, 64):
                    F[i, j] = F[i, j] * 2 + 1
                T.copy(F, B)

    a = torch.randn(64, 64, dtype=torch.float32)
    b = torch.zeros(64, 64, dtype=torch.float32)
    run(f, a, b)
    assert torch.allclose(b.double(), a.double() * 2 + 1, rtol=0, atol=1e-6)


def test_consumer_before_producer_fails_clearly():
    """The else-branch (the producer) comes second: program order cannot satisfy the wait."""

    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256) as bx:
            S_ = T.alloc_shared((64, 64), "float32")
            full = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            if tx < 128:
                T.barrier_wait(full, 0)
                T.copy(S_, B)
            else:
                T.copy(A, S_)
                T.cp_async_barrier_noinc(full)

    a = torch.randn(64, 64)
    with pytest.raises(Exception, match="would never complete"):
        run(f, a, torch.zeros(64, 64))
