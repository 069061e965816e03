"""tilelang.tools.Analyzer: FLOPs and global bytes of a GEMM against the closed form, for random
sizes, and the roofline estimate from the device description."""
import random

import pytest

import tilelang.language as T
from tilelang.carver.arch import CUDA
from tilelang.errors import TileLangError
from tilelang.tools import AnalysisResult, Analyzer


def gemm(M, N, K, bM, bN, bK, dtype="float16", split=1):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), dtype)
            B_s = T.alloc_shared((bN, bK), dtype)
            C_l = T.alloc_fragment((bM, bN), "float32")
            C_s = T.alloc_shared((bM, bN), dtype)
            T.clear(C_l)
            for s in T.serial(split):
                for k in T.Pipelined(T.ceildiv(K, bK * split), num_stages=2):
                    T.copy(A[by * bM, (s * T.ceildiv(K, bK * split) + k) * bK], A_s)
                    T.copy(B[bx * bN, (s * T.ceildiv(K, bK * split) + k) * bK], B_s)
                    T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C_s)  # shared <- fragment: no global traffic
            T.copy(C_s, C[by * bM, bx * bN])

    return main


@pytest.mark.parametrize("seed", range(4))
def test_counts_match_the_closed_form(seed):
    rng = random.Random(seed)
    bM, bN, bK = rng.choice([32, 64, 128]), rng.choice([32, 64, 128]), rng.choice([16, 32, 64])
    gm, gn, kt, split = rng.randint(1, 6), rng.randint(1, 6), rng.randint(1, 5), rng.randint(1, 3)
    M, N, K = gm * bM, gn * bN, kt * bK * split
    dtype, size = rng.choice([("float16", 2), ("float32", 4), ("int8", 1)])
    r = Analyzer.analysis(gemm(M, N, K, bM, bN, bK, dtype, split), CUDA("cuda -arch=sm_80"))
    assert r.total_flops == 2 * M * N * K
    blocks, ksteps = gm * gn, kt * split
    want = blocks * ksteps * (bM * bK + bN * bK) * size + M * N * size
    assert r.total_global_bytes == want


def test_estimate_uses_the_device_numbers():
    f = gemm(1024, 1024, 1024, 128, 128, 32)
    r = Analyzer.analysis(f, CUDA("cuda -arch=sm_80"))
    assert isinstance(r, AnalysisResult)
    peak = round(128 * 108 * 1.41 * 2 / 1e3, 1)
    assert r.expected_tflops == peak and r.expected_bandwidth_GBps == 12.08
    mem, comp = r.total_global_bytes / 12.08e9, r.total_flops / (peak * 1e12)
    assert r.estimated_time == pytest.approx(max(mem, comp))
    # an architecture without peak numbers: memory time only
    r75 = Analyzer.analysis(f, CUDA("cuda -arch=sm_75"))
    assert r75.expected_tflops is None and r75.estimated_time == pytest.approx(mem)


def test_dynamic_shapes_are_refused():
    n = T.dynamic("n")

    @T.prim_func
    def f(A: T.Tensor((n, 64), "float16"), B: T.Tensor((n, 64), "float16")):
        with T.Kernel(T.ceildiv(n, 64), threads=128) as bx:
            S = T.alloc_shared((64, 64), "float16")
            T.copy(A[bx * 64, 0], S)
            T.copy(S, B[bx * 64, 0])

    with pytest.raises(TileLangError, match="not a constant"):
        Analyzer.analysis(f, CUDA("cuda -arch=sm_90a"))
    with pytest.raises(TileLangError, match="expected a T.prim_func"):
        Analyzer(42, CUDA("cuda -arch=sm_90a"))
