"""Stream-K on promoted k-reductions (stream_k.promoted_reduction): an fp8 gemm accumulating into
a local fragment that is added into a second accumulator and cleared every few k-steps. The
k-iterations split across blocks like a plain reduction's; each partial folds its unpromoted rest."""
import pytest
import torch

import tilelang.language as T
from tilelang.ir import stmt as S
from tilelang.op import tile_ops as O

from .conftest import build_sm90, nvrtc_or_skip, tile_kernel


def promoted_gemm(M, N, K, every, bK=64, tail=True, read_loc=False, dtype="float8_e4m3fn", always_tail=False):
    """C = A @ B.T, the gemm's fragment promoted into acc where (k + 1) % every == 0. always_tail:
    loc is added after the loop even when the last iteration promoted (it must read 0 then)."""
    n_k = K // bK

    @T.prim_func
    def g(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128) as (bx, by):
            As = T.alloc_shared((128, bK), dtype)
            Bs = T.alloc_shared((128, bK), dtype)
            Cs = T.alloc_shared((128, 128), "float32")
            loc = T.alloc_fragment((128, 128), "float32")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(loc)
            T.clear(acc)
            for k in T.Pipelined(n_k, num_stages=3):
                T.copy(A[by * 128, k * bK], As)
                T.copy(B[bx * 128, k * bK], Bs)
                T.gemm(As, Bs, loc, transpose_B=True)
                if (k + 1) % every == 0:
                    for i, j in T.Parallel(128, 128):
                        acc[i, j] += loc[i, j]
                    T.clear(loc)
            if always_tail or (tail and n_k % every != 0):
                for i, j in T.Parallel(128, 128):
                    acc[i, j] += loc[i, j]
            if read_loc:  # loc read otherwise after the loop: the split would change the result
                for i, j in T.Parallel(128, 128):
                    acc[i, j] = acc[i, j] * 2 + loc[i, j]
            T.copy(acc, Cs)
            T.copy(Cs, C[by * 128, bx * 128])

    return g


def compile90(prog, configs=None):
    nvrtc_or_skip()
    return build_sm90(prog, configs)


def stream_k_on(kernel) -> bool:
    return "tl_sk_ws" in kernel.get_kernel_source()


def test_promoted_gemm_takes_stream_k_and_folds_the_rest_into_its_partial():
    src = compile90(promoted_gemm(256, 256, 2048, 3)).get_kernel_source()
    assert "tl_sk_ws" in src and "tl_sk_flags" in src
    partial = src[src.index("if ((tl_k1 < 32))"):]
    partial = partial[:partial.index("tl_sk_pending[0] = 1;")]
    # the fold (acc += loc) comes before the partial is stored
    assert "+ loc[" in partial and partial.index("+ loc[") < partial.index("tl_sk_ws")


def test_switch_and_unsafe_suffix_keep_whole_tiles():
    assert not stream_k_on(compile90(promoted_gemm(256, 256, 2048, 3), {"tl.disable_stream_k_promoted": True}))
    assert not stream_k_on(compile90(promoted_gemm(256, 256, 2048, 3), {"tl.disable_stream_k": True}))
    assert not stream_k_on(compile90(promoted_gemm(256, 256, 2048, 3, read_loc=True)))


def test_recognizer_on_the_tile_ir():
    from tilelang.transform.cuda.stream_k import fold_stmt, promoted_reduction

    def parts(prog):
        k = tile_kernel(prog, "sm_90a")
        stmts = list(k.body.stmts)
        at = next(i for i, s in enumerate(stmts) if isinstance(s, S.For) and s.kind == "pipelined")
        loop = stmts[at]
        body = [b for b in loop.body.stmts if not isinstance(b, O.Copy)]
        gemms = [b for b in body if isinstance(b, O.Gemm)]
        return loop, body, gemms, stmts[:at], stmts[at + 1:], k.block_vars

    loop, body, gemms, prefix, suffix, bv = parts(promoted_gemm(256, 256, 2048, 3))
    got = promoted_reduction(loop, body, gemms, prefix, suffix, bv)
    assert got is not None and got[0].name == "acc" and got[1].name == "loc"
    f = fold_stmt(*got)  # for i, j in T.Parallel(128, 128): acc[i, j] = acc[i, j] + loc[i, j]
    st = f.body.body
    assert f.kind == f.body.kind == "parallel" and st.buffer is got[0] and st.indices == (f.var, f.body.var)
    assert st.value.op == "+" and (st.value.a.buffer, st.value.b.buffer) == got
    loop, body, gemms, prefix, suffix, bv = parts(promoted_gemm(256, 256, 2048, 3, read_loc=True))
    assert promoted_reduction(loop, body, gemms, prefix, suffix, bv) is None


@pytest.mark.parametrize("M,N,K,every,tail", [
    (256, 256, 2048, 3, True),   # 4 tiles x 32 k-steps on 16 ranges of 8: splits inside a promotion interval
    (384, 128, 1344, 2, True),   # 3 tiles x 21 k-steps on 7 ranges of 9: ends at k = 9, 15, 3
    (128, 384, 1472, 4, True),   # 3 tiles x 23 k-steps, a tail fold after the loop
])
def test_promoted_stream_k_matches_float64_on_the_host(M, N, K, every, tail, run_on_host):
    k = compile90(promoted_gemm(M, N, K, every, tail=tail))
    assert stream_k_on(k)
    g = torch.Generator().manual_seed(M + N + K + every)
    a = (torch.randn(M, K, generator=g) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(N, K, generator=g) * 2).to(torch.float8_e4m3fn)
    c = torch.full((M, N), float("nan"))
    run_on_host(k, [a, b, c])
    ref = a.double() @ b.double().T
    err = (c.double() - ref).abs().max().item()
    assert err <= 1e-5 * ref.abs().max().item() + 1e-3, err
