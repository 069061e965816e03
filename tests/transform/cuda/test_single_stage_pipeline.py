"""T.Pipelined(num_stages=1) on sm_90 (software_pipeline.py, single_stage): one buffer per staged
tile, its load for iteration k + 1 issued right after its last reader in iteration k, waited for
before its first reader (the gated-MLP shape of the peer fusedmoe kernel: two gemms, each on its
own weight tile, the second tile's load beside the first gemm). Run on the host emulator against
float64; with tl.disable_single_stage_pipeline the loop stays unpipelined."""
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T


def gated(M=128, N=64, K=256, bM=64, bN=64, bK=64, two=True):
    @T.prim_func
    def main(X: T.Tensor((M, K), "float16"), G: T.Tensor((N, K), "float16"), U: T.Tensor((N, K), "float16"),
             O: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            x_s = T.alloc_shared((bM, bK), "float16")
            g_s = T.alloc_shared((bN, bK), "float16")
            u_s = T.alloc_shared((bN, bK), "float16")
            g = T.alloc_fragment((bM, bN), "float32")
            u = T.alloc_fragment((bM, bN), "float32")
            T.clear(g)
            T.clear(u)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=1):
                T.copy(X[by * bM, k * bK], x_s)
                T.copy(G[bx * bN, k * bK], g_s)
                T.gemm(x_s, g_s, g, transpose_B=True)
                if two:
                    T.copy(U[bx * bN, k * bK], u_s)
                    T.gemm(x_s, u_s, u, transpose_B=True)
            for i, j in T.Parallel(bM, bN):
                g[i, j] = g[i, j] + 0.5 * u[i, j]
            T.copy(g, O[by * bM, bx * bN])

    return main


def _run(kern, two, run_on_host, M=128, N=64, K=256):
    X, G, U = torch.randn(M, K).half(), torch.randn(N, K).half(), torch.randn(N, K).half()
    O = torch.full((M, N), float("nan"))
    run_on_host(kern, [X, G, U, O])
    ref = X.double() @ G.double().T + (0.5 * (X.double() @ U.double().T) if two else 0)
    torch.testing.assert_close(O.double(), ref, rtol=1e-3, atol=1e-3)


def _compile(fn, **configs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(fn, target="cuda -arch=sm_90a", pass_configs=configs or None)


@pytest.mark.parametrize("two", [True, False])
def test_tile_refilled_after_its_last_reader(two, run_on_host):
    kern = _compile(gated(two=two), **{"tl.disable_warp_specialized": True})
    loop = kern.get_kernel_source().split("for (int k = 0;")[1]
    gemms = [m.start() for m in re.finditer(r"tl::gemm_ss_sm90<", loop)]
    assert len(gemms) == (2 if two else 1), loop
    # every gemm: its wait + barrier before it, a barrier then a refill (cp.async + commit) after it
    for at in gemms:
        assert "tl::cp_async_wait<" in loop[:at].rsplit("tl::cp_async_commit();", 1)[-1], loop
        after = loop[at:]
        assert after.index("__syncthreads();") < after.index("cp_async_zfill") < after.index("tl::cp_async_commit();")
    _run(kern, two, run_on_host)


def test_switch_off_leaves_the_loop_unpipelined(run_on_host):
    kern = _compile(gated(), **{"tl.disable_warp_specialized": True, "tl.disable_single_stage_pipeline": True})
    src = kern.get_kernel_source()
    assert "_stages" not in src and src.count("tl::cp_async_wait<0>();") >= 2, src
    _run(kern, True, run_on_host)
