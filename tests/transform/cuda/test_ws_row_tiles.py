"""1-d shared tiles on the warp-specialized path (ws_loads._row_plan): a row of per-column values
(the backward's lse and Delta: `T.copy(lse[b, h, k*64 : k*64 + 64], lse_s)`) is a TMA box of one
row with no swizzle, so such a loop keeps the TMA producer. It used to leave warp specialization
("lse is 3-d and lse_shared 1-d") for the cp.async pipeline.

Checks: the sm_90a source loads the row tile with TMA into its own barrier group and warns of
nothing; host-emulated and CPU runs match float64; the same on the GPU."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"


def scaled_gemm(M, N, K, bM=64, bN=64, bK=64, stages=2):
    """C[m, n] = sum_k A[m, k] * B[n, k] * w[0, k] -- w's k-slice staged as a 1-d tile."""

    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), W: T.Tensor((2, K), "float32"),
          C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bN, M // bM, threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "float16")
            B_s = T.alloc_shared((bN, bK), "float16")
            w_s = T.alloc_shared((bK,), "float32")
            A_f = T.alloc_fragment((bM, bK), "float32")
            As2 = T.alloc_shared((bM, bK), "float16")
            C_l = T.alloc_fragment((bM, bN), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // bK, num_stages=stages):
                T.copy(A[by * bM, k * bK], A_s)
                T.copy(B[bx * bN, k * bK], B_s)
                T.copy(W[1, k * bK:(k + 1) * bK], w_s)
                T.copy(A_s, A_f)
                for i, j in T.Parallel(bM, bK):
                    A_f[i, j] = A_f[i, j] * w_s[j]
                T.copy(A_f, As2)
                T.gemm(As2, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bM, bx * bN])

    return f


CASE = (128, 128, 256)


def _inputs(seed):
    M, N, K = CASE
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(M, K, generator=g).half(), torch.randn(N, K, generator=g).half(),
            torch.rand(2, K, generator=g) + 0.5)


def _check(c, a, b, w):
    a_w = (a.double() * w[1].double()).half().double()  # the kernel rounds A * w to fp16 for the gemm
    ref = a_w @ b.double().T
    assert (c.double() - ref).abs().max().item() <= 1e-3 * ref.abs().max().item() + 1e-3


@pytest.mark.nvrtc
def test_row_tile_is_a_tma_load(host):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        k = tilelang.compile(scaled_gemm(*CASE), target=SM90)
    assert not [str(w.message) for w in rec if "warp specialization" in str(w.message)]
    src = k.get_kernel_source()
    assert "w_s_stages + (tl_stage) * 64 + 0" in src and "cp_async" not in src.split("setmaxnreg_inc")[1]
    assert "tl_full1" in src  # the row tile is first read by another statement than B's gemm


@pytest.mark.nvrtc
def test_row_tile_runs_on_host_and_matches_float64(run_on_host):
    k = tilelang.compile(scaled_gemm(*CASE), target=SM90)
    a, b, w = _inputs(5)
    c = torch.full((CASE[0], CASE[1]), float("nan"))
    run_on_host(k, [a, b, w, c])
    _check(c, a, b, w)


def test_row_tile_matches_float64_on_cpu():
    k = tilelang.compile(scaled_gemm(*CASE), target="c")
    a, b, w = _inputs(6)
    c = torch.full((CASE[0], CASE[1]), float("nan"))
    k(a, b, w, c)
    _check(c, a, b, w)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_row_tile_on_gpu():
    k = tilelang.compile(scaled_gemm(*CASE), target="cuda")
    a, b, w = _inputs(7)
    c = torch.full((CASE[0], CASE[1]), float("nan"), device="cuda")
    k(a.cuda(), b.cuda(), w.cuda(), c)
    torch.cuda.synchronize()
    _check(c.cpu(), a, b, w)
