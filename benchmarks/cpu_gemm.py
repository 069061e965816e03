"""fp32 GEMM 1024^3 through our CPU backend beside torch.matmul, same machine, same run.

The kernel is written as users write TileLang (T.Kernel, alloc_shared, T.copy, T.gemm);
`@tilelang.autotune` compiles a few block configs, checks each against torch and times it
with the profiler's do_bench, which also times torch.matmul on the same inputs.

    python benchmarks/cpu_gemm.py [--n 1024] [--rep 300]
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402

CONFIGS = [
    {"block_M": 64, "block_N": 64, "block_K": 32},
    {"block_M": 128, "block_N": 128, "block_K": 32},
    {"block_M": 64, "block_N": 128, "block_K": 64},
]


def matmul(M, N, K, block_M=64, block_N=64, block_K=32):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float32")
            B_s = T.alloc_shared((block_K, block_N), "float32")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return gemm


def main(n=1024, rep=300):
    tuned = tilelang.autotune(configs=CONFIGS, warmup=50, rep=rep, ref_prog=lambda A, B: A @ B,
                              atol=1e-3, rtol=1e-3)(tilelang.jit(out_idx=[-1], target="cpu")(matmul))
    res = tuned.get_result(n, n, n)
    flops = 2 * n ** 3
    gf = lambda ms: flops / (ms * 1e-3) / 1e9  # noqa: E731
    for r in res.results:
        cfg = "x".join(str(v) for v in r.config.values())
        print(f"  tilelang {cfg:12s} " + (f"{gf(r.latency):7.1f} GFLOP/s  ({r.latency:.2f} ms, compiled in "
                                            f"{r.compile_seconds:.2f} s)" if r.error is None else r.error))
    torch_ms = res.ref_latency
    print(f"fp32 GEMM {n}^3, {torch.get_num_threads()} threads: tilelang {gf(res.latency):.1f} GFLOP/s "
          f"(best {res.config}), torch.matmul {gf(torch_ms):.1f} GFLOP/s -> ratio {torch_ms / res.latency:.2f}x")
    return res


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--rep", type=float, default=300, help="timing budget per config, ms")
    args = p.parse_args()
    main(args.n, args.rep)
