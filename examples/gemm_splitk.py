"""Split-K GEMM: the K dimension is cut into `split_k` slices, one grid z-index each.

    python examples/gemm_splitk.py [--target auto|cpu|cuda] [--m 200 --n 170 --k 700 --split-k 4]

Every block computes a partial C tile over its K slice, then adds it into a float32
C with T.atomic_add, so C must start at zero. Slices are rounded up to a whole number
of block_K tiles; the last one runs past K, where T.copy reads zeros.
"""
import argparse
import sys

import torch

import tilelang
import tilelang.language as T


@tilelang.jit
def matmul_splitk(M, N, K, block_M, block_N, block_K, split_k, dtype="float16", accum_dtype="float",
                  out_dtype="float32"):
    k_tiles = T.ceildiv(T.ceildiv(K, split_k), block_K)  # block_K tiles per slice
    slice_K = k_tiles * block_K

    @T.prim_func
    def splitk_kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(k_tiles, num_stages=2):
                T.copy(A[by * block_M, bz * slice_K + ko * block_K], A_shared)
                T.copy(B[bz * slice_K + ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.atomic_add(C[by * block_M, bx * block_N], C_local)

    return splitk_kernel


def main(target="auto", M=200, N=170, K=700, block_M=64, block_N=64, block_K=32, split_k=4):
    fn = matmul_splitk if target == "auto" else tilelang.jit(matmul_splitk.__wrapped__, target=target)
    kernel = fn(M, N, K, block_M, block_N, block_K, split_k)
    device = "cpu" if kernel.target.kind == "cpu" else "cuda"
    a = torch.randn(M, K, device=device).half()
    b = torch.randn(K, N, device=device).half()
    c = torch.zeros(M, N, device=device, dtype=torch.float32)  # atomics accumulate into it
    kernel(a, b, c)
    ref = a.double() @ b.double()
    err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    ok = err < 1e-2
    print(f"{'PASS' if ok else 'FAIL'} gemm_splitk max_rel_err={err:.3e}")
    return ok


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", default="auto")
    p.add_argument("--m", type=int, default=200)
    p.add_argument("--n", type=int, default=170)
    p.add_argument("--k", type=int, default=700)
    p.add_argument("--split-k", type=int, default=4)
    args = p.parse_args()
    sys.exit(0 if main(args.target, args.m, args.n, args.k, split_k=args.split_k) else 1)
