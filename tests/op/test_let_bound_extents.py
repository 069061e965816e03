"""T.copy slices whose bounds are names bound in the kernel (DeepSeek MLA decode:
`kv_start = L * bz + k * bN; kv_end = L * bz + (k + 1) * bN; T.copy(KV[b, kv_start:kv_end, :], S)`;
gemm_sp compress: `k_base + tn * 32 : k_base + (tn + 1) * 32`): the extent is a constant once the
names are replaced by their values, so the copy matches its tile."""
import torch

import tilelang
import tilelang.language as T

B, L, BN, D = 2, 128, 32, 16


@T.prim_func
def window_sum(KV: T.Tensor((B, L * 2, D), "float64"), O: T.Tensor((B, 2, BN, D), "float64")):
    with T.Kernel(2, B, threads=128) as (bz, b):
        tile = T.alloc_shared((BN, D), "float64")
        acc = T.alloc_fragment((BN, D), "float64")
        T.clear(acc)
        for k in T.Pipelined(L // BN, num_stages=2):
            kv_start = L * bz + k * BN
            kv_end = L * bz + (k + 1) * BN
            T.copy(KV[b, kv_start:kv_end, :], tile)
            for i, j in T.Parallel(BN, D):
                acc[i, j] += tile[i, j] * (k + 1)
        T.copy(acc, O[b, bz, :, :])


@T.prim_func
def chunks(A: T.Tensor((4, 128), "float64"), O: T.Tensor((4, 128), "float64")):
    with T.Kernel(2, 4, threads=1) as (bk, m):
        loc = T.alloc_local((32,), "float64")
        k_base = bk * 64
        for tn in T.serial(2):
            T.copy(A[m, k_base + tn * 32: k_base + (tn + 1) * 32], loc)
            for e in T.serial(32):
                loc[e] = loc[e] * 2 + tn
            T.copy(loc, O[m, k_base + tn * 32: k_base + (tn + 1) * 32])


def test_let_bound_window_copy():
    kv = torch.randn(B, L * 2, D, dtype=torch.float64)
    out = torch.full((B, 2, BN, D), float("nan"), dtype=torch.float64)
    tilelang.compile(window_sum, target="cpu")(kv, out)
    w = torch.arange(1, L // BN + 1, dtype=torch.float64)
    ref = (kv.view(B, 2, L // BN, BN, D) * w.view(1, 1, -1, 1, 1)).sum(2)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)


def test_let_bound_chunk_copy():
    a = torch.randn(4, 128, dtype=torch.float64)
    out = torch.full((4, 128), float("nan"), dtype=torch.float64)
    tilelang.compile(chunks, target="cpu")(a, out)
    tn = (torch.arange(128) // 32 % 2).double()
    torch.testing.assert_close(out, a * 2 + tn, rtol=1e-12, atol=1e-12)


def test_let_bound_window_copy_compiles_for_sm90():
    import pytest

    pytest.importorskip("cuda.bindings")
    src = tilelang.compile(window_sum, target="cuda -arch=sm_90a").get_kernel_source()
    assert "tl_smem" in src  # the tile is staged through shared memory
