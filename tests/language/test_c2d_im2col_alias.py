"""T.c2d_im2col, the older name of T.im2col: warns a DeprecationWarning and computes the same
convolution (checked on the CPU backend against float64 torch conv2d on fresh random inputs)."""
import pytest
import torch

import tilelang
import tilelang.language as T


def _conv(N, H, W, C, F, K, S, D, P, bM=16, bN=16, bK=16):
    OH, OW = (H + 2 * P - D * (K - 1) - 1) // S + 1, (W + 2 * P - D * (K - 1) - 1) // S + 1

    def build():
        @T.prim_func
        def conv(data: T.Tensor((N, H, W, C), "float32"), kern: T.Tensor((K * K * C, F), "float32"),
                 out: T.Tensor((N * OH * OW, F), "float32")):
            with T.Kernel(T.ceildiv(F, bN), T.ceildiv(N * OH * OW, bM), threads=64) as (bx, by):
                d_s = T.alloc_shared((bM, bK), "float32")
                k_s = T.alloc_shared((bK, bN), "float32")
                acc = T.alloc_fragment((bM, bN), "float32")
                T.clear(acc)
                for ki in T.Pipelined(T.ceildiv(K * K * C, bK), num_stages=2):
                    T.c2d_im2col(data, d_s, by, ki, K, S, D, P)
                    T.copy(kern[ki * bK, bx * bN], k_s)
                    T.gemm(d_s, k_s, acc)
                T.copy(acc, out[by * bM, bx * bN])

        return conv

    return build


def test_c2d_im2col_warns_and_matches_conv2d():
    N, H, W, C, F, K, S, D, P = 2, 6, 5, 16, 16, 3, 1, 1, 1
    build = _conv(N, H, W, C, F, K, S, D, P)
    with pytest.warns(DeprecationWarning, match="T.im2col"):
        k = tilelang.compile(build(), out_idx=[2], target="cpu")
    x = torch.randn(N, H, W, C)
    w = torch.randn(K, K, C, F)
    got = k(x, w.reshape(K * K * C, F))
    ref = torch.nn.functional.conv2d(x.double().permute(0, 3, 1, 2), w.double().permute(3, 2, 0, 1),
                                     stride=S, padding=P, dilation=D).permute(0, 2, 3, 1).reshape(-1, F)
    torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=1e-4)
