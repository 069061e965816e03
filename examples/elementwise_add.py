"""Elementwise add in eager mode: the decorated function body *is* the kernel.

    python examples/elementwise_add.py [--target auto|cpu|cuda] [--m 1000 --n 700]

Eager style: dims are `T.const`s read off the arguments' shapes, tensor parameters
are annotated inside the body, the output is `T.empty(...)` and is returned.
Calling `elementwise_add(a, b)` specializes on the shapes, compiles once and runs.
"""
import argparse
import sys

import torch

import tilelang
import tilelang.language as T


@tilelang.jit
def elementwise_add(A, B, block_M: int = 32, block_N: int = 128, threads: int = 128,
                    dtype=T.float32):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), dtype)
    B: T.Tensor((M, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_N), dtype)
        B_local = T.alloc_fragment((block_M, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), dtype)
        T.copy(A[by * block_M, bx * block_N], A_shared)
        T.copy(B[by * block_M, bx * block_N], B_local)
        for i, j in T.Parallel(block_M, block_N):
            C_local[i, j] = A_shared[i, j] + B_local[i, j]
        T.copy(C_local, C[by * block_M, bx * block_N])
    return C


def main(target="auto", M=300, N=500, dtype="float32"):
    # @tilelang.jit compiles for "auto" (cuda when a GPU is usable, else cpu); another
    # target means re-decorating the same function with that target.
    fn = elementwise_add if target == "auto" else tilelang.jit(elementwise_add.__wrapped__, target=target)
    device = "cuda" if target != "cpu" and torch.cuda.is_available() else "cpu"
    tdtype = getattr(torch, dtype)
    a = torch.randn(M, N, device=device).to(tdtype)
    b = torch.randn(M, N, device=device).to(tdtype)
    c = fn(a, b, dtype=dtype)
    ref = a.double() + b.double()
    err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    ok = err < (1e-5 if dtype == "float32" else 1e-2) and tuple(c.shape) == (M, N)
    print(f"{'PASS' if ok else 'FAIL'} elementwise_add max_rel_err={err:.3e}")
    return ok


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", default="auto")
    p.add_argument("--m", type=int, default=300)
    p.add_argument("--n", type=int, default=500)
    p.add_argument("--dtype", default="float32")
    args = p.parse_args()
    sys.exit(0 if main(args.target, args.m, args.n, args.dtype) else 1)
