"""Copies hoisted past mma.sync compute (cp_async_waits.py, `past_mma`; off with
tl.disable_copy_hoist_past_mma): in the selected-block attention of deepseek_nsa's forward kernel
(one warp, G query rows, blocks of BS keys picked through an index tensor, an unpipelined loop),
the V tile's cp.async goes out with the K tile's, before the scores gemm and the softmax, under a
single wait: one memory round trip a block instead of two. A copy into a tile the gemm before it
reads stays behind that gemm. Both kernels run on the host emulator against float64, with the
hoist and without."""
import math
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T

OFF = {"tl.disable_copy_hoist_past_mma": True}


def selected_attention(L=64, G=16, D=32, BS=32, NS=2, scale=0.1):
    """O[t] = softmax(scale * Q[t] K_sel^T) V_sel over the NS blocks Idx[t, :] picks (index < 0: skipped)."""

    @T.prim_func
    def main(Q: T.Tensor((L, G, D), "float16"), K: T.Tensor((L, D), "float16"), V: T.Tensor((L, D), "float16"),
             Idx: T.Tensor((L, NS), "int32"), O: T.Tensor((L, G, D), "float16")):
        with T.Kernel(L, threads=32) as bx:
            Q_s = T.alloc_shared((G, D), "float16")
            K_s = T.alloc_shared((BS, D), "float16")
            V_s = T.alloc_shared((BS, D), "float16")
            O_s = T.alloc_shared((G, D), "float16")
            acc_s = T.alloc_fragment((G, BS), "float32")
            acc_p = T.alloc_fragment((G, BS), "float16")
            acc_o = T.alloc_fragment((G, D), "float32")
            m = T.alloc_fragment((G,), "float32")
            m_prev = T.alloc_fragment((G,), "float32")
            r = T.alloc_fragment((G,), "float32")
            ssum = T.alloc_fragment((G,), "float32")
            lsum = T.alloc_fragment((G,), "float32")
            T.copy(Q[bx, 0:G, :], Q_s)
            T.fill(acc_o, 0)
            T.fill(lsum, 0)
            T.fill(m, -T.infinity("float32"))
            for n in T.Pipelined(NS, num_stages=2):
                i_s = Idx[bx, n] * BS
                if i_s >= 0:
                    T.copy(K[i_s:i_s + BS, :], K_s)
                    T.clear(acc_s)
                    T.gemm(Q_s, K_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    T.copy(m, m_prev)
                    T.reduce_max(acc_s, m, dim=1, clear=False)
                    for i in T.Parallel(G):
                        r[i] = T.exp2((m_prev[i] - m[i]) * scale)
                    for i, j in T.Parallel(G, BS):
                        acc_s[i, j] = T.exp2((acc_s[i, j] - m[i]) * scale)
                    T.reduce_sum(acc_s, ssum, dim=1)
                    for i in T.Parallel(G):
                        lsum[i] = lsum[i] * r[i] + ssum[i]
                    T.copy(acc_s, acc_p)
                    for i, j in T.Parallel(G, D):
                        acc_o[i, j] *= r[i]
                    T.copy(V[i_s:i_s + BS, :], V_s)
                    T.gemm(acc_p, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(G, D):
                acc_o[i, j] /= lsum[i]
            T.copy(acc_o, O_s)
            T.copy(O_s, O[bx, 0:G, :])

    return main


def reused_tile(G=16, D=32, BS=32):
    """S = Q K^T, then V loaded into K's tile (the gemm before reads it): O = half(S) V."""

    @T.prim_func
    def main(Q: T.Tensor((G, D), "float16"), K: T.Tensor((BS, D), "float16"), V: T.Tensor((BS, D), "float16"),
             O: T.Tensor((G, D), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            Q_s = T.alloc_shared((G, D), "float16")
            KV_s = T.alloc_shared((BS, D), "float16")
            acc_s = T.alloc_fragment((G, BS), "float32")
            acc_p = T.alloc_fragment((G, BS), "float16")
            acc_o = T.alloc_fragment((G, D), "float32")
            T.copy(Q, Q_s)
            T.copy(K, KV_s)
            T.clear(acc_s)
            T.gemm(Q_s, KV_s, acc_s, transpose_B=True)
            T.copy(acc_s, acc_p)
            T.copy(V, KV_s)
            T.clear(acc_o)
            T.gemm(acc_p, KV_s, acc_o)
            T.copy(acc_o, O)

    return main


def _compile(func, arch, off):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(func, target=f"cuda -arch={arch}", pass_configs=OFF if off else None)


def _body(src):
    """The selected block's statements: the `if` inside the block loop."""
    return src.split("if (", 1)[1] if "if (" in src else src


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("off", [False, True])
def test_v_load_joins_k_load_and_matches_float64(run_on_host, arch, off):
    L, G, D, BS, NS, scale = 64, 16, 32, 32, 2, 0.1
    kern = _compile(selected_attention(L, G, D, BS, NS, scale), arch, off)
    body = _body(kern.get_kernel_source().split("for (int n = 0;")[1])
    first_gemm = body.index("tl::gemm_ss<")
    v_load = body.index("&V[")
    if off:
        assert v_load > first_gemm and body.count("tl::cp_async_wait<0>();") == 2, body
    else:
        assert v_load < first_gemm and body.count("tl::cp_async_wait<0>();") == 1, body
        assert body.index("tl::cp_async_wait<0>();") > v_load
    g = torch.Generator().manual_seed(99 + 2 * off + (arch == "sm_90a"))
    Q = torch.randn(L, G, D, generator=g).half()
    K = torch.randn(L, D, generator=g).half()
    V = torch.randn(L, D, generator=g).half()
    Idx = torch.randint(0, L // BS, (L, NS), generator=g, dtype=torch.int32)
    Idx[::5, 1] = -1  # some rows skip their second block
    O = torch.full((L, G, D), float("nan")).half()
    run_on_host(kern, [Q, K, V, Idx, O])
    c = scale / math.log2(math.e)  # exp2(x * scale) == exp(x * c)
    ref = torch.empty(L, G, D, dtype=torch.float64)
    for t in range(L):
        rows = torch.cat([torch.arange(int(b) * BS, int(b) * BS + BS) for b in Idx[t] if b >= 0])
        s = Q[t].double() @ K[rows].double().T
        p = torch.softmax(s * c, dim=1)
        ref[t] = p @ V[rows].double()
    # P is rounded to fp16 before the second gemm, O to fp16 at the end
    torch.testing.assert_close(O.double(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_copy_into_a_tile_the_gemm_reads_stays_behind_it(run_on_host, arch):
    G, D, BS = 16, 32, 32
    kern = _compile(reused_tile(G, D, BS), arch, False)
    src = kern.get_kernel_source()
    assert src.index("&V[") > src.index("tl::gemm_ss<"), src
    g = torch.Generator().manual_seed(7 + (arch == "sm_90a"))
    Q, K, V = torch.randn(G, D, generator=g).half(), torch.randn(BS, D, generator=g).half(), \
        torch.randn(BS, D, generator=g).half()
    O = torch.full((G, D), float("nan"))
    run_on_host(kern, [Q, K, V, O])
    ref = (Q.double() @ K.double().T).half().double() @ V.double()
    torch.testing.assert_close(O.double(), ref, rtol=1e-2, atol=1e-2)
    assert re.search(r"tl::cp_async_wait<0>\(\);", src)
