"""A pipelined gemm whose B operand is a reshaped view of a 4-d parameter
(`T.Tensor((KH * KW * C, F), dtype, kernel.data)`, as the convolution example writes it).

On sm_90a the view's tiles load through TMA: the tensor map must describe the view's 2-d shape,
not the parameter's 4-d one, and must be encoded from the parameter's tensor. Checked against
float64 on the CPU backend and (marked `cuda`) on an sm_90 GPU."""
import pytest
import torch

import tilelang
import tilelang.language as T

KH, C, F, M = 3, 32, 256, 128


def view_gemm(bm=64, bn=128, bk=32):
    K = KH * KH * C

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), W: T.Tensor((KH, KH, C, F), T.float16),
             O: T.Tensor((M, F), T.float32)):
        with T.Kernel(T.ceildiv(F, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            w_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            w_flat = T.Tensor((K, F), T.float16, W.data)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(w_flat[k * bk, bx * bn], w_s)
                T.gemm(a_s, w_s, acc)
            T.copy(acc, O[by * bm, bx * bn])

    return main


def _check(kernel, device):
    a = torch.randn(M, KH * KH * C, dtype=torch.float16, device=device)
    w = torch.randn(KH, KH, C, F, dtype=torch.float16, device=device)
    o = torch.full((M, F), float("nan"), device=device)
    kernel(a, w, o)
    ref = a.double() @ w.double().reshape(-1, F)
    err = ((o.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-3, err


def test_view_gemm_cpu():
    _check(tilelang.compile(view_gemm(), target="cpu"), "cpu")


def test_view_gemm_uses_tma_on_sm90a():
    src = tilelang.compile(view_gemm(), target="cuda -arch=sm_90a").get_kernel_source()
    assert "tma_load" in src or "cp.async.bulk.tensor" in src


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                    reason="needs an sm_90 GPU")
def test_view_gemm_gpu():
    _check(tilelang.compile(view_gemm(), target="cuda -arch=sm_90a"), "cuda")
