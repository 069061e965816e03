"""Quickstart: the canonical TileLang program, a tiled GEMM with a fused ReLU.

    python examples/quickstart.py [--target auto|cpu|cuda] [--m 1000 --n 900 --k 500]

`@tilelang.jit` on a factory is lazy: calling `matmul(M, N, K, ...)` builds the
`T.prim_func` for those sizes, compiles it once (cached) and returns the kernel.
The sizes here are deliberately not multiples of the tile, so the ragged edge
blocks are exercised (out-of-range reads give 0, out-of-range writes are dropped).
"""
import argparse
import sys

import torch

import tilelang
import tilelang.language as T


@tilelang.jit
def matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def matmul_relu_kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                           C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(panel_size=10, enable=True)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return matmul_relu_kernel


def main(target="auto", M=300, N=260, K=200, block_M=128, block_N=128, block_K=32):
    if target == "auto":
        kernel = matmul(M, N, K, block_M, block_N, block_K)
    else:
        kernel = tilelang.compile(matmul.get_tir(M, N, K, block_M, block_N, block_K), target=target)
    device = "cpu" if kernel.target.kind == "cpu" else "cuda"
    a = torch.randn(M, K, device=device).half()
    b = torch.randn(K, N, device=device).half()
    c = torch.full((M, N), float("nan"), device=device).half()
    kernel(a, b, c)
    ref = torch.relu(a.double() @ b.double())
    err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    ok = err < 1e-2
    print(f"{'PASS' if ok else 'FAIL'} quickstart max_rel_err={err:.3e}")
    return ok


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", default="auto")
    p.add_argument("--m", type=int, default=300)
    p.add_argument("--n", type=int, default=260)
    p.add_argument("--k", type=int, default=200)
    args = p.parse_args()
    sys.exit(0 if main(args.target, args.m, args.n, args.k) else 1)
