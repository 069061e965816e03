"""W4A16 GEMM: C = A @ dequant(B)^T with B stored as packed signed int4, two per int8 byte.

    python examples/dequant_gemm_int4.py [--target auto|cpu|cuda] [--m 100 --n 200 --k 300]

B is [N, K/2] int8: byte (n, k/2) holds w[n, k] in its low nibble (k even) and
w[n, k+1] in its high nibble, each a two's-complement 4-bit integer in [-8, 7];
Scale is one fp16 factor per output channel. The kernel copies the packed tile,
unpacks it in registers with shifts and masks to fp16 ((q ^ 8) - 8 sign-extends a
nibble q), runs T.gemm with transpose_B, and applies the scale in the epilogue.
"""
import argparse
import sys

import torch

import tilelang
import tilelang.language as T


@tilelang.jit
def dequant_matmul(M, N, K, block_M=64, block_N=64, block_K=64, in_dtype="float16", storage_dtype="int8",
                   accum_dtype="float"):
    assert K % 2 == 0 and block_K % 2 == 0, "two int4 values per byte along K"
    num_elems_per_byte = 2

    @T.prim_func
    def dequant_kernel(
            A: T.Tensor((M, K), in_dtype),
            B: T.Tensor((N, K // num_elems_per_byte), storage_dtype),
            Scale: T.Tensor((N,), in_dtype),
            C: T.Tensor((M, N), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K // num_elems_per_byte), storage_dtype)
            B_local = T.alloc_fragment((block_N, block_K // num_elems_per_byte), storage_dtype)
            B_dequant = T.alloc_fragment((block_N, block_K), in_dtype)
            S_shared = T.alloc_shared((block_N,), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            C_out = T.alloc_fragment((block_M, block_N), in_dtype)

            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K // num_elems_per_byte], B_shared)
                T.copy(B_shared, B_local)
                for i, j in T.Parallel(block_N, block_K):
                    q = (B_local[i, j // num_elems_per_byte] >> (4 * (j % num_elems_per_byte))) & 0xF
                    B_dequant[i, j] = ((q ^ 8) - 8).astype(in_dtype)
                T.gemm(A_shared, B_dequant, C_local, transpose_B=True)
            T.copy(Scale[bx * block_N], S_shared)
            for i, j in T.Parallel(block_M, block_N):
                C_out[i, j] = C_local[i, j] * S_shared[j]
            T.copy(C_out, C[by * block_M, bx * block_N])

    return dequant_kernel


def pack_int4(w: torch.Tensor) -> torch.Tensor:
    """[N, K] ints in [-8, 7] -> [N, K/2] int8, even k in the low nibble."""
    lo = w[:, 0::2].to(torch.int32) & 0xF
    hi = w[:, 1::2].to(torch.int32) & 0xF
    return (lo | (hi << 4)).to(torch.uint8).view(torch.int8)


def main(target="auto", M=100, N=200, K=300, block_M=64, block_N=64, block_K=64):
    fn = dequant_matmul if target == "auto" else tilelang.jit(dequant_matmul.__wrapped__, target=target)
    kernel = fn(M, N, K, block_M, block_N, block_K)
    device = "cpu" if kernel.target.kind == "cpu" else "cuda"
    a = torch.randn(M, K, device=device).half()
    w = torch.randint(-8, 8, (N, K), device=device)
    scale = (torch.rand(N, device=device) * 0.1 + 0.01).half()
    c = torch.full((M, N), float("nan"), device=device).half()  # poisoned: every element must be written
    kernel(a, pack_int4(w), scale, c)
    ref = (a.double() @ w.double().T) * scale.double()
    err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    ok = err < 1e-2
    print(f"{'PASS' if ok else 'FAIL'} dequant_gemm_int4 max_rel_err={err:.3e}")
    return ok


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", default="auto")
    p.add_argument("--m", type=int, default=100)
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--k", type=int, default=300)
    args = p.parse_args()
    sys.exit(0 if main(args.target, args.m, args.n, args.k) else 1)
