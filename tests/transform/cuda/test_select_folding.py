"""T.if_then_else conditions the block, loop and element ranges decide are folded to their branch
in the CUDA lowering (lower_tile_ops.visit_Select with Ranges.decide): FlashAttention's
`k * block_N + j >= seq_len` mask over a sequence of whole tiles costs no compare and select per
element. A ragged length keeps the compare. Both run on the host emulator and match float64."""
import pytest
import torch

import tilelang
import tilelang.language as T


def masked_rowsum(S, n_loop, bN=64, rows=64):
    """O[i] = sum over k < n_loop, j < bN of (A[i, k*bN + j] if k*bN + j < S else -1)."""

    @T.prim_func
    def f(A: T.Tensor((rows, n_loop * bN), "float32"), O: T.Tensor((rows,), "float32")):
        with T.Kernel(1, threads=128):
            t = T.alloc_fragment((rows, bN), "float32")
            acc = T.alloc_fragment((rows,), "float32")
            part = T.alloc_fragment((rows,), "float32")
            T.clear(acc)
            for k in T.serial(n_loop):
                for i, j in T.Parallel(rows, bN):
                    t[i, j] = T.if_then_else(k * bN + j >= S, -1.0, A[i, k * bN + j])
                T.reduce_sum(t, part, dim=1)
                for i in T.Parallel(rows):
                    acc[i] += part[i]
            T.copy(acc, O)

    return f


@pytest.mark.nvrtc
@pytest.mark.parametrize("S,folded", [(256, True), (200, False)])
def test_decided_select_folds(run_on_host, S, folded):
    n_loop = 4
    k = tilelang.compile(masked_rowsum(S, n_loop), target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    assert (f">= {S}" not in src) == folded, src
    a = torch.randn(64, n_loop * 64)
    o = torch.full((64,), float("nan"))
    run_on_host(k, [a, o])
    ref = a.double().clone()
    ref[:, S:] = -1.0
    assert (o.double() - ref.sum(1)).abs().max().item() <= 1e-3
