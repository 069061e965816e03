"""Kernels the tests compile again and again, written as users write them.

    from tilelang.testing.kernels import gemm
    f = gemm(1024, 1024, 512, 128, 128, 32)                            # C = A @ B, fp16 in, fp32 out
    f = gemm(512, 256, 512, 128, 128, 64, out_dtype="float16", relu=True, swizzle=4)
    f = gemm(512, 64, 256, 128, 64, 32, transpose_B=True)              # B given as (N, K)
    f = gemm(512, 512, 512, 128, 128, 64, dtype="int8", out_dtype="int32", acc_dtype="int32",
             transpose_B=True)                                         # int8 in, exact int32 out

The canonical tiled GEMM: T.Pipelined global -> shared copies (tiles A_s, B_s), T.gemm into a
register tile C_l, an optional ReLU over it, and one T.copy of C_l to C.

    f = attention(1, 2, 256, 64, 64, 64, stages=2)   # FlashAttention forward, (B, S, H, D) tensors
    f = lighting_indexer(768, 256, 4, 32, 64, 512)  # the fp8 lighting indexer's loop in fp16 (None: dynamic kv)
    f = emitter_gemm(256, 256, 128)  # C = A @ B.T through the mma.sync emitter (ldmatrix, mma, stmatrix)
"""
from __future__ import annotations

import math

from .. import language as T
from ..layout import make_swizzled_layout


def gemm(M, N, K, bM, bN, bK, threads=128, stages=3, dtype="float16", out_dtype="float32", *,
         transpose_B=False, relu=False, swizzle=None, acc_dtype="float32"):
    """The prim_func `gemm` (or `gemm_nt` with transpose_B: B is (N, K)); M, N, K may be symbolic."""
    b_shape, b_tile = ((N, K), (bN, bK)) if transpose_B else ((K, N), (bK, bN))

    @T.macro
    def body(A, B, C):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bM, bK), dtype)
            B_s = T.alloc_shared(b_tile, dtype)
            C_l = T.alloc_fragment((bM, bN), acc_dtype)
            if swizzle:
                T.use_swizzle(panel_size=swizzle)
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                T.copy(A[by * bM, ko * bK], A_s)
                if transpose_B:
                    T.copy(B[bx * bN, ko * bK], B_s)
                else:
                    T.copy(B[ko * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=transpose_B)
            if relu:
                for i, j in T.Parallel(bM, bN):
                    C_l[i, j] = T.max(C_l[i, j], 0)
            T.copy(C_l, C[by * bM, bx * bN])

    if transpose_B:
        @T.prim_func
        def gemm_nt(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), out_dtype)):
            body(A, B, C)

        return gemm_nt

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), out_dtype)):
        body(A, B, C)

    return gemm


def ws_gemm(M, N, K, bM=128, bN=128, bK=64, *, consumer=0, stages=1, pipelined=True, set_nreg=False,
            dtype="float16"):
    """C = A @ B (fp32 accumulate, `dtype` out) specialized by hand (T.ws, as in the public
    TileLang's warp_specialize examples): warp group 1 - consumer streams tiles with T.tma_copy,
    warp group `consumer` waits, runs T.gemm and releases them. stages=1: one tile pair and a
    data_is_ready / compute_is_done barrier pair; stages=2: 3-d (2, ...) tiles and a full / empty
    barrier per stage. set_nreg: the producer gives registers back, the consumer takes more."""
    producer = 1 - consumer
    loop = (lambda n: T.Pipelined(n, num_stages=2)) if pipelined else T.serial

    @T.prim_func
    def ws_gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, bM, bK), dtype)
            B_s = T.alloc_shared((stages, bK, bN), dtype)
            C_l = T.alloc_fragment((bM, bN), "float32")
            bars = T.alloc_barrier([128] * (2 * stages))  # full[s] = bars[s], empty[s] = bars[stages + s]
            if set_nreg:
                with T.ws(producer):
                    T.dec_max_nreg(40)
            with T.ws(consumer):
                if set_nreg:
                    T.inc_max_nreg(232)
                T.clear(C_l)
            for ko in loop(T.ceildiv(K, bK)):
                s = ko % stages
                with T.ws(producer):
                    T.barrier_wait(bars[stages + s], ((ko // stages) % 2) ^ 1)
                    T.tma_copy(A[by * bM, ko * bK], A_s[s, :, :], barrier=bars[s])
                    T.tma_copy(B[ko * bK, bx * bN], B_s[s, :, :], barrier=bars[s])
                    T.barrier_arrive(bars[s])
                with T.ws(consumer):
                    T.mbarrier_wait_parity(bars[s], (ko // stages) % 2)
                    T.gemm(A_s[s, :, :], B_s[s, :, :], C_l)
                    T.mbarrier_arrive(bars[stages + s])
            with T.ws(consumer):
                T.copy(C_l, C[by * bM, bx * bN])

    return ws_gemm


def gather_gemm(M, N, K, R, nblk, dtype="float16"):
    """Out[:, b N:(b + 1) N] = A @ Bg[Idx[b N:(b + 1) N]]^T for b < nblk, specialized by hand the
    way the public TileLang's sparse MLA examples are: `if tx < 128` (consumer) / `else`
    (producer) branches on the thread index, the producer gathering rows into a 2-stage tile with
    per-thread T.ptx_cp_async completed by T.cp_async_barrier_noinc, the consumer issuing
    T.wgmma_gemm on 128-column slices of it and waiting with T.wait_wgmma. K % 128 == 0, M == 64."""
    chunks = K // 8  # 16-byte chunks of a row
    per_thread = N * chunks // 128

    @T.prim_func
    def gather_gemm(A: T.Tensor((M, K), dtype), Bg: T.Tensor((R, K), dtype), Idx: T.Tensor((nblk * N,), "int32"),
                    Out: T.Tensor((M, nblk * N), "float32")):
        with T.Kernel(1, threads=256) as bx:
            A_s = T.alloc_shared((M, K), dtype)
            B_s = T.alloc_shared((2, N, K), dtype)
            acc = T.alloc_fragment((M, N), "float32")
            full = T.alloc_barrier(arrive_count=[128, 128])
            empty = T.alloc_barrier(arrive_count=[128, 128])
            tx = T.get_thread_binding()
            T.copy(A[0, 0], A_s)
            if tx < 128:
                for b in T.serial(nblk):
                    T.barrier_wait(full[b % 2], (b // 2) % 2)
                    T.clear(acc)
                    for h in T.unroll(K // 128):
                        T.wgmma_gemm(A_s[:, h * 128:(h + 1) * 128], B_s[b % 2, :, h * 128:(h + 1) * 128], acc,
                                     transpose_B=True)
                    T.wait_wgmma(0)
                    T.barrier_arrive(empty[b % 2])
                    T.copy(acc, Out[0, b * N])
            else:
                for b in T.serial(nblk):
                    T.barrier_wait(empty[b % 2], ((b // 2) % 2) ^ 1)
                    for q in T.serial(per_thread):
                        e = q * 128 + (tx - 128)
                        T.ptx_cp_async(B_s[b % 2, e // chunks, (e % chunks) * 8],
                                       Bg[Idx[b * N + e // chunks], (e % chunks) * 8], 8)
                    T.cp_async_barrier_noinc(full[b % 2])

    return gather_gemm


def attention(B, H, S, D, bM, bN, stages, threads=128):
    """FlashAttention forward: Q tile in shared, K then V staged per KV tile, online softmax in
    exp2, P @ V from registers; O = softmax(Q K^T / sqrt(D)) V."""
    scale = 1.0 / math.sqrt(D) * 1.44269504

    @T.prim_func
    def fa(Q: T.Tensor((B, S, H, D), "float16"), K: T.Tensor((B, S, H, D), "float16"),
           V: T.Tensor((B, S, H, D), "float16"), O: T.Tensor((B, S, H, D), "float16")):
        with T.Kernel(T.ceildiv(S, bM), H, B, threads=threads) as (bx, by, bz):
            Qs = T.alloc_shared((bM, D), "float16")
            Ks = T.alloc_shared((bN, D), "float16")
            Vs = T.alloc_shared((bN, D), "float16")
            s = T.alloc_fragment((bM, bN), "float32")
            p = T.alloc_fragment((bM, bN), "float16")
            o = T.alloc_fragment((bM, D), "float32")
            m = T.alloc_fragment((bM,), "float32")
            m_prev = T.alloc_fragment((bM,), "float32")
            r = T.alloc_fragment((bM,), "float32")
            l = T.alloc_fragment((bM,), "float32")
            rs = T.alloc_fragment((bM,), "float32")
            T.copy(Q[bz, bx * bM:(bx + 1) * bM, by, :], Qs)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            for k in T.Pipelined(T.ceildiv(S, bN), num_stages=stages):
                T.copy(K[bz, k * bN:(k + 1) * bN, by, :], Ks)
                T.clear(s)
                T.gemm(Qs, Ks, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(bM):
                    r[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(bM, bN):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, rs, dim=1)
                for i in T.Parallel(bM):
                    l[i] = l[i] * r[i] + rs[i]
                T.copy(s, p)
                for i, j in T.Parallel(bM, D):
                    o[i, j] *= r[i]
                T.copy(V[bz, k * bN:(k + 1) * bN, by, :], Vs)
                T.gemm(p, Vs, o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(bM, D):
                o[i, j] /= l[i]
            T.copy(o, O[bz, bx * bM:(bx + 1) * bM, by, :])

    return fa


def gemm_sqrsum(tokens, hidden, tb=32, hb=64, stages=2):
    """mhc_pre's gemm_sqrsum at any size: bf16 x (tokens, hidden) staged through a swizzled shared
    tile and converted to a tf32 tile that is both read element by element (sqrsum = the sum of
    squares of each row) and the A of a gemm against fn (24, hidden, tf32) copied raw: out = x @ fn.T.
    Parameters (x, fn, out, sqrsum); `gemm_sqrsum_inputs` and `gemm_sqrsum_check` go with it."""
    @T.prim_func
    def main(x: T.Tensor((tokens, hidden), "bfloat16"), fn: T.Tensor((24, hidden), "tfloat32"),
             out: T.Tensor((tokens, 24), "float32"), sqrsum: T.Tensor((tokens,), "float32")):
        with T.Kernel(tokens // tb, threads=128) as px:
            out_frag = T.alloc_fragment((tb, 32), "float32")
            part = T.alloc_fragment((tb, 4), "float32")
            T.clear(out_frag)
            T.clear(part)
            for pz in T.Pipelined(hidden // hb, num_stages=stages):
                x16 = T.alloc_shared((tb, hb), "bfloat16")
                fn_s = T.alloc_shared((32, hb), "tfloat32")
                T.annotate_layout({x16: make_swizzled_layout(x16)})
                T.copy(x[px * tb, pz * hb], x16)
                T.copy(fn[0, pz * hb], fn_s)
                xf16 = T.alloc_fragment((tb, hb), "bfloat16")
                T.copy(x16, xf16)
                xf = T.alloc_fragment((tb, hb), "tfloat32")
                T.copy(xf16, xf)
                for jj in T.serial(hb // 4):
                    for i, j in T.Parallel(tb, 4):
                        part[i, j] += xf[i, jj * 4 + j] * xf[i, jj * 4 + j]
                T.gemm(xf, fn_s, out_frag, transpose_B=True)
            sq = T.alloc_fragment(tb, "float32")
            T.reduce_sum(part, sq)
            for i in T.Parallel(tb):
                sqrsum[px * tb + i] = sq[i]
            for i, j in T.Parallel(tb, 32):
                if j < 24:
                    out[px * tb + i, j] = out_frag[i, j]

    return main


def gemm_sqrsum_inputs(tokens, hidden, seed):
    """Fresh random (x, fn, out, sqrsum) for `gemm_sqrsum`; the outputs are poisoned with 7."""
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, hidden, generator=g).bfloat16()
    fn = torch.randn(24, hidden, generator=g) * 0.1
    return x, fn, torch.full((tokens, 24), 7.0), torch.full((tokens,), 7.0)


def gemm_sqrsum_check(x, fn, out, sq):
    """Asserts `gemm_sqrsum`'s outputs against float64: x is exact in tf32, fn is rounded to tf32
    (relative 2^-11 per product), so out is within 2^-10 of |x| @ |fn|.T."""
    import torch

    xd = x.double()
    ref_sq = (xd * xd).sum(-1)
    assert torch.allclose(sq.double(), ref_sq, rtol=1e-5, atol=1e-4), (sq.double() - ref_sq).abs().max()
    ref = xd @ fn.double().T
    tol = 2.0 ** -10 * (xd.abs() @ fn.double().abs().T) + 1e-5
    assert ((out.double() - ref).abs() <= tol).all(), (out.double() - ref).abs().max()


def lighting_indexer(NKV, M, Q, H, K, threads, stages=2):
    """The fp8 lighting indexer's loop in fp16: per block of M kv rows (T.Pipelined, warp-specialized
    on sm_90a), s = K_blk @ Q^T under FullCol, relu * w[q, h] * scale[row] summed over h, stored to
    Out[q, row]. NKV None: the kv length is a T.dynamic size `nkv` (a ragged last block is bound-checked)."""
    N = Q * H
    nkv = T.dynamic("nkv") if NKV is None else NKV

    @T.prim_func
    def k(Kv: T.Tensor((nkv, K), "float16"), Qm: T.Tensor((N, K), "float16"), Scale: T.Tensor((nkv,), "float32"),
          W: T.Tensor((Q, H), "float32"), Out: T.Tensor((Q, nkv), "float32")):
        with T.Kernel(1, threads=threads) as _bx:
            q_s = T.alloc_shared((N, K), "float16")
            k_s = T.alloc_shared((M, K), "float16")
            scale = T.alloc_fragment((M,), "float32")
            s = T.alloc_fragment((M, N), "float32")
            s3 = T.reshape(s, (M, Q, H))
            logits = T.alloc_fragment((M, Q), "float32")
            w = T.alloc_fragment((Q, H), "float32")
            T.copy(Qm, q_s)
            T.copy(W, w)
            for nb in T.Pipelined(T.ceildiv(nkv, M) if NKV is None else NKV // M, num_stages=stages):
                T.copy(Kv[nb * M, 0], k_s)
                T.copy(Scale[nb * M], scale)
                T.gemm(k_s, q_s, s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
                for i, q, h in T.Parallel(M, Q, H):
                    s3[i, q, h] = (T.max(s3[i, q, h], 0) * w[q, h]) * scale[i]
                T.reduce_sum(s3, logits, dim=-1, clear=True)
                for q, i in T.Parallel(Q, M):
                    Out[q, nb * M + i] = logits[i, q]

    return k


def emitter_gemm(M, N, K, out_dtype="float32", stages=2, blocked_out=False):
    """C = A @ B.T written with the mma.sync emitter: 2 x 2 warps of 64 x 64, k-chunks of 32, a pipelined
    T.Parallel refill of swizzled shared tiles; C leaves through a shared tile (blocked_out: 16 x 16 blocks)."""
    from ..cuda.intrinsics import make_mma_swizzle_layout
    from ..cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter

    em = TensorCoreIntrinEmitter(a_dtype="float16", b_dtype="float16", accum_dtype="float32",
                                 b_transposed=True, block_row_warps=2, block_col_warps=2,
                                 warp_row_tiles=64, warp_col_tiles=64, chunk=32)
    bm = bn = 128
    bk = 32
    c_shape = (bm // 16, bn // 16, 16, 16) if blocked_out else (bm, bn)

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), "float16", scope="shared.dyn")
            B_shared = T.alloc_shared((bn, bk), "float16", scope="shared.dyn")
            C_shared = T.alloc_shared(c_shape, out_dtype, scope="shared.dyn")
            A_local = T.alloc_local((em.warp_rows * em.local_size_a,), "float16")
            B_local = T.alloc_local((em.warp_cols * em.local_size_b,), "float16")
            C_local = T.alloc_local((em.warp_rows * em.warp_cols * em.local_size_out,), "float32")
            T.annotate_layout({A_shared: make_mma_swizzle_layout(A_shared),
                               B_shared: make_mma_swizzle_layout(B_shared)})
            T.clear(C_local)
            for ko in T.Pipelined(K // bk, num_stages=stages):
                for i, k in T.Parallel(bm, bk):
                    A_shared[i, k] = A[by * bm + i, ko * bk + k]
                for j, k in T.Parallel(bn, bk):
                    B_shared[j, k] = B[bx * bn + j, ko * bk + k]
                for ki in T.serial(bk // 16):
                    em.ldmatrix_a(A_local, A_shared, ki)
                    em.ldmatrix_b(B_local, B_shared, ki)
                    em.mma(A_local, B_local, C_local)
            em.stmatrix(C_local, C_shared)
            if blocked_out:
                for i, j in T.Parallel(bm, bn):
                    C[by * bm + i, bx * bn + j] = C_shared[i // 16, j // 16, i % 16, j % 16]
            else:
                for i, j in T.Parallel(bm, bn):
                    C[by * bm + i, bx * bn + j] = C_shared[i, j]
    return gemm
