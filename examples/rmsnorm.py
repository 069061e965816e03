"""RMSNorm over the last dim, y = x / sqrt(mean(x^2) + eps) * w, streaming the row in chunks.

    python examples/rmsnorm.py [--target auto|cpu|cuda] [--m 200 --n 1000]

Pass 1 walks the row in `block_N` column chunks and accumulates the sum of squares
with `T.reduce_sum(..., clear=False)`; pass 2 re-reads each chunk, scales and stores.
Chunks past N are zero-filled by T.copy, so they add nothing to the sum, and their
stores are dropped. bf16 in and out, float32 accumulation.
"""
import argparse
import sys

import torch

import tilelang
import tilelang.language as T


@tilelang.jit
def rmsnorm(M, N, block_M=4, block_N=256, eps=1e-6, dtype="bfloat16", accum_dtype="float"):
    num_chunks = T.ceildiv(N, block_N)

    @T.prim_func
    def rmsnorm_kernel(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x_shared = T.alloc_shared((block_M, block_N), dtype)
            w_shared = T.alloc_shared((block_N,), dtype)
            x_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            sq = T.alloc_fragment((block_M, block_N), accum_dtype)
            sumsq = T.alloc_fragment((block_M,), accum_dtype)
            y_local = T.alloc_fragment((block_M, block_N), dtype)
            T.clear(sumsq)
            for k in T.Pipelined(num_chunks, num_stages=2):
                T.copy(X[bx * block_M, k * block_N], x_shared)
                T.copy(x_shared, x_local)
                for i, j in T.Parallel(block_M, block_N):
                    sq[i, j] = x_local[i, j] * x_local[i, j]
                T.reduce_sum(sq, sumsq, dim=1, clear=False)
            for i in T.Parallel(block_M):
                sumsq[i] = T.rsqrt(sumsq[i] / N + eps)
            for k in T.Pipelined(num_chunks, num_stages=2):
                T.copy(X[bx * block_M, k * block_N], x_shared)
                T.copy(W[k * block_N], w_shared)
                for i, j in T.Parallel(block_M, block_N):
                    y_local[i, j] = x_shared[i, j] * sumsq[i] * w_shared[j]
                T.copy(y_local, Y[bx * block_M, k * block_N])

    return rmsnorm_kernel


def main(target="auto", M=200, N=1000, block_M=4, block_N=256, dtype="bfloat16"):
    fn = rmsnorm if target == "auto" else tilelang.jit(rmsnorm.__wrapped__, target=target)
    kernel = fn(M, N, block_M, block_N, dtype=dtype)
    device = "cpu" if kernel.target.kind == "cpu" else "cuda"
    tdtype = getattr(torch, dtype)
    x = torch.randn(M, N, device=device).to(tdtype)
    w = (torch.rand(N, device=device) + 0.5).to(tdtype)
    y = torch.full_like(x, float("nan"))  # poisoned: every element must be written
    kernel(x, w, y)
    xd = x.double()
    ref = xd * torch.rsqrt(xd.pow(2).mean(dim=1, keepdim=True) + 1e-6) * w.double()
    err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
    ok = err < (1e-5 if dtype == "float32" else 1e-2)
    print(f"{'PASS' if ok else 'FAIL'} rmsnorm max_rel_err={err:.3e}")
    return ok


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", default="auto")
    p.add_argument("--m", type=int, default=200)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--dtype", default="bfloat16")
    args = p.parse_args()
    sys.exit(0 if main(args.target, args.m, args.n, dtype=args.dtype) else 1)
