"""FlashAttention forward (causal and non-causal), fp16 in, fp32 accumulation.

    python examples/flash_attention.py [--target auto|cpu|cuda] [--causal] [--seq 200]

Q, K, V, O are [batch, seq, heads, dim]. Each block owns `block_M` query rows of one
(batch, head): it keeps Q in shared memory, walks the K/V sequence in `block_N`
tiles with T.Pipelined, and keeps an online softmax (running row max, rescale of the
partial output, running row sum) so the seq x seq score matrix never exists.
Scores use exp2 with log2(e) folded into the softmax scale, compiled with fast math
(PASS_CONFIGS: on CUDA each exp2 is one ex2.approx, as in cuDNN and the public TileLang's
attention examples). Key positions past the
end of the sequence (ragged last tile) and, when causal, after the query position
are masked to -inf before the max.
"""
import argparse
import math
import sys

import torch

import tilelang
import tilelang.language as T


PASS_CONFIGS = {"tl.enable_fast_math": True}


@tilelang.jit(pass_configs=PASS_CONFIGS)
def flashattn(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, num_stages=1, threads=128):
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # 1/sqrt(dim) * log2(e)
    shape = [batch, seq_len, heads, dim]
    dtype = "float16"
    accum_dtype = "float"

    @T.macro
    def MMA0(K, Q_shared, K_shared, acc_s, k, bx, by, bz):
        T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
        if is_causal:
            for i, j in T.Parallel(block_M, block_N):
                acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(acc_s.dtype))
        else:
            for i, j in T.Parallel(block_M, block_N):
                acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(acc_s.dtype))
        T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

    @T.macro
    def MMA1(V, V_shared, acc_s_cast, acc_o, k, by, bz):
        T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
        T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)

    @T.macro
    def Softmax(acc_s, acc_s_cast, scores_max, scores_max_prev, scores_scale, scores_sum, logsum):
        T.copy(scores_max, scores_max_prev)
        # clear=False folds the running max in, so a row's max never decreases and stays
        # finite once its first key has been seen.
        T.reduce_max(acc_s, scores_max, dim=1, clear=False)
        for i in T.Parallel(block_M):
            scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
        for i, j in T.Parallel(block_M, block_N):
            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
        T.reduce_sum(acc_s, scores_sum, dim=1)
        for i in T.Parallel(block_M):
            logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
        T.copy(acc_s, acc_s_cast)

    @T.macro
    def Rescale(acc_o, scores_scale):
        for i, j in T.Parallel(block_M, dim):
            acc_o[i, j] *= scores_scale[i]

    @T.prim_func
    def flash_fwd(
            Q: T.Tensor(shape, dtype),
            K: T.Tensor(shape, dtype),
            V: T.Tensor(shape, dtype),
            Output: T.Tensor(shape, dtype),
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_M], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
            scores_scale = T.alloc_fragment([block_M], accum_dtype)
            scores_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            loop_range = (
                T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                if is_causal else T.ceildiv(seq_len, block_N))

            for k in T.Pipelined(loop_range, num_stages=num_stages):
                MMA0(K, Q_shared, K_shared, acc_s, k, bx, by, bz)
                Softmax(acc_s, acc_s_cast, scores_max, scores_max_prev, scores_scale, scores_sum, logsum)
                Rescale(acc_o, scores_scale)
                MMA1(V, V_shared, acc_s_cast, acc_o, k, by, bz)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return flash_fwd


def ref_program(Q, K, V, is_causal):
    dim = Q.size(-1)
    scores = torch.einsum("bqhd,bkhd->bhqk", Q, K) / math.sqrt(dim)
    if is_causal:
        seq_len = Q.size(1)
        mask = torch.tril(torch.ones(seq_len, seq_len, device=scores.device, dtype=torch.bool))
        scores = scores.masked_fill(~mask, float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", attn, V)


def main(target="auto", batch=1, heads=2, seq_len=200, dim=64, is_causal=False, block_M=64, block_N=64):
    fn = flashattn if target == "auto" else tilelang.jit(flashattn.__wrapped__, target=target, pass_configs=PASS_CONFIGS)
    kernel = fn(batch, heads, seq_len, dim, is_causal, block_M, block_N)
    device = "cpu" if kernel.target.kind == "cpu" else "cuda"
    q, k, v = (torch.randn(batch, seq_len, heads, dim, device=device).half() for _ in range(3))
    out = torch.full_like(q, float("nan"))  # poisoned: every element must be written
    kernel(q, k, v, out)
    ref = ref_program(q.double(), k.double(), v.double(), is_causal)
    err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
    ok = err < 1e-2
    name = "flash_attention" + ("(causal)" if is_causal else "")
    print(f"{'PASS' if ok else 'FAIL'} {name} max_rel_err={err:.3e}")
    return ok


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", default="auto")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--seq", type=int, default=200)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--causal", action="store_true", help="run only the causal variant")
    p.add_argument("--no-causal", action="store_true", help="run only the non-causal variant")
    args = p.parse_args()
    variants = [True] if args.causal else [False] if args.no_causal else [False, True]
    ok = all([main(args.target, args.batch, args.heads, args.seq, args.dim, c) for c in variants])
    sys.exit(0 if ok else 1)
