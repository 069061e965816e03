"""T.Pipelined(num_stages=n) around hand-written warp groups (manual_ws_ring.py): the loop's TMA
tiles and barriers become n-stage rings, the waits' parities count uses of a stage; run on the
host emulator (TMA, mbarriers, wgmma) against float64. Loops the ring cannot take stay serial
with a warning that says why, and still compute the right numbers."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T


def softpipe(M, N, K, bM=128, bN=128, bK=64, stages=2, epilogue_reads_tile=False):
    """The public TileLang's warp_specialize softpipe example: one tile pair, one barrier each."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=256) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "float16")
            B_s = T.alloc_shared((bK, bN), "float16")
            C_l = T.alloc_fragment((bM, bN), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            with T.ws(0):
                T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                with T.ws(1):
                    T.barrier_wait(done, (ko + 1) % 2)
                    T.tma_copy(A[by * bM, ko * bK], A_s, barrier=ready)
                    T.tma_copy(B[ko * bK, bx * bN], B_s, barrier=ready)
                    T.barrier_arrive(ready)
                with T.ws(0):
                    T.barrier_wait(ready, ko % 2)
                    T.gemm(A_s, B_s, C_l)
                    T.barrier_arrive(done)
            with T.ws(0):
                if epilogue_reads_tile:  # A_s is read after the loop: no ring
                    for i, j in T.Parallel(bM, bN):
                        C_l[i, j] = C_l[i, j] + T.cast(A_s[i, j % bK], "float32")
                T.copy(C_l, C[by * bM, bx * bN])

    return main


def compile_(func):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        k = tilelang.compile(func, target="cuda -arch=sm_90a")
    return k, [str(w.message) for w in rec]


@pytest.mark.parametrize("stages", [2, 3])
def test_ring_source_and_host_run(stages, run_on_host):
    M, N, K = 256, 128, 384  # 6 k-tiles: every stage used twice
    k, msgs = compile_(softpipe(M, N, K, stages=stages))
    src = k.get_kernel_source()
    assert not any("serial loop" in m for m in msgs), msgs
    assert "A_s_ring" in src and f"mbar_ring[{stages - 1}]" not in src.split("for (int ko")[1]
    assert src.count("tl::mbarrier_init(&mbar_ring[") == stages
    assert f"(ko % {stages})" in src and f"(((ko / {stages}) + 1) & 1)" in src, src  # parity per use of the stage
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    c = torch.full((M, N), float("nan"))
    run_on_host(k, [a, b, c])
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-3, atol=1e-3)


def test_tile_read_after_the_loop_stays_serial(run_on_host):
    M, N, K = 128, 128, 256
    k, msgs = compile_(softpipe(M, N, K, epilogue_reads_tile=True))
    src = k.get_kernel_source()
    assert "_ring" not in src
    assert any("runs as a serial loop" in m and "A_s is used outside the loop" in m for m in msgs), msgs
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    c = torch.zeros(M, N)
    run_on_host(k, [a, b, c])
    last = a[:, K - 64:].double()  # the tile the last iteration loaded
    ref = a.double() @ b.double() + last[:, torch.arange(N) % 64]
    torch.testing.assert_close(c.double(), ref, rtol=1e-3, atol=1e-3)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("stages", [2, 3])
def test_ring_gpu(stages):
    M, N, K = 1024, 512, 1024
    k, _ = compile_(softpipe(M, N, K, stages=stages))
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda")
    k(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-3, atol=1e-3)
