"""fp32 GEMM 1024^3 through our CPU backend beside torch.matmul, same machine, same run.

    python benchmarks/cpu_gemm.py
"""
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402


def make(M, N, K, bM, bN, bK):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "float32")
            B_s = T.alloc_shared((bK, bN), "float32")
            C_l = T.alloc_fragment((bM, bN), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[by * bM, ko * bK], A_s)
                T.copy(B[ko * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bM, bx * bN])
    return gemm


def bench(fn, rep=5):
    fn()
    ts = []
    for _ in range(rep):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2]


n = 1024
a, b = torch.randn(n, n), torch.randn(n, n)
flops = 2 * n ** 3
t_torch = bench(lambda: torch.matmul(a, b))
best = None
for cfg in [(64, 64, 32), (64, 128, 64), (128, 128, 32), (32, 256, 64)]:
    k = tilelang.compile(make(n, n, n, *cfg), out_idx=[-1], target="cpu")
    c = k(a, b)
    err = ((c.double() - a.double() @ b.double()).abs().max() / (a.double() @ b.double()).abs().max()).item()
    t = bench(lambda: k(a, b))
    print(f"  cfg {cfg}: {flops / t / 1e9:7.1f} GFLOP/s  rel_err {err:.1e}")
    if err < 1e-5 and (best is None or t < best[1]):
        best = (cfg, t)
print(f"fp32 GEMM {n}^3 on {torch.get_num_threads()} threads: ours {flops / best[1] / 1e9:.1f} GFLOP/s "
      f"{best[0]}, torch.matmul {flops / t_torch / 1e9:.1f} GFLOP/s -> {t_torch / best[1]:.2f}x")
