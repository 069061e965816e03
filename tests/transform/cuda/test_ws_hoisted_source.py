"""A T.copy inside a T.ws scope of a later warp group, in a serial K loop: the copy's per-thread
source pointer is declared before the loop (lower_copy.hoisted_source) while the scope's thread
index (tid_wg = tid - t_lo) is bound inside it, so the declaration must spell tid - t_lo. Each
warp group loads and multiplies its own half of B (as the public warp_specialize example
gemm_copy_gemm_0_1 does)."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip

M, N, K, BM, BN, BK = 64, 64, 128, 64, 64, 32


def split_gemm():
    @T.prim_func
    def k(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // BN, M // BM, threads=256) as (bx, by):
            A_s = T.alloc_shared((BM, BK), T.float16)
            B0 = T.alloc_shared((BK, BN // 2), T.float16)
            B1 = T.alloc_shared((BK, BN // 2), T.float16)
            C0 = T.alloc_fragment((BM, BN // 2), T.float32)
            C1 = T.alloc_fragment((BM, BN // 2), T.float32)
            with T.ws(1):
                T.clear(C1)
            with T.ws(0):
                T.clear(C0)
            for ko in T.Pipelined(K // BK, num_stages=0):
                T.copy(A[by * BM, ko * BK], A_s)
                with T.ws(1):
                    T.copy(B[ko * BK, bx * BN], B1)
                    T.gemm(A_s, B1, C1)
                with T.ws(0):
                    T.copy(B[ko * BK, bx * BN + BN // 2], B0)
                    T.gemm(A_s, B0, C0)
            with T.ws(1):
                T.copy(C1, C[by * BM, bx * BN])
            with T.ws(0):
                T.copy(C0, C[by * BM, bx * BN + BN // 2])
    return k


def inputs():
    a = torch.randn(M, K).half()
    b = torch.randn(K, N).half()
    c = torch.full((M, N), float("nan"))
    return a, b, c



def test_cpu_backend():
    a, b, c = inputs()
    tilelang.compile(split_gemm(), target="cpu")(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-3)


@pytest.mark.nvrtc
def test_sm90a_on_host():
    host = host_cuda_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = tilelang.compile(split_gemm(), target="cuda -arch=sm_90a")
    src = kern.get_kernel_source()
    decl = [ln for ln in src.split("for (int ko")[0].splitlines() if "tl_gsrc" in ln]
    assert decl and not any("tid_wg" in ln for ln in decl)  # declared before the loop: no scope variable
    a, b, c = inputs()
    host.HostProgram({"k": kern}).run("k", [a, b, c])
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-3)
