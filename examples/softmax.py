"""Row softmax: each block normalizes `block_M` whole rows held in a register fragment.

    python examples/softmax.py [--target auto|cpu|cuda] [--m 300 --n 200]

softmax(x)_j = 2^(x_j*log2(e) - max*log2(e)) / sum_k 2^(...): the max and the sum are
`T.reduce_max` / `T.reduce_sum` over dim 1 of the fragment; exp is `T.exp2` with the
log2(e) scale folded in. Columns past N (the row is padded to a power of two) are
masked to -inf so they contribute exp2(-inf) = 0.
"""
import argparse
import sys

import torch

import tilelang
import tilelang.language as T

LOG2E = 1.44269504


@tilelang.jit
def softmax(M, N, block_M=8, dtype="float16", accum_dtype="float"):
    block_N = 1 << (N - 1).bit_length()  # the whole row, padded to a power of two

    @T.prim_func
    def softmax_kernel(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x_shared = T.alloc_shared((block_M, block_N), dtype)
            x = T.alloc_fragment((block_M, block_N), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)
            y = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(X[bx * block_M, 0], x_shared)
            for i, j in T.Parallel(block_M, block_N):
                x[i, j] = T.if_then_else(j < N, x_shared[i, j], -T.infinity(accum_dtype))
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, block_N):
                x[i, j] = T.exp2(x[i, j] * LOG2E - row_max[i] * LOG2E)
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, block_N):
                y[i, j] = x[i, j] / row_sum[i]
            T.copy(y, Y[bx * block_M, 0])

    return softmax_kernel


def main(target="auto", M=300, N=200, block_M=8, dtype="float16"):
    fn = softmax if target == "auto" else tilelang.jit(softmax.__wrapped__, target=target)
    kernel = fn(M, N, block_M, dtype)
    device = "cpu" if kernel.target.kind == "cpu" else "cuda"
    x = (torch.randn(M, N, device=device) * 4).to(getattr(torch, dtype))
    y = torch.full_like(x, float("nan"))  # poisoned: every element must be written
    kernel(x, y)
    ref = torch.softmax(x.double(), dim=1)
    err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
    ok = err < (1e-5 if dtype == "float32" else 1e-2)
    print(f"{'PASS' if ok else 'FAIL'} softmax max_rel_err={err:.3e}")
    return ok


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", default="auto")
    p.add_argument("--m", type=int, default=300)
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--dtype", default="float16")
    args = p.parse_args()
    sys.exit(0 if main(args.target, args.m, args.n, dtype=args.dtype) else 1)
